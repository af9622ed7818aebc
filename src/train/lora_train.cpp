// LoRA experts on a frozen base of any shape, trained on one domain's text or on one
// generated task (loss on the answers only), written in llama.cpp's adapter layout.
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "clone/core/error.h"
#include "clone/data/corpus.h"
#include "clone/data/token_file.h"
#include "clone/data/tokenizer_train.h"
#include "clone/train/batches.h"
#include "clone/train/trainer.h"

namespace cln::train {
namespace fs = std::filesystem;

TrainReport train_lora(const LoraTrainOptions& o) {
  if (o.domain.empty() == o.task.empty()) fail("lora: give exactly one of a domain or a task");
  if (o.out.empty()) fail("lora: no output path");
  auto f = GgufFile::open(o.base);
  const Tokenizer tok = Tokenizer::from_gguf(*f);
  LlamaModel model = LlamaModel::from_gguf(*f);
  if (tok.n_vocab() != model.config().n_vocab)
    fail(o.base, ": the tokenizer has ", tok.n_vocab(), " tokens, the model ",
         model.config().n_vocab);
  model.set_trainable(false);
  const Adapter& adapter =
      model.add_lora(o.domain.empty() ? o.task : o.domain, o.rank, o.alpha, o.targets, o.seed);
  AdamW opt(adapter.params(), o.adam);
  kernels::ThreadPool pool(o.threads);

  WindowSampler windows;
  TaskItems items;
  if (!o.domain.empty()) {
    const std::string path = data::token_file_path(o.data_dir, o.domain, "train");
    data::TokenFile t = data::read_token_file(path, tok.vocab(), o.base);
    if (t.n_docs == 0) fail(path, ": no documents");
    windows.add(o.domain, std::move(t.tokens), 1.0);
  } else {
    const std::string path = (fs::path(o.data_dir) / "tasks" / o.task / "train.jsonl").string();
    items = encode_task_items(data::read_jsonl_tasks(path), tok);
    if (items.items.empty()) fail(path, ": no task items");
  }

  const std::string dir =
      o.out_dir.empty() ? fs::path(o.out).replace_extension("").string() + ".train" : o.out_dir;
  std::string targets;
  for (LayerMatrix t : o.targets)
    targets += (targets.empty() ? "" : ",") + std::string(short_name(t));
  const nlohmann::json meta = {{"base_params", model.config().n_params()},
                               {"tokenizer_fingerprint", data::vocab_fingerprint(tok.vocab())},
                               {"domain", o.domain},
                               {"task", o.task},
                               {"rank", o.rank},
                               {"alpha", o.alpha},
                               {"targets", targets},
                               {"batch", o.batch},
                               {"seq_len", o.seq_len},
                               {"seed", o.seed},
                               {"steps", o.sched.steps},
                               {"lr", o.sched.lr},
                               {"warmup", o.sched.warmup},
                               {"threads", o.threads}};
  LoopCallbacks cb;
  cb.batch = [&](int64_t step, std::vector<int32_t>* tokens, std::vector<int32_t>* tgt) {
    if (!o.domain.empty())
      windows.batch(o.seed, step, o.batch, o.seq_len, tokens, tgt);
    else
      task_batch(items.items, items.prompt_len, o.seed, step, o.batch, o.seq_len, tok.eos(), tokens,
                 tgt);
  };
  const LoopOptions lo = o.loop(dir, "lora", meta.dump());
  const TrainReport rep = run_loop(model, opt, pool, lo, cb);
  if (!rep.done) return rep;  // stopped early: the checkpoint holds the state
  model.write_lora_gguf(o.out, adapter);
  if (o.verbose) std::fprintf(stderr, "lora: wrote %s\n", o.out.c_str());
  return rep;
}

}  // namespace cln::train
