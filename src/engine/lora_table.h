// The active LoRA experts of a request resolved per layer and matrix: what the engine's
// linear layers add after each base matmul, y += w * (alpha / r) * B (A x). One table per
// request (a Context holds one; a Batch one per slot).
#pragma once

#include <array>
#include <memory>
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

// One sequence's experts over its positions: the table in use and changes scheduled at later
// cache positions (a prompt whose parts have their own mixtures), so rows of one pass on
// either side of a change get their own experts. A Context holds one; a Batch one per slot.
class LoraSchedule {
 public:
  // These experts from now on; scheduled changes are dropped.
  void set(std::unique_ptr<LoraTable> t);
  // These experts from position pos on; pos must be at least next_pos (the sequence's next
  // position) and after every change scheduled before, else cln::Error.
  void set_from(int64_t pos, int64_t next_pos, std::unique_ptr<LoraTable> t);
  void clear();
  void drop_scheduled() { pending_.clear(); }  // keep the experts in use
  // The largest rank among the table in use and the scheduled ones (for the scratch).
  int64_t max_rank() const;
  bool active() const { return now_ != nullptr; }
  // y += the experts' products on rows [0, n), which are positions first_pos.. of the
  // sequence, each row under the table for its position; `in` and `out` are the matrix's
  // input and output widths (the rows' strides in x and y).
  void apply(int64_t layer, LayerMatrix m, const float* x, int64_t n, int64_t first_pos, int64_t in,
             int64_t out, float* y, float* tmp, kernels::ThreadPool* pool) const;
  // The changes at or before next_pos become the table in use (after a pass).
  void advance(int64_t next_pos);

 private:
  std::unique_ptr<LoraTable> now_;
  std::vector<std::pair<int64_t, std::unique_ptr<LoraTable>>> pending_;  // ascending
};

}  // namespace cln
