// Serving requests on a device with a controller. RequestDriver is fed the engine's
// layer events (analytically from shapes, or from the engine's hook in co-simulation):
// at each it builds the controller's state, applies the chosen level and lets the device
// charge the layer. run_workload() serves a whole workload; sweep() every controller
// under every co-runner pattern, with the per-controller summary `clone sim` prints.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "clone/device/sim.h"
#include "clone/dvfs/load_forecast.h"
#include "clone/dvfs/policy.h"
#include "clone/dvfs/settings.h"
#include "clone/workload/workload.h"

namespace cln::dvfs {

// Output-length predictor: the true length, or that times exp(noise * N(0,1)) (seeded
// per request), the error a learned predictor measured (serve/length.h reports its RMS log
// error). With a reserve, the controllers plan for the prediction times exp(reserve *
// noise): `reserve` standard deviations of the predictor's own error longer, so an
// under-predicted decode does not run out of budget at its end (0: plan for the
// prediction; nothing to reserve for with the true length).
struct LengthPredictor {
  double noise = 0;
  uint64_t seed = 7;
  double reserve = 0;
  int64_t predict(const workload::Request& r) const;
};

struct RequestResult {
  int64_t id = 0;
  std::string slo;
  int64_t prompt = 0, output = 0, predicted = 0;
  double queue_s = 0, ttft_s = 0, tpot_s = 0, e2e_s = 0, energy_j = 0;
  double ttft_target_s = 0, tpot_target_s = 0;
  int64_t switches = 0;
  bool met = false;      // TTFT and mean TPOT within target
  bool feasible = true;  // the top clock, from the same start, would have met it
};

struct TimelinePoint {
  int64_t pass = 0;  // 0 .. prefill passes-1, then one per decode token
  Phase phase = Phase::Prefill;
  int layer = 0;
  double t_s = 0;  // since arrival
  double mhz = 0;
  double corunner = 0;
};

class RequestDriver {
 public:
  // planning: the cost model the controller knows (its estimates and the co-runner's
  // contention); nullptr = the device's own. It differs from the device's when the simulated
  // board runs with perturbed factors (robustness to model error).
  RequestDriver(device::SimDevice& dev, Policy& pol, const workload::Request& r, double arrival_s,
                int64_t predicted_output, int64_t n_batch,
                std::vector<TimelinePoint>* timeline = nullptr,
                const device::CostModel* planning = nullptr);
  // The controller picks the level for this layer, the device switches to it and charges
  // the layer.
  void on_event(const LayerEvent& ev);
  // The level this request's controller wants for the layer `ev` describes (the request's
  // own view: its phase, position and tokens), without touching the device; a batch
  // runs at the highest level any of its requests wants (dvfs/batch_cosim.h).
  int decide(const LayerEvent& ev);
  // Decode planned over at most this many tokens ahead (0: over the whole predicted rest):
  // the controller is told no more than h tokens remain, so it keeps the running mean TPOT
  // near its target instead of planning to make time up over tokens a too-long prediction
  // promised and that never come (docs/serve.md, the length predictor).
  void set_decode_horizon(int64_t h) { horizon_ = h; }
  LayerHook hook() {
    return [this](const LayerEvent& ev) { on_event(ev); };
  }
  RequestResult finish();

 private:
  device::SimDevice& dev_;
  const device::CostModel* plan_;
  Policy& pol_;
  workload::Request req_;
  RequestInfo info_;
  Estimates est_;
  std::vector<TimelinePoint>* tl_;
  int64_t horizon_ = 0;  // set_decode_horizon
  double e0_, first_ = -1;
  int64_t sw0_, pass_ = -1, decode_passes_ = 0;
  double pass_start_ = 0;
  // The co-runner's observed past (a load monitor), summarised again every second.
  static constexpr double kForecastEvery_s = 1.0;
  LoadForecast::Options fc_opt_;
  LoadForecast fc_;
  void forecast();
  Phase phase_ = Phase::Prefill;
};

// Would the top clock meet r's SLO from the device's current state? (A replay on a copy.)
bool feasible_at_top(const device::SimDevice& dev, const workload::Request& r, double arrival_s,
                     int64_t n_batch);

// The decode horizon every controller runs with unless told otherwise (RunOptions,
// CoSimOptions, TrainOptions, and the CLI's --decode-horizon): chosen on seed-7 requests
// among 0/8/16/32/64 tokens under the length predictor's error, judged on seed 42
// (docs/serve.md, "A short decode horizon").
inline constexpr int64_t kDecodeHorizon = 16;

struct RunOptions {
  int64_t n_batch = 512;
  bool closed_loop = true;        // next request arrives think_s after the previous ends
                                  // (one user on one device); false: at arrival_s, queueing
  int64_t timeline_request = -1;  // record the timeline of this request id
  std::vector<TimelinePoint>* timeline = nullptr;
  const device::CostModel* planning = nullptr;  // what the controllers know (null: the device)
  int64_t decode_horizon = kDecodeHorizon;      // RequestDriver::set_decode_horizon, every request
};

std::vector<RequestResult> run_workload(device::SimDevice& dev, Policy& pol,
                                        const std::vector<workload::Request>& reqs,
                                        const LengthPredictor& pred, const RunOptions& opt);

// The setting `controller` takes for request `r` (arrived at arrival_s) on `dev` as it is
// now, told `predicted` output tokens (dvfs/settings.h: performance the fastest setting, the
// oracle its own plan replayed in each and the cheapest that meets the SLO, every other
// controller the cheapest predicted one under the co-runner's forecast). `dev` is not
// changed.
int choose_setting(const std::string& controller, const Settings& st, const device::SimDevice& dev,
                   const workload::Request& r, double arrival_s, int64_t predicted, int64_t n_batch,
                   const PolicyOptions& popt);
// The device switched to setting i (its stall charged); the energy that cost.
double switch_setting(device::SimDevice& dev, const Settings& st, int i);
// Whether the fastest setting's top clock, from dev's state now, meets r's SLO (`before`,
// if given, runs on the board in that setting first: work the request waits for).
bool feasible_in_fastest(const device::SimDevice& dev, const Settings& st,
                         const workload::Request& r, double arrival_s, int64_t n_batch,
                         const std::function<void(device::SimDevice&)>& before = {});

// As run_workload, with the board's knobs chosen per request among `st` (dvfs/settings.h:
// performance the fastest setting, oracle the exact choice, every other controller the
// cheapest predicted one), the controller of that setting running its clock inside it. A
// request is feasible when the fastest setting's top clock meets its SLO; its energy
// includes changing setting.
std::vector<RequestResult> run_workload_settings(device::SimDevice& dev,
                                                 const std::string& controller, const Settings& st,
                                                 const std::vector<workload::Request>& reqs,
                                                 const LengthPredictor& pred, const RunOptions& opt,
                                                 const PolicyOptions& popt);

struct Summary {
  std::string controller, corunner;
  size_t n = 0, infeasible = 0;
  double energy_j = 0;  // mean per request
  // Split by feasibility (a controller that gives up on requests no clock can serve looks
  // cheap in the mean over all): means over the feasible and the infeasible requests, and the
  // per-request distribution over the feasible ones.
  double energy_feasible_j = 0, energy_infeasible_j = 0;
  double energy_feasible_p50_j = 0, energy_feasible_p90_j = 0;
  double ttft_p50 = 0, ttft_p99 = 0, tpot_p50 = 0, tpot_p99 = 0;  // seconds
  double attainment = 0;           // % of all requests meeting their SLO
  double attainment_feasible = 0;  // % of feasible requests meeting it
  double switches_per_token = 0;
};
Summary summarize(const std::string& controller, const std::string& corunner,
                  const std::vector<RequestResult>& rs);

struct SweepSpec {
  std::vector<std::string> controllers;
  std::vector<std::string> corunners;  // pattern names or CSV paths
  uint64_t corunner_seed = 1;
  PolicyOptions policy;
  LengthPredictor predictor;
  RunOptions run;
  std::function<void(const std::string&)> progress;  // one line per finished run
  std::string timeline_corunner;  // the co-runner pattern whose run records the timeline
                                  // (empty: the first)
  // The board as it really is, when it differs from the model the controllers plan with
  // (null: the same). Feasibility and the oracle use the real board.
  std::shared_ptr<const device::CostModel> device_model;
  // Power modes every controller chooses between per request (run_workload_settings);
  // empty: the model's own setting throughout.
  std::vector<std::string> modes;
  double setting_switch_s = 1e-3;
};
struct SweepResult {
  std::vector<Summary> summaries;
  std::vector<std::vector<RequestResult>> results;  // parallel to summaries
  std::vector<TimelinePoint> timeline;              // of run.timeline_request, first controller hit
  std::string timeline_controller, timeline_corunner;
};
SweepResult sweep(std::shared_ptr<const device::CostModel> model,
                  const std::vector<workload::Request>& reqs, const SweepSpec& spec);

}  // namespace cln::dvfs
