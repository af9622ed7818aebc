#include "clone/dvfs/train.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <random>
#include <sstream>

#include "clone/core/error.h"
#include "clone/device/calibrate.h"
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
            int every, std::vector<std::array<float, kFeatures>>& x, std::vector<float>& y)
      : m_(std::move(m)), student_(student), rng_(seed), every_(every), x_(x), y_(y) {}
  std::string name() const override { return "collector"; }
  int decide(const State& s) override {
    const auto& lv = m_->levels();
    double span = lv.back().mhz - lv.front().mhz;
    bool label = std::uniform_int_distribution<int>(0, every_ - 1)(rng_) == 0;
    int teacher = -1;
    if (label) {
      teacher = mpc_level(*m_, s);
      std::array<float, kFeatures> f;
      features(s, f.data());
      x_.push_back(f);
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
  std::mt19937_64 rng_;
  int every_;
  int held_ = -1;
  std::vector<std::array<float, kFeatures>>& x_;
  std::vector<float>& y_;
};

double fit(Mlp& net, const std::vector<std::array<float, kFeatures>>& x,
           const std::vector<float>& y, const TrainOptions& opt, uint64_t seed) {
  size_t n = x.size();
  int H = net.n_hidden, I = net.n_in;
  // Normalisation from the data.
  for (int i = 0; i < I; ++i) {
    double s = 0, s2 = 0;
    for (const auto& r : x)
      s += r[static_cast<size_t>(i)], s2 += r[static_cast<size_t>(i)] * r[static_cast<size_t>(i)];
    double mu = s / static_cast<double>(n), var = s2 / static_cast<double>(n) - mu * mu;
    net.mean[static_cast<size_t>(i)] = static_cast<float>(mu);
    net.scale[static_cast<size_t>(i)] = static_cast<float>(1 / std::sqrt(std::max(var, 1e-6)));
  }
  std::vector<float> xn(n * static_cast<size_t>(I));
  for (size_t k = 0; k < n; ++k)
    for (int i = 0; i < I; ++i)
      xn[k * I + i] = (x[k][static_cast<size_t>(i)] - net.mean[static_cast<size_t>(i)]) *
                      net.scale[static_cast<size_t>(i)];
  // Adam over all parameters laid out as one vector view.
  std::vector<float*> p;
  for (auto& v : net.w1) p.push_back(&v);
  for (auto& v : net.b1) p.push_back(&v);
  for (auto& v : net.w2) p.push_back(&v);
  p.push_back(&net.b2);
  std::vector<double> g(p.size()), m1(p.size(), 0), m2(p.size(), 0);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed);
  std::vector<float> h(static_cast<size_t>(H));
  double mse = 0;
  int64_t step = 0;
  for (int ep = 0; ep < opt.epochs; ++ep) {
    std::shuffle(order.begin(), order.end(), rng);
    double lr = opt.lr * (ep < opt.epochs * 2 / 3 ? 1.0 : 0.2);
    mse = 0;
    for (size_t b0 = 0; b0 < n; b0 += static_cast<size_t>(opt.batch)) {
      size_t b1 = std::min(n, b0 + static_cast<size_t>(opt.batch));
      std::fill(g.begin(), g.end(), 0);
      for (size_t bi = b0; bi < b1; ++bi) {
        size_t k = order[bi];
        const float* xi = &xn[k * I];
        float o = net.forward_norm(xi, h.data());
        double err = o - y[k];
        mse += err * err;
        double dz = 2 * err * o * (1 - o) / static_cast<double>(b1 - b0);
        size_t off_b1 = static_cast<size_t>(H * I), off_w2 = off_b1 + H, off_b2 = off_w2 + H;
        for (int j = 0; j < H; ++j) {
          g[off_w2 + j] += dz * h[static_cast<size_t>(j)];
          double da = dz * net.w2[static_cast<size_t>(j)] *
                      (1 - h[static_cast<size_t>(j)] * h[static_cast<size_t>(j)]);
          g[off_b1 + j] += da;
          for (int i = 0; i < I; ++i) g[static_cast<size_t>(j * I + i)] += da * xi[i];
        }
        g[off_b2] += dz;
      }
      ++step;
      double c1 = 1 - std::pow(0.9, static_cast<double>(step)),
             c2 = 1 - std::pow(0.999, static_cast<double>(step));
      for (size_t q = 0; q < p.size(); ++q) {
        m1[q] = 0.9 * m1[q] + 0.1 * g[q];
        m2[q] = 0.999 * m2[q] + 0.001 * g[q] * g[q];
        *p[q] -= static_cast<float>(lr * (m1[q] / c1) / (std::sqrt(m2[q] / c2) + 1e-8));
      }
    }
    mse /= static_cast<double>(n);
  }
  return mse;
}

}  // namespace

TrainResult train_policy(const device::DeviceProfile& profile, const ModelConfig& model,
                         const TrainOptions& opt) {
  device::CostOptions co;
  co.sfu = true;  // the teacher plans on the fine grid: smooth labels
  auto m = std::make_shared<const device::CostModel>(profile, model, co);
  TrainResult tr;
  tr.net.init(kFeatures, opt.hidden, opt.seed);
  std::vector<std::array<float, kFeatures>> x;
  std::vector<float> y;
  auto say = [&](const std::string& s) {
    if (opt.log) opt.log(s);
  };
  {
    std::ostringstream os;
    os << "training DVFS MLP for " << profile.name << " / " << model.name << ": "
       << tr.net.n_params() << " parameters, " << opt.rounds << " rounds x "
       << opt.requests_per_pattern << " requests x 4 co-runners, seed " << opt.seed;
    say(os.str());
  }
  const auto patterns = device::CorunnerTrace::pattern_names();
  for (int round = 0; round < opt.rounds; ++round) {
    size_t before = x.size();
    for (size_t pi = 0; pi < patterns.size(); ++pi) {
      uint64_t s = opt.seed * 1000003 + static_cast<uint64_t>(round) * 101 + pi;
      workload::GeneratorSpec gs;
      gs.kind = "chat";
      gs.n = static_cast<size_t>(opt.requests_per_pattern);
      gs.seed = s;
      gs.max_context = 2048;
      // Vary how tight the SLOs are so the policy sees slack of every size.
      auto reqs = workload::generate(gs);
      std::mt19937_64 rng(s);
      std::uniform_real_distribution<double> scale(0.85, 1.6);
      for (auto& r : reqs) workload::apply_slo(r, workload::slo_class(r.slo), scale(rng));
      device::SimDevice dev(m, device::CorunnerTrace::make(patterns[pi], s));
      Collector col(m, round == 0 ? nullptr : &tr.net, s, opt.label_every, x, y);
      RunOptions ro;
      ro.n_batch = opt.n_batch;
      run_workload(dev, col, reqs, LengthPredictor{}, ro);
    }
    tr.final_mse = fit(tr.net, x, y, opt, opt.seed + static_cast<uint64_t>(round));
    std::ostringstream os;
    os << "round " << round << ": +" << (x.size() - before) << " labelled states (" << x.size()
       << " total), fit MSE " << tr.final_mse << " (clock fraction^2)";
    say(os.str());
  }
  tr.samples = x.size();
  return tr;
}

}  // namespace cln::dvfs
