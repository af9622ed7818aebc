// From importance scores (importance.h) and per-layer ratios to a plan (plan.h).
#pragma once

#include <vector>

#include "clone/prune/importance.h"
#include "clone/prune/plan.h"

namespace cln::prune {

// Share removed per layer, in [0, 1]: of the query heads and of the FFN channels.
struct Ratios {
  std::vector<double> attn, ffn;
  static Ratios uniform(int64_t n_layer, double r);
  // Throws naming the layer when a ratio is outside [0, 1], or the length is wrong.
  void validate(const ModelConfig& c) const;
  bool operator==(const Ratios&) const = default;
};

// Per layer: the FFN keeps its round((1 - r) n_ff) best channels; attention keeps g KV
// groups of k query heads with g k closest to (1 - r) n_head (ties: fewer heads, then more
// groups),
// the g best groups and, in each, its k best heads. A ratio that keeps nothing removes
// the half. Block scores (halves only) accept ratios of 0 or 1 alone.
PrunePlan plan_from_ratios(const ModelConfig& c, const Scores& s, const Ratios& r);

// ShortGPT: the n halves (attention or FFN, across all layers) with the lowest Block
// Influence removed, everything else kept. Needs block scores.
Ratios remove_halves(const ModelConfig& c, const Scores& block, int n);

// FLAP-style adaptive ratios: every query head and FFN channel scored by its standardised
// score within its layer and kind ((s - mean) / std), ranked across all layers, and the
// lowest removed until `fraction` of the prunable weights (heads: their Q rows and O
// columns; channels: gate, up and down) is gone; the ratios are what each layer lost.
Ratios global_ratios(const ModelConfig& c, const Scores& s, double fraction);

}  // namespace cln::prune
