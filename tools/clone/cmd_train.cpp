// clone train base: train the shipped base model from scratch. clone train finetune: train
// every weight of an existing model of any shape, or a LoRA adapter merged at the end
// (recovery after pruning). Both resume from
// their checkpoint. clone train samples: continuations of test documents. clone train
// bench: training throughput against the FMA peak and PyTorch.
#include <cstdio>
#include <fstream>
#include <memory>

#include "clone/core/error.h"
#include "clone/core/table.h"
#include "clone/engine/accounting.h"
#include "clone/eval/samples.h"
#include "clone/kernels/machine.h"
#include "clone/kernels/thread_pool.h"
#include "clone/train/llama.h"
#include "clone/train/trainer.h"
#include "subcommand.h"

namespace cmd_train {

struct BenchOpts {
  int64_t vocab = 4096, n_embd = 192, n_layer = 12, n_head = 6, n_head_kv = 2, n_ff = 512;
  int64_t batch = 8, seq_len = 256;
  int steps = 3, threads = 2;
  bool torch = false;
  std::string python = "/usr/bin/python3";
  std::string torch_script = "tests/train/torch_llama.py";
  std::string format = "md";
};

int bench(const BenchOpts& o) {
  using namespace cln;
  const ModelConfig c =
      train::llama_shape(o.vocab, o.n_embd, o.n_layer, o.n_head, o.n_head_kv, o.n_ff, o.seq_len);
  kernels::ThreadPool pool(o.threads);
  const kernels::MachineLimits lim = kernels::measure_machine(&pool);
  const train::StepBench b = train::bench_train_step(c, o.batch, o.seq_len, o.steps, o.threads);
  const double flops = train_step_flops(c, o.batch, o.seq_len);
  Table t({"impl", "threads", "params", "batch", "seq_len", "step_s", "tokens_per_s", "gflops",
           "pct_fma_peak"});
  t.add({std::string("clone"), static_cast<long long>(o.threads), static_cast<long long>(b.params),
         static_cast<long long>(o.batch), static_cast<long long>(o.seq_len), b.step_s,
         b.tokens_per_s, b.gflops, 100.0 * b.gflops / lim.fma_gflops});
  if (o.torch) {
    const train::TorchBench tb = train::bench_torch_step(o.python, o.torch_script, c, o.batch,
                                                         o.seq_len, o.steps, o.threads);
    t.add({tb.impl, static_cast<long long>(o.threads), static_cast<long long>(tb.params),
           static_cast<long long>(o.batch), static_cast<long long>(o.seq_len), tb.step_s,
           tb.tokens_per_s, flops / tb.step_s / 1e9,
           100.0 * flops / tb.step_s / 1e9 / lim.fma_gflops});
  }
  std::printf("%s", t.format(o.format).c_str());
  if (o.format == "md")
    std::printf(
        "\nFMA peak %.1f GFLOP/s (%d threads, %s); FLOPs per step %.3g (6 per weight per "
        "token + causal attention)\n",
        lim.fma_gflops, lim.threads, lim.simd_target, flops);
  return 0;
}

void add_shape(CLI::App* a, int64_t* n_embd, int64_t* n_layer, int64_t* n_head, int64_t* n_head_kv,
               int64_t* n_ff) {
  a->add_option("--n-embd", *n_embd, "model width")
      ->capture_default_str()
      ->check(CLI::Range(8, 8192));
  a->add_option("--n-layer", *n_layer, "layers")->capture_default_str()->check(CLI::Range(1, 256));
  a->add_option("--n-head", *n_head, "query heads")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  a->add_option("--n-head-kv", *n_head_kv, "key/value heads (divides --n-head)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  a->add_option("--n-ff", *n_ff, "feed-forward width")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536));
}

void add_batch(CLI::App* a, int64_t* batch, int64_t* seq_len) {
  a->add_option("--batch", *batch, "sequences per step")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  a->add_option("--seq-len", *seq_len, "tokens per sequence (the context length)")
      ->capture_default_str()
      ->check(CLI::Range(2, 65536));
}

// The flags base training and fine-tuning share: data, run folder, teacher, schedule, loop.
void add_text_run(CLI::App* a, cln::train::TextRunOptions* o) {
  a->add_option("--data", o->data_dir, "folder written by `clone data build`")
      ->capture_default_str();
  a->add_option("--out", o->out_dir, "run folder")->capture_default_str();
  a->add_option("--model-out", o->model_out, "GGUF to write at the end (default <out>/model.gguf)");
  a->add_option("--domains", o->domains, "train on these domains only (default: all)")
      ->delimiter(',');
  add_batch(a, &o->batch, &o->seq_len);
  auto* teacher =
      a->add_option("--teacher", o->teacher,
                    "distil from this model (same tokenizer; e.g. the dense model a pruned one "
                    "was cut from): the loss is KL(teacher || model) per token, mixed with cross "
                    "entropy by --kd-weight")
          ->check(CLI::ExistingFile);
  a->add_option("--kd-weight", o->kd_weight,
                "share of the distillation term in the loss (1: KL only, 0: cross entropy only)")
      ->capture_default_str()
      ->check(CLI::Range(0.0f, 1.0f))
      ->needs(teacher);
  a->add_option("--steps", o->sched.steps, "optimizer steps")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{10000000}));
  a->add_option("--warmup", o->sched.warmup, "warm-up steps")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{10000000}));
  a->add_option("--lr", o->sched.lr, "peak learning rate")
      ->capture_default_str()
      ->check(CLI::Range(1e-7, 1e30));
  a->add_option("--min-lr-ratio", o->sched.min_lr_ratio, "final learning rate / peak")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  a->add_option("--weight-decay", o->adam.weight_decay, "AdamW decoupled weight decay")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 10.0));
  a->add_option("--clip", o->adam.clip, "max global gradient norm (0: off)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e9));
  a->add_option("--seed", o->seed, "seed of the init and the data order")->capture_default_str();
  a->add_option("--threads", o->threads, "threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  a->add_option("--mix-temperature", o->mix_temperature, "domain share ~ tokens^T")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  a->add_option("--log-every", o->log_every, "steps between progress lines")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1000000}));
  a->add_option("--eval-every", o->eval_every,
                "steps between validation losses (0: only at the end)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1000000}));
  a->add_option("--ckpt-every", o->ckpt_every, "steps between checkpoints")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1000000}));
  a->add_option("--test-tokens", o->test_tokens, "test tokens per domain for the perplexity table")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1000000000}));
  a->add_option("--stop-after", o->stop_after, "stop this run at this step (resume later)");
  a->add_flag("!--no-resume", o->resume, "start from scratch even if a checkpoint exists");
}

struct SamplesOpts {
  cln::eval::SampleOptions s;
  int64_t examples = 3;
  std::string out;
};

int samples(const SamplesOpts& o) {
  const auto r = cln::eval::sample_domains(o.s);
  const std::string md = cln::eval::samples_markdown(r, o.examples);
  std::fputs(md.c_str(), stdout);
  if (!o.out.empty()) {
    std::ofstream f(o.out);
    f << "Continuations of " << o.s.per_domain << " test documents per domain after their first "
      << o.s.prompt_tokens << " tokens (in \u00ab\u00bb), temperature " << o.s.sampling.temperature
      << ", top-k " << o.s.sampling.top_k << ", top-p " << o.s.sampling.top_p << ", seed "
      << o.s.sampling.seed << ", at most " << o.s.max_new << " new tokens.\n\n"
      << md;
    if (!f) cln::fail("cannot write ", o.out);
  }
  return 0;
}

const cln::cli::Register reg{
    "train", "Train the base model; benchmark training throughput", [](CLI::App& app) {
      app.require_subcommand(1);
      auto o = std::make_shared<cln::train::BaseTrainOptions>();
      CLI::App* base = app.add_subcommand(
          "base",
          "Train a Llama from scratch on the corpora of `clone data build` (or distil a "
          "--teacher into it from the first step); resumes from "
          "<out>/checkpoint.bin; writes loss.csv, valid.csv, loss.png, train.log, model.gguf, "
          "perplexity.md");
      base->add_option("--tokenizer", o->tokenizer,
                       "SentencePiece model (default <data>/tokenizer.model)");
      add_shape(base, &o->n_embd, &o->n_layer, &o->n_head, &o->n_head_kv, &o->n_ff);
      add_text_run(base, o.get());

      auto fo = std::make_shared<cln::train::FinetuneOptions>();
      CLI::App* ft = app.add_subcommand(
          "finetune",
          "Train every weight of an existing model (any shape: pruned deci models too), or a "
          "LoRA adapter merged at the end (--lora-rank), on the "
          "corpora, or distil a dense --teacher into it; resumes from <out>/checkpoint.bin; "
          "writes a GGUF of the same shape, "
          "loss.csv, valid.csv, loss.png, train.log, perplexity.md");
      ft->add_option("-m,--model", fo->model, "GGUF to fine-tune (its tokenizer is used)")
          ->required()
          ->check(CLI::ExistingFile);
      auto* rank = ft->add_option("--lora-rank", fo->lora_rank,
                                  "LoRA then merge: train one adapter of this rank on every "
                                  "matrix of the frozen model and fold it in at the end (0: "
                                  "train every weight)")
                       ->capture_default_str()
                       ->check(CLI::Range(int64_t{0}, int64_t{4096}));
      ft->add_option("--lora-alpha", fo->lora_alpha, "LoRA alpha (scale alpha / rank)")
          ->capture_default_str()
          ->check(CLI::Range(0.0f, 1e6f))
          ->needs(rank);
      add_text_run(ft, fo.get());

      auto b = std::make_shared<BenchOpts>();
      CLI::App* bench_cmd = app.add_subcommand(
          "bench",
          "Training steps per second of a Llama shape on random tokens: tokens/s, "
          "GFLOP/s and the share of the FMA peak; --torch adds PyTorch on the same shape");
      bench_cmd->add_option("--vocab", b->vocab, "vocabulary size")
          ->capture_default_str()
          ->check(CLI::Range(2, 1000000));
      add_shape(bench_cmd, &b->n_embd, &b->n_layer, &b->n_head, &b->n_head_kv, &b->n_ff);
      add_batch(bench_cmd, &b->batch, &b->seq_len);
      bench_cmd->add_option("--steps", b->steps, "timed steps (after one warm-up)")
          ->capture_default_str()
          ->check(CLI::Range(1, 1000));
      bench_cmd->add_option("--threads", b->threads, "threads")
          ->capture_default_str()
          ->check(CLI::Range(1, 256));
      bench_cmd->add_flag("--torch", b->torch, "also run tests/train/torch_llama.py bench");
      bench_cmd->add_option("--python", b->python, "python with torch")->capture_default_str();
      bench_cmd->add_option("--torch-script", b->torch_script, "the PyTorch reference")
          ->capture_default_str();
      bench_cmd->add_option("--format", b->format, "md, csv or json")
          ->capture_default_str()
          ->check(CLI::IsMember({"md", "csv", "json"}));
      auto so = std::make_shared<SamplesOpts>();
      CLI::App* samples_cmd = app.add_subcommand(
          "samples",
          "Continue test documents of every domain from a short prompt: the texts, how often "
          "the model stops with EOS, and its lengths next to the real documents'");
      samples_cmd->add_option("-m,--model", so->s.model, "model GGUF")
          ->required()
          ->check(CLI::ExistingFile);
      samples_cmd->add_option("--data", so->s.data_dir, "folder written by `clone data build`")
          ->capture_default_str();
      samples_cmd->add_option("--per-domain", so->s.per_domain, "documents per domain")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{1}, int64_t{100000}));
      samples_cmd->add_option("--prompt-tokens", so->s.prompt_tokens, "prompt tokens per document")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{1}, int64_t{4096}));
      samples_cmd->add_option("--max-new", so->s.max_new, "generation limit")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{1}, int64_t{4096}));
      samples_cmd->add_option("--temp", so->s.sampling.temperature, "temperature (0: greedy)")
          ->capture_default_str()
          ->check(CLI::Range(0.0f, 100.0f));
      samples_cmd->add_option("--seed", so->s.sampling.seed, "sampling seed")
          ->capture_default_str();
      samples_cmd->add_option("--threads", so->s.threads, "threads")
          ->capture_default_str()
          ->check(CLI::Range(1, 256));
      samples_cmd->add_option("--examples", so->examples, "texts shown per domain")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{0}, int64_t{100000}));
      samples_cmd->add_option("--out", so->out, "markdown file for the table and the texts");
      return [o, b, base, bench_cmd, so, samples_cmd, fo, ft] {
        if (base->parsed()) {
          cln::train::train_base(*o);
          return 0;
        }
        if (ft->parsed()) {
          cln::train::train_finetune(*fo);
          return 0;
        }
        if (samples_cmd->parsed()) return samples(*so);
        if (bench_cmd->parsed()) return bench(*b);
        return 1;
      };
    }};

}  // namespace cmd_train
