// Order statistics of measurements (benchmark runs, latencies, lengths).
#pragma once

#include <utility>
#include <vector>

namespace cln {

// The p-th percentile (p in [0, 100]) with linear interpolation between the two nearest
// ranks (numpy's default); 0 for no values.
double percentile(std::vector<double> v, double p);
// percentile(v, 50): the middle value, or the mean of the two middle values.
inline double median(std::vector<double> v) {
  return percentile(std::move(v), 50);
}

}  // namespace cln
