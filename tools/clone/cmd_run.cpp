// clone run: prompt in, streamed text out. With --device, the generation is also
// co-simulated: the engine's layer-boundary hook drives a DVFS controller and the
// simulated device (the model's own shapes on the profile's cost model), and the
// request's simulated trace on that device is printed after the text.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include "clone/core/error.h"
#include "clone/dvfs/cosim.h"
#include "clone/engine/context.h"
#include "clone/engine/generate.h"
#include "clone/gguf/gguf.h"
#include "clone/serve/embed.h"
#include "clone/serve/length.h"
#include "clone/serve/router.h"
#include "clone/tokenizer/tokenizer.h"
#include "common.h"
#include "subcommand.h"

namespace cmd_run {

struct Opts {
  int64_t decode_horizon =
      cln::dvfs::kDecodeHorizon;  // the board's controller (dvfs::CoSimOptions)
  std::string model;
  std::string prompt;
  std::string prompt_file;
  int n_predict = 128;
  int64_t n_ctx = 0;
  int threads = 0;
  cln::SamplerParams sp;
  std::vector<std::string> loras;
  // The soft mixture of LoRA experts: experts with router keys, mixed per prompt.
  std::vector<std::string> experts;
  std::string mixing = "soft", length_model;
  double route_temperature = cln::serve::RouterOptions{}.temperature,
         route_threshold = cln::serve::RouterOptions{}.threshold;
  int64_t prompt_part = cln::serve::default_prompt_part;
  bool stats = true;
  bool ignore_eos = false;
  // Co-simulation on a modelled device.
  std::string device, dvfs = "learned", policy_file, slo, corunner = "idle", trace;
  std::string backend = "sim", sysfs_root = "/", knob;  // --backend linux: the real knob
  double ttft_ms = 0, tpot_ms = 0;
  uint64_t corunner_seed = 1;
  int64_t predicted = 0;
  std::vector<std::string> modes;  // per-request power mode (dvfs::CoSimOptions::modes)
  double setting_switch_ms = cln::dvfs::Settings{}.switch_s * 1e3;
};

constexpr int64_t kBatch = 512;  // the engine's prefill pass length; the simulator plans the same

// The co-simulation of this generation on a modelled device (dvfs/cosim.h).
std::unique_ptr<cln::dvfs::CoSim> make_cosim(const Opts& o, const cln::Model& m,
                                             int64_t prompt_tokens, int64_t predicted,
                                             int embed_layers, int64_t embed_tokens) {
  cln::dvfs::CoSimOptions c;
  c.device = o.device, c.controller = o.dvfs, c.policy_path = o.policy_file, c.slo = o.slo;
  c.ttft_target_s = o.ttft_ms * 1e-3, c.tpot_target_s = o.tpot_ms * 1e-3;
  c.corunner = o.corunner, c.corunner_seed = o.corunner_seed, c.predicted = predicted;
  c.n_batch = kBatch;
  c.decode_horizon = o.decode_horizon;
  c.embed_layers = embed_layers, c.embed_tokens = embed_tokens;
  c.backend = o.backend, c.sysfs_root = o.sysfs_root, c.knob = o.knob;
  c.modes = o.modes, c.setting_switch_s = o.setting_switch_ms * 1e-3;
  return std::make_unique<cln::dvfs::CoSim>(m.config(), c, prompt_tokens, std::max(1, o.n_predict));
}

int run(const Opts& o) {
  using namespace cln;
  auto model = Model::load(o.model);
  const Tokenizer tok = Tokenizer::from_gguf(model->gguf());
  std::string prompt = o.prompt;
  if (!o.prompt_file.empty()) prompt = cli::read_text_file(o.prompt_file);
  std::vector<int32_t> ids = tok.encode(prompt, true);
  Context ctx(model, {o.n_ctx, o.threads, kBatch});
  std::vector<ActiveLora> loras = cli::load_loras(o.loras, *model);
  // Routing: the prompt's embedding (the base's first k layers, no adapters) against each
  // expert's key; the experts are then applied with the router's weights. A prompt longer
  // than --prompt-part runs in parts instead, each under the unigram router's weights for its
  // own tokens (as `clone serve` does; the experts change at each part's first position, one
  // prefill), and the whole prompt's embedding runs only for a length predictor that reads it.
  int embed_layers = 0;
  int64_t embed_tokens = 0;
  std::unique_ptr<serve::Embedder> embedder;
  std::vector<float> embedding;
  std::vector<std::pair<int64_t, std::vector<ActiveLora>>> later;  // parts after the first
  if (!o.experts.empty()) {
    if (!o.loras.empty()) fail("--expert (routed) and --lora (fixed weights) do not mix");
    auto [experts, keys] = cli::load_experts(o.experts, *model, true);
    serve::RouterOptions ro;
    ro.mixing = serve::mixing_from_name(o.mixing);
    ro.temperature = o.route_temperature, ro.threshold = o.route_threshold;
    serve::Router router(keys, ro);
    embedder = serve::make_hidden_embedder(router.embedder(), model, std::max(1, o.threads));
    const auto n = static_cast<int64_t>(ids.size());
    const bool in_parts = o.prompt_part > 0 && n > o.prompt_part;
    const auto mix = [&](const std::vector<double>& w) {
      std::vector<ActiveLora> m;
      for (size_t i = 0; i < w.size(); ++i)
        if (w[i] > 0) m.push_back({experts[i].second, static_cast<float>(w[i])});
      return m;
    };
    const auto shown = [&](const std::vector<double>& w) {
      std::string s;
      for (size_t i = 0; i < w.size(); ++i) {
        if (w[i] <= 0) continue;
        char buf[128];
        std::snprintf(buf, sizeof buf, "%s%s %.3f", s.empty() ? "" : ", ", experts[i].first.c_str(),
                      w[i]);
        s += buf;
      }
      return s;
    };
    const auto t0 = std::chrono::steady_clock::now();
    if (!in_parts || !o.length_model.empty()) {
      embedding = embedder->embed(ids);
      embed_layers =
          static_cast<int>(dynamic_cast<const serve::HiddenEmbedder&>(*embedder).layers());
      embed_tokens = std::min<int64_t>(n, embedder->max_tokens());
    }
    if (!in_parts) {
      const std::vector<double> w = router.weights(embedding);
      loras = mix(w);
      const double route_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (o.stats)
        std::fprintf(stderr,
                     "[clone route] %s mixing over %zu experts (%s embedding, %.1f ms): %s\n",
                     o.mixing.c_str(), experts.size(), router.embedder().c_str(), route_ms,
                     shown(w).c_str());
    } else {
      for (size_t i = 0; i < keys.size(); ++i)
        if (keys[i].unigram_logp.empty())
          fail("expert ", experts[i].first,
               " has no unigram router key for the prompt parts (`clone lora keys --unigram` "
               "writes it; --prompt-part 0 routes the whole prompt)");
      serve::RouterOptions po = ro;
      po.temperature = serve::unigram_part_temperature;
      const serve::Router parts(serve::unigram_router_keys(keys), po);
      serve::UnigramEmbedder counts(tok.n_vocab(), tok.bos());
      for (int64_t start = 0; start < n; start += o.prompt_part) {
        const std::vector<double> w = parts.weights(counts.embed(
            serve::segment_window_tokens(ids, start, std::min(n, start + o.prompt_part),
                                         serve::SegmentRoute::Own, 1, tok.bos())));
        if (start == 0)
          loras = mix(w);
        else
          later.emplace_back(start, mix(w));
        if (o.stats)
          std::fprintf(stderr, "[clone route] part from token %lld (unigram): %s\n",
                       static_cast<long long>(start), shown(w).c_str());
      }
    }
  }
  ctx.set_loras(loras);
  for (auto& [pos, m] : later) ctx.set_loras_from(pos, std::move(m));
  // The output-length predictor: the controller plans for its prediction.
  int64_t predicted = o.predicted;
  if (!o.length_model.empty()) {
    auto lm = serve::OutputLengthModel::load(o.length_model, model, std::max(1, o.threads));
    const int64_t cap = std::max(1, o.n_predict);
    predicted = std::clamp<int64_t>(!embedding.empty() && lm.embedder_name() == embedder->name()
                                        ? lm.predict(ids, embedding)
                                        : lm.predict(ids),
                                    1, cap);
    if (o.stats)
      std::fprintf(stderr, "[clone length] predicted %lld tokens (cap %lld)\n",
                   static_cast<long long>(predicted), static_cast<long long>(cap));
  }
  std::unique_ptr<dvfs::CoSim> cosim;
  if (!o.device.empty()) {
    cosim = make_cosim(o, *model, static_cast<int64_t>(ids.size()), predicted, embed_layers,
                       embed_tokens);
    ctx.set_hook(cosim->hook());
  } else if (!o.trace.empty()) {
    fail("--trace needs --device (the trace is the simulated device's)");
  } else if (o.backend == "linux") {
    fail(
        "--backend linux needs --device: the profile of this board, which the controller "
        "plans with");
  }
  std::fputs(prompt.c_str(), stdout);
  std::fflush(stdout);
  GenerateParams gp;
  gp.max_new = o.n_predict;
  gp.sampling = o.sp;
  gp.eos = o.ignore_eos ? -1 : tok.eos();
  const Generation g = generate(ctx, ids, gp, [&](int32_t id) {
    const std::string piece = tok.token_to_piece(id);
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    return true;
  });
  std::fputc('\n', stdout);
  if (o.stats) {
    const auto n = static_cast<double>(g.tokens.size());
    std::fprintf(stderr,
                 "\n[clone] prompt %zu tokens in %.1f ms (%.1f tok/s, TTFT) | generated %zu tokens "
                 "in %.1f ms (%.1f tok/s, TPOT %.2f ms) | stop: %s\n",
                 ids.size(), g.prefill_s * 1e3, static_cast<double>(ids.size()) / g.prefill_s,
                 g.tokens.size(), g.decode_s * 1e3, n > 1 ? (n - 1) / g.decode_s : 0.0,
                 n > 1 ? g.decode_s * 1e3 / (n - 1) : 0.0, stop_name(g.stop));
  }
  if (cosim) {
    const dvfs::RequestResult r = cosim->finish();
    std::fprintf(stderr, "[clone sim] %s\n", cosim->summary_line(r).c_str());
    if (cosim->measured())
      for (const auto& line : cosim->measured()->mode_set)
        std::fprintf(stderr, "[clone sim] %s\n", line.c_str());
    if (!o.trace.empty()) cosim->write_trace(o.trace);
  }
  return 0;
}

const cln::cli::Register reg{
    "run", "Generate text from a prompt, streamed token by token", [](CLI::App& app) {
      auto o = std::make_shared<Opts>();
      app.add_option("-m,--model", o->model, "model GGUF file")
          ->required()
          ->check(CLI::ExistingFile);
      app.add_option("-p,--prompt", o->prompt, "prompt text");
      app.add_option("-f,--file", o->prompt_file, "read the prompt from a file")
          ->check(CLI::ExistingFile);
      app.add_option("-n,--n-predict", o->n_predict, "tokens to generate at most")
          ->capture_default_str()
          ->check(CLI::Range(0, 1 << 20));
      app.add_option("-c,--ctx", o->n_ctx, "context length (0 = model's, at most 4096)")
          ->capture_default_str()
          ->check(CLI::NonNegativeNumber);
      app.add_option("-t,--threads", o->threads, "threads (0 = all cores)")
          ->capture_default_str()
          ->check(CLI::Range(0, 1024));
      app.add_option("--temp", o->sp.temperature, "sampling temperature (0 = greedy)")
          ->capture_default_str()
          ->check(CLI::Range(0.0, 100.0));
      app.add_option("--top-k", o->sp.top_k, "keep the k most likely tokens (0 = all)")
          ->capture_default_str()
          ->check(CLI::NonNegativeNumber);
      app.add_option("--top-p", o->sp.top_p, "nucleus: keep the smallest set with this mass")
          ->capture_default_str()
          ->check(CLI::Range(0.0, 1.0));
      app.add_option("-s,--seed", o->sp.seed, "sampling seed")->capture_default_str();
      app.add_option("--lora", o->loras, "LoRA adapter GGUF, as path or path:weight (repeatable)");
      app.add_option("--expert", o->experts,
                     "LoRA expert with a router key (path or name=path, repeatable): mixed per "
                     "prompt by the router");
      app.add_option("--mixing", o->mixing, "with --expert: soft, top1 or uniform")
          ->capture_default_str()
          ->check(CLI::IsMember({"soft", "top1", "uniform"}));
      app.add_option("--route-temperature", o->route_temperature,
                     "with --expert: softmax temperature over cosine similarities")
          ->capture_default_str()
          ->check(CLI::PositiveNumber);
      app.add_option("--route-threshold", o->route_threshold,
                     "with --expert: drop experts under this weight")
          ->capture_default_str()
          ->check(CLI::Range(0.0, 0.99));
      app.add_option("--prompt-part", o->prompt_part,
                     "with --expert: a prompt longer than this runs in parts of this many "
                     "tokens, each under the experts' unigram weights for its own tokens (0: "
                     "one mixture for the whole prompt, as the paper)")
          ->capture_default_str()
          ->check(CLI::NonNegativeNumber);
      app.add_option("--length-model", o->length_model,
                     "output-length predictor JSON (clone length train): the DVFS controller "
                     "plans for its prediction")
          ->check(CLI::ExistingFile);
      app.add_flag("--ignore-eos", o->ignore_eos, "keep generating past the end-of-sequence token");
      app.add_flag("!--no-stats", o->stats, "do not print timing to stderr");
      auto* g = app.add_option_group("co-simulation",
                                     "run on a modelled device (printed after the text)");
      g->add_option("--device", o->device,
                    "device profile, name (orin-nx-16gb, orin-nano-8gb, host) or JSON path");
      g->add_option(
           "--dvfs", o->dvfs,
           "DVFS controller: performance, powersave, schedutil, static, learned, mpc, mpc-switch, "
           "oracle")
          ->capture_default_str();
      g->add_option("--dvfs-policy", o->policy_file,
                    "learned policy weights (default: the shipped ones for the profile trained for "
                    "the model shape nearest this one, <models>/dvfs[/base]/<profile>.json)")
          ->check(CLI::ExistingFile);
      g->add_option("--decode-horizon", o->decode_horizon,
                    "the controller plans a decode over at most this many tokens ahead (0: the "
                    "whole predicted rest)")
          ->capture_default_str()
          ->check(CLI::NonNegativeNumber);
      g->add_option("--modes", o->modes,
                    "the controller chooses the request's power mode (GPU cap and cores, "
                    "memory clock, CPU clock and cores) among these (comma-separated, or all), "
                    "then its GPU clock per layer inside it; with --backend linux the mode is "
                    "put on the board")
          ->delimiter(',');
      g->add_option("--setting-switch-ms", o->setting_switch_ms,
                    "with --modes: the stall charged for changing mode (an estimate)")
          ->capture_default_str()
          ->check(CLI::NonNegativeNumber);
      g->add_option("--slo", o->slo, "SLO class: chatbot, smart-reply, code-completion")
          ->check(CLI::IsMember({"chatbot", "smart-reply", "code-completion"}));
      g->add_option("--ttft-ms", o->ttft_ms, "TTFT target (ms; overrides the class's)")
          ->check(CLI::PositiveNumber);
      g->add_option("--tpot-ms", o->tpot_ms, "TPOT target (ms; overrides the class's)")
          ->check(CLI::PositiveNumber);
      g->add_option("--corunner", o->corunner,
                    "co-runner on the device: idle, web-search, video, bursty, const:<s>, CSV")
          ->capture_default_str();
      g->add_option("--corunner-seed", o->corunner_seed, "co-runner trace seed")
          ->capture_default_str();
      g->add_option("--backend", o->backend,
                    "sim: the modelled device only; linux: each chosen clock is also set on "
                    "this machine's knob (sysfs), time and energy measured there beside the "
                    "model's")
          ->capture_default_str()
          ->check(CLI::IsMember({"sim", "linux"}));
      g->add_option("--sysfs-root", o->sysfs_root, "linux backend: where sysfs is")
          ->capture_default_str();
      g->add_option("--knob", o->knob,
                    "linux backend: the frequency knob (clone device probe lists them; default "
                    "the GPU's devfreq, else the first writable one)");
      g->add_option("--predicted-tokens", o->predicted,
                    "output length the controller is told (0 = --n-predict)")
          ->check(CLI::NonNegativeNumber);
      g->add_option("--trace", o->trace, "write the per-layer-boundary trace (CSV)");
      cln::cli::add_resource_flags(app, {cln::Resource::Profiles, cln::Resource::Models});
      return [o] { return run(*o); };
    }};

}  // namespace cmd_run
