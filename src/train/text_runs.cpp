// Base training and fine-tuning (every weight, or a LoRA adapter merged at the end): a
// model trained on the mixture of the corpora's training splits, validated on their valid splits
// through the engine, and written as GGUF with a per-domain test perplexity table at the end.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>

#include "clone/core/error.h"
#include "clone/data/corpus.h"
#include "clone/data/token_file.h"
#include "clone/data/tokenizer_train.h"
#include "clone/engine/context.h"
#include "clone/eval/domains.h"
#include "clone/eval/nll.h"
#include "clone/train/batches.h"
#include "clone/train/trainer.h"

namespace cln::train {
namespace fs = std::filesystem;

namespace {

struct TextData {
  WindowSampler train;
  std::vector<std::pair<std::string, std::vector<uint16_t>>> valid;
};

TextData load_text(const TextRunOptions& o, const Vocab& vocab, const std::string& source) {
  TextData d;
  const std::vector<std::string>& names = o.domains.empty() ? data::domain_names() : o.domains;
  for (const std::string& name : names) {
    if (std::find(data::domain_names().begin(), data::domain_names().end(), name) ==
        data::domain_names().end())
      fail("unknown domain '", name, "'");
    for (const char* split : {"train", "valid"}) {
      const std::string path = data::token_file_path(o.data_dir, name, split);
      data::TokenFile f = data::read_token_file(path, vocab, source);
      if (f.n_docs == 0) fail(path, ": no documents");
      if (std::string(split) == "train") {
        const double w = std::pow(static_cast<double>(f.tokens.size()), o.mix_temperature);
        d.train.add(name, std::move(f.tokens), w);
      } else {
        d.valid.emplace_back(name, std::move(f.tokens));
      }
    }
  }
  return d;
}

// What a run trains, and the model it validates and writes: every weight of the model
// itself, or LoRA adapters on the frozen model, folded into a copy of it (LoRA then merge).
struct Trained {
  std::vector<TensorP> params;
  const LlamaModel* shown = nullptr;
  std::function<void()> refresh;  // brings *shown up to date with params (empty: it is)
};

// Trains t.params of `model` on the mixture and, when the run completes, writes t.shown
// and the test perplexity table.
TrainReport run_text(const LlamaModel& model, const Trained& t, const Vocab& vocab,
                     const std::string& source, const TextRunOptions& o, const nlohmann::json& meta,
                     const std::vector<std::string>& resume_keys, const std::string& label,
                     std::vector<std::pair<std::string, std::string>> extra, LossFn loss = {}) {
  TextData data = load_text(o, vocab, source);
  AdamW opt(t.params, o.adam);
  const auto refresh = [&t] {
    if (t.refresh) t.refresh();
  };
  kernels::ThreadPool pool(o.threads);
  if (o.verbose) {
    std::fprintf(stderr,
                 "%s: %lld parameters, %lld layers x %lld wide, vocab %lld, %lld x %lld tokens "
                 "per step, %lld steps\n",
                 label.c_str(), static_cast<long long>(model.config().n_params()),
                 static_cast<long long>(model.config().n_layer()),
                 static_cast<long long>(model.config().n_embd),
                 static_cast<long long>(model.config().n_vocab), static_cast<long long>(o.batch),
                 static_cast<long long>(o.seq_len), static_cast<long long>(o.sched.steps));
    for (size_t i = 0; i < data.train.size(); ++i)
      std::fprintf(stderr, "%s: domain %-10s share %.3f\n", label.c_str(),
                   data.train.name(i).c_str(), data.train.share(i));
  }
  // Validation runs the weights being trained through the engine (a view, no copy).
  const auto view = t.shown->engine_view();
  Context ctx(view, {o.seq_len, o.threads, o.seq_len});
  LoopCallbacks cb;
  cb.batch = [&](int64_t step, std::vector<int32_t>* tok, std::vector<int32_t>* tgt) {
    data.train.batch(o.seed, step, o.batch, o.seq_len, tok, tgt);
  };
  cb.loss = std::move(loss);
  cb.validate = [&]() {
    refresh();
    double sum = 0;
    std::string parts;
    for (const auto& [name, stream] : data.valid) {
      const eval::Windows w =
          eval::even_windows(static_cast<int64_t>(stream.size()), o.seq_len, o.eval_windows);
      const double l = eval::windowed_nll(ctx, std::span<const uint16_t>(stream), w).mean_nll;
      sum += l;
      char b[64];
      std::snprintf(b, sizeof b, " %s %.3f", name.c_str(), l);
      parts += b;
    }
    return std::make_pair(sum / static_cast<double>(data.valid.size()), parts);
  };
  LoopOptions lo = o.loop(o.out_dir, label, meta.dump());
  lo.resume_keys = resume_keys;
  const TrainReport rep = run_loop(model, opt, pool, lo, cb);
  if (!rep.done) return rep;
  const std::string out =
      o.model_out.empty() ? (fs::path(o.out_dir) / "model.gguf").string() : o.model_out;
  extra.emplace_back("clone.training.run", meta.dump());
  refresh();
  t.shown->write_gguf(out, vocab, extra);
  if (o.verbose) std::fprintf(stderr, "%s: wrote %s\n", label.c_str(), out.c_str());
  if (o.test_tokens > 0) {
    const auto rows = eval::domain_perplexity(view, vocab, source, o.data_dir, "test", o.seq_len,
                                              o.test_tokens, o.threads);
    const eval::Windows w = eval::even_windows(1 << 30, o.seq_len, o.test_tokens / o.seq_len);
    const std::string md = "Test split, per domain: up to " + std::to_string(w.starts.size()) +
                           " evenly spaced windows of " + std::to_string(o.seq_len) +
                           " tokens, every prediction scored (eval::even_windows); unigram "
                           "fitted on the training split with add-one smoothing.\n\n" +
                           eval::domain_table(rows).markdown();
    std::ofstream((fs::path(o.out_dir) / "perplexity.md").string()) << md;
    if (o.verbose) std::fputs(md.c_str(), stderr);
  }
  return rep;
}

nlohmann::json common_meta(const TextRunOptions& o, uint64_t fingerprint) {
  std::string domains;
  for (const std::string& d : o.domains) domains += (domains.empty() ? "" : ",") + d;
  return {{"batch", o.batch},    {"seq_len", o.seq_len},
          {"seed", o.seed},      {"steps", o.sched.steps},
          {"lr", o.sched.lr},    {"warmup", o.sched.warmup},
          {"domains", domains},  {"tokenizer_fingerprint", fingerprint},
          {"threads", o.threads}};
}

// Distillation from o.teacher, when set: the teacher, frozen, whose logits on each batch
// (computed without a tape) the loss mixes with cross entropy; its facts go in meta. Empty
// (cross entropy) without a teacher.
struct Distillation {
  std::unique_ptr<LlamaModel> teacher;
  LossFn loss;
};
Distillation distillation(const TextRunOptions& o, const Vocab& vocab, const std::string& student,
                          nlohmann::json& meta) {
  Distillation d;
  if (o.teacher.empty()) return d;
  if (!(o.kd_weight >= 0.0f && o.kd_weight <= 1.0f))
    fail("--kd-weight ", o.kd_weight, " is outside [0, 1]");
  const auto tf = GgufFile::open(o.teacher);
  const Tokenizer teacher_tok = Tokenizer::from_gguf(*tf);
  if (data::vocab_fingerprint(teacher_tok.vocab()) != data::vocab_fingerprint(vocab))
    fail(o.teacher, ": the teacher's tokenizer differs from ", student,
         "'s; distillation needs the same vocabulary");
  d.teacher = std::make_unique<LlamaModel>(LlamaModel::from_gguf(*tf));
  d.teacher->set_trainable(false);
  meta.update({{"teacher", fs::path(o.teacher).filename().string()},
               {"teacher_params", d.teacher->config().n_params()},
               {"teacher_bytes", static_cast<int64_t>(fs::file_size(o.teacher))},
               {"kd_weight", o.kd_weight}});
  const float w = o.kd_weight;
  const int64_t n_seq = o.batch, seq_len = o.seq_len;
  d.loss = [t = d.teacher.get(), w, n_seq, seq_len](Graph& g, const TensorP& logits,
                                                    const std::vector<int32_t>& tokens,
                                                    const std::vector<int32_t>& targets) {
    Graph tg(g.pool());
    tg.grad_enabled = false;
    return op::distill_cross_entropy(g, logits, t->forward(tg, tokens, n_seq, seq_len), targets, w);
  };
  return d;
}

}  // namespace

TrainReport train_base(const BaseTrainOptions& o) {
  const std::string tok_path =
      o.tokenizer.empty() ? (fs::path(o.data_dir) / "tokenizer.model").string() : o.tokenizer;
  const Vocab vocab = data::vocab_from_sentencepiece(tok_path);
  const auto V = static_cast<int64_t>(vocab.tokens.size());
  LlamaModel model = LlamaModel::init(
      llama_shape(V, o.n_embd, o.n_layer, o.n_head, o.n_head_kv, o.n_ff, o.seq_len), o.seed);
  nlohmann::json meta = common_meta(o, data::vocab_fingerprint(vocab));
  meta.update({{"n_vocab", V},
               {"n_embd", o.n_embd},
               {"n_layer", o.n_layer},
               {"n_head", o.n_head},
               {"n_head_kv", o.n_head_kv},
               {"n_ff", o.n_ff}});
  // A checkpoint of a run without a teacher has neither key: older runs resume as they were.
  Distillation kd = distillation(o, vocab, tok_path, meta);
  const std::string how =
      o.teacher.empty() ? "" : ", distilled from " + fs::path(o.teacher).filename().string();
  return run_text(
      model, {model.params(), &model, {}}, vocab, tok_path, o, meta,
      {"batch", "seq_len", "seed", "tokenizer_fingerprint", "domains", "teacher", "kd_weight"},
      "train",
      {{"general.description", "clone base model trained from scratch on Debian text corpora" +
                                   how + " (clone train base)"}},
      std::move(kd.loss));
}

TrainReport train_finetune(const FinetuneOptions& o) {
  if (o.model.empty()) fail("finetune: no model to fine-tune");
  const auto f = GgufFile::open(o.model);
  const Tokenizer tok = Tokenizer::from_gguf(*f);
  LlamaModel model = LlamaModel::from_gguf(*f);
  if (tok.n_vocab() != model.config().n_vocab)
    fail(o.model, ": the tokenizer has ", tok.n_vocab(), " tokens, the model ",
         model.config().n_vocab);
  nlohmann::json meta = common_meta(o, data::vocab_fingerprint(tok.vocab()));
  meta.update({{"model", fs::path(o.model).filename().string()},
               {"model_params", model.config().n_params()},
               {"model_bytes", static_cast<int64_t>(fs::file_size(o.model))}});
  // Every weight, or a LoRA adapter on every matrix of the frozen model, folded into a
  // copy for validation and the file (the keys only when set: older checkpoints resume).
  Trained trained{model.params(), &model, {}};
  std::unique_ptr<LlamaModel> folded;
  if (o.lora_rank > 0) {
    model.set_trainable(false);
    const Adapter& a = model.add_lora("recovery", o.lora_rank, o.lora_alpha,
                                      {kAllLayerMatrices.begin(), kAllLayerMatrices.end()}, o.seed);
    folded = std::make_unique<LlamaModel>(LlamaModel::init(model.config(), o.seed));
    trained = {a.params(), folded.get(), [&model, &folded] { model.fold_adapters_into(*folded); }};
    meta.update({{"lora_rank", o.lora_rank}, {"lora_alpha", o.lora_alpha}});
  } else if (o.lora_rank < 0) {
    fail("finetune: LoRA rank ", o.lora_rank, " is negative (0: every weight)");
  }
  const std::string from = fs::path(o.model).filename().string();
  const std::string how = o.lora_rank > 0
                              ? "a rank-" + std::to_string(o.lora_rank) + " LoRA adapter, merged"
                              : "every weight";
  std::vector<std::pair<std::string, std::string>> extra = {
      {"general.description",
       (o.teacher.empty()
            ? "fine-tuned from " + from
            : "distilled from " + fs::path(o.teacher).filename().string() + " into " + from) +
           " (clone train finetune: " + how + ", on the training splits)"}};
  // The source's own provenance (how it was pruned, trained) is kept beside the new run's.
  for (const auto& [k, v] : f->metadata())
    if (k.starts_with("clone.") && v.type == GgufType::STRING)
      extra.emplace_back(k == "clone.training.run" ? "clone.source.training.run" : k, v.s);
  Distillation kd = distillation(o, tok.vocab(), o.model, meta);
  return run_text(model, trained, tok.vocab(), o.model, o, meta, {}, "finetune", std::move(extra),
                  std::move(kd.loss));
}

}  // namespace cln::train
