// Training loops: the base model from scratch and LoRA experts on a frozen base, with
// checkpoints that resume bit for bit, a progress line, a loss curve (CSV and PNG),
// and clear stops on bad input (no documents, tokenizer mismatch, checkpoint of
// another shape, NaN/Inf loss).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "clone/train/llama.h"
#include "clone/train/optim.h"

namespace cln::train {

// Windows of seq_len + 1 tokens drawn from several token streams. The batch of step s
// depends only on (seed, s): resuming needs no loader state.
class WindowSampler {
 public:
  // weight: relative share of windows drawn from this stream.
  void add(std::string name, std::vector<uint16_t> tokens, double weight);
  // tokens/targets [n_seq * seq_len]: targets are tokens shifted by one.
  void batch(uint64_t seed, int64_t step, int64_t n_seq, int64_t seq_len,
             std::vector<int32_t>* tokens, std::vector<int32_t>* targets) const;
  size_t size() const { return streams_.size(); }
  const std::string& name(size_t i) const { return streams_[i].name; }
  double share(size_t i) const;

 private:
  struct Stream {
    std::string name;
    std::vector<uint16_t> tokens;
    double weight;
  };
  std::vector<Stream> streams_;
};

// Checkpoint: "CLCK", version, the run's JSON description (shape, seed, data), step,
// then every parameter and its AdamW m and v. Written to path.tmp, then renamed.
void save_checkpoint(const std::string& path, const std::string& meta_json, int64_t step,
                     AdamW& opt);
// Restores weights and optimizer state; returns the step to continue from. Throws
// cln::Error if the file is not a checkpoint or its parameters differ in name or shape
// (the message names the first difference).
int64_t load_checkpoint(const std::string& path, AdamW& opt, std::string* meta_json);

struct BaseTrainOptions {
  std::string data_dir = "out/data";  // tokens/<domain>.<split>.tok, tokenizer.model
  std::string tokenizer;              // default data_dir/tokenizer.model
  std::string out_dir = "out/base";   // checkpoint.bin, loss.csv, valid.csv, loss.png, model.gguf
  std::string model_out;              // default out_dir/model.gguf
  // shape
  int64_t n_embd = 192, n_layer = 12, n_head = 6, n_head_kv = 2, n_ff = 512;
  int64_t batch = 8, seq_len = 256;
  Schedule sched;
  AdamWConfig adam;
  uint64_t seed = 1234;
  int threads = 2;
  double mix_temperature = 0.5;  // domain share ~ tokens^temperature
  int64_t log_every = 10, eval_every = 250, ckpt_every = 100;
  int64_t eval_windows = 16;    // validation windows per domain
  int64_t test_tokens = 65536;  // test tokens per domain in the final perplexity table
  int64_t stop_after = -1;      // stop this run after reaching this step (tests, demos)
  bool resume = true;           // continue from out_dir/checkpoint.bin when it exists
  bool verbose = true;
};

struct TrainReport {
  int64_t first_step = 0;      // where this run started (0 or the resumed step)
  int64_t last_step = 0;       // steps completed
  std::vector<double> losses;  // training loss of each step this run
  double tokens_per_s = 0;
};

TrainReport train_base(const BaseTrainOptions& o);

struct LoraTrainOptions {
  std::string base;                   // base model GGUF (its tokenizer is used)
  std::string data_dir = "out/data";  // tokens/<domain>.train.tok or tasks/<task>/train.jsonl
  std::string domain;                 // one of domain_names(), or
  std::string task;                   // one of task_names() (loss on the answer only)
  std::string out;                    // adapter GGUF
  std::string out_dir;                // loss.csv and train.log (default: beside out)
  int64_t rank = 8;
  float alpha = 16.0f;
  std::vector<std::string> targets = {"q", "k", "v", "o", "gate", "up", "down"};
  int64_t batch = 8, seq_len = 256;
  Schedule sched{1e-3, 20, 300, 0.1};
  AdamWConfig adam{0.9, 0.999, 1e-8, 0.0, 1.0};
  uint64_t seed = 1234;
  int threads = 2;
  int64_t log_every = 10;
  int64_t ckpt_every = 50;  // adapter + AdamW state to <out_dir>/checkpoint.bin
  int64_t stop_after = -1;  // stop this run after reaching this step (tests, demos)
  bool resume = true;       // continue from <out_dir>/checkpoint.bin when it exists
  bool verbose = true;
};

// Trains LoRA adapters on a frozen base and writes them in llama.cpp's adapter layout.
// Interrupted runs resume from the checkpoint and repeat the loss curve bit for bit; a
// checkpoint of another run (domain, task, rank, targets, seed, schedule, base) stops
// with a message naming the difference.
TrainReport train_lora(const LoraTrainOptions& o);

// Task items packed into rows of seq_len tokens: BOS prompt answer EOS, repeated; the
// targets are -1 except on the answer and its EOS. Rows of the batch of step s depend
// only on (seed, s).
void task_batch(const std::vector<std::vector<int32_t>>& items,
                const std::vector<int32_t>& prompt_len, uint64_t seed, int64_t step, int64_t n_seq,
                int64_t seq_len, int32_t pad, std::vector<int32_t>* tokens,
                std::vector<int32_t>* targets);

// Per-domain perplexity of a model on token streams, next to a unigram model fitted on
// each domain's training tokens (add-one smoothing). Rows: domain, tokens, model ppl,
// unigram ppl.
struct PerplexityRow {
  std::string domain;
  int64_t tokens = 0;
  double model_ppl = 0, unigram_ppl = 0;
};
std::vector<PerplexityRow> domain_perplexity(const LlamaModel& m, const std::string& data_dir,
                                             const std::string& split, int64_t seq_len,
                                             int64_t max_tokens, int threads);

// FLOPs of one training step (forward + backward) of a uniform llama: 6 per weight per
// token for every matrix (output head included), plus causal attention (scores and
// values, forward once and backward twice).
double train_step_flops(const ModelConfig& c, int64_t n_seq, int64_t seq_len);

// Times full training steps (forward, backward, AdamW) on random tokens after one
// warm-up step; the same work `train_base` does per step.
struct StepBench {
  int64_t params = 0;
  double step_s = 0, tokens_per_s = 0, gflops = 0;
};
StepBench bench_train_step(const ModelConfig& c, int64_t n_seq, int64_t seq_len, int steps,
                           int threads);

}  // namespace cln::train
