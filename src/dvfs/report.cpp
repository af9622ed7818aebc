#include "clone/dvfs/report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "clone/core/error.h"
#include "clone/core/plot.h"

namespace cln::dvfs {

namespace {

const char* on_off(bool b) {
  return b ? "on" : "off";
}

double pivot_metric(const Summary& s, size_t k) {
  const double v[7] = {s.energy_j, s.attainment, s.ttft_p99,          s.tpot_p99,
                       s.ttft_p50, s.tpot_p50,   s.switches_per_token};
  return v[k];
}

}  // namespace

std::vector<Judgement> judge(const std::vector<Summary>& summaries,
                             const std::vector<std::string>& corunners) {
  std::map<std::pair<std::string, std::string>, const Summary*> by;
  for (const auto& s : summaries) by[{s.corunner, s.controller}] = &s;
  std::vector<Judgement> out;
  for (const auto& c : corunners) {
    auto get = [&](const char* n) -> const Summary* {
      auto it = by.find({c, n});
      return it == by.end() ? nullptr : it->second;
    };
    const Summary* l = get("learned");
    if (!l) continue;
    auto saving = [&](const char* n) {
      const Summary* o = get(n);
      return o ? 100 * (1 - l->energy_j / o->energy_j) : NAN;
    };
    Judgement j;
    j.corunner = c;
    j.learned_att = l->attainment;
    j.performance_att = get("performance") ? get("performance")->attainment : NAN;
    j.att_gap = l->attainment - j.performance_att;
    j.learned_vs_oracle_pct =
        get("oracle") ? 100 * (l->energy_j / get("oracle")->energy_j - 1) : NAN;
    j.learned_vs_oracle_feasible_pct =
        get("oracle") && get("oracle")->energy_feasible_j > 0
            ? 100 * (l->energy_feasible_j / get("oracle")->energy_feasible_j - 1)
            : NAN;
    j.learned_att_feasible = l->attainment_feasible;
    j.saving_vs_performance_pct = saving("performance");
    j.saving_vs_powersave_pct = saving("powersave");
    j.saving_vs_schedutil_pct = saving("schedutil");
    j.saving_vs_static_pct = saving("static");
    j.saving_vs_podgov_pct = saving("podgov");
    out.push_back(j);
  }
  return out;
}

const std::vector<std::string>& SimReport::pivot_metrics() {
  static const std::vector<std::string> m = {
      "energy_j",   "slo_attainment_pct", "ttft_p99_s",        "tpot_p99_s",
      "ttft_p50_s", "tpot_p50_s",         "switches_per_token"};
  return m;
}

SimReport::SimReport(std::vector<std::string> corunners, std::vector<std::string> controllers,
                     int64_t timeline_request)
    : corunners_(std::move(corunners)),
      controllers_(std::move(controllers)),
      timeline_request_(timeline_request),
      summary_({"sfu", "lpu", "noise", "corunner", "controller", "requests", "infeasible",
                "energy_j", "energy_feasible_j", "energy_infeasible_j", "energy_feasible_p50_j",
                "energy_feasible_p90_j", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s",
                "slo_attainment_pct", "attainment_feasible_pct", "switches_per_token"}),
      judged_({"sfu", "lpu", "noise", "corunner", "learned_att_pct", "performance_att_pct",
               "att_gap_points", "learned_att_feasible_pct", "learned_vs_oracle_energy_pct",
               "learned_vs_oracle_feasible_energy_pct", "saving_vs_performance_pct",
               "saving_vs_powersave_pct", "saving_vs_schedutil_pct", "saving_vs_static_pct",
               "saving_vs_podgov_pct"}),
      requests_({"sfu",     "lpu",      "noise",         "corunner", "controller",
                 "id",      "slo",      "prompt",        "output",   "predicted",
                 "queue_s", "ttft_s",   "ttft_target_s", "tpot_s",   "tpot_target_s",
                 "e2e_s",   "energy_j", "switches",      "met",      "feasible"}),
      ablation_({"corunner", "controller", "sfu", "lpu", "energy_total_j", "latency_total_s",
                 "ttft_mean_s", "tpot_mean_s", "slo_attainment_pct", "switches",
                 "energy_vs_baseline_pct", "latency_vs_baseline_pct"}) {
  summary_.set_precision(3);
  judged_.set_precision(2);
  ablation_.set_precision(2);
}

void SimReport::add(const Setting& st, const SweepResult& res) {
  if (res.summaries.size() != res.results.size())
    fail("sim report: ", res.summaries.size(), " summaries for ", res.results.size(),
         " result lists");
  ++settings_;
  if (settings_ == 1) first_noise_ = st.noise;
  const std::pair<bool, bool> accel{st.sfu, st.lpu};
  if (std::find(accel_seen_.begin(), accel_seen_.end(), accel) == accel_seen_.end())
    accel_seen_.push_back(accel);
  const std::string sfu = on_off(st.sfu), lpu = on_off(st.lpu);
  for (size_t i = 0; i < res.summaries.size(); ++i) {
    const Summary& s = res.summaries[i];
    const auto& rs = res.results[i];
    summary_.add({sfu, lpu, st.noise, s.corunner, s.controller, static_cast<long long>(s.n),
                  static_cast<long long>(s.infeasible), s.energy_j, s.energy_feasible_j,
                  s.energy_infeasible_j, s.energy_feasible_p50_j, s.energy_feasible_p90_j,
                  s.ttft_p50, s.ttft_p99, s.tpot_p50, s.tpot_p99, s.attainment,
                  s.attainment_feasible, s.switches_per_token});
    if (settings_ == 1)
      for (size_t k = 0; k < pivot_metrics().size(); ++k)
        pivots_[pivot_metrics()[k]][s.corunner][s.controller] = pivot_metric(s, k);
    infeasible_ += s.infeasible, runs_ += s.n;
    if (st.noise == first_noise_) {
      double e = 0, lat = 0, ttft = 0, tpot = 0;
      long long sw = 0;
      for (const auto& r : rs)
        e += r.energy_j, lat += r.e2e_s, ttft += r.ttft_s, tpot += r.tpot_s, sw += r.switches;
      const double n = static_cast<double>(std::max<size_t>(1, rs.size()));
      const auto key = std::make_pair(s.corunner, s.controller);
      if (!baseline_.count(key)) baseline_[key] = {e, lat};  // the first setting
      const auto& b = baseline_[key];
      ablation_.add({s.corunner, s.controller, sfu, lpu, e, lat, ttft / n, tpot / n, s.attainment,
                     sw, 100 * (e / b.first - 1), 100 * (lat / b.second - 1)});
    }
    for (const auto& r : rs)
      requests_.add({sfu,
                     lpu,
                     st.noise,
                     s.corunner,
                     s.controller,
                     static_cast<long long>(r.id),
                     r.slo,
                     static_cast<long long>(r.prompt),
                     static_cast<long long>(r.output),
                     static_cast<long long>(r.predicted),
                     r.queue_s,
                     r.ttft_s,
                     r.ttft_target_s,
                     r.tpot_s,
                     r.tpot_target_s,
                     r.e2e_s,
                     r.energy_j,
                     static_cast<long long>(r.switches),
                     static_cast<long long>(r.met),
                     static_cast<long long>(r.feasible)});
  }
  for (const auto& j : judge(res.summaries, corunners_))
    judged_.add({sfu, lpu, st.noise, j.corunner, j.learned_att, j.performance_att, j.att_gap,
                 j.learned_att_feasible, j.learned_vs_oracle_pct, j.learned_vs_oracle_feasible_pct,
                 j.saving_vs_performance_pct, j.saving_vs_powersave_pct, j.saving_vs_schedutil_pct,
                 j.saving_vs_static_pct, j.saving_vs_podgov_pct});
  if (timeline_.empty() && !res.timeline.empty()) {
    timeline_ = res.timeline;
    timeline_title_ = "request " + std::to_string(timeline_request_) + ", " +
                      res.timeline_controller + ", " + res.timeline_corunner + ", SFU " + sfu +
                      ", LPU " + lpu;
  }
}

double SimReport::pivot(const std::string& metric, const std::string& corunner,
                        const std::string& controller) const {
  const auto& m = pivot_metrics();
  if (std::find(m.begin(), m.end(), metric) == m.end())
    fail("sim report: no pivot of \"", metric, "\"");
  auto a = pivots_.find(metric);
  if (a == pivots_.end()) return 0;
  auto b = a->second.find(corunner);
  if (b == a->second.end()) return 0;
  auto c = b->second.find(controller);
  return c == b->second.end() ? 0 : c->second;
}

void SimReport::write(const std::string& dir) const {
  std::filesystem::create_directories(dir);
  summary_.write(dir + "/summary.csv");
  judged_.write(dir + "/judged.csv");
  requests_.write(dir + "/requests.csv");
  if (has_ablation()) ablation_.write(dir + "/ablation.csv");
  for (const auto& metric : pivot_metrics()) {
    const std::string path = dir + "/pivot_" + metric + ".csv";
    std::ofstream pv(path);
    pv << "corunner";
    for (const auto& c : controllers_) pv << "," << c;
    pv << "\n";
    for (const auto& cr : corunners_) {
      pv << cr;
      for (const auto& c : controllers_) pv << "," << pivot(metric, cr, c);
      pv << "\n";
    }
    if (!pv) fail("error writing ", path);
  }
  if (!timeline_.empty()) {
    const std::string path = dir + "/timeline.csv";
    std::ofstream tl(path);
    tl << "pass,phase,layer,t_s,mhz,corunner\n";
    for (const auto& p : timeline_)
      tl << p.pass << "," << (p.phase == Phase::Prefill ? "prefill" : "decode") << "," << p.layer
         << "," << p.t_s << "," << p.mhz << "," << p.corunner << "\n";
    if (!tl) fail("error writing ", path);
  }
}

void plot_report(const std::string& dir, const SimReport& r) {
  const auto& ctl = r.controllers();
  auto bars = [&](const char* metric, const char* ylabel, double scale, std::string title) {
    plot::Bars b;
    b.csv = dir + "/pivot_" + metric + ".csv";
    b.series = ctl, b.scale = scale, b.title = std::move(title), b.ylabel = ylabel;
    b.xlabel = "co-runner pattern";
    return b;
  };
  struct One {
    const char *metric, *ylabel, *file, *title;
  };
  const One singles[] = {
      {"energy_j", "energy per request (J)", "energy.png", "Energy per request"},
      {"slo_attainment_pct", "requests meeting TTFT and TPOT (%)", "slo.png", "SLO attainment"},
      {"switches_per_token", "switches per output token", "switches.png",
       "DVFS frequency switches"}};
  for (const auto& x : singles)
    plot::run_gnuplot(plot::bar_chart_script({dir + "/" + x.file, 900, 460},
                                             {bars(x.metric, x.ylabel, 1, x.title)}));
  // Latency percentiles: P50 and P99 side by side.
  struct Pair {
    const char *p50, *p99, *ylabel;
    double scale;
    const char *file, *name;
  };
  const Pair pairs[] = {{"ttft_p50_s", "ttft_p99_s", "TTFT (s)", 1, "ttft.png", "TTFT"},
                        {"tpot_p50_s", "tpot_p99_s", "TPOT (ms)", 1e3, "tpot.png", "TPOT"}};
  for (const auto& x : pairs)
    plot::run_gnuplot(
        plot::bar_chart_script({dir + "/" + x.file, 1300, 460},
                               {bars(x.p50, x.ylabel, x.scale, std::string(x.name) + " P50"),
                                bars(x.p99, x.ylabel, x.scale, std::string(x.name) + " P99")}));
  if (!r.timeline().empty()) {
    // Top: the clock at every layer boundary (x: pass, y: layer); bottom: the co-runner's
    // intensity during each pass, on the same x axis.
    plot::HeatMap h;
    h.figure = {dir + "/timeline.png", 1000, 620};
    h.csv = dir + "/timeline.csv";
    h.x = 1, h.y = 3, h.value = 5;
    h.title = "GPU clock at every layer boundary: " + r.timeline_title();
    h.ylabel = "layer (top row: output head)";
    h.cblabel = "GPU clock (MHz)";
    h.strip_y = 6;
    h.strip_xlabel = "pass (prefill passes first, then one per output token)";
    h.strip_ylabel = "co-runner intensity";
    plot::run_gnuplot(plot::heat_map_script(h));
  }
}

}  // namespace cln::dvfs
