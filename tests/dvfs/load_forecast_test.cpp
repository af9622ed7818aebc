// The co-runner load forecast the online controllers plan with (dvfs/load_forecast.h), and
// what it buys them: requests the top clock serves under a bursty co-runner are served.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "clone/core/error.h"
#include "clone/core/rng.h"
#include "clone/dvfs/load_forecast.h"
#include "clone/dvfs/runner.h"
#include "clone/engine/presets.h"
#include "clone/workload/replay.h"

using namespace cln;
using namespace cln::dvfs;

namespace {

// A load that steps every 0.3-2.9 s between random levels, as a function of time.
struct Steps {
  std::vector<std::pair<double, double>> seg;  // (start, load)
  explicit Steps(uint64_t seed) {
    Rng rng(seed);
    for (double t = -200; t < 10; t += rng.uniform(0.3, 2.9)) seg.push_back({t, rng.uniform(0, 1)});
  }
  double operator()(double t) const {
    double v = seg.front().second;
    for (const auto& [s, x] : seg)
      if (s <= t) v = x;
    return v;
  }
};

// The quantile by its definition: every window of w samples of the history, averaged one by
// one, sorted, the q-th.
double reference(const Steps& f, double now, double history, double step, double horizon,
                 double q) {
  const auto n = static_cast<size_t>(std::llround(history / step));
  std::vector<double> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = f(now - history + (static_cast<double>(i) + 0.5) * step);
  const auto w = std::max<size_t>(1, static_cast<size_t>(std::llround(horizon / step)));
  if (w >= n) {
    double s = 0;
    for (double v : x) s += v;
    return s / static_cast<double>(n);
  }
  std::vector<double> means;
  for (size_t i = 0; i + w <= n; ++i) {
    double s = 0;
    for (size_t k = i; k < i + w; ++k) s += x[k];
    means.push_back(s / static_cast<double>(w));
  }
  std::sort(means.begin(), means.end());
  return means[static_cast<size_t>(std::llround(q * static_cast<double>(means.size() - 1)))];
}

}  // namespace

TEST(LoadForecast, EqualsTheQuantileOfWindowMeansOnEveryHorizonOfTheGrid) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    const Steps f(seed);
    for (double q : {0.0, 0.5, 0.9, 0.97, 1.0}) {
      LoadForecast::Options o;
      o.quantile = q, o.history_s = 37.3, o.step_s = 0.1, o.min_horizon_s = 0.1, o.horizons = 10;
      const LoadForecast fc(f, 4.2, o);
      for (int h = 0; h < o.horizons; ++h) {
        const double horizon = 0.1 * std::ldexp(1.0, h);
        EXPECT_NEAR(fc.mean_load(horizon), reference(f, 4.2, 37.3, 0.1, horizon, q), 1e-9)
            << "seed " << seed << " q " << q << " horizon " << horizon;
      }
    }
  }
}

TEST(LoadForecast, InterpolatesBetweenHorizonsAndClampsAtTheEnds) {
  const Steps f(4);
  LoadForecast::Options o;
  o.horizons = 6;
  const LoadForecast fc(f, 0, o);
  const double a = fc.mean_load(0.8), b = fc.mean_load(1.6);
  EXPECT_NEAR(fc.mean_load(0.8 * std::sqrt(2.0)), 0.5 * (a + b), 1e-12);
  EXPECT_EQ(fc.mean_load(0.01), fc.mean_load(0.1));
  EXPECT_EQ(fc.mean_load(1e4), fc.mean_load(3.2));
}

TEST(LoadForecast, ASteadyLoadNeedsNoReserveAndABurstyOneDoes) {
  auto steady = [](double) { return 0.35; };
  const LoadForecast calm(steady, 100);
  for (double h : {0.1, 1.0, 30.0, 500.0}) EXPECT_NEAR(calm.mean_load(h), 0.35, 1e-12);
  EXPECT_NEAR(calm.burst_reserve_s(30, 0.77), 0.0, 1e-9);
  // 1.5 s in every 6 s at full load: a short stretch may be all burst, a long one is a
  // quarter; planned for the quarter, the reserve covers the worst tail at full load.
  auto bursts = [](double t) { return std::fmod(t + 600, 6.0) < 1.5 ? 1.0 : 0.0; };
  const LoadForecast fc(bursts, 100);
  EXPECT_NEAR(fc.mean_load(0.4), 1.0, 1e-12);
  EXPECT_NEAR(fc.mean_load(102.4), 0.25, 0.02);
  const double c = 0.5, planned = fc.mean_load(25.6);
  double worst = 0;
  for (double tail = 0.1; tail <= 25.6 + 1e-9; tail *= 2)
    worst =
        std::max(worst, tail * c * (fc.mean_load(tail) - planned) / (1 - c * fc.mean_load(tail)));
  EXPECT_GT(worst, 0.5);
  EXPECT_NEAR(fc.burst_reserve_s(25.6, c), worst, 1e-12);
  // A phase with less time left plans for a heavier mean and keeps less in hand.
  EXPECT_LT(fc.burst_reserve_s(0.2, c), fc.burst_reserve_s(25.6, c));
}

TEST(LoadForecast, RejectsAnEmptyGridOrAQuantileOutsideZeroToOne) {
  auto f = [](double) { return 0.0; };
  LoadForecast::Options o;
  o.quantile = 1.5;
  EXPECT_THROW(LoadForecast(f, 0, o), Error);
  o.quantile = 0.5, o.step_s = 0;
  EXPECT_THROW(LoadForecast(f, 0, o), Error);
}

// The first 23 chat requests of `clone sim --profile orin-nx-16gb` (seed 42) under the bursty
// co-runner: bursts that come after a quiet stretch used to push requests past their targets
// under the MPC teacher and the learned policy (a peak decaying over 10 s forgot them);
// planned against the forecast, every request the top clock serves in time is.
TEST(LoadForecast, OnlineControllersServeEveryFeasibleRequestOfABurstyStretch) {
  auto m = std::make_shared<const device::CostModel>(
      device::DeviceProfile::load(std::string(CLONE_SOURCE_DIR) + "/profiles/orin-nx-16gb.json"),
      model_preset("gemma-2b"));
  const auto reqs = workload::load_workload("chat", 23, 42, 1.0);
  PolicyOptions po;
  po.learned_path = std::string(CLONE_SOURCE_DIR) + "/models/dvfs/orin-nx-16gb.json";
  const auto trace = device::CorunnerTrace::make("bursty", 42);
  for (const char* c : {"mpc", "learned"}) {
    auto pol = make_policy(c, m, po);
    device::SimDevice dev(m, trace);
    const auto rs = run_workload(dev, *pol, reqs, {}, {});
    int feasible = 0;
    for (const auto& r : rs) {
      if (!r.feasible) continue;
      ++feasible;
      EXPECT_TRUE(r.met) << c << " request " << r.id << ": TTFT " << r.ttft_s << " of "
                         << r.ttft_target_s << ", TPOT " << r.tpot_s << " of " << r.tpot_target_s;
    }
    EXPECT_GE(feasible, 10) << c;
  }
}

// The same stretch with the power mode chosen per request (`clone sim --modes all`): the
// learned controller in the mode chosen for each request serves every request the fastest
// mode's top clock serves in time (in the lowest mode, 10W, all 12 feasible ones miss). The
// choice plans for the forecast load and keeps its reserve, as the controllers do; on this
// stretch, and on 120 requests of each co-runner on the NX and the Nano, planning for the
// load now instead changes no choice.
TEST(LoadForecast, ThePowerModeChosenPerRequestPlansForTheForecastToo) {
  const std::string dir = std::string(CLONE_SOURCE_DIR);
  auto m = std::make_shared<const device::CostModel>(
      device::DeviceProfile::load(dir + "/profiles/orin-nx-16gb.json"), model_preset("gemma-2b"));
  const Settings st = make_settings(*m, {"all"});
  ASSERT_GE(st.models.size(), 3u);
  const auto reqs = workload::load_workload("chat", 23, 42, 1.0);
  PolicyOptions po;
  po.learned_path = dir + "/models/dvfs/orin-nx-16gb.json";
  device::SimDevice dev(m, device::CorunnerTrace::make("bursty", 42));
  const auto rs = run_workload_settings(dev, "learned", st, reqs, {}, {}, po);
  int feasible = 0;
  for (const auto& r : rs) {
    if (!r.feasible) continue;
    ++feasible;
    EXPECT_TRUE(r.met) << "request " << r.id << ": TTFT " << r.ttft_s << " of " << r.ttft_target_s
                       << ", TPOT " << r.tpot_s << " of " << r.tpot_target_s;
  }
  EXPECT_GE(feasible, 10);
}
