#include "lora_table.h"

#include <algorithm>
#include <cmath>

#include "clone/core/error.h"

namespace cln {

LoraTable::LoraTable(const Model& m, const std::vector<ActiveLora>& loras)
    : table_(static_cast<size_t>(m.config().n_layer())), loras_(loras) {
  for (const auto& a : loras) {
    if (!a.adapter) fail("set_loras: null adapter");
    if (!std::isfinite(a.weight))
      fail("set_loras: weight of '", a.adapter->name(), "' is not finite");
    if (a.weight == 0.0f) continue;
    for (int64_t il = 0; il < m.config().n_layer(); ++il)
      for (LayerMatrix w : kAllLayerMatrices)
        if (const LoraPair* pr = a.adapter->find(layer_tensor_name(il, w))) {
          table_[static_cast<size_t>(il)][static_cast<size_t>(index(w))].emplace_back(
              pr, a.weight * a.adapter->scale());
          max_rank_ = std::max(max_rank_, a.adapter->rank());
        }
  }
}

void LoraTable::apply(int64_t layer, LayerMatrix m, const float* x, int64_t n, float* y, float* tmp,
                      kernels::ThreadPool* pool) const {
  if (table_.empty()) return;
  for (const auto& [pr, scale] :
       table_[static_cast<size_t>(layer)][static_cast<size_t>(index(m))]) {
    kernels::matmul(pr->a, x, n, tmp, pool);
    kernels::matmul(pr->b, tmp, n, y, pool, true, scale);
  }
}

void LoraSchedule::set(std::unique_ptr<LoraTable> t) {
  now_ = std::move(t);
  pending_.clear();
}

void LoraSchedule::set_from(int64_t pos, int64_t next_pos, std::unique_ptr<LoraTable> t) {
  const int64_t after = pending_.empty() ? next_pos : pending_.back().first + 1;
  if (pos < after)
    fail("experts changed at position ", pos, ": the next position is ", after, " or later");
  if (pos == next_pos && pending_.empty()) return set(std::move(t));
  pending_.emplace_back(pos, std::move(t));
}

void LoraSchedule::clear() {
  now_.reset();
  pending_.clear();
}

int64_t LoraSchedule::max_rank() const {
  int64_t r = now_ ? now_->max_rank() : 0;
  for (const auto& [pos, t] : pending_) r = std::max(r, t->max_rank());
  return r;
}

void LoraSchedule::apply(int64_t layer, LayerMatrix m, const float* x, int64_t n, int64_t first_pos,
                         int64_t in, int64_t out, float* y, float* tmp,
                         kernels::ThreadPool* pool) const {
  const auto run = [&](const LoraTable* t, int64_t from, int64_t to) {  // rows [from, to)
    if (t && to > from && !t->empty())
      t->apply(layer, m, x + from * in, to - from, y + from * out, tmp, pool);
  };
  int64_t from = 0;
  const LoraTable* t = now_.get();
  for (const auto& [pos, next] : pending_) {
    const int64_t at = std::clamp<int64_t>(pos - first_pos, 0, n);
    run(t, from, at);
    from = at;
    t = next.get();
  }
  run(t, from, n);
}

void LoraSchedule::advance(int64_t next_pos) {
  while (!pending_.empty() && pending_.front().first <= next_pos) {
    now_ = std::move(pending_.front().second);
    pending_.erase(pending_.begin());
  }
}

}  // namespace cln
