// Token sampling: greedy, or temperature with top-k and top-p (nucleus), seeded so a
// run can be repeated exactly.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "clone/core/rng.h"

namespace cln {

struct SamplerParams {
  float temperature = 0.8f;  // 0 = greedy
  int top_k = 40;            // 0 = all tokens
  float top_p = 0.95f;       // 1 = off
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplerParams& p);
  // Picks a token id from logits [n_vocab]. Throws cln::Error on NaN logits.
  int32_t sample(std::span<const float> logits);

 private:
  SamplerParams p_;
  Rng rng_;
  std::vector<std::pair<float, int32_t>> cand_;
};

}  // namespace cln
