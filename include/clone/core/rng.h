// The one random-number generator of the library: splitmix64, seedable, fast, and the
// same on every platform and standard library (std::normal_distribution is not), so a
// seed gives the same weights, batches and samples everywhere.
#pragma once

#include <cstdint>

namespace cln {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next();
  double uniform();  // [0, 1), 53 random bits
  double normal();   // N(0, 1), Box-Muller
  // [0, n) for n > 0 (modulo; the bias is below 2^-40 for the sizes used here).
  uint64_t below(uint64_t n) { return next() % n; }

 private:
  uint64_t state_;
};

}  // namespace cln
