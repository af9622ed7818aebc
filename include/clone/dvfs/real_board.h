// The real board beside the modelled one (`--backend linux`): at each layer boundary the
// clock the controller chose on the modelled board is also written to the board's own knob
// (its lowest level at or above that clock; its top level if none is), and time and energy
// are measured, from the wall clock and the power rails. The controllers still plan on the
// profile's cost model: their state (slack, clock, energy) is the modelled board's, so the
// measured numbers are reported beside the modelled ones, not fed back.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "clone/device/cost_model.h"
#include "clone/device/linux.h"

namespace cln::dvfs {

class RealBoard {
 public:
  // Throws cln::Error naming what is missing (no knob, not writable: device/linux.h).
  RealBoard(const std::string& sysfs_root, const std::string& knob,
            const std::vector<device::OperatingPoint>& model_levels);

  std::string name() const { return dev_.name(); }
  bool measures_energy() const { return !std::isnan(dev_.energy_j()); }
  double mhz_now() const { return dev_.levels()[static_cast<size_t>(dev_.level())].mhz; }
  // Puts the board in the power mode `in_mode` is built for (its options().mode, of its
  // profile; device::apply_power_mode) and from then on maps that model's levels (capped by
  // the mode) onto the knob. Returns what was set, one line per knob; throws cln::Error
  // naming the knobs the mode needs and cannot set.
  std::vector<std::string> apply_mode(const device::CostModel& in_mode);
  // The knob's level for a model level, and its clock.
  int level_for(int model_level) const;
  double mhz_for(int model_level) const;
  // Meters the layer that has just run (energy since the last call, J; NaN without
  // rails), then sets the knob for the next one.
  double on_layer(int model_level);
  // Energy since the last call, without a layer (the end of a request).
  double meter();
  double now_s() const { return dev_.now_s(); }
  int64_t switches() const { return dev_.switches(); }

 private:
  void map_levels(const std::vector<device::OperatingPoint>& model_levels);

  std::string root_;
  device::LinuxDevice dev_;
  std::vector<int> map_;
  double last_e_ = 0;
};

}  // namespace cln::dvfs
