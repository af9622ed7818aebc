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
  int64_t text_tokens = 192;  // text sets: tokens per text
  int64_t max_new = 16;       // task sets: generation limit
  std::vector<std::pair<std::string, std::string>> mixed_texts = {
      {"quotes", "code"}, {"scripture", "computing"}, {"dictionary", "wordnet"}};
  std::vector<std::string> mixed_tasks = {"add_words"};  // needs addition and number_words
  std::string profile = "orin-nx-16gb";                  // board for the modelled router cost
  int threads = 2;
  bool verbose = true;
};

struct RouteSetResult {
  std::string set;
  std::vector<std::string> right;  // the experts this set needs
  bool text = true;                // perplexity (lower better) or exact match (%)
  int64_t items = 0;
  double top1_hidden = 0, top1_tfidf = 0;  // % of items whose top-1 expert is a right one
  double right_weight = 0;                 // mean soft weight on the right experts
  // quality per way of running: base, right (the best right single expert), soft, top1, uniform
  double base = 0, right_single = 0, soft = 0, top1 = 0, uniform = 0;
};

struct RouteEval {
  std::vector<RouteSetResult> sets;
  double embed_ms = 0, prefill_ms = 0;  // this machine: embedding vs the prompt's prefill
  double board_embed_ms = 0, board_prefill_ms = 0;  // modelled on the profile, top clock
  int64_t cost_prompt_tokens = 64;
};

RouteEval evaluate_router(const RouteEvalOptions& o);
Table routing_table(const RouteEval& e);
Table quality_table(const RouteEval& e);

}  // namespace cln::serve
