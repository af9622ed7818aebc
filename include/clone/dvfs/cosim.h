// Co-simulation of a real generation: hung on the engine's layer-boundary hook, a simulated
// device (the model's own shapes on a profile's cost model, with a co-runner) runs each
// layer at the clock a DVFS controller picks, as one request with an SLO. The per-layer
// trace records every boundary; finish() gives the request's result on that device.
// Needs only the model's shapes (a ModelConfig), not the engine: the caller runs the model
// and passes hook() to its Context.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "clone/device/sim.h"
#include "clone/dvfs/real_board.h"
#include "clone/dvfs/runner.h"
#include "clone/engine/hook.h"
#include "clone/engine/model_config.h"

namespace cln::dvfs {

struct CoSimOptions {
  std::string device;                  // profile name or JSON path
  std::string controller = "learned";  // a make_policy name
  std::string policy_path;             // learned weights (empty: default_learned_path)
  std::string slo;                     // SLO class; may stay empty when both targets are given
  double ttft_target_s = 0, tpot_target_s = 0;  // > 0 overrides the class's target
  std::string corunner = "idle";                // pattern name or CSV (CorunnerTrace::make)
  uint64_t corunner_seed = 1;
  int64_t predicted = 0;  // output length the controller is told (0: the output budget)
  int64_t n_batch = 512;  // the engine's prefill pass length (the planners assume the same)
  int64_t decode_horizon = kDecodeHorizon;  // RequestDriver::set_decode_horizon (0: the whole
                                            // prediction)
  // Per request, the power mode (nvpmodel preset: the GPU's cap and cores, the memory clock,
  // the CPU's clock and cores) among these ("all": every mode of the profile), by the
  // controller's rule (runner.h choose_setting), the controller then setting the clock at
  // every layer boundary inside it; the change is charged as a setting_switch_s stall.
  // Empty: no mode, the profile's top clocks. Backend linux: the mode is put on the board.
  std::vector<std::string> modes;
  double setting_switch_s = Settings{}.switch_s;
  // "sim": the modelled board only. "linux": each chosen clock is also set on the real
  // board's knob and time and energy are measured there too (dvfs/real_board.h).
  std::string backend = "sim";
  std::string sysfs_root = "/";  // linux: where sysfs is (tests pass a fake tree)
  std::string knob;              // linux: the knob to drive (empty: the GPU, else the first)
  // The router's prompt embedding (the base model's first embed_layers layers over the
  // prompt's first embed_tokens tokens) runs before the request's passes: charged on the
  // device at its clock, inside the request's TTFT and energy. 0: no router.
  int embed_layers = 0;
  int64_t embed_tokens = 0;
};

// What the real board measured for one request (backend "linux").
struct Measured {
  std::string board;                     // "linux:17000000.gpu"
  std::vector<std::string> mode_set;     // with modes: what putting the board in it set
  double time_s = 0;                     // wall time from admission to the end
  double energy_j = 0;                   // from the rails; NaN when the board has none
  std::map<double, int64_t> mhz_layers;  // layers run at each of the knob's clocks
};

// One layer boundary as the simulated device ran it.
struct TraceRow {
  int64_t pass = 0;
  Phase phase = Phase::Prefill;
  int layer = 0;
  int64_t token = 0;  // prefill: first prompt position of the pass; decode: output token index
  int64_t n_tokens = 0;
  double mhz = 0, t_start_s = 0, time_s = 0, energy_j = 0, corunner = 0;
};

class CoSim {
 public:
  // The request as known before generating: prompt tokens and the output budget (exact
  // when generation ignores end-of-sequence; the oracle plans for it). Throws cln::Error
  // when the options give no SLO targets, or name an unknown profile or controller.
  CoSim(const ModelConfig& model, const CoSimOptions& opt, int64_t prompt_tokens,
        int64_t max_output);
  CoSim(const CoSim&) = delete;
  CoSim& operator=(const CoSim&) = delete;

  // The hook to give the engine's Context (it refers to this object).
  LayerHook hook();
  // The request's result once generation is over (call once).
  RequestResult finish();

  const std::vector<TraceRow>& trace() const { return rows_; }
  const device::CostModel& cost_model() const { return *model_; }
  const workload::Request& request() const { return req_; }
  // With modes: the power mode the controller chose for this request ("" without).
  const std::string& mode() const { return mode_; }
  // Backend "linux": what the real board measured (after finish()).
  const std::optional<Measured>& measured() const { return measured_; }

  // One line: model, profile, controller, co-runner, lengths, TTFT/TPOT against targets,
  // end-to-end time, energy, SLO met or missed (and infeasible), frequency switches.
  std::string summary_line(const RequestResult& r) const;
  // The trace as CSV (pass,phase,layer,token,n_tokens,mhz,t_start_s,time_s,energy_j,corunner).
  void write_trace(const std::string& path) const;

 private:
  void on_event(const LayerEvent& ev);

  CoSimOptions opt_;
  std::shared_ptr<const device::CostModel> model_;
  std::optional<device::SimDevice> dev_;
  std::unique_ptr<Policy> policy_;
  std::optional<RequestDriver> driver_;
  workload::Request req_;
  bool feasible_ = true;
  int64_t pass_ = -1, decode_passes_ = 0;
  std::vector<TraceRow> rows_;
  std::unique_ptr<RealBoard> real_;
  std::optional<Measured> measured_;
  double real_t0_ = 0;
  double pre_j_ = 0;  // before the driver's first pass: the mode switch, the router's embedding
  std::string mode_;
};

}  // namespace cln::dvfs
