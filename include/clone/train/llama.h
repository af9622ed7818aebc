// A Llama-family model as trainable F32 tensors, of any shape the engine runs: per-layer
// heads, KV heads and FFN widths, layers without attention or without an FFN, a tied or
// untied head. Its tensors are the schema's (engine/schema.h) and its forward pass is the
// engine's (engine/forward.h) run with an autograd executor, so what is trained here is
// what the engine and llama.cpp load: llama GGUF when all layers are alike, deci otherwise.
//
// LoRA adapters, any number, each with its weight: y = W x + sum_i w_i (alpha_i/r_i) B_i (A_i x).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "clone/engine/model.h"
#include "clone/engine/model_config.h"
#include "clone/engine/schema.h"
#include "clone/gguf/gguf.h"
#include "clone/tokenizer/tokenizer.h"
#include "clone/train/autograd.h"

namespace cln::train {

struct LoraTensors {
  TensorP a;  // [r, in]   GGUF "<base>.lora_a", ne = [in, r]
  TensorP b;  // [out, r]  GGUF "<base>.lora_b", ne = [r, out]
};

struct Adapter {
  std::string name;
  int64_t rank = 0;
  float alpha = 0;
  float weight = 1;  // w_i, this adapter's share in the forward pass
  // per layer, per matrix (unset when not adapted)
  std::vector<std::array<LoraTensors, kLayerMatrices>> pairs;
  float scale() const { return alpha / static_cast<float>(rank); }
  // A then B of every adapted matrix, in schema order.
  std::vector<TensorP> params() const;
};

// What a forward pass shows of itself, for structured-pruning importance
// (prune/importance.h). Values are computed when the probe is called.
struct ForwardProbe {
  // The input of each layer matrix (the normed hidden state for Q, K, V, gate and up; the
  // attention output for O; silu(gate) * up for down), [tokens, in].
  std::function<void(int32_t layer, LayerMatrix m, const TensorP& input)> matrix_input;
  // The residual stream before and after each half of a layer (attn: true for attention).
  std::function<void(int32_t layer, bool attn, const TensorP& before, const TensorP& after)> half;
};

class LlamaModel {
 public:
  // Seeded init: matrices ~ N(0, 0.02), the residual-output projections (attn_output,
  // ffn_down) scaled by 1/sqrt(2 n_layer), norms 1. Same seed, same weights.
  static LlamaModel init(const ModelConfig& c, uint64_t seed);
  // Every weight of a llama or deci GGUF as F32 (quantized types dequantized).
  static LlamaModel from_gguf(const GgufFile& f);

  const ModelConfig& config() const { return cfg_; }
  // The base weights in file order, named as in GGUF (a tied head is token_embd, once).
  const std::vector<TensorP>& params() const { return params_; }
  TensorP find(const std::string& name) const;  // nullptr if absent
  // Marks the base weights trainable or frozen (frozen: no gradient computed).
  void set_trainable(bool on);

  // A new adapter on `targets` of every layer that has them: A ~ U(-1/sqrt(in), 1/sqrt(in)),
  // B = 0, so the model is unchanged until B trains. Freezes nothing by itself.
  Adapter& add_lora(const std::string& name, int64_t rank, float alpha,
                    const std::vector<LayerMatrix>& targets, uint64_t seed, float weight = 1);
  // An adapter from a GGUF in llama.cpp's adapter layout (as write_lora_gguf writes it).
  Adapter& load_lora(const GgufFile& f, float weight = 1);
  // A deque: references to adapters stay valid as more are added.
  std::deque<Adapter>& adapters() { return adapters_; }
  const std::deque<Adapter>& adapters() const { return adapters_; }

  // Logits [n_seq * seq_len, n_vocab] for n_seq sequences of seq_len tokens each (rows
  // sequence-major); positions restart at 0 in every sequence.
  TensorP forward(Graph& g, const std::vector<int32_t>& tokens, int64_t n_seq, int64_t seq_len,
                  const ForwardProbe* probe = nullptr) const;

  // Sets `out`'s base weights (a model of this shape) to this model's with every adapter
  // folded in: W + sum_i w_i (alpha_i / r_i) B_i A_i, the static model LoRA-then-merge
  // recovery writes. `out`'s own adapters are left as they are.
  void fold_adapters_into(LlamaModel& out) const;

  // The engine's model over these weights as they are now (no copy; adapters not included):
  // evaluation and generation run the trained weights through the inference engine.
  std::shared_ptr<const Model> engine_view() const;

  // Writes the model as GGUF (F32) with the tokenizer inside. Throws if the vocabulary
  // size differs from the model's. `extra` keys are added as strings (training provenance).
  void write_gguf(const std::string& path, const Vocab& vocab,
                  const std::vector<std::pair<std::string, std::string>>& extra = {}) const;
  // Writes one adapter in llama.cpp's LoRA adapter layout.
  void write_lora_gguf(const std::string& path, const Adapter& a) const;

 private:
  struct Exec;  // the autograd executor of llama_forward
  struct Layer {
    TensorP attn_norm, ffn_norm;
    std::array<TensorP, kLayerMatrices> mat;
  };
  void bind(const std::vector<TensorSpec>& specs);
  Adapter& new_adapter(const std::string& name, int64_t rank, float alpha, float weight);

  ModelConfig cfg_;
  std::vector<TensorP> params_;  // model_tensors(cfg_) order
  TensorP tok_embd_, output_norm_, output_;
  std::vector<Layer> layers_;
  std::deque<Adapter> adapters_;
};

// A uniform llama shape from its sizes; head size n_embd / n_head.
ModelConfig llama_shape(int64_t n_vocab, int64_t n_embd, int64_t n_layer, int64_t n_head,
                        int64_t n_head_kv, int64_t n_ff, int64_t n_ctx);

}  // namespace cln::train
