// What one DVFS decision costs: the learned MLP (what runs at every layer boundary), the
// governors, and the MPC teacher for comparison. Build: target dvfs_bench.
//   build-*/bench/dvfs_bench
#include <benchmark/benchmark.h>

#include "clone/engine/presets.h"
#include "clone/dvfs/policy.h"

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
  s.corunner = 0.3, s.corunner_peak = 0.6, s.ttft_target_s = 3, s.tpot_target_s = 0.3,
  s.prompt = 800;
  s.tokens_done = 100, s.predicted_remaining = 120, s.elapsed_s = 25, s.phase_elapsed_s = 22;
  s.slack_s = 2, s.budget_left_s = 40, s.work_left_s = 28, s.ttft_est_s = 1.6, s.tpot_est_s = 0.186;
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

}  // namespace

BENCHMARK_CAPTURE(decide, learned_jetson, "learned", false);
BENCHMARK_CAPTURE(decide, learned_sfu, "learned", true);
BENCHMARK_CAPTURE(decide, schedutil, "schedutil", false);
BENCHMARK_CAPTURE(decide, performance, "performance", false);
BENCHMARK_CAPTURE(decide, mpc_teacher_jetson, "mpc", false);
BENCHMARK_CAPTURE(decide, mpc_teacher_sfu, "mpc", true);

BENCHMARK_MAIN();
