#include "clone/core/stats.h"

#include <algorithm>
#include <cmath>

namespace cln {

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double idx = std::clamp(p, 0.0, 100.0) / 100 * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(idx)), hi = static_cast<size_t>(std::ceil(idx));
  return v[lo] + (idx - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

}  // namespace cln
