// Continuous batching: several requests, each in its own slot with its own KV cache and its
// own mixture of LoRA experts, run through one forward pass (llama_forward, forward.h). The
// rows of a pass are the slots' tokens one after another: every base matmul runs once over
// all rows, each slot's experts are applied to its own rows (no adapter merge or swap), and
// attention reads each slot's cache. A slot joins or leaves between passes; a pass may mix
// prompt chunks (prefill) and single decode tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "clone/engine/hook.h"
#include "clone/engine/lora.h"
#include "clone/engine/model.h"
#include "clone/kernels/thread_pool.h"

namespace cln {

class LoraTable;

struct BatchParams {
  int n_slots = 8;         // requests held at once
  int64_t n_ctx = 0;       // KV cache length per slot; 0 = the model's training context
  int64_t max_rows = 512;  // tokens per pass, all slots together
  int n_threads = 0;       // 0 = all cores
};

class Batch {
 public:
  Batch(std::shared_ptr<const Model> model, const BatchParams& p);
  ~Batch();
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  const Model& model() const { return *model_; }
  int n_slots() const { return static_cast<int>(slots_.size()); }
  int64_t n_ctx() const { return n_ctx_; }
  int64_t max_rows() const { return max_rows_; }
  // A free slot for a new request with these experts (empty: the base model), or -1.
  int open(std::vector<ActiveLora> loras = {});
  void close(int slot);  // frees the slot at once (its cache is forgotten)
  // Replaces an open slot's experts from its next pass on (its cache is kept: the positions
  // already run keep what the earlier mixture made of them), e.g. a stream re-routed. Drops
  // the changes set_loras_from scheduled.
  void set_loras(int slot, std::vector<ActiveLora> loras);
  // Schedules a change of an open slot's experts at cache position pos (>= its next position,
  // after any change scheduled before): its rows from pos on run under these experts, in
  // whichever pass they come, so a prompt whose parts have their own mixtures is prefilled in
  // as few passes as the row budget allows, rather than one pass a part.
  void set_loras_from(int slot, int64_t pos, std::vector<ActiveLora> loras);
  bool is_open(int slot) const;
  int64_t n_past(int slot) const;
  int open_slots() const;

  struct Work {
    int slot;
    std::span<const int32_t> tokens;  // appended at the slot's next positions
  };
  // One pass over every slot's tokens (at most max_rows in all, each slot at most once);
  // returns each work item's last-token logits [n_vocab], in the order given (valid until
  // the next step). Throws cln::Error on a closed slot, a full cache or a bad token.
  std::vector<std::span<const float>> step(const std::vector<Work>& work);

  // Called at every layer boundary of every pass: phase Decode when every row is a decode
  // token, n_tokens the pass's rows, pos the smallest position among them.
  void set_hook(LayerHook hook) { hook_ = std::move(hook); }
  size_t state_bytes() const;

 private:
  struct Slot;
  struct Pass;
  std::shared_ptr<const Model> model_;
  std::unique_ptr<kernels::ThreadPool> pool_;
  int64_t n_ctx_ = 0, max_rows_ = 0;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::unique_ptr<LoraTable> table(const std::vector<ActiveLora>& loras);  // sizes the scratch
  struct Scratch;
  std::unique_ptr<Scratch> s_;
  std::vector<float> logits_;
  LayerHook hook_;
};

}  // namespace cln
