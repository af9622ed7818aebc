// The governors, the static per-request clock, the MPC teacher and the learned MLP policy.
// The oracle lives in oracle.cpp.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "clone/core/error.h"
#include "clone/core/resources.h"
#include "clone/dvfs/mlp.h"
#include "clone/dvfs/policy.h"
#include "oracle.h"

namespace cln::dvfs {

using device::CostModel;

Estimates estimate(const CostModel& m, int64_t prompt, int64_t predicted_output, int64_t n_batch) {
  Estimates e;
  int nl = m.n_layer();
  e.prefill_layer_s.assign(static_cast<size_t>(nl + 1), 0);
  e.decode_layer_s.assign(static_cast<size_t>(nl + 1), 0);
  int top = m.max_level();
  e.n_batch = n_batch;
  for (int64_t pos = 0; pos < prompt; pos += n_batch) {
    int64_t n = std::min(n_batch, prompt - pos);
    e.prefill_pass_s.emplace_back(static_cast<size_t>(nl + 1), 0.0);
    for (int l = 0; l <= nl; ++l) {
      double t = m.cost(m.work(l, Phase::Prefill, pos, n), top, 0).time_s;
      e.prefill_pass_s.back()[static_cast<size_t>(l)] = t;
      e.prefill_layer_s[static_cast<size_t>(l)] += t;
    }
  }
  int64_t mid = prompt + std::max<int64_t>(predicted_output, 1) / 2;
  for (int l = 0; l <= nl; ++l)
    e.decode_layer_s[static_cast<size_t>(l)] =
        m.cost(m.work(l, Phase::Decode, mid, 1), top, 0).time_s;
  for (double t : e.prefill_layer_s) e.prefill_s += t;
  for (double t : e.decode_layer_s) e.decode_token_s += t;
  // The first and the last token's time: a token's grows with its position (its attention
  // reads the whole cache), so the mid-generation token underestimates a late decode's rest.
  e.decode_first_pos = prompt;
  e.decode_last_pos = prompt + std::max<int64_t>(predicted_output, 1) - 1;
  for (int l = 0; l <= nl; ++l) {
    e.decode_first_s += m.cost(m.work(l, Phase::Decode, e.decode_first_pos, 1), top, 0).time_s;
    e.decode_last_s += m.cost(m.work(l, Phase::Decode, e.decode_last_pos, 1), top, 0).time_s;
  }
  return e;
}

double Estimates::decode_token_at(int64_t pos) const {
  if (decode_last_pos <= decode_first_pos) return decode_last_s;
  const double f = static_cast<double>(pos - decode_first_pos) /
                   static_cast<double>(decode_last_pos - decode_first_pos);
  return decode_first_s + f * (decode_last_s - decode_first_s);
}

void features(const State& s, float* out) {
  auto clip = [](double v, double lo, double hi) {
    return static_cast<float>(std::clamp(v, lo, hi));
  };
  double nl = std::max(1, s.n_layer);
  bool dec = s.phase == Phase::Decode;
  out[0] = clip(0.5 * (s.corunner + s.corunner_ahead), 0, 1);
  out[1] = dec ? 1.0f : 0.0f;
  out[2] = clip(s.layer / nl, 0, 1);
  out[3] = clip(std::log(std::max(s.ttft_target_s, 1e-6) / std::max(s.ttft_est_s, 1e-6)), -1, 3);
  out[4] = clip(std::log(std::max(s.tpot_target_s, 1e-6) / std::max(s.tpot_est_s, 1e-6)), -1, 3);
  double total = static_cast<double>(s.tokens_done + s.predicted_remaining);
  out[5] = dec ? clip(static_cast<double>(s.tokens_done) / std::max(total, 1.0), 0, 1)
               : clip(s.layer / (nl + 1), 0, 1);
  out[6] = clip(std::log1p(static_cast<double>(s.predicted_remaining)), 0, 10);
  out[7] = clip(std::log(std::max(s.budget_left_s, 1e-6) / std::max(s.work_left_s, 1e-6)), -1, 2);
  out[8] = clip(s.slack_s / std::max(s.budget_left_s + s.phase_elapsed_s, 1e-6), -1, 1);
}

// Budget an online controller plans against: what is left, less a reserve for two clock
// switches and the larger of the forecast's burst reserve and 1% of the phase's whole budget
// for the estimate's error. The 1% is of the whole budget, not of what is left: near the end
// of a phase what is left is small, and a reserve shrinking with it let the last stretch of
// a co-runner above its estimate push a request past its target by a few tenths of a percent.
double usable_budget(const CostModel& m, const State& s) {
  const double reserve = std::max(0.01 * (s.budget_left_s + s.phase_elapsed_s), s.burst_reserve_s);
  return s.budget_left_s - reserve - 2 * m.switch_time_s();
}

int safe_level(const CostModel& m, const State& s, int k) {
  double budget = usable_budget(m, s);
  device::Work w = m.work(s.layer, s.phase, s.pos, s.n_tokens);
  double at_top = m.cost(w, m.max_level(), s.corunner).time_s;
  double rest = std::max(0.0, s.work_left_s - at_top);
  while (k < m.max_level() && m.cost(w, k, s.corunner).time_s + rest > budget) ++k;
  return k;
}

namespace {

// The rest of the phase as groups of identical passes: (work, multiplicity), this layer
// first.
struct Group {
  device::Work w;
  double mult;
};
std::vector<Group> remaining_groups(const CostModel& m, const State& s) {
  const int nl = m.n_layer();
  std::vector<Group> g;
  for (int l = s.layer; l <= nl; ++l) g.push_back({m.work(l, s.phase, s.pos, s.n_tokens), 1});
  if (s.phase == Phase::Prefill) {
    // Later passes of the prompt, assumed as long as this one (the engine's batch).
    for (int64_t p = s.pos + s.n_tokens; p < s.prompt; p += s.n_tokens)
      for (int l = 0; l <= nl; ++l)
        g.push_back({m.work(l, Phase::Prefill, p, std::min(s.n_tokens, s.prompt - p)), 1});
  } else {
    double more = static_cast<double>(std::max<int64_t>(s.predicted_remaining - 1, 0));
    if (more > 0) {
      int64_t mid = s.pos + 1 + static_cast<int64_t>(more / 2);
      for (int l = 0; l <= nl; ++l) g.push_back({m.work(l, Phase::Decode, mid, 1), more});
    }
  }
  return g;
}

// The time and energy of the rest of the phase the controller plans over (this layer on,
// the decode to its horizon) with the clock held at one level throughout. The pass's
// per-layer costs at a level and the later passes' are kept while the pass, the plan's
// length and the load stay the same, so each later layer of the pass costs a lookup.
class RestCosts {
 public:
  device::Cost at(const CostModel& m, const State& s, int level) {
    const Key key{s.phase,
                  s.pos,
                  s.n_tokens,
                  s.prompt,
                  s.predicted_remaining,
                  std::max(s.corunner, s.corunner_ahead)};
    if (!(key == key_)) key_ = key, by_level_.clear();
    Pass& p = by_level_[level];
    if (p.layer.empty()) {
      const int nl = m.n_layer();
      State first = s;
      first.layer = 0;
      const std::vector<Group> g = remaining_groups(m, first);
      for (size_t i = 0; i < g.size(); ++i) {
        const device::Cost k = m.cost(g[i].w, level, key.load);
        const device::Cost c{g[i].mult * k.time_s, g[i].mult * k.energy_j};
        if (i <= static_cast<size_t>(nl))
          p.layer.push_back(c);
        else
          p.later.push_back(c);
      }
    }
    // This pass's layers from s.layer, then the later passes.
    device::Cost c;
    for (size_t i = static_cast<size_t>(s.layer); i < p.layer.size(); ++i)
      c.time_s += p.layer[i].time_s, c.energy_j += p.layer[i].energy_j;
    for (const device::Cost& x : p.later) c.time_s += x.time_s, c.energy_j += x.energy_j;
    return c;
  }

 private:
  struct Key {
    Phase phase = Phase::Prefill;
    int64_t pos = -1, n_tokens = 0, prompt = 0, remaining = 0;
    double load = -1;
    bool operator==(const Key&) const = default;
  };
  struct Pass {
    std::vector<device::Cost> layer, later;
  };
  Key key_;
  std::map<int, Pass> by_level_;
};

// A clock change stalls the board (500 us on an Orin's GPU without the SFU, half a token
// of a 6 M-parameter model) and costs its energy. An online controller proposing level k
// changes to it only where it must or where it pays: where holding the current clock for
// the rest of what it plans over (the phase, the decode to its horizon) would not finish
// in the usable budget, a move up is taken; otherwise the change is made only to a clock
// that can be held for that rest, the stall included, and that costs less there, the
// change included. Not to a clock the guard must leave again a layer later, and not up
// for a layer while the current clock still serves the rest. A proposal down to a clock too
// slow to hold for that rest is taken as far as a clock can be held: the cheapest of those
// between it and the current one that fit, if that pays. (Before, such a proposal kept the
// current clock: on a cut model at a tight TPOT the first decode tokens ran at the top
// clock, 22 of them on the NX's 80%/65% search pick, while the net asked for one just below
// the target's and nothing in between was tried.)
int keep_or_change(const CostModel& m, const State& s, int k, RestCosts& rest) {
  if (k == s.level) return k;
  const device::Cost hold = rest.at(m, s, s.level);
  const double usable = usable_budget(m, s);
  if (k > s.level && hold.time_s > usable) return k;
  // Down from the clock next to the current one (or the proposal, if it is above) to the
  // proposal, while the rest still fits: a slower clock never finishes sooner.
  int best = s.level;
  double best_j = hold.energy_j;
  for (int j = k > s.level ? k : s.level - 1; j >= k; --j) {
    const device::Cost move = rest.at(m, s, j);
    if (move.time_s + m.switch_time_s() > usable) break;
    if (move.energy_j + m.switch_cost_j() < best_j)
      best = j, best_j = move.energy_j + m.switch_cost_j();
  }
  return best;
}

}  // namespace

int mpc_level(const CostModel& m, const State& s) {
  int top = m.max_level();
  double budget = usable_budget(m, s);
  if (budget <= 0) return top;
  int L = top + 1;
  const std::vector<Group> g = remaining_groups(m, s);
  std::vector<double> t(g.size() * static_cast<size_t>(L)), e(t.size());
  for (size_t i = 0; i < g.size(); ++i)
    for (int k = 0; k < L; ++k) {
      // This layer runs under the co-runner now; later ones for the forecast
      // over the time the phase has left, or for its load now if that is more.
      auto c = m.cost(g[i].w, k, i == 0 ? s.corunner : std::max(s.corunner, s.corunner_ahead));
      t[i * L + k] = c.time_s * g[i].mult;
      e[i * L + k] = c.energy_j * g[i].mult;
    }
  auto solve = [&](double lambda, int* first) {
    double total = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      int best = 0;
      double bv = e[i * L] + lambda * t[i * L];
      for (int k = 1; k < L; ++k) {
        double v = e[i * L + k] + lambda * t[i * L + k];
        if (v < bv) bv = v, best = k;
      }
      if (i == 0 && first) *first = best;
      total += t[i * L + best];
    }
    return total;
  };
  int choice = top;
  if (solve(0, &choice) <= budget) return choice;
  double lo = 1e-4, hi = 1e6;
  if (solve(hi, &choice) > budget) return top;
  for (int it = 0; it < 40; ++it) {
    double mid = std::sqrt(lo * hi);
    if (solve(mid, nullptr) <= budget)
      hi = mid;
    else
      lo = mid;
  }
  solve(hi, &choice);
  return choice;
}

// The same plan with each clock change in it at its price (the oracle's Viterbi, on the
// controller's estimates). Nodes: in prefill this pass's layers from s.layer, each at its
// own clock, then the later passes' layers; in decode the rest of this token at one clock,
// then the later tokens to the horizon, each token (past 64 tokens, each run of equal
// tokens) one node at one clock: a change inside a decode token is a stall the next token
// would repeat. A change costs the switch's energy and, at the Lagrange price of time, its
// stall; with one price for every change the Viterbi pass takes O(nodes x levels). Bisection
// on the price brackets the budget with two plans, and the decision is the first clock of a
// blend of the two (below).
int mpc_switch_level(const CostModel& m, const State& s) {
  const int top = m.max_level();
  const double budget = usable_budget(m, s);
  if (budget <= 0) return top;
  const int L = top + 1;
  const int nl = m.n_layer();
  const double ahead = std::max(s.corunner, s.corunner_ahead);
  std::vector<double> t, e;  // [node][level]
  auto add_node = [&](const device::Work& w, double load) {
    for (int k = 0; k < L; ++k) {
      const device::Cost c = m.cost(w, k, load);
      t.push_back(c.time_s), e.push_back(c.energy_j);
    }
  };
  if (s.phase == Phase::Prefill) {
    // A node per layer of the passes left (each group is one layer once in prefill): this
    // layer under the load now, the others under the load ahead.
    const std::vector<Group> g = remaining_groups(m, s);
    for (size_t i = 0; i < g.size(); ++i) add_node(g[i].w, i == 0 ? s.corunner : ahead);
  } else {
    // The rest of this token at one clock: this layer under the load now, the others under
    // the load ahead.
    add_node(m.work(s.layer, s.phase, s.pos, s.n_tokens), s.corunner);
    const size_t at = t.size() - static_cast<size_t>(L);
    for (int l = s.layer + 1; l <= nl; ++l) {
      const device::Work w = m.work(l, s.phase, s.pos, s.n_tokens);
      for (int k = 0; k < L; ++k) {
        const device::Cost c = m.cost(w, k, ahead);
        t[at + static_cast<size_t>(k)] += c.time_s;
        e[at + static_cast<size_t>(k)] += c.energy_j;
      }
    }
    // Each later token costs what one at the middle of the rest does (as in the plain
    // MPC's plan); a node stands for one token, or past 64 for a run of them.
    const int64_t more = std::max<int64_t>(s.predicted_remaining - 1, 0);
    std::vector<double> tt(static_cast<size_t>(L)), ee(tt.size());
    for (int l = 0; more > 0 && l <= nl; ++l) {
      const device::Work w = m.work(l, Phase::Decode, s.pos + 1 + more / 2, 1);
      for (int k = 0; k < L; ++k) {
        const device::Cost c = m.cost(w, k, ahead);
        tt[static_cast<size_t>(k)] += c.time_s, ee[static_cast<size_t>(k)] += c.energy_j;
      }
    }
    const int64_t run = (more + 63) / 64;
    for (int64_t done = 0; done < more; done += run) {
      const double n = static_cast<double>(std::min(run, more - done));
      for (size_t k = 0; k < tt.size(); ++k) t.push_back(n * tt[k]), e.push_back(n * ee[k]);
    }
  }
  const size_t N = t.size() / static_cast<size_t>(L);
  const double sw_t = m.switch_time_s(), sw_e = m.switch_cost_j();
  // The cheapest plan at price lambda (a clock per node): Viterbi with back pointers. A
  // node's best arrival at level k is the better of staying at k and the cheapest level
  // plus a change; on a tie it stays.
  std::vector<double> d(static_cast<size_t>(L)), nd(d.size());
  std::vector<int> from(N * static_cast<size_t>(L));
  auto solve = [&](double lambda) {
    const double sw = sw_e + lambda * sw_t;
    for (size_t k = 0; k < d.size(); ++k)
      d[k] = e[k] + lambda * t[k] + (static_cast<int>(k) != s.level ? sw : 0);
    for (size_t i = 1; i < N; ++i) {
      size_t cheapest = 0;
      for (size_t k = 1; k < d.size(); ++k)
        if (d[k] < d[cheapest]) cheapest = k;
      for (size_t k = 0; k < d.size(); ++k) {
        const size_t at = i * d.size() + k;
        const bool stay = d[k] <= d[cheapest] + sw;
        nd[k] = (stay ? d[k] : d[cheapest] + sw) + e[at] + lambda * t[at];
        from[at] = static_cast<int>(stay ? k : cheapest);
      }
      std::swap(d, nd);
    }
    std::vector<int> plan(N);
    size_t best = 0;
    for (size_t k = 1; k < d.size(); ++k)
      if (d[k] < d[best]) best = k;
    plan[N - 1] = static_cast<int>(best);
    for (size_t i = N - 1; i > 0; --i)
      plan[i - 1] = from[i * d.size() + static_cast<size_t>(plan[i])];
    return plan;
  };
  // A plan's time and energy, its changes (from the current clock on) included.
  struct Totals {
    double time_s = 0, energy_j = 0;
  };
  auto totals = [&](const std::vector<int>& a, const std::vector<int>& b, size_t j) {
    Totals x;  // a's nodes before j, b's from j on
    int prev = s.level;
    for (size_t i = 0; i < N; ++i) {
      const int k = i < j ? a[i] : b[i];
      const size_t at = i * static_cast<size_t>(L) + static_cast<size_t>(k);
      if (k != prev) x.time_s += sw_t, x.energy_j += sw_e;
      x.time_s += t[at], x.energy_j += e[at];
      prev = k;
    }
    return x;
  };
  std::vector<int> fast = solve(0);
  if (totals(fast, fast, N).time_s <= budget) return fast[0];
  double lo = 1e-4, hi = 1e6;
  fast = solve(hi);
  if (totals(fast, fast, N).time_s > budget) return top;
  // To 0.01% of the price (18 halvings of the bracket's log): the two plans that bracket
  // the budget then differ by little, and a finer price rarely changes the first clock.
  while (hi > 1.0001 * lo) {
    const double mid = std::sqrt(lo * hi);
    const std::vector<int> plan = solve(mid);
    if (totals(plan, plan, N).time_s <= budget)
      hi = mid;
    else
      lo = mid;
  }
  // The relaxation gives only the plans at the price's break points: just above it the
  // faster plan (it fits), just below the slower (it does not); the cheapest plan that
  // fits lies between, a prefix of one and the rest of the other, one change between. The
  // order of the two parts costs the same change, but which part runs first decides the
  // clock now: the current clock is kept where a blend that starts with it fits (so a
  // clock is left once, when the plan cannot go on with it, not for the few layers that
  // the nodes' grain happens to make cheaper), else the faster plan's first clock.
  fast = solve(hi);
  const std::vector<int> slow = solve(lo);
  int choice = fast[0];
  if (slow[0] == s.level && fast[0] != s.level)
    for (size_t j = 1; j < N && choice != s.level; ++j)
      if (totals(slow, fast, j).time_s <= budget) choice = s.level;
  return choice;
}

namespace {

class Performance : public Policy {
 public:
  explicit Performance(int top) : top_(top) {}
  std::string name() const override { return "performance"; }
  bool reads_forecast() const override { return false; }
  int decide(const State&) override { return top_; }

 private:
  int top_;
};

class Powersave : public Policy {
 public:
  std::string name() const override { return "powersave"; }
  bool reads_forecast() const override { return false; }
  int decide(const State&) override { return 0; }
};

class Schedutil : public Policy {
 public:
  Schedutil(std::shared_ptr<const CostModel> m, double window) : m_(std::move(m)), window_(window) {
    level_ = m_->max_level();
  }
  std::string name() const override { return "schedutil"; }
  bool reads_forecast() const override { return false; }
  int decide(const State& s) override {
    double fmax = m_->levels().back().mhz;
    double f = m_->levels()[static_cast<size_t>(s.level)].mhz;
    busy_ += s.util * s.last_layer_s * f / fmax;  // frequency-invariant utilisation
    time_ += s.last_layer_s;
    if (time_ >= window_) {
      double util = busy_ / time_;
      level_ = m_->level_at_least(1.25 * util * fmax);
      busy_ = time_ = 0;
    }
    return level_;
  }

 private:
  std::shared_ptr<const CostModel> m_;
  double window_, busy_ = 0, time_ = 0;
  int level_;
};

}  // namespace

SingleClock predict_single_clock(const CostModel& m, int level, const RequestInfo& r,
                                 double corunner, int64_t n_batch) {
  const int nl = m.n_layer();
  const int64_t n_out = std::max<int64_t>(r.predicted_output, 1);
  const int64_t mid = r.prompt + n_out / 2;
  SingleClock p;
  p.ttft_s = r.start_s - r.arrival_s;
  double e_pre = 0, e_tok = 0;
  for (int64_t pos = 0; pos < r.prompt; pos += n_batch)
    for (int l = 0; l <= nl; ++l) {
      const auto c = m.cost(m.work(l, Phase::Prefill, pos, std::min(n_batch, r.prompt - pos)),
                            level, corunner);
      p.ttft_s += c.time_s, e_pre += c.energy_j;
    }
  for (int l = 0; l <= nl; ++l) {
    const auto c = m.cost(m.work(l, Phase::Decode, mid, 1), level, corunner);
    p.tpot_s += c.time_s, e_tok += c.energy_j;
  }
  p.energy_j = e_pre + static_cast<double>(n_out - 1) * e_tok;
  return p;
}

namespace {

class StaticPerRequest : public Policy {
 public:
  StaticPerRequest(std::shared_ptr<const CostModel> m, int64_t n_batch)
      : m_(std::move(m)), n_batch_(n_batch) {}
  std::string name() const override { return "static"; }
  bool reads_forecast() const override { return false; }
  // The cheapest single clock whose predicted TTFT and TPOT meet the SLO (not the lowest
  // such clock: below the energy-optimal clock a slower run costs more static energy).
  void begin(const RequestInfo& r, const device::SimDevice* sim) override {
    // The co-runner's load now is observable (a load average); its future is not.
    const double s = sim ? sim->corunner_intensity() : 0;
    // Moving off the clock the board is at stalls it once, before the prefill: on a short
    // prompt and a board without fast switching (500 us on an Orin's GPU) that stall alone
    // can spend the TTFT target.
    const int now = sim ? sim->level() : m_->max_level();
    const double sw_t = m_->switch_time_s(), sw_e = m_->switch_cost_j();
    level_ = now;
    double best = std::numeric_limits<double>::infinity();
    for (int k = 0; k <= m_->max_level(); ++k) {
      SingleClock p = predict_single_clock(*m_, k, r, s, n_batch_);
      if (k != now) p.ttft_s += sw_t, p.energy_j += sw_e;
      if (p.meets(r) && p.energy_j < best) best = p.energy_j, level_ = k;
    }
    if (!std::isfinite(best)) level_ = m_->max_level();  // none meets: the fastest
  }
  int decide(const State&) override { return level_; }

 private:
  std::shared_ptr<const CostModel> m_;
  int64_t n_batch_;
  int level_ = 0;
};

// The load-based GPU governor a Jetson ships (devfreq's nvhost_podgov): the clock follows
// the share of wall time the GPU was busy over a window, whatever the arithmetic utilisation
// of its kernels; above the upper threshold it scales up to bring the load to the target,
// below the lower one it scales down. Busy while serving, so it rises to the top clock;
// after an idle gap it starts low and ramps up.
class LoadGovernor : public Policy {
 public:
  LoadGovernor(std::shared_ptr<const CostModel> m, double window)
      : m_(std::move(m)), window_(window), level_(m_->max_level()) {}
  std::string name() const override { return "podgov"; }
  bool reads_forecast() const override { return false; }
  int decide(const State& s) override {
    if (last_now_ < 0) last_now_ = s.now_s - s.last_layer_s;
    busy_ += s.last_layer_s;
    wall_ += std::max(s.now_s - last_now_, s.last_layer_s);
    last_now_ = s.now_s;
    if (wall_ >= window_) {
      const double load = std::min(1.0, busy_ / wall_);
      const double f = m_->levels()[static_cast<size_t>(level_)].mhz;
      if (load > kUp || load < kDown) level_ = m_->level_at_least(f * load / kTarget);
      busy_ = wall_ = 0;
    }
    return level_;
  }

 private:
  static constexpr double kUp = 0.85, kDown = 0.5, kTarget = 0.7;
  std::shared_ptr<const CostModel> m_;
  double window_, busy_ = 0, wall_ = 0, last_now_ = -1;
  int level_;
};

class Mpc : public Policy {
 public:
  explicit Mpc(std::shared_ptr<const CostModel> m) : m_(std::move(m)) {}
  std::string name() const override { return "mpc"; }
  int decide(const State& s) override { return keep_or_change(*m_, s, mpc_level(*m_, s), rest_); }

 private:
  std::shared_ptr<const CostModel> m_;
  RestCosts rest_;
};

// The MPC whose plan prices the switch: it follows its own plan (no hold rule, which only
// stands in for the price the plain MPC's plan leaves out).
class MpcSwitch : public Policy {
 public:
  explicit MpcSwitch(std::shared_ptr<const CostModel> m) : m_(std::move(m)) {}
  std::string name() const override { return "mpc-switch"; }
  int decide(const State& s) override { return mpc_switch_level(*m_, s); }

 private:
  std::shared_ptr<const CostModel> m_;
};

class Learned : public Policy {
 public:
  Learned(std::shared_ptr<const CostModel> m, Mlp net) : m_(std::move(m)), net_(std::move(net)) {
    if (net_.n_in != kFeatures)
      fail("learned DVFS policy: the network takes ", net_.n_in, " inputs, the controller gives ",
           kFeatures);
  }
  std::string name() const override { return "learned"; }
  int decide(const State& s) override {
    // Guard: behind schedule even at the top clock -> top clock, whatever the net says.
    // "Behind" by the cost model at the load planned for (as the hold rule below judges a
    // clock), not by the estimates' work_left_s, which scale a whole layer's time for the
    // co-runner where the model scales only its compute and memory parts: on a model whose
    // layers are mostly fixed overhead the two disagree, and the guard sent the clock up at
    // one layer that the hold rule let down again at the next (a switch a token).
    const int top = m_->max_level();
    if (usable_budget(*m_, s) <= rest_.at(*m_, s, top).time_s) return top;
    float x[kFeatures];
    features(s, x);
    const auto& lv = m_->levels();
    double f = lv.front().mhz + net_.forward(x) * (lv.back().mhz - lv.front().mhz);
    int best = 0;
    for (int k = 1; k <= m_->max_level(); ++k)
      if (std::abs(lv[static_cast<size_t>(k)].mhz - f) <
          std::abs(lv[static_cast<size_t>(best)].mhz - f))
        best = k;
    const int k = safe_level(*m_, s, best);
    return keep_or_change(*m_, s, k, rest_);
  }

 private:
  std::shared_ptr<const CostModel> m_;
  Mlp net_;
  RestCosts rest_;
};

}  // namespace

std::string default_learned_path(const CostModel& m) {
  namespace fs = std::filesystem;
  const std::string dir = resource_path(Resource::Models, "dvfs");
  std::vector<std::string> folders{dir};
  if (fs::is_directory(dir)) {
    std::vector<std::string> subs;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_directory()) subs.push_back(e.path().string());
    std::sort(subs.begin(), subs.end());
    folders.insert(folders.end(), subs.begin(), subs.end());
  }
  auto named = [&](const std::string& file) {
    std::vector<std::string> found;
    for (const auto& f : folders)
      if (fs::exists(f + "/" + file)) found.push_back(f + "/" + file);
    return found;
  };
  std::vector<std::string> cands;
  if (!m.options().mode.empty()) cands = named(m.profile().name + "." + m.options().mode + ".json");
  if (cands.empty()) cands = named(m.profile().name + ".json");
  if (cands.empty()) return dir + "/" + m.profile().name + ".json";  // the error names it
  const double params = static_cast<double>(std::max<int64_t>(1, m.model().n_params()));
  std::string best = cands.front();
  double best_d = std::numeric_limits<double>::infinity();
  for (const auto& c : cands) {
    const int64_t p = load_mlp_meta(c).model_params;
    const double d = p > 0 ? std::abs(std::log(static_cast<double>(p) / params))
                           : std::numeric_limits<double>::infinity();
    if (d < best_d) best = c, best_d = d;
  }
  return best;
}

std::shared_ptr<const Mlp> load_learned_net(const CostModel& model,
                                            const std::string& learned_path) {
  const std::string path = learned_path.empty() ? default_learned_path(model) : learned_path;
  if (!std::filesystem::exists(path))
    fail("learned DVFS policy: no weights at ", path,
         " (train them with `clone dvfs train --profile ", model.profile().name, "`)");
  return std::make_shared<const Mlp>(Mlp::load(path));
}

std::unique_ptr<Policy> make_policy(const std::string& name, std::shared_ptr<const CostModel> model,
                                    const PolicyOptions& opt) {
  if (name == "performance") return std::make_unique<Performance>(model->max_level());
  if (name == "powersave") return std::make_unique<Powersave>();
  if (name == "schedutil") return std::make_unique<Schedutil>(model, opt.schedutil_window_s);
  if (name == "static") return std::make_unique<StaticPerRequest>(model, opt.n_batch);
  if (name == "podgov") return std::make_unique<LoadGovernor>(model, opt.schedutil_window_s);
  if (name == "mpc") return std::make_unique<Mpc>(model);
  if (name == "mpc-switch") return std::make_unique<MpcSwitch>(model);
  if (name == "oracle") return make_oracle(model, opt.n_batch);
  if (name == "learned")
    return std::make_unique<Learned>(
        model, opt.learned_net ? *opt.learned_net : *load_learned_net(*model, opt.learned_path));
  fail("unknown DVFS controller \"", name,
       "\" (have: performance, powersave, schedutil, podgov, static, learned, mpc, mpc-switch, "
       "oracle)");
}

std::vector<std::string> policy_names() {
  return {"performance", "powersave", "schedutil", "podgov", "static", "learned", "oracle"};
}

}  // namespace cln::dvfs
