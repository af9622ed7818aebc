// A setting of all of the board's knobs, chosen per request: the GPU clock cap and the
// cores (TPCs) online, the memory (EMC) clock and the CPU clock, as the profile's power
// modes (nvpmodel presets) group them; inside the chosen setting the controller still sets
// the GPU clock at every layer boundary. Per request, not per layer: changing the memory
// clock or a mode's CPU and core set takes far longer than a GPU clock step.
//
// Rules for the setting (which one each controller gets in `clone sim --modes`):
//   fastest    the setting whose top clock serves the request soonest (performance)
//   cheapest   the cheapest (setting, single clock) the cost model predicts meets the SLO
//              at the co-runner's load now, static's rule over every knob (every other
//              online controller; the fastest setting when none is predicted to meet it)
//   exact      the oracle: its own plan replayed in every setting, from the same state,
//              co-runner future included; the cheapest that meets the SLO (else the
//              fastest). Exact over the setting, as the oracle is over the clocks.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "clone/device/cost_model.h"
#include "clone/dvfs/load_forecast.h"
#include "clone/dvfs/policy.h"

namespace cln::dvfs {

struct Settings {
  std::vector<std::string> names;                                // the profile's power modes
  std::vector<std::shared_ptr<const device::CostModel>> models;  // the cost model in each
  // Changing setting between requests: the board stalls this long (its idle draw charged).
  // An estimate, not a measurement: a BPMP EMC rate change and cpufreq steps take tens to
  // hundreds of microseconds; 1 ms leaves room for both.
  double switch_s = 1e-3;
};

// The settings for `modes` ("all": every mode of the profile, in its order) of `base`'s
// profile, model and options; an unknown mode is an error listing the profile's modes.
Settings make_settings(const device::CostModel& base, const std::vector<std::string>& modes);

// Index of the setting whose top clock serves `r` soonest (idle board: its TTFT plus its
// decode time for the predicted length).
int fastest_setting(const Settings& st, const RequestInfo& r, int64_t n_batch);
// Static's rule over every setting and clock (see above). With a forecast (what the online
// controllers choose by), each prediction is for the co-runner as loaded as the forecast
// says it may be over the request (or as it is now, if more), and each phase must also
// leave the forecast's burst reserve in hand.
int cheapest_setting(const Settings& st, const RequestInfo& r, double corunner, int64_t n_batch,
                     const LoadForecast* forecast = nullptr);

}  // namespace cln::dvfs
