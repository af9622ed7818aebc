// The one accounting of a model's parameters, FLOPs and bytes, per layer and per pass,
// derived from the schema (schema.h). `clone bench` (its FLOP and byte rates), the
// device cost model (time and energy of each layer pass on a board) and the trainer
// (FLOPs of a training step) all count with these functions.
//
// A pass runs n tokens at positions pos .. pos + n - 1 through one layer or the head:
//   matmul    2 FLOPs per weight per token (plus LoRA: 2 per adapter weight per token)
//   attention QK^T and PV over the causal context: 2 * n_head * (dk + dv) per (query, key) pair
//   other     elementwise work per token: 5 * n_embd per half-layer present (RMSNorm, RoPE,
//             residual add, ...) plus 4 * n_ff for SwiGLU; head: 4 * n_embd (final norm)
//   bytes     weights at their storage types, KV cache read (the whole context) and written
//             (the new rows), activations between kernels, logits written
#pragma once

#include <cstdint>

#include "clone/engine/model_config.h"

namespace cln {

// Weight counts of one layer, from its shape.
struct LayerParams {
  int64_t attn = 0;  // q, k, v, o matrices
  int64_t ffn = 0;   // gate, up, down matrices
  int64_t norms = 0;
  int64_t q_dim = 0, kv_dim = 0;  // query width, key + value width (per token in the KV cache)
  int64_t lora_per_rank = 0;      // adapter weights per unit of rank over all seven matrices
  int64_t matrices() const { return attn + ffn; }
  int64_t total() const { return attn + ffn + norms; }
};
LayerParams layer_params(const ModelConfig& c, int64_t layer);

// Parameters of the whole model, embedding, norms and head included (a tied head counts once).
int64_t model_params(const ModelConfig& c);
// Bytes of every tensor at its storage type (norms included).
double model_weight_bytes(const ModelConfig& c);
// Bytes of a layer's tensors / of the head's (final norm and output matrix, or the tied embedding).
double layer_weight_bytes(const ModelConfig& c, int64_t layer);
double head_weight_bytes(const ModelConfig& c);
// Bytes one decoded token streams: every layer, the head, and one embedding row.
double decode_weight_bytes(const ModelConfig& c);

struct PassOptions {
  double kv_bytes_per_value = 4;   // KV cache element (the engine keeps F32; Jetson runtimes F16)
  double act_bytes_per_value = 4;  // activations between kernels
  int64_t n_experts = 0;           // active LoRA experts
  int64_t lora_rank = 8;
  double lora_bytes_per_value = 2;
};

struct PassCount {
  double matmul_flops = 0, attn_flops = 0, other_flops = 0;
  double lora_flops = 0;  // adapter matmuls (also in matmul_flops' sense, kept apart)
  double weight_bytes = 0, kv_bytes = 0, act_bytes = 0, lora_bytes = 0;
  double flops() const { return matmul_flops + attn_flops + other_flops + lora_flops; }
  double bytes() const { return weight_bytes + kv_bytes + act_bytes + lora_bytes; }
  PassCount& operator+=(const PassCount& o);
};

// What a layer's passes share whatever their tokens: a caller costing many passes (the
// device cost model) computes it once per layer.
struct LayerStatics {
  LayerParams params;
  double weight_bytes = 0;
};
LayerStatics layer_statics(const ModelConfig& c, int64_t layer);

// One pass of n tokens at pos through layer `layer` (its statics given, or computed).
PassCount layer_pass(const ModelConfig& c, int64_t layer, const LayerStatics& st, int64_t pos,
                     int64_t n_tokens, const PassOptions& o = {});
PassCount layer_pass(const ModelConfig& c, int64_t layer, int64_t pos, int64_t n_tokens,
                     const PassOptions& o = {});
// The final norm over n tokens and the output head over the n_logits last of them (its
// weight bytes given, or computed).
PassCount head_pass(const ModelConfig& c, double head_bytes, int64_t n_tokens, int64_t n_logits,
                    const PassOptions& o = {});
PassCount head_pass(const ModelConfig& c, int64_t n_tokens, int64_t n_logits,
                    const PassOptions& o = {});
// Every layer and the head: a prefill of n tokens from pos computes n_logits logits (the
// engine computes only the last token's, 1, unless all are asked for).
PassCount forward_pass(const ModelConfig& c, int64_t pos, int64_t n_tokens, int64_t n_logits,
                       const PassOptions& o = {});

// FLOPs of one training step on n_seq sequences of seq_len tokens (logits at every
// position): the forward's matrix and attention FLOPs, and twice them for the backward
// (gradients of the activations and of the weights), i.e. 6 per weight per token.
double train_step_flops(const ModelConfig& c, int64_t n_seq, int64_t seq_len);

}  // namespace cln
