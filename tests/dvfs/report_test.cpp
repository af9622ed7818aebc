// The tables `clone sim` builds from its sweeps, checked against numbers computed here from
// summaries and per-request results made by hand.
#include "clone/dvfs/report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "clone/core/error.h"

using namespace cln;
using namespace cln::dvfs;
namespace fs = std::filesystem;

namespace {

Summary summary(const std::string& corunner, const std::string& ctl, double energy, double att) {
  Summary s;
  s.corunner = corunner, s.controller = ctl, s.energy_j = energy, s.attainment = att;
  s.energy_feasible_j = energy;
  s.n = 2, s.ttft_p99 = energy / 100, s.tpot_p50 = att / 1000, s.switches_per_token = 0.5;
  return s;
}

double cell(const Table& t, size_t row, const std::string& col) {
  const auto& cols = t.columns();
  const size_t c = static_cast<size_t>(std::find(cols.begin(), cols.end(), col) - cols.begin());
  EXPECT_LT(c, cols.size()) << col;
  const auto& v = t.rows().at(row).at(c);
  if (auto* d = std::get_if<double>(&v)) return *d;
  if (auto* i = std::get_if<long long>(&v)) return static_cast<double>(*i);
  ADD_FAILURE() << col << " is text";
  return 0;
}
std::string text(const Table& t, size_t row, size_t col) {
  return std::get<std::string>(t.rows().at(row).at(col));
}

// idle: every controller; video: no learned run; bursty: learned and performance only.
std::vector<Summary> summaries() {
  return {summary("idle", "performance", 100, 95),  summary("idle", "powersave", 120, 10),
          summary("idle", "schedutil", 110, 40),    summary("idle", "static", 90, 80),
          summary("idle", "learned", 80, 90),       summary("idle", "oracle", 75, 92),
          summary("video", "performance", 130, 70), summary("bursty", "learned", 150, 60),
          summary("bursty", "performance", 140, 75)};
}

TEST(Judge, SavingsAreOneMinusTheEnergyRatio) {
  const auto j = judge(summaries(), {"idle", "video", "bursty"});
  ASSERT_EQ(j.size(), 2u);  // video has no learned run
  EXPECT_EQ(j[0].corunner, "idle");
  EXPECT_DOUBLE_EQ(j[0].saving_vs_performance_pct, 100 * (1 - 80.0 / 100));
  EXPECT_DOUBLE_EQ(j[0].saving_vs_powersave_pct, 100 * (1 - 80.0 / 120));
  EXPECT_DOUBLE_EQ(j[0].saving_vs_schedutil_pct, 100 * (1 - 80.0 / 110));
  EXPECT_DOUBLE_EQ(j[0].saving_vs_static_pct, 100 * (1 - 80.0 / 90));
  EXPECT_DOUBLE_EQ(j[0].learned_vs_oracle_pct, 100 * (80.0 / 75 - 1));
  EXPECT_DOUBLE_EQ(j[0].learned_vs_oracle_feasible_pct, 100 * (80.0 / 75 - 1));
  EXPECT_DOUBLE_EQ(j[0].learned_att, 90);
  EXPECT_DOUBLE_EQ(j[0].performance_att, 95);
  EXPECT_DOUBLE_EQ(j[0].att_gap, -5);
  EXPECT_EQ(j[1].corunner, "bursty");
  EXPECT_DOUBLE_EQ(j[1].saving_vs_performance_pct, 100 * (1 - 150.0 / 140));
  EXPECT_TRUE(std::isnan(j[1].saving_vs_powersave_pct));
  EXPECT_TRUE(std::isnan(j[1].learned_vs_oracle_pct));
  // The order is the co-runner list's, not the summaries'.
  const auto k = judge(summaries(), {"bursty", "idle"});
  ASSERT_EQ(k.size(), 2u);
  EXPECT_EQ(k[0].corunner, "bursty");
}

// A sweep whose energies (per request and mean) and latencies scale with `f`.
SweepResult sweep_result(double f) {
  SweepResult r;
  r.summaries = summaries();
  for (auto& s : r.summaries) {
    const double e = s.energy_j;
    s.energy_j *= f;
    std::vector<RequestResult> rs(2);
    for (size_t i = 0; i < rs.size(); ++i) {
      rs[i].id = static_cast<int64_t>(i);
      rs[i].energy_j = f * e * static_cast<double>(i + 1);
      rs[i].e2e_s = f * static_cast<double>(i + 2);
      rs[i].ttft_s = 0.5, rs[i].tpot_s = 0.1 * f, rs[i].switches = 3;
    }
    r.results.push_back(rs);
  }
  return r;
}

TEST(SimReport, TablesAblationAndPivots) {
  SimReport rep({"idle", "video", "bursty"}, {"performance", "learned"}, 4);
  SweepResult first = sweep_result(1);
  first.timeline = {{0, Phase::Prefill, 0, 0, 918, 0.2}, {1, Phase::Decode, 0, 0.1, 612, 0.4}};
  first.timeline_controller = "learned", first.timeline_corunner = "idle";
  rep.add({false, false, 0}, first);
  EXPECT_FALSE(rep.has_ablation());
  rep.add({true, false, 0}, sweep_result(0.8));
  rep.add({true, false, 0.5}, sweep_result(0.5));  // another noise: not in the ablation
  EXPECT_TRUE(rep.has_ablation());

  const size_t n = summaries().size();
  EXPECT_EQ(rep.summary().rows().size(), 3 * n);
  EXPECT_EQ(rep.requests().rows().size(), 3 * 2 * n);
  EXPECT_EQ(rep.judged().rows().size(), 3 * 2u);
  EXPECT_DOUBLE_EQ(cell(rep.judged(), 0, "saving_vs_static_pct"), 100 * (1 - 80.0 / 90));
  EXPECT_EQ(text(rep.judged(), 2, 0), "on");

  // Ablation: totals per accelerator setting against the first one's.
  ASSERT_EQ(rep.ablation().rows().size(), 2 * n);
  const size_t learned_idle = 4;
  EXPECT_EQ(text(rep.ablation(), learned_idle, 1), "learned");
  EXPECT_DOUBLE_EQ(cell(rep.ablation(), learned_idle, "energy_total_j"), 80 + 160);
  EXPECT_DOUBLE_EQ(cell(rep.ablation(), learned_idle, "latency_total_s"), 2 + 3);
  EXPECT_DOUBLE_EQ(cell(rep.ablation(), learned_idle, "energy_vs_baseline_pct"), 0);
  EXPECT_NEAR(cell(rep.ablation(), n + learned_idle, "energy_vs_baseline_pct"), -20, 1e-9);
  EXPECT_NEAR(cell(rep.ablation(), n + learned_idle, "latency_vs_baseline_pct"), -20, 1e-9);
  EXPECT_DOUBLE_EQ(cell(rep.ablation(), n + learned_idle, "tpot_mean_s"), 0.08);
  EXPECT_DOUBLE_EQ(cell(rep.ablation(), n + learned_idle, "switches"), 6);

  // Pivots come from the first setting; pairs that did not run are 0.
  EXPECT_DOUBLE_EQ(rep.pivot("energy_j", "idle", "learned"), 80);
  EXPECT_DOUBLE_EQ(rep.pivot("ttft_p99_s", "bursty", "performance"), 1.4);
  EXPECT_DOUBLE_EQ(rep.pivot("slo_attainment_pct", "video", "learned"), 0);
  EXPECT_THROW(rep.pivot("nonsense", "idle", "learned"), Error);

  EXPECT_EQ(rep.timeline().size(), 2u);
  EXPECT_EQ(rep.timeline_title(), "request 4, learned, idle, SFU off, LPU off");
  EXPECT_EQ(rep.request_runs(), 3 * 2 * n);

  const fs::path dir = fs::path(CLONE_BINARY_DIR) / "report_test";
  fs::remove_all(dir);
  rep.write(dir.string());
  for (const char* f : {"summary.csv", "judged.csv", "requests.csv", "ablation.csv", "timeline.csv",
                        "pivot_energy_j.csv", "pivot_switches_per_token.csv"})
    EXPECT_TRUE(fs::exists(dir / f)) << f;
  std::ifstream pv(dir / "pivot_energy_j.csv");
  std::stringstream ss;
  ss << pv.rdbuf();
  EXPECT_EQ(ss.str(), "corunner,performance,learned\nidle,100,80\nvideo,130,0\nbursty,140,150\n");
}

TEST(SimReport, OneSettingWritesNoAblation) {
  SimReport rep({"idle"}, {"learned"});
  rep.add({false, false, 0}, sweep_result(1));
  EXPECT_FALSE(rep.has_ablation());
  const fs::path dir = fs::path(CLONE_BINARY_DIR) / "report_test_one";
  fs::remove_all(dir);
  rep.write(dir.string());
  EXPECT_TRUE(fs::exists(dir / "summary.csv"));
  EXPECT_FALSE(fs::exists(dir / "ablation.csv"));
  EXPECT_FALSE(fs::exists(dir / "timeline.csv"));
  SweepResult bad = sweep_result(1);
  bad.results.pop_back();
  EXPECT_THROW(rep.add({false, false, 0}, bad), Error);
}

}  // namespace
