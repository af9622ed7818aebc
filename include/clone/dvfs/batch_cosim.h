// Co-simulation of a continuous batch (engine/batch.h) on a simulated board: what
// dvfs/cosim.h does for one request, for the server. Every request in the batch keeps its
// own SLO state and its own controller (RequestDriver); at each layer boundary of a pass
// each request's controller is asked for a clock given its own view of the pass (its
// phase, position and tokens), and the board runs the layer at the highest clock any of
// them wants: a request never runs slower than its own controller asked for. The board
// charges the batched layer once: weights read once, each request's rows and attention
// over its own KV cache. A request's energy is its share of each pass by rows.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "clone/device/sim.h"
#include "clone/dvfs/cosim.h"
#include "clone/dvfs/real_board.h"
#include "clone/dvfs/runner.h"
#include "clone/engine/hook.h"
#include "clone/engine/model_config.h"

namespace cln::dvfs {

// One request's share of the next pass.
struct BatchItem {
  int64_t id = 0;
  Phase phase = Phase::Prefill;
  int64_t pos = 0;  // its first token's position (its KV cache length before the pass)
  int64_t n_tokens = 0;
};

// What the board did for one request.
struct BatchRequestResult {
  RequestResult r;                       // device-time TTFT/TPOT/energy, SLO met or missed
  std::map<double, int64_t> mhz_layers;  // layers run at each clock (MHz) while it was in the batch
  std::optional<Measured> measured;      // backend "linux": the real board's numbers
  std::string mode;                      // with modes: the power mode the board was in
  // The clock (MHz) of every layer it ran, head last: one row per pass it took part in
  // (its prefill passes, then one per generated token but the last).
  std::vector<std::vector<float>> timeline;
};

class BatchCoSim {
 public:
  // Uses opt.device, controller, policy_path, corunner, corunner_seed, n_batch (the
  // scheduler's rows per pass), modes and setting_switch_s, and backend, sysfs_root, knob;
  // the per-request fields are given to admit(). With modes, the power mode is the board's,
  // shared by every request in the batch: a request admitted to an idle board chooses it
  // (the controller's rule, runner.h choose_setting; the switch charged to that request and
  // on the linux backend put on the board), one admitted beside others runs in the mode they
  // are in (changing it under them would break the plans they were admitted with). Throws
  // cln::Error for an unknown profile or controller, "oracle" (it needs the future), or a linux
  // board that cannot be driven (naming what is missing).
  BatchCoSim(const ModelConfig& model, const CoSimOptions& opt);
  ~BatchCoSim();
  BatchCoSim(const BatchCoSim&) = delete;
  BatchCoSim& operator=(const BatchCoSim&) = delete;

  // A request joins the batch (device time: now). Targets must be positive.
  void admit(int64_t id, const std::string& slo, int64_t prompt, int64_t predicted_output,
             double ttft_target_s, double tpot_target_s);
  // The router's prompt embedding (the first `layers` layers of a prefill of `tokens`
  // prompt tokens, no adapters, no head) run for request `id` on the board at the current
  // clock, before its own passes: its time counts in the request's TTFT, its energy is the
  // request's.
  void charge_embedding(int64_t id, int layers, int64_t tokens);
  // Who runs in the next pass; every item's id must have been admitted.
  void begin_pass(std::vector<BatchItem> items);
  // The hook for the batch: called at each layer boundary of the pass begun last.
  LayerHook hook();
  // The request left the batch (finished or cancelled): its result on the board.
  BatchRequestResult finish(int64_t id);

  const device::CostModel& cost_model() const { return *model_; }
  const device::SimDevice& device() const { return *dev_; }
  const RealBoard* real() const { return real_.get(); }
  // With modes: the power mode the board is in ("" before the first request, or without).
  std::string mode() const;
  int64_t active() const { return static_cast<int64_t>(live_.size()); }

 private:
  struct Live;
  void on_event(const LayerEvent& ev);

  CoSimOptions opt_;
  PolicyOptions po_;  // the learned weights read once, for every request's controller
  std::shared_ptr<const device::CostModel> model_;
  std::optional<device::SimDevice> dev_;
  std::map<int64_t, std::unique_ptr<Live>> live_;
  std::vector<BatchItem> pass_;
  std::unique_ptr<RealBoard> real_;
  std::optional<Settings> st_;        // opt.modes
  std::vector<PolicyOptions> st_po_;  // each mode's (its learned net)
  int mode_ = -1;                     // index in st_, -1 before the first request
  std::vector<BatchItem> ran_;        // who ran the last layer (the real board's energy is theirs)
  void share_measured(double energy_j);
};

}  // namespace cln::dvfs
