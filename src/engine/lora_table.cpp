#include "lora_table.h"

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

}  // namespace cln
