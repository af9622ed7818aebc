// Calibration against the paper's own measurements (Gemma-2B, FP16, on Jetson Orin):
//   Orin NX:   TTFT 255 ms (128-token prompt), 1935 ms (1024); TPOT 180-200 ms;
//              128 in + 242 out idle: TTFT/TPOT 255/198 ms, end-to-end 42.6 s;
//              the same with a web-search co-runner: end-to-end 61.4 s.
//   Orin Nano: 128 in + 242 out idle: TTFT/TPOT 268/231 ms.
// fit_to_paper() fits the profile's efficiency factors to these, minimising the squared
// log error: Nelder-Mead for the factors the idle points pin down, then (NX) a grid search
// for the contention on the co-runner point; docs/device.md explains which factor each
// measurement pins down.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "clone/device/corunner.h"
#include "clone/device/cost_model.h"

namespace cln::device {

// The layer events the engine emits for one request: prefill in passes of at most
// n_batch tokens, then one decode pass per further output token; every pass visits
// layers 0..n_layer-1 and then the head (layer == n_layer). Returns false from fn to stop.
void for_each_request_event(int n_layer, int64_t prompt, int64_t n_out, int64_t n_batch,
                            const std::function<bool(const LayerEvent&)>& fn);

struct FixedRun {
  double ttft_s = 0, tpot_s = 0, e2e_s = 0, energy_j = 0;
  double rail_j = 0;  // of energy_j: the compute rail (Cost::rail_j)
};
// One request at a fixed level (max when level < 0), analytically.
FixedRun run_fixed(std::shared_ptr<const CostModel> model, const CorunnerTrace& corunner,
                   int64_t prompt, int64_t n_out, int level = -1, int64_t n_batch = 4096);

struct CalibrationPoint {
  std::string what;       // "TTFT 128-token prompt"
  double measured = 0;    // the paper's number (seconds)
  double lo = 0, hi = 0;  // accepted band when the paper gives a range (else both = measured)
  double modelled = 0;
  double rel_err() const;  // 0 inside [lo, hi], else relative distance to the band
};

// The paper's points for this profile ("orin-nx-16gb" or "orin-nano-8gb"), evaluated.
std::vector<CalibrationPoint> paper_points(const DeviceProfile& p);

// The web-search co-runner seed the calibration uses (the trace is seeded).
constexpr uint64_t kCalibrationSeed = 1;

struct FitResult {
  Fit fit;
  std::vector<std::string> fitted;  // names of the factors that were free
  std::vector<CalibrationPoint> points;
  int evaluations = 0;
  double loss = 0;  // over the points not held out
};
// NX: frees compute_efficiency, core_bytes_per_cycle, overlap (on the idle points), then
// contention (on the web-search point, which only it moves; a grid over its whole range, so
// the start does not matter; held out, contention keeps the profile's value).
// Nano: frees compute_efficiency and core_bytes_per_cycle; overlap and contention are the
// NX values passed in (same SoC family, too few Nano measurements to pin them).
// held_out: points (by `what`) left out of the loss, to see how well the fit predicts
// them (validation rather than calibration); FitResult::points still has them, and
// loss is over the others. An unknown name is an error.
FitResult fit_to_paper(const DeviceProfile& p, const Fit* shared = nullptr,
                       const std::vector<std::string>& held_out = {});

}  // namespace cln::device
