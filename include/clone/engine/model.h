// A Llama-family model loaded from GGUF: weights stay in the memory-mapped file (no
// copy), except small norm vectors, which are kept as F32. Where this CPU has faster
// kernels for a rearranged layout (Q4_0/Q8_0 with AVX-512 VNNI), each matrix is packed
// once at load and its mapped pages are released, so memory still holds one copy.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "clone/engine/model_config.h"
#include "clone/gguf/gguf.h"
#include "clone/kernels/ops.h"

namespace cln {

struct LayerWeights {
  // Matrices in GGUF orientation: rows = output features, cols = input features.
  std::vector<float> attn_norm;  // F32 [n_embd]
  kernels::Matrix wq;            // [n_head * dk, n_embd]      (absent when n_head == 0)
  kernels::Matrix wk;            // [n_head_kv * dk, n_embd]
  kernels::Matrix wv;            // [n_head_kv * dv, n_embd]
  kernels::Matrix wo;            // [n_embd, n_head * dv]
  std::vector<float> ffn_norm;   // F32 [n_embd]
  kernels::Matrix gate;          // [n_ff, n_embd]             (absent when n_ff == 0)
  kernels::Matrix up;            // [n_ff, n_embd]
  kernels::Matrix down;          // [n_embd, n_ff]
};

class Model {
 public:
  // Loads llama or deci GGUF; checks that every tensor the config implies exists with
  // the right shape, and that no unexpected layer tensor is left over.
  // pack = false keeps every matrix in its GGUF layout (tools that only read weights).
  static std::shared_ptr<const Model> load(const std::string& path, bool pack = true);
  static std::shared_ptr<const Model> from_gguf(std::shared_ptr<const GgufFile> f,
                                                bool pack = true);

  const ModelConfig& config() const { return cfg_; }
  const GgufFile& gguf() const { return *file_; }
  const std::shared_ptr<const GgufFile>& gguf_ptr() const { return file_; }

  kernels::Matrix token_embd;      // [n_vocab, n_embd]
  std::vector<float> output_norm;  // F32 [n_embd]
  kernels::Matrix output;          // [n_vocab, n_embd] (token_embd when tied)
  std::vector<LayerWeights> layers;

  // Bytes of all weight tensors (what decode streams per token).
  size_t weight_bytes() const;

 private:
  Model() = default;
  void pack_matrices();
  std::shared_ptr<const GgufFile> file_;
  std::vector<std::unique_ptr<kernels::PackedWeights>> packed_;
  ModelConfig cfg_;
};

// Names of the per-layer tensors, shared by the loader, the writer and LoRA.
std::string layer_tensor_name(int64_t layer, const char* what);  // "blk.<layer>.<what>.weight"

// The layer matrices LoRA can adapt, in LayerWeights order (wq, wk, wv, wo, gate, up, down).
inline constexpr int kLayerMatrices = 7;
inline constexpr const char* kLayerMatrixNames[kLayerMatrices] = {
    "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};

}  // namespace cln
