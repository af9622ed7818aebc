// A workload by name as `clone sim` serves it, and the rules that turn a replayed trace
// into requests the simulator can serve: lengths clipped to the runtime's context, an SLO
// class for requests that carry none (assigned as the generator would), seeded think times,
// and the LoRA expert set each request is served with.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "clone/workload/workload.h"

namespace cln::workload {

struct ReplayRules {
  uint64_t seed = 42;
  double slo_scale = 1;
  bool code = false;           // requests with no class get code-completion (else the
                               // generator's chat mix: 70% chatbot, 30% smart-reply)
  int64_t max_output = 2048;   // output tokens are clipped to this,
  int64_t max_context = 4096;  // and the prompt to max_context - output
  double mean_think_s = 10;    // closed-loop think time (exponential, seeded)
};

// Applies the rules to every request, in order, with one seeded stream: for each request a
// think time, then (if it has no SLO class) a class draw. The same seed gives the same result.
void apply_replay_rules(std::vector<Request>& reqs, const ReplayRules& rules);

// A workload by name: "chat" / "code" are generated (GeneratorSpec), "azure-conv" /
// "azure-code" replay the shipped Azure traces, anything else is a clone CSV (load_csv).
// Replayed ones go through apply_replay_rules; at most n requests are returned.
std::vector<Request> load_workload(const std::string& name, size_t n, uint64_t seed,
                                   double slo_scale = 1);

// Each request is served with one of `bank` expert sets (seeded, uniform), so consecutive
// requests with different sets make the device swap experts between them. bank <= 0 leaves
// the requests on the base model.
void assign_expert_sets(std::vector<Request>& reqs, int bank, uint64_t seed);

}  // namespace cln::workload
