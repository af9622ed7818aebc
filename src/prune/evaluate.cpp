#include "clone/prune/evaluate.h"

#include <unistd.h>
#include <cmath>
#include <filesystem>

#include "clone/core/error.h"
#include "clone/data/corpus.h"
#include "clone/data/token_file.h"
#include "clone/device/calibrate.h"
#include "clone/device/cost_model.h"
#include "clone/device/sim.h"
#include "clone/dvfs/policy.h"
#include "clone/dvfs/runner.h"
#include "clone/engine/context.h"
#include "clone/eval/nll.h"
#include "clone/prune/surgery.h"

namespace cln::prune {

DeviceCost device_cost(const ModelConfig& c, const device::DeviceProfile& p, const Workload& w) {
  auto model = std::make_shared<const device::CostModel>(p, c);
  const auto idle = device::CorunnerTrace::make("idle", 1);
  if (w.dvfs.empty() || w.dvfs == "performance") {
    const device::FixedRun r = device::run_fixed(model, idle, w.prompt, w.output, -1, 512);
    return {r.ttft_s, r.tpot_s, r.e2e_s, r.energy_j};
  }
  if (!(w.ttft_target_s > 0) || !(w.tpot_target_s > 0))
    fail("device cost under the ", w.dvfs, " DVFS controller: the request needs TTFT and TPOT ",
         "targets (got ", w.ttft_target_s, " s and ", w.tpot_target_s, " s)");
  dvfs::PolicyOptions po;
  po.learned_path = w.dvfs_policy;
  const auto policy = dvfs::make_policy(w.dvfs, model, po);
  device::SimDevice dev(model, idle);
  workload::Request r;
  r.prompt = w.prompt, r.output = w.output, r.slo = "tailor";
  r.ttft_target_s = w.ttft_target_s, r.tpot_target_s = w.tpot_target_s;
  dvfs::RunOptions ro;
  ro.n_batch = 512;
  const dvfs::RequestResult res = dvfs::run_workload(dev, *policy, {r}, {}, ro).front();
  return {res.ttft_s, res.tpot_s, res.e2e_s, res.energy_j};
}

Workload with_budget_targets(Workload w, const DeviceCost& dense_top, double latency_budget) {
  if (w.dvfs.empty() || w.dvfs == "performance") return w;
  w.tpot_target_s = latency_budget * dense_top.tpot_s;
  w.ttft_target_s = dense_top.ttft_s;
  return w;
}

double search_score(double ppl, const DeviceCost& cost, const Budget& b) {
  if (!(ppl > 0)) fail("search score: perplexity ", ppl, " is not positive");
  double s = 1.0 / ppl;
  if (b.energy_j > 0 && cost.energy_j > b.energy_j)
    s *= std::pow(b.energy_j / cost.energy_j, b.alpha);
  if (b.latency_s > 0 && cost.tpot_s > b.latency_s)
    s *= std::pow(b.latency_s / cost.tpot_s, b.beta);
  return s;
}

double validation_ppl(const std::string& model_path, const Validation& v) {
  const auto model = Model::load(model_path);
  const Tokenizer tok = Tokenizer::from_gguf(model->gguf());
  Context ctx(model, {v.seq_len, v.threads, v.seq_len});
  double sum = 0;
  int n = 0;
  for (const std::string& d : data::domain_names()) {
    const data::TokenFile f = data::read_token_file(data::token_file_path(v.data_dir, d, "valid"),
                                                    tok.vocab(), model_path);
    const eval::Windows w =
        eval::even_windows(static_cast<int64_t>(f.tokens.size()), v.seq_len, v.windows);
    sum += eval::windowed_nll(ctx, std::span<const uint16_t>(f.tokens), w).mean_nll;
    ++n;
  }
  return std::exp(sum / n);
}

double validation_ppl(const GgufFile& dense, const PrunePlan& plan, const Validation& v,
                      const std::string& tmp_dir) {
  std::filesystem::create_directories(tmp_dir);
  const std::string path =
      (std::filesystem::path(tmp_dir) / ("candidate-" + std::to_string(::getpid()) + ".gguf"))
          .string();
  write_pruned(dense, plan, path);
  const double ppl = validation_ppl(path, v);
  std::filesystem::remove(path);
  return ppl;
}

}  // namespace cln::prune
