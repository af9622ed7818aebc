#include "clone/dvfs/real_board.h"

#include <cmath>

#include "clone/core/error.h"

namespace cln::dvfs {

RealBoard::RealBoard(const std::string& sysfs_root, const std::string& knob,
                     const std::vector<device::OperatingPoint>& model_levels)
    : root_(sysfs_root), dev_(sysfs_root, knob) {
  if (dev_.levels().empty()) fail("linux backend: ", dev_.name(), " lists no frequencies");
  map_levels(model_levels);
}

void RealBoard::map_levels(const std::vector<device::OperatingPoint>& model_levels) {
  const auto& real = dev_.levels();
  map_.clear();
  for (const device::OperatingPoint& p : model_levels) {
    int pick = static_cast<int>(real.size()) - 1;
    for (int i = 0; i < static_cast<int>(real.size()); ++i)
      if (real[static_cast<size_t>(i)].mhz >= p.mhz - 1e-6) {
        pick = i;
        break;
      }
    map_.push_back(pick);
  }
}

std::vector<std::string> RealBoard::apply_mode(const device::CostModel& in_mode) {
  const device::DeviceProfile& p = in_mode.profile();
  std::vector<std::string> done =
      device::apply_power_mode(device::probe_linux(root_), p, p.mode(in_mode.options().mode));
  map_levels(in_mode.levels());
  return done;
}

int RealBoard::level_for(int model_level) const {
  if (model_level < 0 || model_level >= static_cast<int>(map_.size()))
    fail("linux backend: model level ", model_level, " out of range [0, ", map_.size() - 1, "]");
  return map_[static_cast<size_t>(model_level)];
}

double RealBoard::mhz_for(int model_level) const {
  return dev_.levels()[static_cast<size_t>(level_for(model_level))].mhz;
}

double RealBoard::meter() {
  dev_.on_layer(LayerEvent{});
  const double e = dev_.energy_j();
  if (std::isnan(e)) return e;
  const double d = e - last_e_;
  last_e_ = e;
  return d;
}

double RealBoard::on_layer(int model_level) {
  const double e = meter();
  dev_.set_level(level_for(model_level));
  return e;
}

}  // namespace cln::dvfs
