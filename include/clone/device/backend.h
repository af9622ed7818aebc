// A device backend: where the controller's frequency choice lands and where time and
// energy are measured. `sim` is a modelled device (sim.h); `linux` is the real board
// through sysfs (linux.h). The engine's layer hook calls on_layer() before each layer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "clone/device/profile.h"
#include "clone/engine/hook.h"

namespace cln::device {

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  virtual std::string name() const = 0;
  virtual const std::vector<OperatingPoint>& levels() const = 0;
  virtual int level() const = 0;
  virtual void set_level(int i) = 0;                // no-op when already there
  virtual void on_layer(const LayerEvent& ev) = 0;  // the layer described is about to run
  virtual double now_s() const = 0;                 // device clock
  virtual double energy_j() const = 0;              // energy meter; NaN if it cannot measure
  virtual double corunner_intensity() const = 0;    // current co-runner share estimate
  virtual double last_util() const = 0;             // compute busy fraction of the last layer
  virtual int64_t switches() const = 0;             // frequency changes so far
};

}  // namespace cln::device
