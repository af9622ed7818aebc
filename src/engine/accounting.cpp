#include "clone/engine/accounting.h"

#include <algorithm>

#include "clone/engine/schema.h"

namespace cln {

namespace {
double bytes_per_value(DType t) {
  return static_cast<double>(dtype_block_bytes(t)) / static_cast<double>(dtype_block_size(t));
}
double tensor_bytes(const ModelConfig& c, const TensorSpec& t) {
  return static_cast<double>(t.numel()) * bytes_per_value(c.tensor_type(t));
}
}  // namespace

PassCount& PassCount::operator+=(const PassCount& o) {
  matmul_flops += o.matmul_flops, attn_flops += o.attn_flops, other_flops += o.other_flops;
  lora_flops += o.lora_flops;
  weight_bytes += o.weight_bytes, kv_bytes += o.kv_bytes, act_bytes += o.act_bytes;
  lora_bytes += o.lora_bytes;
  return *this;
}

LayerParams layer_params(const ModelConfig& c, int64_t layer) {
  LayerParams p;
  const LayerShape& s = c.layers.at(static_cast<size_t>(layer));
  for (LayerMatrix m : kAllLayerMatrices) {
    const MatrixShape ms = matrix_shape(c, layer, m);
    (in_attention(m) ? p.attn : p.ffn) += ms.rows * ms.cols;
    p.lora_per_rank += ms.rows + ms.cols;  // A [r, cols] and B [rows, r]
  }
  p.norms = c.n_embd * ((s.has_attention() ? 1 : 0) + (s.has_ffn() ? 1 : 0));
  p.q_dim = s.n_head * c.head_dim_k;
  p.kv_dim = s.n_head_kv * (c.head_dim_k + c.head_dim_v);
  return p;
}

int64_t model_params(const ModelConfig& c) {
  int64_t n = 0;
  for (const TensorSpec& t : model_tensors(c)) n += t.numel();
  return n;
}

double model_weight_bytes(const ModelConfig& c) {
  double b = 0;
  for (const TensorSpec& t : model_tensors(c)) b += tensor_bytes(c, t);
  return b;
}

// Called per layer pass by the device cost model (millions of times in a calibration):
// no schema strings unless some tensor has its own type.
double layer_weight_bytes(const ModelConfig& c, int64_t layer) {
  const bool named = !c.type_overrides.empty();
  const auto type_of = [&](TensorRole role, LayerMatrix m, LayerNorm n) {
    TensorSpec t;
    t.role = role;
    if (named)
      t.name = role == TensorRole::Norm ? layer_norm_name(layer, n) : layer_tensor_name(layer, m);
    return c.tensor_type(t);
  };
  double b = 0;
  for (LayerMatrix m : kAllLayerMatrices) {
    const MatrixShape ms = matrix_shape(c, layer, m);
    if (ms.rows > 0)
      b += static_cast<double>(ms.rows * ms.cols) *
           bytes_per_value(type_of(TensorRole::Matrix, m, LayerNorm::Attn));
  }
  const LayerShape& s = c.layers.at(static_cast<size_t>(layer));
  for (const LayerNorm n : {LayerNorm::Attn, LayerNorm::Ffn})
    if (n == LayerNorm::Attn ? s.has_attention() : s.has_ffn())
      b += static_cast<double>(c.n_embd) * bytes_per_value(type_of(TensorRole::Norm, {}, n));
  return b;
}

double head_weight_bytes(const ModelConfig& c) {
  const auto bytes = [&](const char* name, TensorRole role, int64_t n) {
    TensorSpec t;
    t.name = name;
    t.role = role;
    return static_cast<double>(n) * bytes_per_value(c.tensor_type(t));
  };
  return bytes("output_norm.weight", TensorRole::OutputNorm, c.n_embd) +
         (c.tied_output ? bytes("token_embd.weight", TensorRole::TokenEmbd, c.n_vocab * c.n_embd)
                        : bytes("output.weight", TensorRole::Output, c.n_vocab * c.n_embd));
}

double decode_weight_bytes(const ModelConfig& c) {
  double b = head_weight_bytes(c);
  for (int64_t il = 0; il < c.n_layer(); ++il) b += layer_weight_bytes(c, il);
  if (!c.tied_output) {  // one row of the embedding table
    const TensorSpec emb = model_tensors(c).front();
    b += tensor_bytes(c, emb) / static_cast<double>(emb.rows);
  }
  return b;
}

LayerStatics layer_statics(const ModelConfig& c, int64_t layer) {
  return {layer_params(c, layer), layer_weight_bytes(c, layer)};
}

PassCount layer_pass(const ModelConfig& c, int64_t layer, int64_t pos, int64_t n_tokens,
                     const PassOptions& o) {
  return layer_pass(c, layer, layer_statics(c, layer), pos, n_tokens, o);
}

PassCount layer_pass(const ModelConfig& c, int64_t layer, const LayerStatics& st, int64_t pos,
                     int64_t n_tokens, const PassOptions& o) {
  PassCount r;
  const LayerShape& s = c.layers.at(static_cast<size_t>(layer));
  const LayerParams& p = st.params;
  const double n = static_cast<double>(n_tokens), d = static_cast<double>(c.n_embd);
  const double ff = static_cast<double>(s.n_ff);
  r.matmul_flops = 2 * n * static_cast<double>(p.matrices());
  if (s.has_attention()) {
    // token t (0-based in the pass) attends to pos + t + 1 positions
    const double pairs = n * static_cast<double>(pos) + n * (n + 1) / 2;
    r.attn_flops = 2 * static_cast<double>(s.n_head) *
                   static_cast<double>(c.head_dim_k + c.head_dim_v) * pairs;
    r.other_flops += 5 * n * d;
    const double ctx = static_cast<double>(pos) + n;
    r.kv_bytes = static_cast<double>(p.kv_dim) * o.kv_bytes_per_value * (ctx + n);
    r.act_bytes +=
        n * (2 * d + 2 * static_cast<double>(p.q_dim + p.kv_dim)) * o.act_bytes_per_value;
  }
  if (s.has_ffn()) {
    r.other_flops += n * (5 * d + 4 * ff);
    r.act_bytes += n * (2 * d + 3 * ff) * o.act_bytes_per_value;
  }
  r.weight_bytes = st.weight_bytes;
  if (o.n_experts > 0) {
    const double rank = static_cast<double>(o.lora_rank * o.n_experts);
    r.lora_flops = 2 * n * rank * static_cast<double>(p.lora_per_rank);
    r.lora_bytes = rank * static_cast<double>(p.lora_per_rank) * o.lora_bytes_per_value;
  }
  return r;
}

PassCount head_pass(const ModelConfig& c, int64_t n_tokens, int64_t n_logits,
                    const PassOptions& o) {
  return head_pass(c, head_weight_bytes(c), n_tokens, n_logits, o);
}

PassCount head_pass(const ModelConfig& c, double head_bytes, int64_t n_tokens, int64_t n_logits,
                    const PassOptions& o) {
  PassCount r;
  const double n = static_cast<double>(n_tokens), d = static_cast<double>(c.n_embd);
  const double v = static_cast<double>(c.n_vocab);
  const double out = static_cast<double>(std::clamp<int64_t>(n_logits, 0, n_tokens));
  r.matmul_flops = 2 * out * d * v;
  r.other_flops = 4 * n * d;
  r.weight_bytes = head_bytes;
  r.act_bytes = out * v * 4 + n * d * o.act_bytes_per_value;
  return r;
}

PassCount forward_pass(const ModelConfig& c, int64_t pos, int64_t n_tokens, int64_t n_logits,
                       const PassOptions& o) {
  PassCount r;
  for (int64_t il = 0; il < c.n_layer(); ++il) r += layer_pass(c, il, pos, n_tokens, o);
  r += head_pass(c, n_tokens, n_logits, o);
  return r;
}

double train_step_flops(const ModelConfig& c, int64_t n_seq, int64_t seq_len) {
  const PassCount f = forward_pass(c, 0, seq_len, seq_len);
  return 3.0 * static_cast<double>(n_seq) * (f.matmul_flops + f.attn_flops);
}

}  // namespace cln
