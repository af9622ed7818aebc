// The shape of a Llama-family decoder, layer by layer. A pruned model is an ordinary
// model here: every layer keeps its own head count, KV head count and FFN width, and
// a layer with zero heads has no attention (and zero FFN width, no feed-forward).
// The device cost model and the tailoring search read shapes from here alone.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "clone/core/dtype.h"

namespace cln {

class GgufFile;
struct TensorSpec;

struct LayerShape {
  int64_t n_head = 0;     // query heads; 0 = no attention in this layer
  int64_t n_head_kv = 0;  // key/value heads; divides n_head
  int64_t n_ff = 0;       // feed-forward width; 0 = no FFN in this layer
  bool has_attention() const { return n_head > 0; }
  bool has_ffn() const { return n_ff > 0; }
  bool operator==(const LayerShape&) const = default;
};

struct ModelConfig {
  std::string arch = "llama";  // "llama" (all layers alike) or "deci" (per-layer shapes)
  std::string name;
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_ctx_train = 2048;
  int64_t head_dim_k = 0;  // key_length: survives head pruning
  int64_t head_dim_v = 0;  // value_length
  float rope_base = 10000.0f;
  float rms_eps = 1e-5f;
  bool tied_output = false;          // output head shares token_embd
  DType weight_type = DType::F32;    // type of the layer matrices
  std::optional<DType> embd_type;    // token_embd (default: weight_type)
  std::optional<DType> output_type;  // output head (default: weight_type)
  // Tensors stored in another type than the above (e.g. pruned widths that are not whole
  // quantization blocks, kept as F16), by GGUF name.
  std::map<std::string, DType> type_overrides;
  std::vector<LayerShape> layers;

  int64_t n_layer() const { return static_cast<int64_t>(layers.size()); }
  bool uniform() const;      // every layer has the same shape and none is empty
  int64_t n_params() const;  // parameter count, embeddings and head included (accounting.h)
  // The storage type of a tensor of this model (norms are F32).
  DType tensor_type(const TensorSpec& t) const;
  // Throws cln::Error naming the first inconsistency (zero width, heads not divisible, ...).
  void validate() const;

  // Reads llama.* or deci.* keys; head sizes from key_length/value_length when present.
  static ModelConfig from_gguf(const GgufFile& f);
};

}  // namespace cln
