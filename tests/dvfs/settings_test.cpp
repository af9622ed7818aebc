// Choosing the board's whole setting (a power mode: GPU cap and cores, memory clock, CPU
// clock) per request, and the GPU clock per layer inside it (dvfs/settings.h).
#include <gtest/gtest.h>

#include "clone/core/error.h"
#include "clone/dvfs/runner.h"
#include "clone/dvfs/settings.h"
#include "clone/engine/presets.h"
#include "clone/workload/workload.h"

using namespace cln;
using namespace cln::dvfs;

namespace {

std::string src(const std::string& rel) {
  return std::string(CLONE_SOURCE_DIR) + "/" + rel;
}

std::shared_ptr<const device::CostModel> super_model(const std::string& mode = "") {
  device::CostOptions o;
  o.mode = mode;
  return std::make_shared<const device::CostModel>(
      device::DeviceProfile::load(src("profiles/orin-nano-super-8gb.json")),
      model_preset("tinyllama-1.1b"), o);
}

}  // namespace

// Each request alone from the same start, under co-runners that change over time: the
// oracle choosing the mode per request spends no more than the oracle, the cheapest single
// clock or performance held in any one mode that meets the SLO (exactly: it tries them), and
// no more than 0.1% above the online controllers (podgov, learned, mpc) there; it meets the
// SLO whenever one of them does. The 0.1% is measured, not proven: under a co-runner that
// changes over time when the prefill ends decides what the decode meets, which the oracle's
// per-phase plan captures only through the prefills it tries (the learned policy is 0.02%
// below it on one request here; before the oracle tried prefill clocks, 1.3% on another).
TEST(Settings, TheOracleOverModesSpendsNoMoreThanAControllerInAnyOneMode) {
  const auto base = super_model();
  Settings st = make_settings(*base, {"all"});
  ASSERT_EQ(st.names.size(), 4u);
  st.switch_s = 0;  // the same start as a run held in a mode
  PolicyOptions po;
  po.learned_path = src("models/dvfs/orin-nano-super-8gb.json");
  workload::GeneratorSpec g;
  g.n = 4, g.seed = 11, g.max_context = 1024;
  const auto reqs = workload::generate(g);
  int compared = 0, other_mode_cheaper = 0;
  for (const char* pat : {"bursty", "web-search"}) {
    const auto trace = device::CorunnerTrace::make(pat, 3);
    for (size_t i = 0; i < reqs.size(); ++i) {
      workload::Request r = reqs[i];
      r.think_s = 5.0 * static_cast<double>(i);  // meet the co-runner at another phase
      device::SimDevice jd(st.models.back(), trace);
      const RequestResult joint = run_workload_settings(jd, "oracle", st, {r}, {}, {}, po)[0];
      bool any_met = false;
      double best_fixed = 1e30;
      for (size_t m = 0; m < st.names.size(); ++m)
        for (const char* c : {"performance", "podgov", "static", "learned", "mpc", "oracle"}) {
          auto pol = make_policy(c, st.models[m], po);
          device::SimDevice dev(st.models[m], trace);
          const RequestResult x = run_workload(dev, *pol, {r}, {}, {})[0];
          if (!x.met) continue;
          any_met = true;
          ++compared;
          best_fixed = std::min(best_fixed, x.energy_j);
          const bool online =
              std::string(c) == "podgov" || std::string(c) == "learned" || std::string(c) == "mpc";
          EXPECT_LE(joint.energy_j, x.energy_j * (1 + (online ? 1e-3 : 1e-9)))
              << pat << " request " << i << ": " << c << " in " << st.names[m];
        }
      if (any_met) {
        EXPECT_TRUE(joint.feasible) << pat << " request " << i;
        EXPECT_TRUE(joint.met) << pat << " request " << i;
      }
      // The top mode is not always the cheapest: the choice matters.
      other_mode_cheaper += any_met && best_fixed < 0.99 * [&] {
        auto pol = make_policy("oracle", st.models.back(), po);
        device::SimDevice dev(st.models.back(), trace);
        return run_workload(dev, *pol, {r}, {}, {})[0].energy_j;
      }();
    }
  }
  EXPECT_GT(compared, 30);
  EXPECT_GT(other_mode_cheaper, 0);
}

// Performance over modes is the fastest mode at its top clock: request for request the
// same as performance held in that mode (MAXN_SUPER on this board).
TEST(Settings, PerformanceRunsTheFastestModeAtItsTopClock) {
  const auto base = super_model();
  Settings st = make_settings(*base, {"15W", "MAXN_SUPER", "25W"});
  st.switch_s = 0;
  workload::GeneratorSpec g;
  g.n = 5, g.seed = 3, g.max_context = 1024;
  const auto reqs = workload::generate(g);
  const auto trace = device::CorunnerTrace::make("video", 1);
  RunOptions ro;
  device::SimDevice jd(st.models[1], trace);
  const auto joint = run_workload_settings(jd, "performance", st, reqs, {}, ro, {});
  auto perf = make_policy("performance", st.models[1]);
  device::SimDevice fd(st.models[1], trace);
  const auto fixed = run_workload(fd, *perf, reqs, {}, ro);
  ASSERT_EQ(joint.size(), fixed.size());
  for (size_t i = 0; i < joint.size(); ++i) {
    EXPECT_DOUBLE_EQ(joint[i].energy_j, fixed[i].energy_j) << i;
    EXPECT_DOUBLE_EQ(joint[i].e2e_s, fixed[i].e2e_s) << i;
  }
}

TEST(Settings, ChangingModeStallsTheBoardAndUnknownModesAreNamed) {
  const auto base = super_model();
  const Settings st = make_settings(*base, {"15W", "MAXN_SUPER"});
  device::SimDevice d(st.models[1], device::CorunnerTrace::make("idle", 1));
  d.set_model(st.models[1], 1e-3, 0);  // the same setting: nothing happens
  EXPECT_EQ(d.now_s(), 0);
  d.set_model(st.models[0], 1e-3, 0.002);
  EXPECT_DOUBLE_EQ(d.now_s(), 1e-3);
  EXPECT_NEAR(d.energy_j(), 0.002 + 1e-3 * base->board_idle_w(), 1e-12);
  EXPECT_LE(d.level(), st.models[0]->max_level());  // 15W caps the GPU clock
  try {
    make_settings(*base, {"25W", "40W"});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("40W"), std::string::npos) << e.what();
  }
  const auto host = std::make_shared<const device::CostModel>(
      device::DeviceProfile::load(src("profiles/host.json")), model_preset("gemma-2b"));
  EXPECT_THROW(make_settings(*host, {"all"}), Error);  // this host's profile has no modes
}

// In a power mode the learned policy loads the weights trained in that mode when there are
// some (models/dvfs/<profile>.<mode>.json), else the profile's.
TEST(Settings, TheLearnedPolicyUsesTheNetTrainedInItsMode) {
  const auto m25 = super_model("25W");
  workload::GeneratorSpec g;
  g.n = 6, g.seed = 9, g.max_context = 1024;
  const auto reqs = workload::generate(g);
  const auto run = [&](const std::string& path) {
    PolicyOptions po;
    po.learned_path = path;
    auto pol = make_policy("learned", m25, po);
    device::SimDevice dev(m25, device::CorunnerTrace::make("bursty", 2));
    double e = 0;
    for (const auto& r : run_workload(dev, *pol, reqs, {}, {})) e += r.energy_j;
    return e;
  };
  const double by_default = run("");
  EXPECT_EQ(by_default, run(src("models/dvfs/orin-nano-super-8gb.25W.json")));
  EXPECT_NE(by_default, run(src("models/dvfs/orin-nano-super-8gb.json")));
}
