// The training loop every run shares (pre-training, fine-tuning, LoRA): batches, forward,
// backward, AdamW, a progress line (step, loss, learning rate, gradient norm, tokens/s,
// elapsed, ETA), a loss curve (CSV and PNG), validation, and checkpoints that resume bit
// for bit; a NaN or infinite loss stops the run with the last checkpoint intact.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "clone/kernels/thread_pool.h"
#include "clone/train/llama.h"
#include "clone/train/optim.h"

namespace cln::train {

struct LoopOptions {
  std::string dir;              // checkpoint.bin, loss.csv, valid.csv, train.log, loss.png
  std::string label = "train";  // progress lines start with it
  Schedule sched;
  int64_t n_seq = 8, seq_len = 256;
  int64_t log_every = 10;
  int64_t eval_every = 0;  // steps between validations (0: only at the end, if any)
  int64_t ckpt_every = 100;
  int64_t stop_after = -1;  // stop this run after reaching this step (resume later)
  bool resume = true;       // continue from dir/checkpoint.bin when it exists
  bool verbose = true;
  std::string meta_json;                 // the run's description, kept in the checkpoint
  std::vector<std::string> resume_keys;  // keys that must agree to resume (empty: all but threads)
};

// A step's loss from the model's logits [n_seq * seq_len, n_vocab], the batch's tokens and
// targets: op::cross_entropy unless a run says otherwise (distillation from a teacher).
using LossFn =
    std::function<TensorP(Graph& g, const TensorP& logits, const std::vector<int32_t>& tokens,
                          const std::vector<int32_t>& targets)>;

struct LoopCallbacks {
  // The batch of a step (a function of the step alone, for bit-exact resumes).
  std::function<void(int64_t step, std::vector<int32_t>* tokens, std::vector<int32_t>* targets)>
      batch;
  // Validation: the mean loss and a line of its parts (empty function: none).
  std::function<std::pair<double, std::string>()> validate;
  LossFn loss;  // empty: op::cross_entropy
};

struct TrainReport {
  int64_t first_step = 0;      // where this run started (0 or the resumed step)
  int64_t last_step = 0;       // steps completed
  std::vector<double> losses;  // training loss of each step this run
  double tokens_per_s = 0;
  bool done = false;  // reached sched.steps (outputs may be written)
};

// Trains opt's parameters (through model's forward) from the checkpoint in o.dir if any.
TrainReport run_loop(const LlamaModel& model, AdamW& opt, kernels::ThreadPool& pool,
                     const LoopOptions& o, const LoopCallbacks& cb);

// Plots dir/loss.csv (and dir/valid.csv when present) to dir/loss.png.
void plot_loss(const std::string& dir);

}  // namespace cln::train
