// DVFS controllers: one interface, called at every layer boundary of every pass with the
// request's state; it returns the frequency level for the layer about to run.
//   performance  top clock always            powersave  bottom clock always
//   schedutil    utilization governor: f = 1.25 * f_max * frequency-invariant compute
//                utilization over the last window (what Linux schedutil/ondemand do)
//                (a CPU governor: it sees decode's low arithmetic utilisation)
//   podgov       the load-based GPU governor Jetsons ship (devfreq nvhost_podgov): clock
//                from the GPU's busy share of wall time over a window
//   static       one clock per request, the cheapest whose predicted TTFT and TPOT meet
//                the SLO (the workload-level black-box approach)
//   learned      two-layer MLP (< 1K parameters) over the state below, trained in the
//                simulator by imitation (see train.h); models/dvfs/ ships the weights
//   mpc          the learned policy's teacher: a Lagrangian solve of the rest of the
//                phase assuming the co-runner stays as it is now (milliseconds per call)
//   mpc-switch   the same plan with every clock change in it at its price (energy and
//                stall): a Viterbi over clock levels, as the oracle's, on the controller's
//                estimates; it follows its plan, with no hold rule
//   oracle       knows the true lengths and the co-runner's future; plans the whole
//                request as a minimum-energy schedule meeting the SLO (the bound)
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "clone/device/cost_model.h"
#include "clone/device/sim.h"
#include "clone/engine/hook.h"

namespace cln::dvfs {

struct RequestInfo {
  int64_t prompt = 0;
  int64_t predicted_output = 0;  // from the length predictor
  int64_t true_output = 0;       // only the oracle may look
  double ttft_target_s = 0, tpot_target_s = 0;
  double arrival_s = 0;  // device time it arrived
  double start_s = 0;    // device time service began
};

// The controller's view at a layer boundary.
struct State {
  Phase phase = Phase::Prefill;
  int layer = 0, n_layer = 0;  // layer == n_layer: the output head
  int64_t pos = 0, n_tokens = 0;
  double corunner = 0;        // co-runner intensity now, 0..1
  double corunner_ahead = 0;  // forecast mean load over the time the phase has left
  // Time to keep in hand against a burst at the end of the phase heavier than that mean
  // (the worst, over tail lengths, of the forecast's shortfall; dvfs/load_forecast.h).
  double burst_reserve_s = 0;
  double ttft_target_s = 0, tpot_target_s = 0;
  int64_t prompt = 0;
  int64_t tokens_done = 0;          // output tokens produced so far
  int64_t predicted_remaining = 0;  // output tokens still to come (predicted, >= 1 while running)
  double elapsed_s = 0;             // since arrival
  double phase_elapsed_s = 0;       // prefill: since arrival; decode: since the first token
  double slack_s = 0;               // budget due so far minus time spent (negative: behind)
  double budget_left_s = 0;         // phase budget still available
  double work_left_s = 0;  // predicted rest of the phase at the top clock, co-runner as forecast
                           // (or as now, if more)
  double ttft_est_s = 0, tpot_est_s = 0;  // whole prefill / one decode token at top clock, idle
  int level = 0;
  double util = 0;  // compute busy fraction of the last layer
  double last_layer_s = 0;
  double now_s = 0;
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string name() const = 0;
  // Called once per request before its first layer; sim is the device (oracle only).
  virtual void begin(const RequestInfo& info, const device::SimDevice* sim) {
    (void)info;
    (void)sim;
  }
  virtual int decide(const State& s) = 0;
  // Whether decide() reads the state's forecast of the co-runner (corunner_ahead,
  // burst_reserve_s, and work_left_s, which is planned with it). The request driver keeps
  // the forecast (dvfs/load_forecast.h) only for controllers that do; for the others those
  // fields hold the load observed now and no reserve.
  virtual bool reads_forecast() const { return true; }
};

struct Mlp;

struct PolicyOptions {
  std::string learned_path;  // MLP weights (JSON); empty = default_learned_path
  // Weights already loaded (load_learned_net): used instead of reading learned_path, so a
  // server making one controller per request reads the file once.
  std::shared_ptr<const Mlp> learned_net;
  double schedutil_window_s = 0.02;
  int64_t n_batch = 512;  // prefill pass length (the oracle plans the same events)
};

// "performance", "powersave", "schedutil", "podgov", "static", "learned", "mpc", "mpc-switch",
// "oracle".
std::unique_ptr<Policy> make_policy(const std::string& name,
                                    std::shared_ptr<const device::CostModel> model,
                                    const PolicyOptions& opt = {});
std::vector<std::string> policy_names();
// The shipped weights for a cost model: <models>/dvfs/<profile>.<mode>.json when its power
// mode has some, else <profile>.json, in <models>/dvfs/ or a folder under it (base/ holds
// weights trained for the shipped base model's shape); among those, the ones trained for
// the model nearest in parameter count (|log ratio|, from the file's meta.model_params;
// files without it count as farthest, the top folder first on a tie). A policy's inputs
// are ratios, but what they imply differs with the model: a 6 M-parameter model's token is
// ~1 ms, where a clock switch's stall matters, and a 2.5 B model's is ~200 ms.
std::string default_learned_path(const device::CostModel& m);
// The learned policy's weights from `path` (empty: default_learned_path); throws
// cln::Error naming the path and the command that trains them if there are none.
std::shared_ptr<const Mlp> load_learned_net(const device::CostModel& model,
                                            const std::string& path);

// Per-layer times at the top clock on an idle device for this request's prefill and for
// one decode token at mid-generation (what a controller precomputes from the cost model).
struct Estimates {
  int64_t n_batch = 512;
  std::vector<std::vector<double>> prefill_pass_s;  // [pass][layer], n_layer + 1 layers (head last)
  std::vector<double> prefill_layer_s;  // n_layer + 1 entries (head last), all prefill passes
  std::vector<double> decode_layer_s;   // n_layer + 1 entries
  double prefill_s = 0, decode_token_s = 0;
  // One token at the first and at the last position of the predicted output; between them
  // a token's time is interpolated (it is convex in the position, so this errs long).
  int64_t decode_first_pos = 0, decode_last_pos = 0;
  double decode_first_s = 0, decode_last_s = 0;
  double decode_token_at(int64_t pos) const;
};
Estimates estimate(const device::CostModel& m, int64_t prompt, int64_t predicted_output,
                   int64_t n_batch);

// What the cost model predicts for a request served at one clock level throughout: TTFT
// from arrival (the wait before service included), TPOT at mid-generation and the request's
// energy for its predicted length, the co-runner held at `corunner`. Static's rule, and the
// per-request choice of a setting of the board's knobs (dvfs/settings.h).
struct SingleClock {
  double ttft_s = 0, tpot_s = 0, energy_j = 0;
  bool meets(const RequestInfo& r) const {
    return ttft_s <= r.ttft_target_s && tpot_s <= r.tpot_target_s;
  }
};
SingleClock predict_single_clock(const device::CostModel& m, int level, const RequestInfo& r,
                                 double corunner, int64_t n_batch);

// The MPC teacher's choice for one state (also used to label training data): minimise
// the phase's remaining energy subject to its remaining budget, co-runner held at s.corunner.
int mpc_level(const device::CostModel& m, const State& s);
// mpc_level with each change of clock priced in the plan (switch energy and stall): the
// "mpc-switch" controller's choice.
int mpc_switch_level(const device::CostModel& m, const State& s);
// The budget online controllers plan against: budget_left less a small reserve.
double usable_budget(const device::CostModel& m, const State& s);
// The lowest level >= k after which the top clock could still finish the phase in budget
// (the learned policy's one-step safety check).
int safe_level(const device::CostModel& m, const State& s, int k);

// Normalised MLP inputs for a state (kFeatures values).
constexpr int kFeatures = 9;
void features(const State& s, float* out);

}  // namespace cln::dvfs
