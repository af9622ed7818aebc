// CLONE's offline tailoring (DESIGN.md section 6): for one device profile and one
// workload, the per-layer pruning ratios that keep the most quality within a latency and
// an energy budget, found by the generative search (nao.h) seeded with every baseline.
//
//   1. Unit importance once (taylor by default): which heads and channels a ratio removes.
//   2. Samples, each evaluated for real (validation perplexity of the cut model, device
//      cost of its shape) and cached by shape: uniform ratios, ShortGPT half removals,
//      FLAP-style global ranking, the Puzzle-style optimiser at the budgets, random vectors.
//   3. Rounds: the search model trains on every (ratios, score) pair, proposes unseen
//      candidates from the best ones by gradient steps in its embedding, which are
//      evaluated and added; each round reports the model's rank correlation on its own
//      proposals (predicted before they were evaluated).
//   4. The best-scoring candidate is cut (<out>/pruned.gguf), and each method family's
//      best within the budgets as best-<method>.gguf (for the judged table, which recovers
//      each the same way: scripts/tailor.sh).
//   5. Recovery of the best (recovery.sched.steps > 0): distilled from the dense model on
//      the training split (or plain fine-tuning), in <out>/recover/, resumable; the result
//      is <out>/model.gguf, the model to ship. Without recovery model.gguf is the cut itself.
//
// Every evaluation is appended to <out>/candidates.jsonl; a run that finds that file
// reuses what it holds, so an interrupted run resumes and ends with the same result.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "clone/prune/evaluate.h"
#include "clone/prune/importance.h"
#include "clone/prune/nao.h"
#include "clone/prune/select.h"
#include "clone/train/trainer.h"

namespace cln::prune {

struct TailorOptions {
  std::string model, data_dir = "out/data", out_dir = "out/tailor";
  std::string profile = "orin-nx-16gb";
  Workload workload;
  double latency_budget = 0.65;  // of the dense model's TPOT on the profile
  double energy_budget = 0.65;   // of the dense model's request energy
  double alpha = 2, beta = 2;
  Method units = Method::Taylor;
  int64_t calib_seqs = 32, calib_len = 128;
  Validation val;  // data_dir is filled from data_dir
  int random_samples = 16;
  int rounds = 4, per_round = 8;
  bool baselines = true;      // uniform, ShortGPT and FLAP-style ratios among the samples
  bool puzzle = true;         // the Puzzle-style optimiser among the samples
  bool family_models = true;  // also write <out>/best-<method>.gguf per method family
  NaoOptions nao;
  uint64_t seed = 1;
  int threads = 2;
  std::function<void(const std::string&)> log;  // progress lines
  // Recovery of the best candidate; none while recovery.sched.steps is 0. The model, the
  // teacher (the dense model, when recovery.kd_weight > 0), the data, the folders and the
  // threads are filled in from the options above; the recipe (batch, seed 1234, ...) is
  // recovery's own, at a peak learning rate of 1e-3: on the validation split it beat 3e-4
  // (fine-tuning's default) after 1000 distilled steps at both budgets tried (65% and 50%
  // of the NX's TPOT: 3.377 against 3.396 nats, 3.473 against 3.531; docs/tailor.md).
  train::FinetuneOptions recovery = [] {
    train::FinetuneOptions r;
    r.sched.steps = 0;
    r.sched.lr = 1e-3;
    return r;
  }();
};

struct Candidate {
  std::string source;  // "uniform 0.3", "shortgpt 4", "flap 0.35", "puzzle", "random", "search 2"
  Ratios ratios;
  std::string key;  // the pruned shape, per layer heads/KV/FFN
  double ppl = 0, tpot_s = 0, energy_j = 0, score = 0;
  bool within = false;  // meets both budgets
};

struct RoundStats {
  int round = 0;
  int proposed = 0;
  double spearman = 0;  // the search model's predictions vs the real scores of its proposals
  double best_score = 0;
};

struct TailorResult {
  double dense_ppl = 0;
  DeviceCost dense;
  double latency_budget_s = 0, energy_budget_j = 0;
  std::vector<Candidate> candidates;  // in evaluation order
  std::vector<RoundStats> rounds;
  Candidate best;  // highest score (within budget when any is)
  bool feasible = false;
  double recovered_ppl = 0;  // validation perplexity of <out>/model.gguf after recovery (0: none)
};

TailorResult tailor(const TailorOptions& o);

// Recovers <out>/pruned.gguf into <out>/model.gguf as o.recovery says (tailor() calls it;
// a finished recovery is not run again) and returns the recovered validation perplexity.
double recover_best(const TailorOptions& o);

// Writes <out>/summary.md, candidates.csv, rounds.csv and, with gnuplot, ratios.png
// (the best candidate's per-layer ratios), pareto.png (validation perplexity against
// TPOT and against energy, every method, budgets marked) and search.png (best score per
// round).
void write_report(const TailorOptions& o, const TailorResult& r);

}  // namespace cln::prune
