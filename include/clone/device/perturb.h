// A profile whose factors are scaled: the board as it may really be when the fitted device
// model is off (robustness of the controllers to model error, `clone sim --perturb`).
// spec: comma-separated factor=scale, e.g. "core_bytes_per_cycle=0.8,board_idle_w=1.5";
// each named factor is multiplied by its scale. Unknown names, scales that are not positive
// numbers, and a factor named twice are errors that list the names.
#pragma once

#include <string>
#include <vector>

#include "clone/device/profile.h"

namespace cln::device {

DeviceProfile perturbed(const DeviceProfile& p, const std::string& spec);
const std::vector<std::string>& perturbable_factors();

}  // namespace cln::device
