// What one DVFS decision costs: the learned MLP (what runs at every layer boundary), the
// governors, and the MPC teacher for comparison. Build: target dvfs_bench.
//   build-*/bench/dvfs_bench
#include <benchmark/benchmark.h>

#include "clone/device/corunner.h"
#include "clone/device/sim.h"
#include "clone/dvfs/load_forecast.h"
#include "clone/dvfs/policy.h"
#include "clone/dvfs/runner.h"
#include "clone/engine/presets.h"

using namespace cln;

namespace {

std::shared_ptr<const device::CostModel> model(bool sfu) {
  device::CostOptions o;
  o.sfu = sfu;
  return std::make_shared<const device::CostModel>(
      device::DeviceProfile::load(std::string(CLONE_SOURCE_DIR) + "/profiles/orin-nx-16gb.json"),
      model_preset("gemma-2b"), o);
}

dvfs::State decode_state() {
  dvfs::State s;
  s.phase = Phase::Decode, s.layer = 7, s.n_layer = 18, s.pos = 900, s.n_tokens = 1;
  s.corunner = 0.3, s.corunner_ahead = 0.4, s.ttft_target_s = 3, s.tpot_target_s = 0.3,
  s.prompt = 800;
  // The rest planned over the default 16-token decode horizon, with time in hand at the top
  // clock under the co-runner (so the learned guard lets the net decide).
  s.tokens_done = 100, s.predicted_remaining = 16, s.elapsed_s = 25, s.phase_elapsed_s = 22;
  s.slack_s = 2, s.budget_left_s = 5, s.work_left_s = 4.3, s.ttft_est_s = 1.6, s.tpot_est_s = 0.186;
  s.level = 4, s.util = 0.05, s.last_layer_s = 0.01;
  return s;
}

void decide(benchmark::State& st, const char* name, bool sfu) {
  auto m = model(sfu);
  dvfs::PolicyOptions o;
  o.learned_path = std::string(CLONE_SOURCE_DIR) + "/models/dvfs/orin-nx-16gb.json";
  auto pol = dvfs::make_policy(name, m, o);
  dvfs::State s = decode_state();
  for (auto _ : st) {
    s.slack_s += 1e-9;  // keep the compiler from hoisting the call
    benchmark::DoNotOptimize(pol->decide(s));
  }
}

// The whole layer boundary as the engine's hook runs it, minus the layer: build the
// controller's state (for a prefill layer this sums the estimates of every pass, the most
// work), decide, and issue the level (set it on the device; on a real board that is also a
// sysfs write, bench_kernels does not time it). Worst case: the finest grid (SFU: 10 MHz
// steps), the longest prompt the engine takes (4096 tokens, 8 passes), the last prefill pass,
// SLO targets 2% above what the top clock needs under the co-runner (least slack), a
// co-runner at half load.
// Counters: the board's own time for that layer and for a decode layer at the top clock, to
// read the boundary's cost as a share of a layer's time.
void boundary(benchmark::State& st, const char* name, bool sfu, const char* board) {
  device::CostOptions co;
  co.sfu = sfu;
  auto m = std::make_shared<const device::CostModel>(
      device::DeviceProfile::load(std::string(CLONE_SOURCE_DIR) + "/profiles/" + board + ".json"),
      model_preset("gemma-2b"), co);
  dvfs::PolicyOptions o;
  o.learned_path = std::string(CLONE_SOURCE_DIR) + "/models/dvfs/" + board + ".json";
  auto pol = dvfs::make_policy(name, m, o);
  const int64_t prompt = 4096, out = 256;
  // Targets 2% above what the top clock needs under the co-runner: the least slack that
  // still lets a controller choose (with less, the learned guard takes the top clock
  // before the net runs).
  dvfs::RequestInfo ri;
  ri.prompt = prompt, ri.predicted_output = ri.true_output = out;
  const dvfs::SingleClock top = dvfs::predict_single_clock(*m, m->max_level(), ri, 0.5, 512);
  workload::Request r;
  r.prompt = prompt, r.output = out, r.slo = "tight";
  r.ttft_target_s = 1.02 * top.ttft_s, r.tpot_target_s = 1.02 * top.tpot_s;
  device::SimDevice dev(m, device::CorunnerTrace::constant(0.5));
  dvfs::RequestDriver drv(dev, *pol, r, 0, out, 512);
  const int nl = m->n_layer();
  const LayerEvent ev{Phase::Prefill, nl / 2, nl, prompt - 512, 512};
  int level = 0;
  for (auto _ : st) {
    level = drv.decide(ev);
    dev.set_level(level);
    benchmark::DoNotOptimize(level);
  }
  // What it chose, against the top level (at the top the guard may have decided alone).
  st.counters["level"] = level;
  st.counters["top_level"] = m->max_level();
  st.counters["grid_levels"] = static_cast<double>(m->levels().size());
  st.counters["prefill_layer_us"] =
      1e6 * m->cost(m->work(ev.layer, ev.phase, ev.pos, ev.n_tokens), m->max_level(), 0).time_s;
  st.counters["decode_layer_us"] =
      1e6 * m->cost(m->work(nl / 2, Phase::Decode, prompt, 1), m->max_level(), 0).time_s;
}

// The co-runner forecast the online controllers plan with, made again once a second of
// device time (dvfs/load_forecast.h): 1200 samples of the last 120 s of a bursty co-runner,
// and the quantile of the window means for 11 horizons. Its cost over that second is its
// share of the board's time.
void forecast(benchmark::State& st) {
  const auto trace = device::CorunnerTrace::make("bursty", 42);
  double now = 500;
  for (auto _ : st) {
    dvfs::LoadForecast fc([&trace](double t) { return trace.at(t); }, now);
    benchmark::DoNotOptimize(fc.mean_load(3.0));
    now += 1;
  }
}

// The power mode chosen once per request (`--modes`, runner.h choose_setting): for the
// online controllers the cheapest (mode, single clock) the cost model predicts meets the SLO
// under the co-runner's forecast, which is built from its last 120 s for the choice. The
// Orin Nano Super's four modes and the finest grid, a 4096-token prompt and 256 tokens with
// 2% slack at the fastest mode's top clock, a bursty co-runner. Counter: the request's own
// time at the top clock, to read the choice as a share of it.
void choose_mode(benchmark::State& st, const char* name) {
  device::CostOptions co;
  co.sfu = true;
  auto m = std::make_shared<const device::CostModel>(
      device::DeviceProfile::load(std::string(CLONE_SOURCE_DIR) +
                                  "/profiles/orin-nano-super-8gb.json"),
      model_preset("gemma-2b"), co);
  const dvfs::Settings set = dvfs::make_settings(*m, {"all"});
  const int64_t prompt = 4096, out = 256;
  const auto est = dvfs::estimate(*set.models.back(), prompt, out, 512);
  workload::Request r;
  r.prompt = prompt, r.output = out, r.slo = "tight";
  r.ttft_target_s = 1.02 * est.prefill_s, r.tpot_target_s = 1.02 * est.decode_token_s;
  device::SimDevice dev(m, device::CorunnerTrace::make("bursty", 42));
  dev.idle_until(500);
  for (auto _ : st)
    benchmark::DoNotOptimize(dvfs::choose_setting(name, set, dev, r, 500, out, 512, {}));
  st.counters["modes"] = static_cast<double>(set.models.size());
  st.counters["request_at_top_ms"] =
      1e3 * (est.prefill_s + est.decode_token_s * static_cast<double>(out - 1));
}

}  // namespace

BENCHMARK(forecast);
BENCHMARK_CAPTURE(boundary, learned_nx_sfu, "learned", true, "orin-nx-16gb");
BENCHMARK_CAPTURE(boundary, learned_nx, "learned", false, "orin-nx-16gb");
BENCHMARK_CAPTURE(boundary, learned_nano_sfu, "learned", true, "orin-nano-8gb");
BENCHMARK_CAPTURE(boundary, learned_nano_super_sfu, "learned", true, "orin-nano-super-8gb");
BENCHMARK_CAPTURE(boundary, podgov_nx_sfu, "podgov", true, "orin-nx-16gb");
BENCHMARK_CAPTURE(boundary, mpc_teacher_nx_sfu, "mpc", true, "orin-nx-16gb");
BENCHMARK_CAPTURE(boundary, mpc_switch_nx_sfu, "mpc-switch", true, "orin-nx-16gb");

BENCHMARK_CAPTURE(decide, learned_jetson, "learned", false);
BENCHMARK_CAPTURE(decide, learned_sfu, "learned", true);
BENCHMARK_CAPTURE(decide, schedutil, "schedutil", false);
BENCHMARK_CAPTURE(decide, performance, "performance", false);
BENCHMARK_CAPTURE(decide, mpc_teacher_jetson, "mpc", false);
BENCHMARK_CAPTURE(decide, mpc_teacher_sfu, "mpc", true);
BENCHMARK_CAPTURE(decide, mpc_switch_jetson, "mpc-switch", false);
BENCHMARK_CAPTURE(decide, mpc_switch_sfu, "mpc-switch", true);

BENCHMARK_CAPTURE(choose_mode, learned, "learned");
BENCHMARK_CAPTURE(choose_mode, performance, "performance");
BENCHMARK_MAIN();
