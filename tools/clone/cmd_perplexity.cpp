// clone perplexity: chunked perplexity of a model over a text file (or token-id list).
#include <cstdio>
#include <memory>

#include "clone/core/error.h"
#include "clone/eval/nll.h"
#include "clone/tokenizer/tokenizer.h"
#include "common.h"
#include "subcommand.h"

namespace cmd_perplexity {

struct Opts {
  std::string model, file, ids_file;
  int64_t n_ctx = 512, stride = 0, score_from = -1;
  int threads = 0;
  std::vector<std::string> loras;
};

int run(const Opts& o) {
  using namespace cln;
  if (o.file.empty() == o.ids_file.empty()) fail("give exactly one of --file and --ids");
  auto model = Model::load(o.model);
  std::vector<int32_t> ids;
  if (!o.file.empty()) {
    const Tokenizer tok = Tokenizer::from_gguf(model->gguf());
    ids = tok.encode(cli::read_text_file(o.file), true);
  } else {
    ids = cli::read_ids_file(o.ids_file);
  }
  const int32_t bos =
      model->gguf().has("tokenizer.ggml.bos_token_id")
          ? static_cast<int32_t>(model->gguf().get_int("tokenizer.ggml.bos_token_id"))
          : 1;
  const eval::Windows w =
      eval::llama_windows(static_cast<int64_t>(ids.size()), o.n_ctx, o.stride, o.score_from, bos);
  Context ctx(model, {o.n_ctx, o.threads, o.n_ctx});
  ctx.set_loras(cli::load_loras(o.loras, *model));
  const auto r = eval::windowed_nll(ctx, ids, w, [](int64_t k, int64_t n, double ppl) {
    std::fprintf(stderr, "\r[%lld/%lld] ppl %.4f", static_cast<long long>(k),
                 static_cast<long long>(n), ppl);
  });
  std::fprintf(stderr, "\n");
  std::printf("ppl %.4f  mean_nll %.6f  scored %lld tokens in %lld windows of %lld  %.1f tok/s\n",
              r.ppl(), r.mean_nll, static_cast<long long>(r.scored),
              static_cast<long long>(r.windows), static_cast<long long>(o.n_ctx), r.tokens_per_s);
  return 0;
}

const cln::cli::Register reg{
    "perplexity", "Perplexity over a text, chunked as llama-perplexity does", [](CLI::App& app) {
      auto o = std::make_shared<Opts>();
      app.add_option("-m,--model", o->model, "model GGUF file")
          ->required()
          ->check(CLI::ExistingFile);
      app.add_option("-f,--file", o->file, "text file to score")->check(CLI::ExistingFile);
      app.add_option("--ids", o->ids_file, "token ids to score instead of text ([1, 2, ...])")
          ->check(CLI::ExistingFile);
      app.add_option("-c,--ctx", o->n_ctx, "window length in tokens")
          ->capture_default_str()
          ->check(CLI::Range(2, 1 << 20));
      app.add_option("--stride", o->stride, "tokens between window starts (0 = ctx)")
          ->capture_default_str()
          ->check(CLI::NonNegativeNumber);
      app.add_option("--score-from", o->score_from,
                     "first scored position in a window (-1 = ctx/2)")
          ->capture_default_str();
      app.add_option("-t,--threads", o->threads, "threads (0 = all cores)")
          ->capture_default_str()
          ->check(CLI::Range(0, 1024));
      app.add_option("--lora", o->loras, "LoRA adapter, path or path:weight (repeatable)");
      return [o] { return run(*o); };
    }};

}  // namespace cmd_perplexity
