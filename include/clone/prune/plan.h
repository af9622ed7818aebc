// What structured pruning keeps, layer by layer, in the dense model's own indices.
//
// Attention: query heads are kept grouped by the key/value head they read, every kept
// group the same size (a model's n_head must be a multiple of n_head_kv), so a KV head
// goes with its query group when the whole group goes, and query heads can also be removed
// evenly within groups. Both are needed on small models: the shipped base has 2 KV heads
// of 3 query heads each, so whole groups alone give only 0, 3 or 6 heads.
// FFN: channels, each a gate row, an up row and a down column together.
// A layer that keeps no query head has no attention; one that keeps no channel, no FFN
// (the engine and the deci format run both).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "clone/engine/model_config.h"

namespace cln::prune {

struct LayerPlan {
  std::vector<int64_t> kv;              // kept KV heads (dense indices, ascending)
  std::vector<std::vector<int64_t>> q;  // q[g]: kept query heads reading kv[g]
  std::vector<int64_t> ff;              // kept FFN channels (dense indices, ascending)

  int64_t n_head() const;
  bool operator==(const LayerPlan&) const = default;
};

struct PrunePlan {
  std::vector<LayerPlan> layers;
  bool operator==(const PrunePlan&) const = default;

  // Everything kept.
  static PrunePlan dense(const ModelConfig& c);
  // Throws cln::Error naming the layer and what is wrong: a head or channel out of range
  // or repeated, a query head listed under a KV head it does not read, groups of unequal
  // size, a kept KV head with no query head, or the wrong number of layers.
  void validate(const ModelConfig& dense) const;
  // The pruned model's shape ("deci" unless every layer is alike).
  ModelConfig shape(const ModelConfig& dense) const;
  // One line per layer: "layer 3: 4/6 heads (2/2 KV), 384/512 FFN".
  std::string summary(const ModelConfig& dense) const;
  std::string to_json() const;
  static PrunePlan from_json(const std::string& text);
};

// The dense query heads that read KV head g.
std::vector<int64_t> query_group(const ModelConfig& c, int64_t layer, int64_t g);

}  // namespace cln::prune
