// Helpers shared by the engine tests: temporary paths and small random models.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "clone/core/rng.h"
#include "clone/engine/lora.h"
#include "clone/engine/model.h"
#include "clone/engine/model_writer.h"
#include "clone/engine/schema.h"

namespace cln::test {

inline std::string tmp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("clone_test_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

// A deci model with GQA, a zero-head layer and a zero-FFN layer.
inline ModelConfig per_layer_config() {
  ModelConfig c;
  c.n_vocab = 300;
  c.n_embd = 64;
  c.n_ctx_train = 64;
  c.head_dim_k = c.head_dim_v = 16;
  c.rope_base = 10000.0f;
  c.rms_eps = 1e-5f;
  c.layers = {{4, 2, 96}, {2, 1, 64}, {0, 0, 32}, {3, 1, 0}, {4, 4, 64}};
  return c;
}

// The per-layer model above with seeded random weights, written once per test binary under
// `name` and loaded.
inline std::shared_ptr<const Model> random_model(const std::string& name, uint64_t seed,
                                                 float spread) {
  const std::string p = tmp_path(name);
  if (!std::filesystem::exists(p))
    init_model(per_layer_config(), {seed, DType::F32, spread}, nullptr, p);
  return Model::load(p);
}

// A random LoRA adapter of rank r on the given targets of every layer that has them.
inline std::string random_adapter(const ModelConfig& c, const std::vector<LayerMatrix>& targets,
                                  int64_t r, float alpha, uint64_t seed, const std::string& name) {
  Rng rng(seed);
  std::vector<LoraTensorData> ts;
  for (int64_t il = 0; il < c.n_layer(); ++il)
    for (LayerMatrix t : targets) {
      const MatrixShape ms = matrix_shape(c, il, t);
      if (ms.rows == 0) continue;
      LoraTensorData d{layer_tensor_name(il, t), ms.rows, ms.cols, r, {}, {}};
      d.a.resize(static_cast<size_t>(r * ms.cols));
      d.b.resize(static_cast<size_t>(ms.rows * r));
      for (auto& v : d.a) v = static_cast<float>(0.1 * rng.normal());
      for (auto& v : d.b) v = static_cast<float>(0.1 * rng.normal());
      ts.push_back(std::move(d));
    }
  const std::string p = tmp_path(name);
  write_lora_adapter(p, name, alpha, ts, "deci");
  return p;
}

}  // namespace cln::test
