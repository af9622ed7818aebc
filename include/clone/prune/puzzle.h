// The Puzzle-style baseline (Bercovich et al., "Puzzle: Distillation-Based NAS for
// Inference-Optimized LLMs", ICML 2025): a library of per-layer variants (each layer's
// attention and FFN at several widths, or removed), each scored by replacing that one
// block in the otherwise dense model (the validation loss delta), each costed on the
// device (the change in the workload request's TPOT and energy, which the cost model sums
// over layers), and an exact optimiser that picks one variant per block to lose the least
// loss within the latency and energy budgets: a multiple-choice knapsack, solved by
// dynamic programming over the two budgets discretised into bins (costs rounded up, so
// what it picks is feasible; optimal on the rounded costs).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "clone/prune/evaluate.h"
#include "clone/prune/select.h"

namespace cln::prune {

struct Variant {
  double ratio = 0;      // share removed (0: the dense block)
  double dloss = 0;      // validation mean-NLL change when only this block is cut so
  double dtime_s = 0;    // TPOT change (<= 0)
  double denergy_j = 0;  // request energy change (<= 0)
};

// One block: a layer's attention (attn) or FFN, and its choices (the first is the dense one).
struct Block {
  int64_t layer = 0;
  bool attn = true;
  std::vector<Variant> choices;
};

struct LibraryOptions {
  std::vector<double> attn_ratios = {1.0 / 3, 0.5, 2.0 / 3, 1.0};
  std::vector<double> ffn_ratios = {0.25, 0.5, 0.75, 1.0};
  std::string tmp_dir = "/tmp";
  // Called after each plan is scored (done, total), when ppl below is not given.
  std::function<void(int, int)> progress;
  // Validation perplexities of plans, all at once, when the caller caches or spreads them
  // (default: validation_ppl, one after the other).
  std::function<std::vector<double>(const std::vector<PrunePlan>&)> ppl;
};

// Scores every variant of every block. Units within a block follow `scores` (any unit
// method); variants whose shapes coincide (e.g. two ratios rounding to the same head
// count) are scored once.
std::vector<Block> build_library(const GgufFile& dense, const Scores& scores, const Validation& val,
                                 const device::DeviceProfile& profile, const Workload& w,
                                 const LibraryOptions& o);

struct Choice {
  Ratios ratios;
  double dloss = 0, dtime_s = 0, denergy_j = 0;  // sums over the chosen variants
  bool feasible = false;  // false: nothing meets the budgets (ratios: the cheapest found)
};

// Budgets as allowed changes: dtime_s <= max_dtime_s (negative: a required saving), the
// same for energy; bins per budget axis.
Choice choose(const std::vector<Block>& lib, int64_t n_layer, double max_dtime_s,
              double max_denergy_j, int bins = 200);

}  // namespace cln::prune
