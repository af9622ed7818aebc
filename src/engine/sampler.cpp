#include "clone/engine/sampler.h"

#include <algorithm>
#include <cmath>

#include "clone/core/error.h"

namespace cln {

Sampler::Sampler(const SamplerParams& p) : p_(p), rng_(p.seed) {
  if (p.temperature < 0) fail("sampler: temperature must be >= 0, got ", p.temperature);
  if (p.top_k < 0) fail("sampler: top-k must be >= 0, got ", p.top_k);
  if (!(p.top_p > 0 && p.top_p <= 1)) fail("sampler: top-p must be in (0, 1], got ", p.top_p);
}

int32_t Sampler::sample(std::span<const float> logits) {
  if (logits.empty()) fail("sampler: no logits");
  int32_t best = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) fail("sampler: logit ", i, " is NaN");
    if (logits[i] > logits[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
  }
  if (p_.temperature == 0.0f) return best;

  cand_.clear();
  for (size_t i = 0; i < logits.size(); ++i) cand_.emplace_back(logits[i], static_cast<int32_t>(i));
  size_t k = cand_.size();
  if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < k) k = static_cast<size_t>(p_.top_k);
  std::partial_sort(cand_.begin(), cand_.begin() + static_cast<std::ptrdiff_t>(k), cand_.end(),
                    [](const auto& a, const auto& b) {
                      return a.first > b.first || (a.first == b.first && a.second < b.second);
                    });
  cand_.resize(k);
  // softmax with temperature over the top-k
  const float mx = cand_[0].first;
  double sum = 0;
  for (auto& c : cand_) {
    c.first = std::exp((c.first - mx) / p_.temperature);
    sum += c.first;
  }
  // top-p: smallest prefix whose mass reaches top_p
  double acc = 0;
  size_t keep = cand_.size();
  for (size_t i = 0; i < cand_.size(); ++i) {
    acc += cand_[i].first / sum;
    if (acc >= p_.top_p) {
      keep = i + 1;
      break;
    }
  }
  cand_.resize(keep);
  double total = 0;
  for (const auto& c : cand_) total += c.first;
  const double u = rng_.uniform() * total;
  double run = 0;
  for (const auto& c : cand_) {
    run += c.first;
    if (u < run) return c.second;
  }
  return cand_.back().second;
}

}  // namespace cln
