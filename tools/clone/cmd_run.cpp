// clone run: prompt in, streamed text out.
#include <cstdio>
#include <memory>

#include "clone/core/error.h"
#include "clone/engine/context.h"
#include "clone/engine/sampler.h"
#include "clone/tokenizer/tokenizer.h"
#include "common.h"
#include "subcommand.h"

namespace {

struct Opts {
  std::string model;
  std::string prompt;
  std::string prompt_file;
  int n_predict = 128;
  int64_t n_ctx = 0;
  int threads = 0;
  cln::SamplerParams sp;
  std::vector<std::string> loras;
  bool stats = true;
  bool ignore_eos = false;
};

int run(const Opts& o) {
  using namespace cln;
  auto model = Model::load(o.model);
  const Tokenizer tok = Tokenizer::from_gguf(model->gguf());
  std::string prompt = o.prompt;
  if (!o.prompt_file.empty()) prompt = cli::read_text_file(o.prompt_file);
  std::vector<int32_t> ids = tok.encode(prompt, true);
  Context ctx(model, {o.n_ctx, o.threads, 512});
  if (static_cast<int64_t>(ids.size()) >= ctx.n_ctx())
    fail("the prompt is ", ids.size(), " tokens; the context holds ", ctx.n_ctx(),
         " (raise --ctx or shorten the prompt)");
  ctx.set_loras(cli::load_loras(o.loras, *model));
  Sampler sampler(o.sp);

  std::fputs(prompt.c_str(), stdout);
  std::fflush(stdout);
  const double t0 = cli::now_s();
  auto logits = ctx.eval(ids);
  const double t_first = cli::now_s();
  int generated = 0;
  std::string stop = "limit";
  while (generated < o.n_predict) {
    const int32_t next = sampler.sample(logits);
    if (next == tok.eos() && !o.ignore_eos) {
      stop = "eos";
      break;
    }
    const std::string piece = tok.token_to_piece(next);
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    ++generated;
    if (ctx.n_past() >= ctx.n_ctx()) {
      stop = "context full";
      break;
    }
    if (generated < o.n_predict) {
      const int32_t one[1] = {next};
      logits = ctx.eval(one);
    }
  }
  const double t_end = cli::now_s();
  std::fputc('\n', stdout);
  if (o.stats) {
    const double decode_s = t_end - t_first;
    std::fprintf(stderr,
                 "\n[clone] prompt %zu tokens in %.1f ms (%.1f tok/s, TTFT) | generated %d tokens "
                 "in %.1f ms (%.1f tok/s, TPOT %.2f ms) | stop: %s\n",
                 ids.size(), (t_first - t0) * 1e3, static_cast<double>(ids.size()) / (t_first - t0), generated,
                 decode_s * 1e3, generated > 1 ? (generated - 1) / decode_s : 0.0,
                 generated > 1 ? decode_s * 1e3 / (generated - 1) : 0.0, stop.c_str());
  }
  return 0;
}

const cln::cli::Register reg{"run", "Generate text from a prompt, streamed token by token",
                               [](CLI::App& app) {
  auto o = std::make_shared<Opts>();
  app.add_option("-m,--model", o->model, "model GGUF file")->required()->check(CLI::ExistingFile);
  app.add_option("-p,--prompt", o->prompt, "prompt text");
  app.add_option("-f,--file", o->prompt_file, "read the prompt from a file")->check(CLI::ExistingFile);
  app.add_option("-n,--n-predict", o->n_predict, "tokens to generate at most")->capture_default_str()->check(CLI::Range(0, 1 << 20));
  app.add_option("-c,--ctx", o->n_ctx, "context length (0 = model's, at most 4096)")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("-t,--threads", o->threads, "threads (0 = all cores)")->capture_default_str()->check(CLI::Range(0, 1024));
  app.add_option("--temp", o->sp.temperature, "sampling temperature (0 = greedy)")->capture_default_str()->check(CLI::Range(0.0, 100.0));
  app.add_option("--top-k", o->sp.top_k, "keep the k most likely tokens (0 = all)")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--top-p", o->sp.top_p, "nucleus: keep the smallest set with this mass")->capture_default_str()->check(CLI::Range(0.0, 1.0));
  app.add_option("-s,--seed", o->sp.seed, "sampling seed")->capture_default_str();
  app.add_option("--lora", o->loras, "LoRA adapter GGUF, as path or path:weight (repeatable)");
  app.add_flag("--ignore-eos", o->ignore_eos, "keep generating past the end-of-sequence token");
  app.add_flag("!--no-stats", o->stats, "do not print timing to stderr");
  return [o] { return run(*o); };
}};

}  // namespace
