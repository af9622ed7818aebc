// A running model: KV cache, scratch buffers, thread pool, the active LoRA experts and
// the layer-boundary hook. eval() runs a batch of tokens (prefill) or one token
// (decode) at the next positions and returns logits.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "clone/engine/hook.h"
#include "clone/engine/lora.h"
#include "clone/engine/model.h"
#include "clone/kernels/thread_pool.h"

namespace cln {

class LoraSchedule;

struct ContextParams {
  int64_t n_ctx = 0;      // KV cache length; 0 = the model's training context
  int n_threads = 0;      // 0 = all cores
  int64_t n_batch = 512;  // longest pass; longer prompts run as several passes
};

class Context {
 public:
  Context(std::shared_ptr<const Model> model, const ContextParams& p);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const Model& model() const { return *model_; }
  int64_t n_ctx() const { return n_ctx_; }
  int64_t n_past() const { return n_past_; }
  kernels::ThreadPool& pool() { return *pool_; }

  // Runs tokens at positions n_past() .. n_past() + n - 1 and appends them to the cache.
  // Returns the last token's logits [n_vocab], or every token's [n, n_vocab] when
  // all_logits. Throws cln::Error if the cache would overflow or an id is out of range.
  std::span<const float> eval(std::span<const int32_t> tokens, bool all_logits = false);

  // The mean over tokens of the hidden states (residual stream) after the first n_layers
  // layers, from an empty cache and without the LoRA experts or the hook: the base model's
  // embedding of a prompt (the router's). Uses this context's cache, empty afterwards.
  std::vector<float> mean_hidden(std::span<const int32_t> tokens, int64_t n_layers);

  void reset();  // forget the cache (and the changes of experts set_loras_from scheduled)
  void truncate(int64_t n);  // keep the first n positions

  void set_hook(LayerHook hook) { hook_ = std::move(hook); }
  // LoRA experts and their weights for the next passes; empty = base model. Drops the
  // changes set_loras_from scheduled.
  void set_loras(std::vector<ActiveLora> loras);
  // These experts from cache position pos on (at least the next position, after any change
  // scheduled before): rows of one pass on either side of pos get their own experts, so a
  // prompt whose parts have their own mixtures is one prefill, not one pass a part.
  void set_loras_from(int64_t pos, std::vector<ActiveLora> loras);

  // Bytes held by the KV cache and scratch buffers.
  size_t state_bytes() const;

 private:
  struct Scratch;
  struct Pass;  // the inference executor of llama_forward (forward.h)
  void eval_pass(const int32_t* tokens, int64_t n, bool all_logits, float* logits_out);
  void check_tokens(std::span<const int32_t> tokens) const;
  // y (+)= W x for this layer's matrix, then each active expert's low-rank product.
  void linear(int64_t layer, LayerMatrix which, const float* x, int64_t n, float* y,
              bool accumulate, bool adapters = true);

  std::shared_ptr<const Model> model_;
  std::unique_ptr<kernels::ThreadPool> pool_;
  int64_t n_ctx_ = 0, n_batch_ = 512, n_past_ = 0;
  // KV cache per layer: F32 [n_ctx, n_head_kv * dk] and [n_ctx, n_head_kv * dv].
  std::vector<std::vector<float>> k_cache_, v_cache_;
  std::unique_ptr<Scratch> s_;
  std::vector<float> logits_;
  LayerHook hook_;
  std::unique_ptr<LoraSchedule> loras_;  // the experts per layer and matrix, over positions
  std::vector<float> lora_tmp_;
};

}  // namespace cln
