// clone route eval: the soft-MoE router judged on held-out prompts of every domain and task
// and on inputs that need two experts (serve/route_eval.h).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "clone/core/error.h"
#include "clone/serve/route_eval.h"
#include "common.h"
#include "subcommand.h"

namespace cmd_route {

struct Opts {
  cln::serve::RouteEvalOptions e;
  std::vector<std::string> experts;
  std::string mixing_unused, out;
  std::vector<double> grid_temperatures, grid_thresholds;
};

int eval(Opts& o) {
  using namespace cln;
  o.e.experts = cli::expert_specs(o.experts);
  if (o.grid_temperatures.empty() != o.grid_thresholds.empty())
    fail("--grid-temperature and --grid-threshold go together (the grid is every pair)");
  for (double t : o.grid_temperatures)
    for (double h : o.grid_thresholds)
      o.e.soft_grid.push_back(
          {serve::Mixing::Soft, t, h, o.e.router.centre, o.e.router.scale_to_max});
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
                "Soft MoE: softmax of %scosine similarity / %.3g, experts under weight %.3g "
                "dropped%s; "
                "%lld %s items per set. Text sets: texts of up to %lld tokens (fewer where a "
                "domain's documents are short: see text tokens; mixed: half of each), "
                "the router embeds the text, every prediction after the first token scored. "
                "Task sets: the router embeds the prompt, greedy answers scored by exact match.\n",
                o.e.router.centre ? "centred " : "", o.e.router.temperature, o.e.router.threshold,
                o.e.router.scale_to_max ? ", weights scaled so the largest is 1" : "",
                static_cast<long long>(o.e.per_set),
                o.e.split == "test" ? "held-out (test)" : (o.e.split + "-split").c_str(),
                static_cast<long long>(o.e.text_tokens));
  std::string seg;
  if (o.e.segment > 0) {
    const std::string window = std::to_string(o.e.segment_window);
    const std::string later =
        "the first under the weights of its own embedding, each later one under those of ";
    seg = "Soft MoE per segment: the text scored in segments of " + std::to_string(o.e.segment) +
          " tokens, ";
    switch (o.e.segment_route) {
      case serve::SegmentRoute::Own:
        seg += later + "BOS and its own tokens (a prompt's prefill, which knows its whole text)";
        break;
      case serve::SegmentRoute::Before:
        seg += later + "the " + window +
               " tokens before it (what a server re-routing a stream would use)";
        break;
      case serve::SegmentRoute::Around:
        seg += "each under the weights of BOS, its own tokens and the " + window +
               " tokens on each side of it, as far as the text goes (a prompt's prefill)";
        break;
    }
    seg += ", by the " + o.e.segment_embedder + " embedding";
    if (o.e.segment_embedder == "unigram") {
      char t[160];
      std::snprintf(t, sizeof t,
                    " (softmax of each expert's mean log-likelihood per token / %.3g, the "
                    "experts' unigram counts over their training text)",
                    o.e.segment_temperature > 0 ? o.e.segment_temperature : o.e.router.temperature);
      seg += t;
    }
    if (o.e.segment_blends != std::vector<double>{1.0})
      seg += "; a blend b is b x the segment's weights + (1 - b) x the request's (" +
             std::string(o.e.segment_route == serve::SegmentRoute::Before ? "its first segment's"
                                                                          : "the whole text's") +
             ")";
    if (o.e.segment_gated)
      seg +=
          "; gated: a segment whose own top expert is the request's keeps the request's "
          "weights";
    // "; a segment whose <expert> holds less than <share> of <weights> keeps the request's
    // weights"
    const auto below = [](const char* expert, double share, const char* weights) {
      char s[224];
      std::snprintf(s, sizeof s,
                    "; a segment whose %s holds less than %.3g of %s keeps the request's weights",
                    expert, share, weights);
      return std::string(s);
    };
    if (o.e.segment_confidence > 0)
      seg += below("own top expert", o.e.segment_confidence, "its weights");
    if (o.e.segment_neighbours)
      seg +=
          "; a segment whose own top expert is neither neighbour's keeps the request's "
          "weights";
    if (o.e.segment_cross_check)
      seg += std::string("; a segment whose top expert by the ") +
             (o.e.segment_embedder == "hidden" ? "TF-IDF" : "hidden") +
             " embedding differs keeps the request's weights";
    if (o.e.segment_in_whole > 0)
      seg += below("top expert", o.e.segment_in_whole,
                   "the whole text's weights (by the segments' router)");
    seg += ".\n";
  }
  if (o.e.mixed_shift > 0)
    seg += "Mixed texts: the second source begins " + std::to_string(o.e.mixed_shift) +
           " tokens after the middle.\n";
  std::string md = std::string(head) + seg + "\n## Routing\n\n" +
                   serve::routing_table(r).markdown() + "\n## Quality of each way of mixing\n\n" +
                   serve::quality_table(r).markdown() + "\n" + cost;
  if (!o.e.soft_grid.empty()) {
    const size_t b = serve::best_grid_setting(r);
    char pick[256];
    std::snprintf(pick, sizeof pick,
                  "\nChosen: temperature %.3g, threshold %.3g (smallest mean gap to the right "
                  "expert: perplexity excess in %%, exact-match deficit in points).\n",
                  o.e.soft_grid[b].temperature, o.e.soft_grid[b].threshold);
    md += "\n## Soft MoE under each setting (" + o.e.split + " split)\n\n" +
          serve::grid_table(r, o.e.soft_grid).markdown() + pick;
  }
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
      ev->add_flag("--centre", o->e.router.centre,
                   "cosine after subtracting the keys' mean (router.h)");
      ev->add_flag("--scale-to-max", o->e.router.scale_to_max,
                   "soft weights divided by the largest instead of summing to 1 (router.h)");
      ev->add_option("--split", o->e.split,
                     "valid to choose the settings (with the grid), test to judge them")
          ->capture_default_str()
          ->check(CLI::IsMember({"valid", "test"}));
      ev->add_option("--grid-temperature", o->grid_temperatures,
                     "also score soft MoE at each of these temperatures (comma list)")
          ->delimiter(',')
          ->check(CLI::PositiveNumber);
      ev->add_option("--grid-threshold", o->grid_thresholds,
                     "... and each of these thresholds (every pair is scored)")
          ->delimiter(',')
          ->check(CLI::Range(0.0, 0.99));
      ev->add_option("--segment", o->e.segment,
                     "also score text sets with soft MoE re-routed every this many tokens on "
                     "the context before each segment (0: not)")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{0}, int64_t{4096}));
      ev->add_option("--segment-window", o->e.segment_window,
                     "tokens of context the router embeds at each segment boundary")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{1}, int64_t{4096}));
      ev->add_option("--segment-route", o->e.segment_route,
                     "before: each later segment routed by the window before it (a stream); "
                     "own: by its own tokens (a prompt's prefill); around: by its own tokens and "
                     "--segment-window tokens on each side")
          ->capture_default_str()
          ->transform(CLI::CheckedTransformer(
              std::map<std::string, cln::serve::SegmentRoute>{
                  {"before", cln::serve::SegmentRoute::Before},
                  {"own", cln::serve::SegmentRoute::Own},
                  {"around", cln::serve::SegmentRoute::Around}},
              CLI::ignore_case));
      ev->add_option("--segment-blend", o->e.segment_blends,
                     "weight of each segment's own routing against the request's, one column "
                     "per value (comma list; 1: the segment's alone)")
          ->delimiter(',')
          ->check(CLI::Range(0.0, 1.0));
      ev->add_flag("--segment-gated", o->e.segment_gated,
                   "a segment keeps the request's weights where its own top expert is the "
                   "request's (blends only where they disagree)");
      ev->add_option("--segment-confidence", o->e.segment_confidence,
                     "a segment keeps the request's weights where its own top expert holds "
                     "less than this share of its weights (blends only where it is sure)")
          ->capture_default_str()
          ->check(CLI::Range(0.0, 1.0));
      ev->add_flag("--segment-neighbours", o->e.segment_neighbours,
                   "a segment keeps the request's weights unless its own top expert is also "
                   "a neighbouring segment's (a change of domain must last two segments)");
      ev->add_flag(
          "--segment-cross-check", o->e.segment_cross_check,
          "a segment keeps the request's weights unless the other embedding (TF-IDF "
          "for hidden segments, hidden for tfidf and unigram) gives it the same top expert");
      ev->add_option("--segment-in-whole", o->e.segment_in_whole,
                     "a segment keeps the request's weights unless its top expert holds at "
                     "least this share of the whole text's weights by the segments' router "
                     "(0: off)")
          ->capture_default_str()
          ->check(CLI::Range(0.0, 1.0));
      ev->add_option(
            "--segment-embedder", o->e.segment_embedder,
            "what the segments are routed by: hidden (the experts' keys), tfidf or unigram "
            "(naive Bayes over each source's training text)")
          ->capture_default_str()
          ->check(CLI::IsMember({"hidden", "tfidf", "unigram"}));
      ev->add_option("--segment-temperature", o->e.segment_temperature,
                     "softmax temperature of the segments' router (0: --temperature)")
          ->capture_default_str()
          ->check(CLI::NonNegativeNumber);
      ev->add_option("--mixed-shift", o->e.mixed_shift,
                     "mixed texts join their sources this many tokens after the middle")
          ->capture_default_str()
          ->check(CLI::NonNegativeNumber);
      ev->add_option("--items", o->e.per_set, "held-out items per set")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{1}, int64_t{100000}));
      ev->add_option("--profile", o->e.profile, "board for the modelled router cost")
          ->capture_default_str();
      ev->add_option("--threads", o->e.threads, "threads")->capture_default_str();
      ev->add_option("--out", o->out, "markdown file for the tables");
      return [o] { return eval(*o); };
    }};

}  // namespace cmd_route
