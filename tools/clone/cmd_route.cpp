// clone route eval: the soft-MoE router judged on held-out prompts of every domain and task
// and on inputs that need two experts (serve/route_eval.h).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "clone/core/error.h"
#include "clone/serve/route_eval.h"
#include "common.h"
#include "subcommand.h"

namespace {

struct Opts {
  cln::serve::RouteEvalOptions e;
  std::vector<std::string> experts;
  std::string mixing_unused, out;
};

int eval(Opts& o) {
  using namespace cln;
  o.e.experts = cli::expert_specs(o.experts);
  const serve::RouteEval r = serve::evaluate_router(o.e);
  char cost[512];
  std::snprintf(cost, sizeof cost,
                "Router cost for a %lld-token prompt (%s, %lld of the model's layers, no head): "
                "%.2f ms against %.2f ms of prefill on this machine (%.1f%% of TTFT), %.2f ms "
                "against %.2f ms on %s at its top clock (%.1f%%, cost model).\n",
                static_cast<long long>(r.cost_prompt_tokens), o.e.embedder.c_str(),
                static_cast<long long>(std::stoll(o.e.embedder.substr(7))), r.embed_ms,
                r.prefill_ms, 100 * r.embed_ms / (r.embed_ms + r.prefill_ms), r.board_embed_ms,
                r.board_prefill_ms, o.e.profile.c_str(),
                100 * r.board_embed_ms / (r.board_embed_ms + r.board_prefill_ms));
  char head[512];
  std::snprintf(head, sizeof head,
                "Soft MoE: softmax of cosine similarity / %.3g, experts under weight %.3g dropped; "
                "%lld held-out items per set. Text sets: %lld-token texts (mixed: half of each), "
                "the router embeds the text, every prediction after the first token scored. "
                "Task sets: the router embeds the prompt, greedy answers scored by exact match.\n",
                o.e.router.temperature, o.e.router.threshold, static_cast<long long>(o.e.per_set),
                static_cast<long long>(o.e.text_tokens));
  const std::string md =
      std::string(head) + "\n## Routing\n\n" + serve::routing_table(r).markdown() +
      "\n## Quality of each way of mixing\n\n" + serve::quality_table(r).markdown() + "\n" + cost;
  std::fputs(md.c_str(), stdout);
  if (!o.out.empty()) cli::write_text_file(o.out, md);
  return 0;
}

const cln::cli::Register reg{
    "route", "The soft mixture of LoRA experts (router): judge it on held-out prompts",
    [](CLI::App& app) {
      app.require_subcommand(1);
      auto o = std::make_shared<Opts>();
      CLI::App* ev = app.add_subcommand(
          "eval", "routing accuracy and the quality of soft MoE, top-1 and uniform mixing");
      ev->add_option("--base", o->e.base, "base model GGUF")->required()->check(CLI::ExistingFile);
      ev->add_option("--data", o->e.data_dir, "folder written by `clone data build`")
          ->capture_default_str();
      ev->add_option("--expert", o->experts,
                     "adapter with a router key, path (named by its stem) or name=path")
          ->required();
      ev->add_option("--embedder", o->e.embedder, "hidden:<layers>")->capture_default_str();
      ev->add_option("--temperature", o->e.router.temperature, "softmax temperature")
          ->capture_default_str()
          ->check(CLI::PositiveNumber);
      ev->add_option("--threshold", o->e.router.threshold, "drop experts under this weight")
          ->capture_default_str()
          ->check(CLI::Range(0.0, 0.99));
      ev->add_option("--items", o->e.per_set, "held-out items per set")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{1}, int64_t{100000}));
      ev->add_option("--profile", o->e.profile, "board for the modelled router cost")
          ->capture_default_str();
      ev->add_option("--threads", o->e.threads, "threads")->capture_default_str();
      ev->add_option("--out", o->out, "markdown file for the tables");
      return [o] { return eval(*o); };
    }};

}  // namespace
