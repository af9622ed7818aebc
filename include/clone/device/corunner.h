// Another app sharing the device: its intensity s in [0, 1] over time. A co-runner of
// intensity s leaves the model (1 - contention*s) of the compute and bandwidth.
// Patterns are generated from a seed (same seed, same trace) or read from a CSV.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cln::device {

class CorunnerTrace {
 public:
  // "idle", "web-search", "video", "bursty", "const:<s>", or a CSV path ("t_s,intensity"
  // rows, header optional, times ascending).
  static CorunnerTrace make(const std::string& spec, uint64_t seed);
  static CorunnerTrace constant(double s);
  static std::vector<std::string> pattern_names() {
    return {"idle", "web-search", "video", "bursty"};
  }

  const std::string& name() const { return name_; }
  double at(double t_s) const;                  // intensity at device time t (periodic both ways)
  double mean(double t0_s, double t1_s) const;  // time-average over [t0, t1]
  double period_s() const { return period_; }

 private:
  double phase(double t_s) const;  // t in [0, period)
  std::string name_;
  std::vector<std::pair<double, double>>
      seg_;  // (start time, intensity), starts ascending, first 0
  double period_ = 1;
};

}  // namespace cln::device
