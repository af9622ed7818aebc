// clone loadgen: the serving load benchmark. Starts `clone serve`'s server in this process
// once per --slots value (e.g. 64 for the continuous batch, 1 for one request at a time)
// and drives it on loopback with concurrent streaming clients (serve/load.h); or, with
// --port and no --model, drives a server that is already running.
#include <cstdio>
#include <memory>
#include <thread>

#include "clone/core/error.h"
#include "clone/engine/lora.h"
#include "clone/engine/model.h"
#include "clone/gguf/gguf.h"
#include "clone/serve/load.h"
#include "clone/serve/router.h"
#include "clone/serve/server.h"
#include "common.h"
#include "subcommand.h"

namespace {

struct Opts {
  std::string model, out;
  std::vector<std::string> experts;
  std::vector<int> slots = {64, 1};
  int64_t n_ctx = 512;
  int threads = 0;
  cln::serve::LoadOptions l;
};

const std::vector<std::string> kPrompts = {"In the beginning",
                                           "The meaning of life is",
                                           "#include <stdio.h>\nint main(",
                                           "A fool and his money",
                                           "The computer",
                                           "Love is",
                                           "def main():\n    ",
                                           "And it came to pass",
                                           "Once upon a time",
                                           "What is the sum of 17 and 25?",
                                           "The network protocol",
                                           "He who laughs last"};

void report(const cln::serve::LoadResult& r) {
  std::fprintf(stderr, "[loadgen] %s: %lld requests, %lld errors, %.1f tokens/s\n", r.label.c_str(),
               static_cast<long long>(r.requests), static_cast<long long>(r.errors),
               r.tokens_per_s);
  for (const auto& e : r.error_samples) std::fprintf(stderr, "[loadgen]   error: %s\n", e.c_str());
}

int run(Opts& o) {
  using namespace cln;
  o.l.prompts = kPrompts;
  std::vector<serve::LoadResult> rows;
  if (o.model.empty()) {  // an external server
    for (const auto& [name, path] : cli::expert_specs(o.experts)) o.l.experts.push_back(name);
    rows.push_back(serve::run_load(o.l, false));
    rows.back().label = o.l.host + ":" + std::to_string(o.l.port);
    report(rows.back());
  } else {
    auto model = Model::load(o.model);
    std::vector<std::pair<std::string, std::shared_ptr<const LoraAdapter>>> experts;
    for (const auto& [name, path] : cli::expert_specs(o.experts)) {
      experts.emplace_back(name, LoraAdapter::load(path, *model));
      o.l.experts.push_back(name);
    }
    for (int slots : o.slots) {
      serve::SchedulerOptions so;
      so.slots = slots;
      so.n_ctx = o.n_ctx;
      so.max_rows = 256;
      so.max_queue = static_cast<size_t>(o.l.clients) + 16;
      so.threads = o.threads;
      serve::Scheduler sched(model, experts, {}, so);
      serve::ServerOptions ho;
      ho.port = 0;
      ho.http_threads = o.l.clients + 4;
      serve::Server server(sched, ho);
      o.l.port = server.bind();
      std::thread th([&] { server.run(); });
      std::fprintf(stderr, "[loadgen] %d slots: %d clients for %.0f s after %.0f s of warm-up\n",
                   slots, o.l.clients, o.l.seconds, o.l.warmup_s);
      serve::LoadResult r = serve::run_load(o.l, true);
      r.label = std::to_string(slots) + (slots == 1 ? " slot" : " slots");
      server.stop();
      th.join();
      report(r);
      rows.push_back(r);
    }
  }
  const Table t = serve::load_table(rows);
  std::printf("%s", t.markdown().c_str());
  if (!o.out.empty()) t.write(o.out);
  int64_t errors = 0;
  for (const auto& r : rows) errors += r.errors;
  return errors == 0 ? 0 : 1;
}

const cln::cli::Register reg{
    "loadgen", "Serving load benchmark: concurrent streaming clients on loopback",
    [](CLI::App& app) {
      auto o = std::make_shared<Opts>();
      app.add_option("-m,--model", o->model, "model GGUF: serve it in this process")
          ->check(CLI::ExistingFile);
      app.add_option("--expert", o->experts, "LoRA experts, path or name=path (repeatable)");
      app.add_option("--slots", o->slots, "batch sizes to compare (with --model), e.g. 64,1")
          ->delimiter(',')
          ->capture_default_str();
      app.add_option("-c,--ctx", o->n_ctx, "context per request")->capture_default_str();
      app.add_option("-t,--threads", o->threads, "compute threads (0: all cores)")
          ->capture_default_str();
      app.add_option("--host", o->l.host, "server address (without --model)")
          ->capture_default_str();
      app.add_option("--port", o->l.port, "server port (without --model)")->capture_default_str();
      app.add_option("--clients", o->l.clients, "concurrent streaming clients")
          ->capture_default_str()
          ->check(CLI::Range(1, 1024));
      app.add_option("--seconds", o->l.seconds, "measured time per configuration")
          ->capture_default_str()
          ->check(CLI::PositiveNumber);
      app.add_option("--warmup", o->l.warmup_s, "seconds not counted at the start")
          ->capture_default_str();
      app.add_option("--min-tokens", o->l.min_tokens, "tokens per request, at least")
          ->capture_default_str();
      app.add_option("--max-tokens", o->l.max_tokens, "tokens per request, at most")
          ->capture_default_str();
      app.add_option("--seed", o->l.seed, "seed of the request mix")->capture_default_str();
      app.add_option("--out", o->out, "also write the table (.md, .csv or .json)");
      return [o] { return run(*o); };
    }};

}  // namespace
