// clone serve: the OpenAI-compatible server (serve/server.h) over a continuous batch with
// the soft mixture of LoRA experts per request. SIGINT/SIGTERM stop taking requests, finish
// those admitted or queued, then exit 0.
#include <pthread.h>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>

#include "clone/core/error.h"
#include "clone/device/cost_model.h"
#include "clone/dvfs/policy.h"
#include "clone/engine/lora.h"
#include "clone/engine/model.h"
#include "clone/gguf/gguf.h"
#include "clone/serve/router.h"
#include "clone/serve/server.h"
#include "common.h"
#include "subcommand.h"

namespace cmd_serve {

struct Opts {
  std::string model, mixing = "soft", part_router = "unigram";
  std::vector<std::string> experts;
  cln::serve::SchedulerOptions s;
  cln::serve::ServerOptions h;
  double setting_switch_ms = cln::dvfs::Settings{}.switch_s * 1e3;
  // Routed prompts are prefilled in parts of 32 tokens, each routed by the experts' unigram
  // keys: judged best of every way of mixing on the held-out sets (docs/serve.md); 0 routes
  // the whole prompt once, as the paper.
  Opts() { s.prompt_part = cln::serve::default_prompt_part; }
};

int serve(Opts& o) {
  using namespace cln;
  // The signals go to the waiting thread below only: block them before any thread starts.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  if (o.s.board.backend == "linux" && o.s.board.device.empty())
    fail(
        "--backend linux needs --device: the profile of this board, which the controllers "
        "plan with");
  auto model = Model::load(o.model);
  auto [experts, keys] = cli::load_experts(o.experts, *model, false);
  const bool with_key = !keys.empty();
  o.s.router.mixing = serve::mixing_from_name(o.mixing);
  o.s.prompt_part_router = serve::part_router_from_name(o.part_router);
  if (!with_key || o.s.prompt_part == 0)  // nothing is routed, or nothing in parts
    o.s.prompt_part_router = serve::PartRouter::Hidden;
  o.s.board.setting_switch_s = o.setting_switch_ms * 1e-3;
  serve::Scheduler sched(model, std::move(experts), std::move(keys), o.s);
  serve::Server server(sched, o.h);
  const int port = server.bind();
  std::string weights;  // the learned controller's, which depend on the model's shape
  if (!o.s.board.device.empty() && o.s.board.controller == "learned")
    weights = " (weights " +
              (o.s.board.policy_path.empty()
                   ? dvfs::default_learned_path(device::CostModel(
                         device::DeviceProfile::find(o.s.board.device), model->config()))
                   : o.s.board.policy_path) +
              ")";
  const std::string board =
      o.s.board.device.empty()
          ? std::string()
          : "; board " + o.s.board.device + " under " + o.s.board.controller + " DVFS" + weights +
                (o.s.board.backend == "linux" ? ", clocks set on this machine" : "");
  const std::string parts = with_key && o.s.prompt_part > 0 ? "; prompts routed in parts of " +
                                                                  std::to_string(o.s.prompt_part) +
                                                                  " tokens by " + o.part_router
                                                            : std::string();
  std::fprintf(stderr,
               "clone serve: %s with %zu experts%s%s, %d slots of %lld tokens%s; listening on "
               "http://%s:%d/\n",
               o.model.c_str(), o.experts.size(), with_key ? " (router keys)" : "", parts.c_str(),
               o.s.slots, static_cast<long long>(o.s.n_ctx), board.c_str(), o.h.host.c_str(), port);
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&sigs, &sig);
    std::fprintf(stderr, "clone serve: %s: finishing %d active and %zu queued requests\n",
                 sig == SIGTERM ? "SIGTERM" : "SIGINT", sched.active(), sched.queued());
    server.stop();
  });
  server.run();
  // run() also returns if the listener fails; wake the waiter so it can be joined.
  pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
  std::fprintf(stderr, "clone serve: stopped\n");
  return 0;
}

const cln::cli::Register reg{
    "serve", "OpenAI-compatible HTTP server with a soft mixture of LoRA experts per request",
    [](CLI::App& app) {
      auto o = std::make_shared<Opts>();
      app.add_option("-m,--model", o->model, "model GGUF")->required()->check(CLI::ExistingFile);
      app.add_option("--expert", o->experts,
                     "LoRA expert, path (named by its stem) or name=path (repeatable); with "
                     "router keys (`clone lora keys`) requests may ask for \"auto\" routing");
      app.add_option("--host", o->h.host, "address to listen on")->capture_default_str();
      app.add_option("--port", o->h.port, "port (0: any free port, printed)")
          ->capture_default_str()
          ->check(CLI::Range(0, 65535));
      app.add_option("--slots", o->s.slots, "requests decoded together")
          ->capture_default_str()
          ->check(CLI::Range(1, 256));
      app.add_option("-c,--ctx", o->s.n_ctx, "context per request (prompt and output)")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{8}, int64_t{1} << 20));
      app.add_option("--max-rows", o->s.max_rows, "tokens per forward pass at most")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
      app.add_option("--queue", o->s.max_queue, "waiting requests beyond the slots (then 503)")
          ->capture_default_str();
      app.add_option("-t,--threads", o->s.threads, "compute threads (0: all cores)")
          ->capture_default_str();
      app.add_option("--http-threads", o->h.http_threads, "connections served at once")
          ->capture_default_str()
          ->check(CLI::Range(1, 1024));
      app.add_option("--mixing", o->mixing, "soft, top1 or uniform")->capture_default_str();
      app.add_option("--temperature", o->s.router.temperature, "router softmax temperature")
          ->capture_default_str()
          ->check(CLI::PositiveNumber);
      app.add_option("--threshold", o->s.router.threshold, "drop experts under this weight")
          ->capture_default_str()
          ->check(CLI::Range(0.0, 0.99));
      app.add_option("--reroute-every", o->s.reroute_every,
                     "re-route a routed stream every this many generated tokens on its recent "
                     "context (0: once per request, on the prompt)")
          ->capture_default_str()
          ->check(CLI::NonNegativeNumber);
      app.add_option("--reroute-window", o->s.reroute_window,
                     "tokens of recent context the router embeds when it re-routes")
          ->capture_default_str()
          ->check(CLI::PositiveNumber);
      app.add_option("--prompt-part", o->s.prompt_part,
                     "prefill a routed prompt longer than this in parts of this many tokens, "
                     "each under the mixture of its own tokens (0: one mixture per prompt, as "
                     "the paper)")
          ->capture_default_str()
          ->check(CLI::NonNegativeNumber);
      app.add_option("--prompt-part-blend", o->s.prompt_part_blend,
                     "each part's own weights x this + the whole prompt's x (1 - this)")
          ->capture_default_str()
          ->check(CLI::Range(0.0, 1.0));
      app.add_option("--prompt-part-router", o->part_router,
                     "what routes each part: hidden (the router's embedding of the part), "
                     "tfidf-checked (the experts' TF-IDF keys, moving a part only where the "
                     "router's embedding names the same top expert) or unigram (naive Bayes "
                     "over each expert's training text, `clone lora keys --unigram`)")
          ->capture_default_str()
          ->check(CLI::IsMember({"hidden", "tfidf-checked", "unigram"}));
      app.add_option("--prompt-part-temperature", o->s.prompt_part_temperature,
                     "the unigram part router's softmax temperature over mean log-likelihoods")
          ->capture_default_str()
          ->check(CLI::PositiveNumber);
      app.add_option("--device", o->s.board.device,
                     "simulate this board (profile name or JSON) under a DVFS controller acting "
                     "at every layer boundary; responses and /metrics carry its time and energy");
      app.add_option("--dvfs", o->s.board.controller,
                     "the board's controller: learned, mpc, mpc-switch, static, schedutil, "
                     "performance, powersave")
          ->capture_default_str();
      app.add_option("--policy", o->s.board.policy_path,
                     "learned policy weights (default: the shipped ones for the profile trained "
                     "for the model shape nearest this one, <models>/dvfs[/base]/<profile>.json)");
      app.add_option("--decode-horizon", o->s.board.decode_horizon,
                     "the controller plans a decode over at most this many tokens ahead (0: the "
                     "whole predicted rest)")
          ->capture_default_str()
          ->check(CLI::NonNegativeNumber);
      app.add_option("--modes", o->s.board.modes,
                     "a request that finds the board idle chooses its power mode (GPU cap and "
                     "cores, memory clock, CPU clock and cores) among these (comma-separated, "
                     "or all) by the controller's rule; requests beside it run in that mode; "
                     "with --backend linux the mode is put on the board")
          ->delimiter(',');
      app.add_option("--setting-switch-ms", o->setting_switch_ms,
                     "with --modes: the stall charged for changing mode (an estimate)")
          ->capture_default_str()
          ->check(CLI::NonNegativeNumber);
      app.add_option("--corunner", o->s.board.corunner,
                     "co-runner on the board: idle, web-search, video, bursty, or a CSV")
          ->capture_default_str();
      app.add_option("--corunner-seed", o->s.board.corunner_seed, "co-runner seed")
          ->capture_default_str();
      app.add_option("--backend", o->s.board.backend,
                     "sim: the --device board is modelled; linux: each chosen clock is also "
                     "set on this machine's knob (sysfs) and time and energy are measured "
                     "there, beside the model's")
          ->capture_default_str()
          ->check(CLI::IsMember({"sim", "linux"}));
      app.add_option("--sysfs-root", o->s.board.sysfs_root, "linux backend: where sysfs is")
          ->capture_default_str();
      app.add_option("--knob", o->s.board.knob,
                     "linux backend: the frequency knob to drive (clone device probe lists "
                     "them; default the GPU's devfreq, else the first writable one)");
      app.add_option("--length-model", o->s.length_model,
                     "output-length predictor (clone length train) the controllers plan with")
          ->check(CLI::ExistingFile);
      app.add_option("--slo", o->s.default_slo, "SLO class of requests that name none")
          ->capture_default_str()
          ->check(CLI::IsMember({"chatbot", "smart-reply", "code-completion"}));
      app.add_option("--chat-template", o->h.chat_template, "raw or chatml")
          ->capture_default_str()
          ->check(CLI::IsMember({"raw", "chatml"}));
      app.add_option("--model-name", o->h.model_name, "the model id clients see")
          ->capture_default_str();
      cln::cli::add_resource_flags(app, {cln::Resource::Profiles, cln::Resource::Models});
      return [o] { return serve(*o); };
    }};

}  // namespace cmd_serve
