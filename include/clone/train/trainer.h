// Training runs: the base model from scratch, fine-tuning of an existing GGUF of any shape
// (recovery after pruning: every weight, or LoRA then merge), and LoRA experts on a frozen base of
// any shape. Each checkpoints and resumes bit for bit through the shared loop (loop.h) and stops
// clearly on bad input (no documents, tokenizer mismatch, checkpoint of another run, NaN/Inf loss).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "clone/engine/model_config.h"
#include "clone/engine/schema.h"
#include "clone/train/loop.h"
#include "clone/train/optim.h"

namespace cln::train {

// What every run shares: batches, schedule, optimizer, seed and the loop's cadence.
struct RunOptions {
  int64_t batch = 8, seq_len = 256;
  Schedule sched;
  AdamWConfig adam;
  uint64_t seed = 1234;
  int threads = 2;
  int64_t log_every = 10, eval_every = 250, ckpt_every = 100;
  int64_t stop_after = -1;  // stop this run after reaching this step (resume later)
  bool resume = true;       // continue from the run folder's checkpoint when it exists
  bool verbose = true;
  // The loop's options for a run in `dir` described by meta_json.
  LoopOptions loop(const std::string& dir, const std::string& label,
                   const std::string& meta_json) const;
};

// What base training and fine-tuning share: the data mixture, validation and the tables.
struct TextRunOptions : RunOptions {
  std::string data_dir = "out/data";  // tokens/<domain>.<split>.tok
  std::string out_dir = "out/base";   // checkpoint.bin, loss.csv, valid.csv, loss.png, train.log
  std::string model_out;              // default out_dir/model.gguf
  std::vector<std::string> domains;   // empty = all domains
  double mix_temperature = 0.5;       // domain share ~ tokens^temperature
  int64_t eval_windows = 16;          // validation windows per domain
  int64_t test_tokens = 65536;  // test tokens per domain in the final perplexity table (0: none)
  // Set: knowledge distillation from this model (same tokenizer, any shape; the dense model
  // a pruned one was cut from, or a smaller model trained from scratch is given): the loss
  // is (1 - kd_weight) * cross entropy + kd_weight * KL(teacher || model) per token
  // (op::distill_cross_entropy). Half and half by default: over 1000 steps of recovery it
  // beat both KL alone and cross entropy alone on the shipped base, whose own training had
  // not converged (docs/tailor.md).
  std::string teacher;
  float kd_weight = 0.5f;
};

struct BaseTrainOptions : TextRunOptions {
  std::string tokenizer;  // SentencePiece model (default data_dir/tokenizer.model)
  int64_t n_embd = 192, n_layer = 12, n_head = 6, n_head_kv = 2, n_ff = 512;
};
// Trains a uniform Llama from random weights (on the corpora, or distilled from a teacher on
// them) and writes it (with perplexity.md) at the end.
TrainReport train_base(const BaseTrainOptions& o);

struct FinetuneOptions : TextRunOptions {
  std::string model;  // the GGUF to fine-tune (its tokenizer is used); any shape
  // > 0: LoRA then merge. The model stays frozen and one adapter of this rank on every
  // matrix trains (the same batches, loss, schedule and optimizer); validation and the
  // written GGUF are the model with the adapter folded in, of the same shape. 0: every
  // weight trains.
  int64_t lora_rank = 0;
  float lora_alpha = 16.0f;
  FinetuneOptions() {
    out_dir = "out/finetune";
    sched = Schedule{3e-4, 20, 500, 0.1};
  }
};
// Trains every weight of an existing model, or a LoRA adapter merged at the end (on the
// corpora, or distilled from a teacher on them), and writes a GGUF of the same shape (F32).
TrainReport train_finetune(const FinetuneOptions& o);

struct LoraTrainOptions : RunOptions {
  std::string base;                   // base model GGUF of any shape (its tokenizer is used)
  std::string data_dir = "out/data";  // tokens/<domain>.train.tok or tasks/<task>/train.jsonl
  std::string domain;                 // one of domain_names(), or
  std::string task;                   // one of task_names() (loss on the answer only)
  std::string out;                    // adapter GGUF
  std::string out_dir;                // loss.csv and train.log (default: beside out)
  int64_t rank = 8;
  float alpha = 16.0f;
  std::vector<LayerMatrix> targets = {kAllLayerMatrices.begin(), kAllLayerMatrices.end()};
  LoraTrainOptions() {
    sched = Schedule{1e-3, 20, 300, 0.1};
    adam = AdamWConfig{0.9, 0.999, 1e-8, 0.0, 1.0};
    eval_every = 0;
    ckpt_every = 50;  // adapter + AdamW state to <out_dir>/checkpoint.bin
  }
};
// Trains LoRA adapters on a frozen base and writes them in llama.cpp's adapter layout.
// A checkpoint of another run (domain, task, rank, targets, seed, schedule, base) stops
// with a message naming the difference.
TrainReport train_lora(const LoraTrainOptions& o);

// Times full training steps (forward, backward, AdamW) on random tokens after one
// warm-up step; the same work `train_base` does per step.
struct StepBench {
  int64_t params = 0;
  double step_s = 0, tokens_per_s = 0, gflops = 0;
};
StepBench bench_train_step(const ModelConfig& c, int64_t n_seq, int64_t seq_len, int steps,
                           int threads);
// The same steps of the same uniform shape in PyTorch (tests/train/torch_llama.py bench, run
// by `python`): the reference the training speed is compared with. impl names the version.
struct TorchBench {
  std::string impl;
  int64_t params = 0;
  double step_s = 0, tokens_per_s = 0;
};
TorchBench bench_torch_step(const std::string& python, const std::string& script,
                            const ModelConfig& c, int64_t n_seq, int64_t seq_len, int steps,
                            int threads);

}  // namespace cln::train
