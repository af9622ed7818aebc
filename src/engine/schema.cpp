#include "clone/engine/schema.h"

#include <charconv>

#include "clone/core/error.h"

namespace cln {

namespace {
constexpr std::string_view kStems[kLayerMatrices] = {"attn_q",   "attn_k", "attn_v",  "attn_output",
                                                     "ffn_gate", "ffn_up", "ffn_down"};
constexpr std::string_view kShort[kLayerMatrices] = {"q", "k", "v", "o", "gate", "up", "down"};
}  // namespace

std::string_view gguf_stem(LayerMatrix m) {
  return kStems[index(m)];
}
std::string_view short_name(LayerMatrix m) {
  return kShort[index(m)];
}

LayerMatrix layer_matrix_from_name(std::string_view name) {
  for (LayerMatrix m : kAllLayerMatrices)
    if (name == kShort[index(m)] || name == kStems[index(m)]) return m;
  fail("unknown layer matrix '", name, "' (use q, k, v, o, gate, up, down)");
}

std::vector<int64_t> TensorSpec::ne() const {
  if (is_vector()) return {cols};
  return {cols, rows};
}

std::string layer_tensor_name(int64_t layer, LayerMatrix m) {
  return "blk." + std::to_string(layer) + "." + std::string(gguf_stem(m)) + ".weight";
}

std::string layer_norm_name(int64_t layer, LayerNorm n) {
  return "blk." + std::to_string(layer) + (n == LayerNorm::Attn ? ".attn_norm" : ".ffn_norm") +
         ".weight";
}

std::optional<std::pair<int64_t, LayerMatrix>> parse_layer_tensor_name(std::string_view name) {
  if (!name.starts_with("blk.") || !name.ends_with(".weight")) return std::nullopt;
  name.remove_prefix(4);
  name.remove_suffix(7);
  const size_t dot = name.find('.');
  if (dot == std::string_view::npos || dot == 0) return std::nullopt;
  int64_t layer = -1;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + dot, layer);
  if (ec != std::errc() || end != name.data() + dot || layer < 0) return std::nullopt;
  const std::string_view stem = name.substr(dot + 1);
  for (LayerMatrix m : kAllLayerMatrices)
    if (stem == kStems[index(m)]) return std::make_pair(layer, m);
  return std::nullopt;
}

MatrixShape matrix_shape(const ModelConfig& c, int64_t layer, LayerMatrix m) {
  const LayerShape& s = c.layers.at(static_cast<size_t>(layer));
  const int64_t d = c.n_embd, dk = c.head_dim_k, dv = c.head_dim_v;
  if (in_attention(m) && !s.has_attention()) return {};
  if (!in_attention(m) && !s.has_ffn()) return {};
  switch (m) {
    case LayerMatrix::Q:
      return {s.n_head * dk, d};
    case LayerMatrix::K:
      return {s.n_head_kv * dk, d};
    case LayerMatrix::V:
      return {s.n_head_kv * dv, d};
    case LayerMatrix::O:
      return {d, s.n_head * dv};
    case LayerMatrix::Gate:
    case LayerMatrix::Up:
      return {s.n_ff, d};
    case LayerMatrix::Down:
      return {d, s.n_ff};
  }
  return {};
}

bool has_matrix(const ModelConfig& c, int64_t layer, LayerMatrix m) {
  return matrix_shape(c, layer, m).rows > 0;
}

std::vector<TensorSpec> model_tensors(const ModelConfig& c) {
  std::vector<TensorSpec> out;
  const int64_t d = c.n_embd;
  out.push_back({"token_embd.weight", TensorRole::TokenEmbd, -1, {}, {}, c.n_vocab, d});
  for (int64_t il = 0; il < c.n_layer(); ++il) {
    const LayerShape& s = c.layers[static_cast<size_t>(il)];
    const auto layer = static_cast<int32_t>(il);
    for (const bool attn : {true, false}) {
      if (attn ? !s.has_attention() : !s.has_ffn()) continue;
      const LayerNorm n = attn ? LayerNorm::Attn : LayerNorm::Ffn;
      out.push_back({layer_norm_name(il, n), TensorRole::Norm, layer, {}, n, 1, d});
      for (LayerMatrix m : kAllLayerMatrices) {
        if (in_attention(m) != attn) continue;
        const MatrixShape ms = matrix_shape(c, il, m);
        out.push_back(
            {layer_tensor_name(il, m), TensorRole::Matrix, layer, m, {}, ms.rows, ms.cols});
      }
    }
  }
  out.push_back({"output_norm.weight", TensorRole::OutputNorm, -1, {}, {}, 1, d});
  if (!c.tied_output)
    out.push_back({"output.weight", TensorRole::Output, -1, {}, {}, c.n_vocab, d});
  return out;
}

const TensorSpec* find_spec(const std::vector<TensorSpec>& specs, std::string_view name) {
  for (const TensorSpec& s : specs)
    if (s.name == name) return &s;
  return nullptr;
}

}  // namespace cln
