// Judging the router on held-out prompts of every domain and task and on inputs that need
// two experts: routing accuracy (top-1 = the prompt's source) for the base-model embedding
// and the TF-IDF baseline, the mean weight the soft mixture puts on the right experts, and
// the quality each way of mixing gives (perplexity on text, exact match on tasks) beside the
// base model and the right single expert; the router's cost as a share of TTFT, measured
// here and modelled on a board.
//
// Text sets score the whole text (teacher-forced, every prediction after the first token)
// and the router embeds that text; a mixed text is the first half-length of a document of
// one domain followed by the same length of another's. Task sets: the router embeds the
// prompt, greedy generation is scored by exact match.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "clone/core/table.h"
#include "clone/serve/router.h"

namespace cln::serve {

struct RouteEvalOptions {
  std::string base;
  std::string data_dir = "out/data";
  std::vector<std::pair<std::string, std::string>> experts;  // name (domain or task), adapter
  std::string embedder = "hidden:4";
  RouterOptions router;
  int64_t per_set = 100;      // held-out items per set
  int64_t text_tokens = 192;  // text sets: tokens per text, shortened per set (see tokens)
  int64_t max_new = 16;       // task sets: generation limit
  std::vector<std::pair<std::string, std::string>> mixed_texts = {
      {"quotes", "code"}, {"scripture", "computing"}, {"dictionary", "wordnet"}};
  // Mixed texts join the sources this many tokens after the middle (the first source's part
  // longer), to judge routing per segment with the joint off the segment grid.
  int64_t mixed_shift = 0;
  std::vector<std::string> mixed_tasks = {"add_words"};  // needs addition and number_words
  std::string profile = "orin-nx-16gb";                  // board for the modelled router cost
  std::string split = "test";  // "valid" to choose the router's settings, "test" to judge them
  // Further soft-MoE settings scored on every item beside o.router (a grid to choose from).
  std::vector<RouterOptions> soft_grid;
  // Soft MoE routed per segment as well (0: not): text sets are also scored in segments of
  // this many tokens, the first with the weights of its own embedding (as a prompt is
  // routed), each later one routed as segment_route says (segment_window_tokens). A task's
  // prompt is routed so too, its answer generated under the last part's weights; an item of
  // at most one segment is routed whole (as `clone serve --prompt-part` does).
  int64_t segment = 0;
  int64_t segment_window = 64;
  SegmentRoute segment_route = SegmentRoute::Before;
  // Each segment's weights blended with the whole request's, lambda * segment + (1 - lambda)
  // * request (the whole text for Own and Around, its first segment - the prompt - for
  // Before), one column per lambda; 1: the segment's own weights alone.
  std::vector<double> segment_blends = {1.0};
  bool segment_gated = false;     // blend_weights' gate: blend only where the top experts differ
  double segment_confidence = 0;  // blend_weights' min_top: blend only where a segment is sure
  // A segment keeps the request's weights unless its own top expert is also the top expert
  // of a segment next to it (a change of domain must last two segments).
  bool segment_neighbours = false;
  // A segment keeps the request's weights unless the other embedding's router (TF-IDF for
  // "hidden" segments, the hidden one for "tfidf" and "unigram") gives it the same top expert.
  bool segment_cross_check = false;
  // (> 0) A segment keeps the request's weights unless its top expert holds at least this
  // share of the whole text's weights under the segments' router (top_expert_in_whole).
  double segment_in_whole = 0;
  // The embedding the segments are routed by: "hidden" (o.embedder, the experts' stored
  // keys), "tfidf" (the baseline, keyed by the same training prompts) or "unigram" (naive
  // Bayes over each source's training text, make_unigram_keys), and its softmax
  // temperature (0: o.router's).
  std::string segment_embedder = "hidden";
  double segment_temperature = 0;
  int threads = 2;
  bool verbose = true;
};

struct RouteSetResult {
  std::string set;
  std::vector<std::string> right;  // the experts this set needs
  bool text = true;                // perplexity (lower better) or exact match (%)
  int64_t items = 0;
  int64_t tokens = 0;                      // text sets: tokens per text (shorter for short docs)
  double top1_hidden = 0, top1_tfidf = 0;  // % of items whose top-1 expert is a right one
  double right_weight = 0;                 // mean soft weight on the right experts
  // quality per way of running: base, right (the best right single expert), soft, top1, uniform
  double base = 0, right_single = 0, soft = 0, top1 = 0, uniform = 0;
  // Mixed texts: each half under its own source's expert (what routing per part could reach
  // with perfect routing and the boundary known; -1: not a mixed text).
  double right_per_half = -1;
  std::vector<double> segmented;  // soft MoE per segment, per segment_blends (empty: not scored)
  std::vector<double> grid;       // soft MoE quality under each of RouteEvalOptions::soft_grid
};

struct RouteEval {
  std::vector<RouteSetResult> sets;
  double embed_ms = 0, prefill_ms = 0;  // this machine: embedding vs the prompt's prefill
  double board_embed_ms = 0, board_prefill_ms = 0;  // modelled on the profile, top clock
  int64_t cost_prompt_tokens = 64;
  std::vector<double> segment_blends;  // the lambdas of RouteSetResult::segmented
};

RouteEval evaluate_router(const RouteEvalOptions& o);
Table routing_table(const RouteEval& e);
Table quality_table(const RouteEval& e);

// The text length for a set whose texts come from sources with these document lengths (one
// source, or two whose halves are joined): the longest of longest, 3/4, 1/2, 1/3 and 1/4 of
// it (at least 32) at which every source has documents for at least half of per_set items,
// so short-document domains (wordnet glosses, quotes) are judged on shorter texts instead of
// on a handful of items; where no length gives that many, the one giving the most.
int64_t choose_text_length(int64_t longest, int64_t per_set,
                           const std::vector<std::vector<int64_t>>& doc_lengths);

// How far a soft-MoE result falls behind the right single expert on one set: text, the
// perplexity excess in percent; tasks, the exact-match deficit in points (negative = ahead).
double gap_to_right(const RouteSetResult& s, double soft_value);
// The soft_grid setting with the smallest mean gap over the sets (ties: the first), and the
// table of every setting's per-set quality and mean gap.
size_t best_grid_setting(const RouteEval& e);
Table grid_table(const RouteEval& e, const std::vector<RouterOptions>& grid);

}  // namespace cln::serve
