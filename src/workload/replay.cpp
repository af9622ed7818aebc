#include "clone/workload/replay.h"

#include <algorithm>

#include "clone/core/rng.h"

namespace cln::workload {

void apply_replay_rules(std::vector<Request>& reqs, const ReplayRules& rules) {
  Rng rng(rules.seed);
  for (auto& r : reqs) {
    r.think_s = rng.exponential(rules.mean_think_s);
    r.output = std::min<int64_t>(r.output, rules.max_output);
    r.prompt = std::min<int64_t>(r.prompt, rules.max_context - r.output);
    if (r.slo.empty()) {
      const char* cls =
          rules.code ? "code-completion" : (rng.uniform() < 0.7 ? "chatbot" : "smart-reply");
      apply_slo(r, slo_class(cls), rules.slo_scale);
    }
  }
}

std::vector<Request> load_workload(const std::string& name, size_t n, uint64_t seed,
                                   double slo_scale) {
  if (name == "chat" || name == "code") {
    GeneratorSpec g;
    g.kind = name, g.n = n, g.seed = seed, g.slo_scale = slo_scale;
    return generate(g);
  }
  const bool azure = name.rfind("azure-", 0) == 0;
  std::vector<Request> reqs =
      azure ? load_azure(azure_trace_path(name.substr(6)), n) : load_csv(name);
  ReplayRules rules;
  rules.seed = seed, rules.slo_scale = slo_scale, rules.code = name == "azure-code";
  apply_replay_rules(reqs, rules);
  if (reqs.size() > n) reqs.resize(n);
  return reqs;
}

void assign_expert_sets(std::vector<Request>& reqs, int bank, uint64_t seed) {
  if (bank <= 0) return;
  Rng rng(seed ^ 0x10a5e7ull);
  for (auto& r : reqs) r.expert_set = static_cast<int32_t>(rng.below(static_cast<uint64_t>(bank)));
}

}  // namespace cln::workload
