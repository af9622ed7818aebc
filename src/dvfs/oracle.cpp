// The oracle: minimum-energy schedule of clock levels over every (pass, layer) of a
// request such that TTFT <= target and mean TPOT <= target, knowing the true output
// length and the co-runner's future.
//
// Each phase is a resource-constrained shortest path: nodes are layer passes, a node's
// cost at level k is E_ik with duration T_ik, and changing level costs the switch
// energy and latency. Lagrangian relaxation turns the time budget into a price lambda:
// a Viterbi pass minimises sum E + lambda*T (+ switch costs) exactly, and bisection on
// lambda finds the cheapest schedule within the budget. The relaxation can leave slack
// when identical passes all jump to the next level together, so the last step blends
// the two schedules that bracket the budget (a prefix at the faster one), which brings
// the result within one node of the LP bound. The co-runner's intensity depends on when
// each node runs, which depends on the schedule: three fixed-point rounds, then a replay
// on a copy of the simulator confirms the SLO (tightening the budget if it slipped). Under a
// co-runner that changes over time, when the prefill ends decides what the decode meets, so
// prefills around each single clock are tried too, each followed by its decode, on replay.
// Last, the plan is replayed beside every uniform plan (each single clock, the top one being
// the performance governor) and the cheapest that meets the SLO is kept: so on a feasible
// request the oracle never spends more than performance or the best single clock.
#include "oracle.h"

#include <algorithm>
#include <cmath>

#include "clone/core/error.h"
#include "clone/device/calibrate.h"

namespace cln::dvfs {

using device::CostModel;

namespace {

class Oracle : public Policy {
 public:
  Oracle(std::shared_ptr<const CostModel> m, int64_t n_batch)
      : m_(std::move(m)), n_batch_(n_batch) {}
  std::string name() const override { return "oracle"; }
  bool reads_forecast() const override { return false; }  // it plans with the trace itself
  void begin(const RequestInfo& r, const device::SimDevice* sim) override;
  int decide(const State& s) override {
    if (next_ >= plan_.size() || nodes_[next_].layer != s.layer) return m_->max_level();
    return plan_[next_++];
  }

 private:
  struct Segment {
    size_t a, b;  // node range
    double budget;
  };
  std::vector<int> solve(const Segment& seg, int prev, double sw_t, double sw_e) const;
  // Plan p's time and energy over the segment, each change (from level prev on) at its
  // stall and its energy.
  device::Cost seg_cost(const std::vector<int>& p, const Segment& seg, int prev, double sw_t,
                        double sw_e) const;
  struct Replay {
    bool ok = false;  // the SLO held
    double energy_j = 0;
  };
  // Runs plan p on a copy of the simulator (its co-runner future included): exact.
  Replay replay(const RequestInfo& r, const device::SimDevice& sim,
                const std::vector<int>& p) const;
  // Keeps the cheapest of plan_ and the uniform plans (every single level, the top one =
  // the performance governor) among those that meet the SLO on replay.
  void keep_cheapest(const RequestInfo& r, const device::SimDevice& sim);

  std::shared_ptr<const CostModel> m_;
  int64_t n_batch_;
  std::vector<LayerEvent> nodes_;
  std::vector<int> plan_;
  std::vector<double> T_, E_;  // [node, level]
  size_t next_ = 0;
  int L_ = 0;
};

device::Cost Oracle::seg_cost(const std::vector<int>& p, const Segment& seg, int prev, double sw_t,
                              double sw_e) const {
  device::Cost c;
  for (size_t i = seg.a; i < seg.b; ++i) {
    int k = p[i - seg.a];
    if (k != prev) c.time_s += sw_t, c.energy_j += sw_e;
    c.time_s += T_[i * L_ + k];
    c.energy_j += E_[i * L_ + k];
    prev = k;
  }
  return c;
}

std::vector<int> Oracle::solve(const Segment& seg, int prev, double sw_t, double sw_e) const {
  size_t n = seg.b - seg.a;
  std::vector<int> path(n, L_ - 1);
  if (n == 0) return path;
  std::vector<double> dp(L_), nd(L_);
  std::vector<int16_t> back(n * L_);
  auto viterbi = [&](double lambda) {
    double sw = sw_e + lambda * sw_t;
    for (int k = 0; k < L_; ++k) dp[k] = (k == prev ? 0 : sw);
    for (size_t i = 0; i < n; ++i) {
      size_t node = seg.a + i;
      int best = 0;
      for (int k = 1; k < L_; ++k)
        if (dp[k] < dp[best]) best = k;
      for (int k = 0; k < L_; ++k) {
        double stay = dp[k], move = dp[best] + sw;
        int from = stay <= move ? k : best;
        nd[k] = std::min(stay, move) + E_[node * L_ + k] + lambda * T_[node * L_ + k];
        back[i * L_ + k] = static_cast<int16_t>(i == 0 ? k : from);
      }
      std::swap(dp, nd);
    }
    std::vector<int> p(n);
    int k = static_cast<int>(std::min_element(dp.begin(), dp.end()) - dp.begin());
    for (size_t i = n; i-- > 0;) {
      p[i] = k;
      k = back[i * L_ + k];
    }
    return p;
  };
  auto cost = [&](const std::vector<int>& p) { return seg_cost(p, seg, prev, sw_t, sw_e); };
  std::vector<int> fast(n, L_ - 1);
  if (cost(fast).time_s > seg.budget) return fast;  // infeasible: run flat out
  std::vector<int> p0 = viterbi(0);
  if (cost(p0).time_s <= seg.budget) return p0;
  double lo = 1e-3, hi = 1e4;
  std::vector<int> phi = viterbi(hi), plo = p0;
  if (cost(phi).time_s > seg.budget) phi = fast;
  for (int it = 0; it < 24; ++it) {
    double mid = std::sqrt(lo * hi);
    std::vector<int> p = viterbi(mid);
    if (cost(p).time_s <= seg.budget)
      hi = mid, phi = std::move(p);
    else
      lo = mid, plo = std::move(p);
  }
  // Blend: the first j nodes as in the fast plan, the rest as in the slow one.
  size_t a = 0, b = n;
  auto blend = [&](size_t j) {
    std::vector<int> p(plo);
    std::copy(phi.begin(), phi.begin() + static_cast<std::ptrdiff_t>(j), p.begin());
    return p;
  };
  while (a < b) {
    size_t mid = (a + b) / 2;
    if (cost(blend(mid)).time_s <= seg.budget)
      b = mid;
    else
      a = mid + 1;
  }
  std::vector<int> mix = blend(a);
  if (cost(mix).time_s <= seg.budget && cost(mix).energy_j < cost(phi).energy_j) return mix;
  return phi;
}

Oracle::Replay Oracle::replay(const RequestInfo& r, const device::SimDevice& sim,
                              const std::vector<int>& p) const {
  device::SimDevice dev = sim;
  const double e0 = dev.energy_j();
  size_t P = 0;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].phase == Phase::Prefill) P = i + 1;
  double first = dev.now_s();
  for (size_t i = 0; i < nodes_.size(); ++i) {
    dev.set_level(p[i]);
    dev.on_layer(nodes_[i]);
    if (i + 1 == P) first = dev.now_s();
  }
  bool ok = first - r.arrival_s <= r.ttft_target_s + 1e-9;
  if (r.true_output > 1)
    ok = ok &&
         (dev.now_s() - first) / static_cast<double>(r.true_output - 1) <= r.tpot_target_s + 1e-9;
  return {ok, dev.energy_j() - e0};
}

void Oracle::keep_cheapest(const RequestInfo& r, const device::SimDevice& sim) {
  Replay best = replay(r, sim, plan_);
  std::vector<int> uniform(plan_.size());
  for (int k = 0; k < L_; ++k) {
    std::fill(uniform.begin(), uniform.end(), k);
    const Replay u = replay(r, sim, uniform);
    if (u.ok && (!best.ok || u.energy_j < best.energy_j)) best = u, plan_ = uniform;
  }
}

void Oracle::begin(const RequestInfo& r, const device::SimDevice* sim) {
  if (!sim)
    fail("the oracle controller needs the simulated device (it reads the co-runner's future)");
  nodes_.clear();
  next_ = 0;
  device::for_each_request_event(m_->n_layer(), r.prompt, r.true_output, n_batch_,
                                 [&](const LayerEvent& ev) {
                                   nodes_.push_back(ev);
                                   return true;
                                 });
  size_t N = nodes_.size();
  size_t P = 0;
  for (size_t i = 0; i < N; ++i)
    if (nodes_[i].phase == Phase::Prefill) P = i + 1;
  L_ = m_->max_level() + 1;
  T_.assign(N * L_, 0);
  E_.assign(N * L_, 0);
  // The oracle knows the board as it is (its cost model, not the one controllers plan with).
  const CostModel& dm = sim->model();
  std::vector<device::Work> work(N);
  for (size_t i = 0; i < N; ++i)
    work[i] = dm.work(nodes_[i].layer, nodes_[i].phase, nodes_[i].pos, nodes_[i].n_tokens);
  double sw_t = dm.switch_time_s();
  double sw_e = dm.switch_cost_j();
  plan_.assign(N, L_ - 1);
  std::vector<int> fast(N, L_ - 1);
  // The cost of every node at every level, at the times the nodes start under plan p (the
  // co-runner's intensity then).
  const auto time_nodes = [&](const std::vector<int>& p) {
    double t = sim->now_s();
    int prev = sim->level();
    for (size_t i = 0; i < N; ++i) {
      if (p[i] != prev) t += sw_t;
      double s = sim->corunner_at(t);
      for (int k = 0; k < L_; ++k) {
        auto c = dm.cost(work[i], k, s);
        T_[i * L_ + k] = c.time_s;
        E_[i * L_ + k] = c.energy_j;
      }
      t += T_[i * L_ + p[i]];
      prev = p[i];
    }
  };
  const auto decode_segment = [&](double tighten) {
    return Segment{
        P, N,
        tighten * r.tpot_target_s * static_cast<double>(std::max<int64_t>(r.true_output - 1, 0))};
  };
  double tighten = 1.0;
  for (int attempt = 0; attempt < 6; ++attempt) {
    for (int round = 0; round < 3; ++round) {
      time_nodes(plan_);
      Segment pre{0, P, tighten * (r.ttft_target_s - (r.start_s - r.arrival_s))};
      std::vector<int> pp = solve(pre, sim->level(), sw_t, sw_e);
      std::vector<int> pd =
          solve(decode_segment(tighten), pp.empty() ? sim->level() : pp.back(), sw_t, sw_e);
      std::copy(pp.begin(), pp.end(), plan_.begin());
      std::copy(pd.begin(), pd.end(), plan_.begin() + static_cast<std::ptrdiff_t>(P));
    }
    if (replay(r, *sim, plan_).ok) break;
    tighten *= 0.98;
    // The SLO slipped every time (or cannot be met at all): flat out, unless a uniform
    // plan below does better.
    if (attempt == 5) plan_ = fast;
  }
  // The phases are planned one after the other, but under a co-runner that changes over
  // time when the prefill ends decides what the decode meets: a slower prefill can cost
  // less in all. So also try prefills around each single clock (up to 8 of the grid): that
  // clock throughout, and the prefill solved again at the times it sets, each followed by
  // the decode as planned; the cheapest on replay then has its decode planned again at its
  // own times (two rounds). The cheapest plan that holds on replay is kept. Only where the
  // co-runner changes before the SLO's horizon: otherwise the phases do not interact.
  const double horizon = r.arrival_s + r.ttft_target_s +
                         r.tpot_target_s * static_cast<double>(std::max<int64_t>(r.true_output, 1));
  bool varies = false;
  for (int i = 1; i <= 256 && !varies; ++i)
    varies = sim->corunner_at(sim->now_s() + (horizon - sim->now_s()) * i / 256.0) !=
             sim->corunner_at(sim->now_s());
  if (varies && P > 0 && P < N) {
    Replay best = replay(r, *sim, plan_);
    std::vector<int> chosen = plan_;
    const Segment pre{0, P, tighten * (r.ttft_target_s - (r.start_s - r.arrival_s))};
    const int step = std::max(1, (L_ + 7) / 8);
    for (int k = L_ - 1; k >= 0; k -= step) {
      std::vector<int> p = plan_;
      std::fill(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(P), k);
      for (int variant = 0; variant < 2; ++variant) {
        if (variant == 1) {
          time_nodes(p);
          const std::vector<int> pp = solve(pre, sim->level(), sw_t, sw_e);
          std::copy(pp.begin(), pp.end(), p.begin());
        }
        const Replay x = replay(r, *sim, p);
        if (x.ok && (!best.ok || x.energy_j < best.energy_j)) best = x, chosen = p;
      }
    }
    std::vector<int> p = chosen;
    for (int round = 0; round < 2; ++round) {
      time_nodes(p);
      const std::vector<int> pd = solve(decode_segment(tighten), p[P - 1], sw_t, sw_e);
      std::copy(pd.begin(), pd.end(), p.begin() + static_cast<std::ptrdiff_t>(P));
      const Replay x = replay(r, *sim, p);
      if (x.ok && (!best.ok || x.energy_j < best.energy_j)) best = x, chosen = p;
    }
    plan_ = chosen;
  }
  // Under a co-runner that changes over time the relaxation's plan can cost more than
  // simply running at one clock (the fixed-point timing is approximate); the replay is
  // exact, so the oracle is never above the performance governor, nor above any single
  // clock, on a request that one of them serves in time.
  keep_cheapest(r, *sim);
}

}  // namespace

std::unique_ptr<Policy> make_oracle(std::shared_ptr<const CostModel> model, int64_t n_batch) {
  return std::make_unique<Oracle>(std::move(model), n_batch);
}

}  // namespace cln::dvfs
