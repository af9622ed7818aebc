// clone lora train: LoRA experts on a frozen base (domain text or a generated task).
// clone lora eval: the expert bank's perplexity and task tables, through the engine.
// clone lora merge: folds adapters, with weights, into the base weights (one static model).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "clone/core/error.h"
#include "clone/engine/lora.h"
#include "clone/engine/schema.h"
#include "clone/eval/expert_eval.h"
#include "clone/serve/embed.h"
#include "clone/serve/router.h"
#include "clone/tokenizer/tokenizer.h"
#include "clone/train/trainer.h"
#include "common.h"
#include "subcommand.h"

namespace cmd_lora {

struct TrainOpts {
  cln::train::LoraTrainOptions t;
  std::string targets = "q,k,v,o,gate,up,down";
  std::string embedder = "hidden:4";  // the router key written into the adapter
  int64_t key_prompts = 256;
};

// Writes the router key (serve/router.h) of each adapter, trained on the domain or task its
// general.name names, into the adapter file.
// tfidf: also each adapter's TF-IDF key, with the idf fitted on every given adapter's
// training prompts (one bank); unigram: also each adapter's unigram log-probabilities over
// its training text. An adapter that has a key by `embedder` already keeps it byte for byte
// (the router was judged with it) and gets only the halves asked for.
void add_keys(const std::string& base, const std::string& data, const std::string& embedder,
              int64_t prompts, int threads, const std::vector<std::string>& adapters,
              bool tfidf = false, bool unigram = false) {
  using namespace cln;
  const auto model = Model::load(base);
  const Tokenizer tok = Tokenizer::from_gguf(model->gguf());
  const auto e = serve::make_hidden_embedder(embedder, model, threads);
  std::vector<std::string> sources;
  for (const std::string& path : adapters) {
    (void)LoraAdapter::load(path, *model);  // it must fit this base
    sources.push_back(GgufFile::open(path)->get_string("general.name"));
  }
  const std::vector<serve::ExpertKey> bank =
      tfidf ? serve::make_tfidf_keys(data, sources, tok, base, prompts)
            : std::vector<serve::ExpertKey>();
  const std::vector<serve::ExpertKey> unigrams =
      unigram ? serve::make_unigram_keys(data, sources, tok, base)
              : std::vector<serve::ExpertKey>();
  for (size_t i = 0; i < adapters.size(); ++i) {
    const auto had = serve::read_key(*GgufFile::open(adapters[i]));
    serve::ExpertKey key = (tfidf || unigram) && had && had->embedder == e->name()
                               ? *had
                               : serve::make_key(*e, data, sources[i], tok, base, prompts);
    if (tfidf) key.tfidf_idf = bank[i].tfidf_idf, key.tfidf_key = bank[i].tfidf_key;
    if (unigram) key.unigram_logp = unigrams[i].unigram_logp;
    serve::write_key(adapters[i], key);
    std::printf("%s: router key (%s%s%s, mean of %lld %s prompts) written\n", adapters[i].c_str(),
                key.embedder.c_str(), tfidf ? " and tfidf" : "", unigram ? " and unigram" : "",
                static_cast<long long>(key.prompts), sources[i].c_str());
  }
}

int train(TrainOpts& o) {
  using namespace cln;
  o.t.targets.clear();
  std::stringstream ss(o.targets);
  std::string m;
  while (std::getline(ss, m, ','))
    if (!m.empty()) o.t.targets.push_back(layer_matrix_from_name(m));
  if (o.t.targets.empty()) fail("--targets names no module");
  if (train::train_lora(o.t).done && !o.embedder.empty())
    add_keys(o.t.base, o.t.data_dir, o.embedder, o.key_prompts, o.t.threads, {o.t.out}, false,
             true);
  return 0;
}

struct KeyOpts {
  std::string base, data = "out/data", embedder = "hidden:4";
  int64_t prompts = 256;
  int threads = 2;
  bool tfidf = false, unigram = false;
  std::vector<std::string> adapters;
};

struct EvalOpts {
  cln::eval::ExpertEvalOptions e;
  std::vector<std::string> experts;
  std::string out;
};

int eval(EvalOpts& o) {
  using namespace cln;
  for (const auto& [name, path] : cli::expert_specs(o.experts)) o.e.experts.push_back({name, path});
  const eval::ExpertEval r = eval::evaluate_experts(o.e);
  const Table ppl = eval::perplexity_table(r);
  const Table tasks = eval::task_table(r);
  std::string md = "Test perplexity per domain (" + std::to_string(o.e.seq_len) +
                   "-token windows, up to " + std::to_string(o.e.max_tokens) +
                   " predicted tokens per domain):\n\n" + ppl.markdown() +
                   "\nExact match on generated tasks (greedy, " + std::to_string(o.e.task_items) +
                   " test items each, at most " + std::to_string(o.e.max_new) +
                   " new tokens):\n\n" + tasks.markdown();
  std::fputs(md.c_str(), stdout);
  if (!o.out.empty()) {
    std::filesystem::create_directories(o.out);
    const std::filesystem::path d(o.out);
    std::ofstream((d / "experts.md").string()) << md;
    ppl.write((d / "perplexity.csv").string());
    tasks.write((d / "tasks.csv").string());
    std::printf("wrote %s/{experts.md,perplexity.csv,tasks.csv}\n", o.out.c_str());
  }
  return 0;
}

struct MergeOpts {
  std::string model, out;
  std::vector<std::string> loras;
};

int merge(const MergeOpts& o) {
  using namespace cln;
  auto model = Model::load(o.model);
  const auto loras = cli::load_loras(o.loras, *model);
  merge_lora(*model, loras, o.out);
  std::printf("wrote %s: %s with %zu adapter(s) folded into its weights\n", o.out.c_str(),
              o.model.c_str(), loras.size());
  return 0;
}

const cln::cli::Register reg{
    "lora", "Train LoRA experts (and merge adapters into a model)", [](CLI::App& app) {
      app.require_subcommand(1);
      auto o = std::make_shared<TrainOpts>();
      CLI::App* t = app.add_subcommand(
          "train",
          "Train rank-r adapters on a frozen base; writes a llama.cpp-layout adapter GGUF");
      t->add_option("--base", o->t.base, "base model GGUF")->required()->check(CLI::ExistingFile);
      t->add_option("--data", o->t.data_dir, "folder written by `clone data build`")
          ->capture_default_str();
      t->add_option("--domain", o->t.domain,
                    "domain to adapt to (dictionary, computing, scripture, "
                    "quotes, wordnet, code)");
      t->add_option("--task", o->t.task,
                    "generated task (addition, subtraction, number_words, digit_reverse); loss on "
                    "answers only");
      t->add_option("--out", o->t.out, "adapter GGUF to write")->required();
      t->add_option("--rank", o->t.rank, "LoRA rank r")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{1}, int64_t{4096}));
      t->add_option("--alpha", o->t.alpha, "LoRA alpha (scale alpha / r)")
          ->capture_default_str()
          ->check(CLI::Range(0.0f, 1e6f));
      t->add_option("--targets", o->targets, "modules: any of q,k,v,o,gate,up,down")
          ->capture_default_str();
      t->add_option("--batch", o->t.batch, "sequences per step")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{1}, int64_t{4096}));
      t->add_option("--seq-len", o->t.seq_len, "tokens per sequence")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{2}, int64_t{65536}));
      t->add_option("--steps", o->t.sched.steps, "optimizer steps")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{1}, int64_t{10000000}));
      t->add_option("--warmup", o->t.sched.warmup, "warm-up steps")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{0}, int64_t{10000000}));
      t->add_option("--lr", o->t.sched.lr, "peak learning rate")
          ->capture_default_str()
          ->check(CLI::Range(1e-8, 10.0));
      t->add_option("--seed", o->t.seed, "seed of the adapter init and the data order")
          ->capture_default_str();
      t->add_option("--threads", o->t.threads, "threads")
          ->capture_default_str()
          ->check(CLI::Range(1, 256));

      t->add_option("--router-embedder", o->embedder,
                    "embedding of the router key written into the adapter (hidden:<layers>; "
                    "empty: none)")
          ->capture_default_str();
      t->add_option("--router-prompts", o->key_prompts, "training prompts the key averages")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{1}, int64_t{100000}));

      auto ko = std::make_shared<KeyOpts>();
      CLI::App* keys = app.add_subcommand(
          "keys", "Write router keys (mean embedding of training prompts) into existing adapters");
      keys->add_option("--base", ko->base, "base model GGUF")->required()->check(CLI::ExistingFile);
      keys->add_option("--data", ko->data, "folder written by `clone data build`")
          ->capture_default_str();
      keys->add_option("--embedder", ko->embedder, "hidden:<layers>")->capture_default_str();
      keys->add_option("--prompts", ko->prompts, "training prompts per key")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{1}, int64_t{100000}));
      keys->add_option("--threads", ko->threads, "threads")->capture_default_str();
      keys->add_flag("--tfidf", ko->tfidf,
                     "also a TF-IDF key per adapter, the idf fitted on all the given adapters' "
                     "training prompts (one bank: `clone serve --prompt-part-router "
                     "tfidf-checked` reads it)");
      keys->add_flag("--unigram", ko->unigram,
                     "also each adapter's unigram log-probabilities over its training text "
                     "(`clone serve --prompt-part-router unigram` reads them)");
      keys->add_option("adapters", ko->adapters,
                       "adapter GGUF files (named by their domain or task)")
          ->required()
          ->check(CLI::ExistingFile);

      auto eo = std::make_shared<EvalOpts>();
      CLI::App* ev = app.add_subcommand(
          "eval",
          "Per-domain test perplexity of the base and each expert, and task exact match "
          "(base, right expert, wrong expert), through the engine");
      ev->add_option("--base", eo->e.base, "base model GGUF")->required()->check(CLI::ExistingFile);
      ev->add_option("--data", eo->e.data_dir, "folder written by `clone data build`")
          ->capture_default_str();
      ev->add_option("--expert", eo->experts,
                     "adapter GGUF, path (named by its file stem) or name=path (repeatable)");
      ev->add_option("--seq-len", eo->e.seq_len, "perplexity window")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{2}, int64_t{65536}));
      ev->add_option("--tokens", eo->e.max_tokens, "predicted tokens per domain, at most")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
      ev->add_option("--task-items", eo->e.task_items, "test items per task")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
      ev->add_option("--max-new", eo->e.max_new, "new tokens per task answer, at most")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{1}, int64_t{200}));
      ev->add_option("--threads", eo->e.threads, "threads")
          ->capture_default_str()
          ->check(CLI::Range(1, 256));
      ev->add_option("--tasks", eo->e.tasks, "tasks to score (default: all)")->delimiter(',');
      ev->add_flag("!--no-perplexity", eo->e.perplexity, "tasks only: no per-domain perplexity");
      ev->add_option("--out", eo->out, "folder for experts.md, perplexity.csv, tasks.csv");

      auto mo = std::make_shared<MergeOpts>();
      CLI::App* mg = app.add_subcommand(
          "merge", "Fold adapters, each with its weight, into the base weights: one static GGUF");
      mg->add_option("-m,--model", mo->model, "base model GGUF")
          ->required()
          ->check(CLI::ExistingFile);
      mg->add_option("--lora", mo->loras, "adapter GGUF, path or path:weight (repeatable)")
          ->required();
      mg->add_option("-o,--out", mo->out, "output GGUF (adapted matrices become f32)")->required();

      return [o, t, eo, ev, mg, mo, ko, keys] {
        if (t->parsed()) return train(*o);
        if (keys->parsed()) {
          add_keys(ko->base, ko->data, ko->embedder, ko->prompts, ko->threads, ko->adapters,
                   ko->tfidf, ko->unigram);
          return 0;
        }
        if (ev->parsed()) return eval(*eo);
        if (mg->parsed()) return merge(*mo);
        return 1;
      };
    }};

}  // namespace cmd_lora
