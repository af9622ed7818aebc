// A Llama-family model's weights, bound to the tensors the schema (schema.h) lists for its
// config. Loaded from GGUF, weights stay in the memory-mapped file (no copy), except small
// norm vectors, which are kept as F32; where this CPU has faster kernels for a rearranged
// layout (Q4_0/Q8_0 with AVX-512 VNNI; F32/F16 column panels with AVX-512), each matrix is
// packed once at load and its mapped pages are released, so memory still holds one copy
// (a tied output head keeps both: the embedding lookup reads the GGUF rows). A model can also view F32 weights
// held elsewhere (the trainer's tensors), so the engine runs what is being trained.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "clone/engine/model_config.h"
#include "clone/engine/schema.h"
#include "clone/gguf/gguf.h"
#include "clone/kernels/ops.h"

namespace cln {

struct LayerWeights {
  // Matrices in GGUF orientation: rows = output features, cols = input features; absent
  // (data == nullptr) when the layer has no such half.
  std::array<kernels::Matrix, kLayerMatrices> mat;
  const float* attn_norm = nullptr;  // F32 [n_embd]
  const float* ffn_norm = nullptr;   // F32 [n_embd]
  const kernels::Matrix& operator[](LayerMatrix m) const {
    return mat[static_cast<size_t>(index(m))];
  }
  kernels::Matrix& operator[](LayerMatrix m) { return mat[static_cast<size_t>(index(m))]; }
  const float* norm(LayerNorm n) const { return n == LayerNorm::Attn ? attn_norm : ffn_norm; }
};

class Model {
 public:
  // Loads llama or deci GGUF; checks that every tensor the config implies exists with
  // the right shape, and that no unexpected layer tensor is left over.
  // pack = false keeps every matrix in its GGUF layout (tools that only read weights).
  static std::shared_ptr<const Model> load(const std::string& path, bool pack = true);
  static std::shared_ptr<const Model> from_gguf(std::shared_ptr<const GgufFile> f,
                                                bool pack = true);
  // A model over F32 weights held by the caller: source(spec) gives the data of every
  // tensor of model_tensors(cfg). Nothing is copied; the caller keeps the memory alive
  // while the model is used, and what the model computes follows the memory's contents.
  static std::shared_ptr<const Model> view_f32(
      ModelConfig cfg, const std::function<const float*(const TensorSpec&)>& source);

  const ModelConfig& config() const { return cfg_; }
  // The file the weights come from (throws for a view, which has none); null for a view.
  const GgufFile& gguf() const;
  const std::shared_ptr<const GgufFile>& gguf_ptr() const { return file_; }

  kernels::Matrix token_embd;          // [n_vocab, n_embd]
  const float* output_norm = nullptr;  // F32 [n_embd]
  kernels::Matrix output;              // [n_vocab, n_embd] (token_embd when tied)
  std::vector<LayerWeights> layers;

  // The weight a layer-matrix name ("blk.3.attn_q.weight") refers to; nullptr if the model
  // has none (no such layer, or the layer lacks that half).
  const kernels::Matrix* find_matrix(std::string_view name) const;
  // Bytes of all weight tensors at their storage types (accounting.h).
  size_t weight_bytes() const;

 private:
  Model() = default;
  void pack_matrices();
  std::shared_ptr<const GgufFile> file_;
  std::vector<std::unique_ptr<kernels::PackedWeights>> packed_;
  std::vector<std::vector<float>> norms_;  // F32 copies of the norm vectors read from a file
  ModelConfig cfg_;
};

}  // namespace cln
