// The model schema: every tensor of a Llama-family model, layer by layer, with its GGUF
// name, its shape (from that layer's heads, KV heads and FFN width) and its role. The
// loader, init-model, quantize, LoRA loading and merging, the trainer and the cost
// accounting all read the model's tensors from here, so a pruned (deci) model is the
// same code path as a dense one: a layer without attention or FFN simply lists fewer
// tensors.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "clone/engine/model_config.h"

namespace cln {

// The seven matrices of a layer, in file order. One name each: gguf_stem() in files,
// short_name() on the command line ("q,k,v,o,gate,up,down").
enum class LayerMatrix : uint8_t { Q, K, V, O, Gate, Up, Down };
inline constexpr int kLayerMatrices = 7;
inline constexpr std::array<LayerMatrix, kLayerMatrices> kAllLayerMatrices = {
    LayerMatrix::Q,    LayerMatrix::K,  LayerMatrix::V,   LayerMatrix::O,
    LayerMatrix::Gate, LayerMatrix::Up, LayerMatrix::Down};
constexpr int index(LayerMatrix m) {
  return static_cast<int>(m);
}
std::string_view gguf_stem(LayerMatrix m);   // "attn_q", ..., "ffn_down"
std::string_view short_name(LayerMatrix m);  // "q", ..., "down"
constexpr bool in_attention(LayerMatrix m) {
  return index(m) <= index(LayerMatrix::O);
}
// "q" or "attn_q" -> Q. Throws cln::Error listing the valid names.
LayerMatrix layer_matrix_from_name(std::string_view name);

// The two RMSNorm weights of a layer: before attention and before the FFN.
enum class LayerNorm : uint8_t { Attn, Ffn };

enum class TensorRole : uint8_t { TokenEmbd, OutputNorm, Output, Norm, Matrix };

struct TensorSpec {
  std::string name;  // GGUF name, e.g. "blk.3.attn_q.weight"
  TensorRole role = TensorRole::Matrix;
  int32_t layer = -1;          // -1 for token_embd, output_norm, output
  LayerMatrix matrix{};        // role Matrix
  LayerNorm norm{};            // role Norm
  int64_t rows = 0, cols = 0;  // a vector (norm) has rows == 1
  bool is_vector() const { return role == TensorRole::Norm || role == TensorRole::OutputNorm; }
  int64_t numel() const { return rows * cols; }
  std::vector<int64_t> ne() const;  // GGUF/ggml order: {cols} or {cols, rows}
};

// "blk.<layer>.<stem>.weight"
std::string layer_tensor_name(int64_t layer, LayerMatrix m);
std::string layer_norm_name(int64_t layer, LayerNorm n);
// (layer, matrix) of a name as layer_tensor_name writes it; nullopt for anything else.
std::optional<std::pair<int64_t, LayerMatrix>> parse_layer_tensor_name(std::string_view name);

// Rows (outputs) x cols (inputs) of a layer matrix for that layer's shape; {0, 0} when the
// layer has no such matrix (no attention, or no FFN).
struct MatrixShape {
  int64_t rows = 0, cols = 0;
};
MatrixShape matrix_shape(const ModelConfig& c, int64_t layer, LayerMatrix m);
bool has_matrix(const ModelConfig& c, int64_t layer, LayerMatrix m);

// Every tensor of a model with config c, in file order: token_embd; per layer attn_norm,
// q, k, v, o (when it has attention), ffn_norm, gate, up, down (when it has an FFN);
// output_norm; output (unless tied to token_embd).
std::vector<TensorSpec> model_tensors(const ModelConfig& c);
// The spec named `name`, or nullptr.
const TensorSpec* find_spec(const std::vector<TensorSpec>& specs, std::string_view name);

}  // namespace cln
