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

namespace cmd_loadgen {

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

// With --routed: texts that change domain part-way (scripture to quotes, code to computing,
// a dictionary entry to scripture, ...), 50-110 tokens, so the router gives their 32-token
// parts different mixtures (the server's default prompt parts).
const std::vector<std::string> kRoutedPrompts = {
    "And the LORD spake unto Moses, saying, Speak unto the children of Israel, and say unto "
    "them, When any man of you bring an offering unto the LORD. Imagination is more important "
    "than knowledge. Knowledge is limited, imagination encircles the world.",
    "#include <stdio.h>\nint main(int argc, char **argv) {\n  for (int i = 0; i < argc; ++i)\n"
    "    printf(\"%s\\n\", argv[i]);\n  return 0;\n}\nA compiler translates a program written "
    "in a high-level language into the machine code of a processor.",
    "Abandon (v. t.) To give up wholly; to relinquish control over. In the beginning God "
    "created the heaven and the earth. And the earth was without form, and void.",
    "A network protocol defines the format and order of messages exchanged between two or more "
    "communicating entities. Be yourself; everyone else is already taken. Love all, trust a "
    "few, do wrong to none.",
    "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return "
    "a\nThe only way to do great work is to love what you do. If you haven't found it yet, "
    "keep looking.",
    "light (n.) something that makes things visible or affords illumination. For God so loved "
    "the world, that he gave his only begotten Son, that whosoever believeth in him should not "
    "perish."};

void report(const cln::serve::LoadResult& r) {
  std::fprintf(stderr, "[loadgen] %s: %lld requests, %lld errors, %.1f tokens/s\n", r.label.c_str(),
               static_cast<long long>(r.requests), static_cast<long long>(r.errors),
               r.tokens_per_s);
  for (const auto& e : r.error_samples) std::fprintf(stderr, "[loadgen]   error: %s\n", e.c_str());
}

int run(Opts& o) {
  using namespace cln;
  o.l.prompts = o.l.routed ? kRoutedPrompts : kPrompts;
  if (o.l.routed && o.experts.empty()) fail("--routed needs experts with router keys (--expert)");
  std::vector<serve::LoadResult> rows;
  if (o.model.empty()) {  // an external server
    for (const auto& [name, path] : cli::expert_specs(o.experts)) o.l.experts.push_back(name);
    rows.push_back(serve::run_load(o.l, false));
    rows.back().label = o.l.host + ":" + std::to_string(o.l.port);
    report(rows.back());
  } else {
    auto model = Model::load(o.model);
    auto [experts, keys] = cli::load_experts(o.experts, *model, o.l.routed);
    for (const auto& [name, adapter] : experts) o.l.experts.push_back(name);
    for (int slots : o.slots) {
      serve::SchedulerOptions so;
      so.slots = slots;
      so.n_ctx = o.n_ctx;
      so.max_rows = 256;
      so.max_queue = static_cast<size_t>(o.l.clients) + 16;
      so.threads = o.threads;
      if (o.l.routed) {  // as `clone serve` routes by default
        so.prompt_part = serve::default_prompt_part;
        so.prompt_part_router = serve::PartRouter::Unigram;
      }
      serve::Scheduler sched(model, experts, o.l.routed ? keys : decltype(keys){}, so);
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
      app.add_option("--requests-per-client", o->l.requests_per_client,
                     "a client stops after this many requests, warm-up's included (0: no limit)")
          ->capture_default_str()
          ->check(CLI::NonNegativeNumber);
      app.add_option("--min-tokens", o->l.min_tokens, "tokens per request, at least")
          ->capture_default_str();
      app.add_option("--max-tokens", o->l.max_tokens, "tokens per request, at most")
          ->capture_default_str();
      app.add_option("--seed", o->l.seed, "seed of the request mix")->capture_default_str();
      app.add_flag("--routed", o->l.routed,
                   "every request asks the router (\"auto\") with prompts that change domain, "
                   "routed in parts by the experts' unigram keys as `clone serve` does");
      app.add_option("--out", o->out, "also write the table (.md, .csv or .json)");
      return [o] { return run(*o); };
    }};

}  // namespace cmd_loadgen
