// A Llama-family model as trainable F32 tensors: the same shapes, names and math as the
// engine (adjacent-pair RoPE, GQA, SwiGLU, RMSNorm, untied output head), so what is
// trained here is written as an ordinary llama GGUF that the engine and llama.cpp load.
// Optional LoRA adapters on any of q, k, v, o, gate, up, down: y = W x + (alpha/r) B (A x).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "clone/engine/model_config.h"
#include "clone/gguf/gguf.h"
#include "clone/tokenizer/tokenizer.h"
#include "clone/train/autograd.h"

namespace cln::train {

struct LlamaLayer {
  TensorP attn_norm;  // [n_embd]
  TensorP wq;         // [n_head * dk, n_embd]
  TensorP wk;         // [n_head_kv * dk, n_embd]
  TensorP wv;         // [n_head_kv * dv, n_embd]
  TensorP wo;         // [n_embd, n_head * dv]
  TensorP ffn_norm;   // [n_embd]
  TensorP gate;       // [n_ff, n_embd]
  TensorP up;         // [n_ff, n_embd]
  TensorP down;       // [n_embd, n_ff]
};

struct LoraTensors {
  TensorP a;  // [r, in]   GGUF "<base>.lora_a", ne = [in, r]
  TensorP b;  // [out, r]  GGUF "<base>.lora_b", ne = [r, out]
};

// "q" -> "attn_q", ..., "down" -> "ffn_down"; throws on an unknown module name.
std::string lora_module_tensor(const std::string& module);

class LlamaModel {
 public:
  // Seeded init: matrices ~ N(0, 0.02), the residual-output projections (attn_output,
  // ffn_down) scaled by 1/sqrt(2 n_layer), norms 1. Same seed, same weights.
  static LlamaModel init(const ModelConfig& c, uint64_t seed);
  // Every weight of a uniform llama GGUF as F32 (quantized types dequantized).
  static LlamaModel from_gguf(const GgufFile& f);

  const ModelConfig& config() const { return cfg_; }
  // All weights in GGUF order, named as in GGUF.
  const std::vector<TensorP>& params() const { return params_; }
  TensorP find(const std::string& name) const;  // nullptr if absent
  // Marks the base weights trainable or frozen (frozen: no gradient computed).
  void set_trainable(bool on);

  // Adds adapters on the modules of every layer: A ~ U(-1/sqrt(in), 1/sqrt(in)), B = 0, so
  // the model is unchanged until B trains. Freezes nothing by itself (see set_trainable).
  void add_lora(int64_t rank, float alpha, const std::vector<std::string>& modules, uint64_t seed);
  const std::map<std::string, LoraTensors>& lora() const { return lora_; }
  std::vector<TensorP> lora_params() const;  // a then b, in layer order
  float lora_alpha() const { return lora_alpha_; }
  int64_t lora_rank() const { return lora_rank_; }

  // Logits [n_seq * seq_len, n_vocab] for n_seq sequences of seq_len tokens each (rows
  // sequence-major); positions restart at 0 in every sequence.
  TensorP forward(Graph& g, const std::vector<int32_t>& tokens, int64_t n_seq,
                  int64_t seq_len) const;

  // Writes the model as llama GGUF (F32), the tokenizer inside. Throws if the vocabulary
  // size differs from the model's. `extra` keys are added as strings (training provenance).
  void write_gguf(const std::string& path, const Vocab& vocab,
                  const std::vector<std::pair<std::string, std::string>>& extra = {}) const;
  // Writes the adapters in llama.cpp's LoRA adapter layout.
  void write_lora_gguf(const std::string& path, const std::string& name) const;

 private:
  TensorP proj(Graph& g, const TensorP& x, const TensorP& w) const;
  void index_params();

  ModelConfig cfg_;
  TensorP tok_embd_;  // [n_vocab, n_embd]
  std::vector<LlamaLayer> layers_;
  TensorP output_norm_;  // [n_embd]
  TensorP output_;       // [n_vocab, n_embd]
  std::vector<TensorP> params_;
  std::map<std::string, LoraTensors> lora_;  // by base tensor name
  float lora_alpha_ = 0;
  int64_t lora_rank_ = 0;
};

// A uniform llama shape from its sizes; head size n_embd / n_head.
ModelConfig llama_shape(int64_t n_vocab, int64_t n_embd, int64_t n_layer, int64_t n_head,
                        int64_t n_head_kv, int64_t n_ff, int64_t n_ctx);

// Deterministic random numbers, the same on every platform (splitmix64, Box-Muller).
struct Rng {
  uint64_t state;
  explicit Rng(uint64_t seed) : state(seed) {}
  uint64_t next();
  double uniform();  // [0, 1)
  double normal();
};

}  // namespace cln::train
