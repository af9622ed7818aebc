// What a pruned candidate is worth: its validation perplexity (the dense model cut by a
// plan, no recovery) and, on a device profile, the simulated time and energy of the target
// workload's request; the search's score combines them (DESIGN.md section 6):
//
//   s = (1 / ppl) * (E / e)^(alpha [e > E]) * (T / t)^(beta [t > T])
//
// with E, T the energy and latency budgets, e, t the candidate's.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "clone/device/profile.h"
#include "clone/gguf/gguf.h"
#include "clone/prune/plan.h"

namespace cln::prune {

// The request the device cost is for, on an idle board, under a DVFS controller: the
// performance governor (the top clock throughout) by default, or any of dvfs/policy.h
// ("learned", "static", "mpc", "oracle", ...) serving it to the SLO given here, changing the
// clock at every layer boundary as it would on the board.
struct Workload {
  std::string name = "chat";
  int64_t prompt = 128, output = 242;  // the paper's chatbot request (128 in, 242 out)
  std::string dvfs = "performance";
  // The learned controller's weights (`clone dvfs train --out`); empty: the profile's shipped
  // ones (trained for Gemma-2B's shape).
  std::string dvfs_policy;
  double ttft_target_s = 0, tpot_target_s = 0;  // the SLO (needed unless dvfs is performance)
};

struct DeviceCost {
  double ttft_s = 0, tpot_s = 0, e2e_s = 0, energy_j = 0;
};
DeviceCost device_cost(const ModelConfig& c, const device::DeviceProfile& p, const Workload& w);
// The SLO a controller serves a candidate's request to under the budgets: TPOT at
// latency_budget x the dense model's top-clock TPOT, TTFT at the dense model's own
// (w unchanged under the performance governor).
Workload with_budget_targets(Workload w, const DeviceCost& dense_top, double latency_budget);

struct Budget {
  double latency_s = 0;  // on TPOT (the decode-bound part the search trades)
  double energy_j = 0;   // per request
  double alpha = 2, beta = 2;
};
double search_score(double ppl, const DeviceCost& cost, const Budget& b);

// Validation perplexity protocol for candidates: `windows` evenly spaced windows of
// seq_len tokens per domain of the corpora's valid split, every prediction scored, the
// mean NLL over domains (the trainer's validation loss).
struct Validation {
  std::string data_dir;
  int64_t seq_len = 256, windows = 8;
  int threads = 1;
};

// Cuts the dense model to the plan (in a temporary file under tmp_dir) and measures its
// validation perplexity. Throws naming the data or the plan's problem.
double validation_ppl(const GgufFile& dense, const PrunePlan& plan, const Validation& v,
                      const std::string& tmp_dir);
// The same for a model file.
double validation_ppl(const std::string& model_path, const Validation& v);

}  // namespace cln::prune
