// The one random-number generator of the library: splitmix64, seedable, fast, and the
// same on every platform and standard library (std::normal_distribution is not), so a
// seed gives the same weights, batches and samples everywhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

namespace cln {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next();
  double uniform();  // [0, 1), 53 random bits
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }  // [lo, hi)
  double normal();   // N(0, 1), Box-Muller
  double exponential(double mean);  // mean * Exp(1), by inversion
  // [0, n) for n > 0 (modulo; the bias is below 2^-40 for the sizes used here).
  uint64_t below(uint64_t n) { return next() % n; }

 private:
  uint64_t state_;
};

// Fisher-Yates with rng: the same order for a seed on every platform (std::shuffle's is not).
template <typename Vec>
void shuffle(Vec& v, Rng& rng) {
  for (size_t i = v.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(rng.below(i));
    std::swap(v[i - 1], v[j]);
  }
}

}  // namespace cln
