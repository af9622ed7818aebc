#include "clone/dvfs/train.h"

#include <algorithm>
#include <sstream>

#include "clone/core/error.h"
#include "clone/core/rng.h"
#include "clone/device/calibrate.h"
#include "clone/dvfs/mlp_fit.h"
#include "clone/dvfs/policy.h"
#include "clone/dvfs/runner.h"
#include "clone/workload/workload.h"

namespace cln::dvfs {

namespace {

// Behaviour policy during data collection: the teacher (held for a pass, to keep round 0
// cheap) or the current student; either way it records teacher labels at sampled states.
class Collector : public Policy {
 public:
  Collector(std::shared_ptr<const device::CostModel> m, const Mlp* student, uint64_t seed,
            int every, std::vector<float>& x, std::vector<float>& y)
      : m_(std::move(m)), student_(student), rng_(seed), every_(every), x_(x), y_(y) {}
  std::string name() const override { return "collector"; }
  int decide(const State& s) override {
    const auto& lv = m_->levels();
    double span = lv.back().mhz - lv.front().mhz;
    bool label = rng_.below(static_cast<uint64_t>(every_)) == 0;
    int teacher = -1;
    if (label) {
      teacher = mpc_level(*m_, s);
      float f[kFeatures];
      features(s, f);
      x_.insert(x_.end(), f, f + kFeatures);
      y_.push_back(
          static_cast<float>((lv[static_cast<size_t>(teacher)].mhz - lv.front().mhz) / span));
    }
    if (!student_) {
      if (s.layer == 0 || held_ < 0) held_ = teacher >= 0 ? teacher : mpc_level(*m_, s);
      return held_;
    }
    if (usable_budget(*m_, s) <= s.work_left_s) return m_->max_level();
    float f[kFeatures];
    features(s, f);
    return safe_level(*m_, s,
                      m_->level_at_least(lv.front().mhz + student_->forward(f) * span -
                                         0.5 * m_->profile().sfu.step_mhz));
  }

 private:
  std::shared_ptr<const device::CostModel> m_;
  const Mlp* student_;
  Rng rng_;
  int every_;
  int held_ = -1;
  std::vector<float>& x_;  // [labelled states, kFeatures]
  std::vector<float>& y_;
};

}  // namespace

TrainResult train_policy(const device::DeviceProfile& profile, const ModelConfig& model,
                         const TrainOptions& opt) {
  device::CostOptions co;
  co.mode = opt.mode;
  co.sfu = true;  // the teacher plans on the fine grid: smooth labels
  auto m = std::make_shared<const device::CostModel>(profile, model, co);
  TrainResult tr;
  tr.net.init(kFeatures, opt.hidden, opt.seed);
  std::vector<float> x, y;
  auto say = [&](const std::string& s) {
    if (opt.log) opt.log(s);
  };
  {
    std::ostringstream os;
    os << "training DVFS MLP for " << profile.name << " / " << model.name << ": "
       << tr.net.n_params() << " parameters, " << opt.rounds << " rounds x "
       << opt.requests_per_pattern << " requests x 4 co-runners, seed " << opt.seed;
    if (opt.relative_share > 0)
      os << "; " << opt.relative_share << " of the requests with SLOs " << opt.relative_lo << "-"
         << opt.relative_hi << "x the top clock's own times";
    say(os.str());
  }
  const auto patterns = device::CorunnerTrace::pattern_names();
  for (int round = 0; round < opt.rounds; ++round) {
    size_t before = y.size();
    for (size_t pi = 0; pi < patterns.size(); ++pi) {
      uint64_t s = opt.seed * 1000003 + static_cast<uint64_t>(round) * 101 + pi;
      workload::GeneratorSpec gs;
      gs.kind = "chat";
      gs.n = static_cast<size_t>(opt.requests_per_pattern);
      gs.seed = s;
      gs.max_context = 2048;
      // Vary how tight the SLOs are so the policy sees slack of every size.
      auto reqs = workload::generate(gs);
      Rng rng(s);
      for (auto& r : reqs) {
        workload::apply_slo(r, workload::slo_class(r.slo), rng.uniform(0.85, 1.6));
        if (opt.relative_share > 0 && rng.uniform(0, 1) < opt.relative_share) {
          RequestInfo ri;
          ri.prompt = r.prompt, ri.predicted_output = ri.true_output = r.output;
          const SingleClock top = predict_single_clock(*m, m->max_level(), ri, 0, opt.n_batch);
          const double u = rng.uniform(opt.relative_lo, opt.relative_hi);
          r.ttft_target_s = u * top.ttft_s, r.tpot_target_s = u * top.tpot_s;
        }
      }
      device::SimDevice dev(m, device::CorunnerTrace::make(patterns[pi], s));
      Collector col(m, round == 0 ? nullptr : &tr.net, s, opt.label_every, x, y);
      RunOptions ro;
      ro.n_batch = opt.n_batch;
      ro.decode_horizon = opt.decode_horizon;
      run_workload(dev, col, reqs, LengthPredictor{}, ro);
    }
    FitOptions fo;
    fo.epochs = opt.epochs, fo.batch = opt.batch, fo.lr = opt.lr;
    tr.final_mse = fit(tr.net, x, y, fo, opt.seed + static_cast<uint64_t>(round));
    std::ostringstream os;
    os << "round " << round << ": +" << (y.size() - before) << " labelled states (" << y.size()
       << " total), fit MSE " << tr.final_mse << " (clock fraction^2)";
    say(os.str());
  }
  tr.samples = y.size();
  return tr;
}

}  // namespace cln::dvfs
