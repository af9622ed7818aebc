// Training the learned DVFS policy in the simulator, by imitation with DAgger.
// Why imitation rather than reinforcement learning: the simulator gives an exact,
// cheap teacher (mpc_level: a Lagrangian solve of the rest of the phase), so supervised
// regression on its choices converges in seconds and deterministically, where RL on a
// sparse SLO reward would need far more rollouts. Why DAgger: a cloned policy drifts into
// states the teacher never visits (behind or ahead of schedule); rolling out the
// student and labelling the states it reaches teaches it to recover.
// The teacher plans on the SFU's near-continuous grid so labels are smooth; the policy
// outputs a clock fraction that the controller rounds to the device's levels.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "clone/device/cost_model.h"
#include "clone/dvfs/mlp.h"
#include "clone/dvfs/runner.h"

namespace cln::dvfs {

struct TrainOptions {
  uint64_t seed = 1;
  int requests_per_pattern = 16;  // chat requests per co-runner pattern per round
  int rounds = 3;                 // round 0 rolls out the teacher, later rounds the student
  int label_every = 4;            // label about one layer boundary in this many
  int hidden = 32;
  int epochs = 60;
  int batch = 128;
  double lr = 3e-3;
  int64_t n_batch = 512;
  std::string mode;  // the profile's power mode to train in ("": its top clocks)
  // The decode horizon the student and the teacher see (RequestDriver::set_decode_horizon):
  // train with the one the policy will run with.
  int64_t decode_horizon = kDecodeHorizon;
  // SLO classes fit models of a Jetson's size: a 6 M-parameter model meets chatbot's 300 ms
  // TPOT at any clock, so a policy trained on class SLOs alone never sees a tight state.
  // This share of the requests instead gets targets of u x what the top clock needs for it
  // on an idle board (TTFT and TPOT), u uniform in [relative_lo, relative_hi]. 0 (the
  // default) draws nothing more from the generator: the weights are those of before.
  double relative_share = 0;
  double relative_lo = 1.02, relative_hi = 2.0;
  std::function<void(const std::string&)> log;  // progress lines
};

struct TrainResult {
  Mlp net;
  size_t samples = 0;
  double final_mse = 0;
};

// model: the device and model shapes to train for (its SFU flag is ignored).
TrainResult train_policy(const device::DeviceProfile& profile, const ModelConfig& model,
                         const TrainOptions& opt);

}  // namespace cln::dvfs
