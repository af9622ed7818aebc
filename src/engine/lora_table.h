// The active LoRA experts of a request resolved per layer and matrix: what the engine's
// linear layers add after each base matmul, y += w * (alpha / r) * B (A x). One table per
// request (a Context holds one; a Batch one per slot).
#pragma once

#include <array>
#include <utility>
#include <vector>

#include "clone/engine/lora.h"
#include "clone/kernels/ops.h"

namespace cln {

class LoraTable {
 public:
  LoraTable() = default;
  // Throws cln::Error on a null adapter or a weight that is not finite.
  LoraTable(const Model& m, const std::vector<ActiveLora>& loras);
  bool empty() const { return max_rank_ == 0; }
  int64_t max_rank() const { return max_rank_; }
  const std::vector<ActiveLora>& loras() const { return loras_; }
  // y[n, out] += sum over the experts on (layer, m) of w * scale * B (A x); tmp holds at
  // least n * max_rank() floats.
  void apply(int64_t layer, LayerMatrix m, const float* x, int64_t n, float* y, float* tmp,
             kernels::ThreadPool* pool) const;

 private:
  using Entries = std::vector<std::pair<const LoraPair*, float>>;
  std::vector<std::array<Entries, kLayerMatrices>> table_;  // [layer][matrix]
  std::vector<ActiveLora> loras_;
  int64_t max_rank_ = 0;
};

}  // namespace cln
