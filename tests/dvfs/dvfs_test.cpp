// DVFS controllers, the oracle's optimality, the learned policy's judged behaviour,
// infeasible SLOs, and the analytic and hook-driven paths agreeing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

#include <nlohmann/json.hpp>

#include "clone/core/error.h"
#include "clone/core/resources.h"
#include "clone/core/rng.h"
#include "clone/device/calibrate.h"
#include "clone/device/perturb.h"
#include "clone/dvfs/mlp.h"
#include "clone/dvfs/runner.h"
#include "clone/engine/presets.h"
#include "clone/gguf/gguf.h"
#include "clone/workload/workload.h"

using namespace cln;
using namespace cln::dvfs;

namespace {

std::string src(const std::string& rel) {
  return std::string(CLONE_SOURCE_DIR) + "/" + rel;
}

std::shared_ptr<const device::CostModel> nx_model(bool sfu = false) {
  device::CostOptions o;
  o.sfu = sfu;
  return std::make_shared<const device::CostModel>(
      device::DeviceProfile::load(src("profiles/orin-nx-16gb.json")), model_preset("gemma-2b"), o);
}

workload::Request req(int64_t id, int64_t prompt, int64_t output, double ttft, double tpot) {
  workload::Request r;
  r.id = id, r.prompt = prompt, r.output = output, r.ttft_target_s = ttft, r.tpot_target_s = tpot,
  r.slo = "test";
  return r;
}

// One request alone on a board under a constant co-runner, its targets ttft_x and tpot_x
// times what the top clock takes for it there: the controller's result, the board's clock
// changes, and the top clock's result.
struct SlackRun {
  RequestResult r;
  int64_t switches = 0;
  RequestResult top;
};
SlackRun run_at_slack(const std::shared_ptr<const device::CostModel>& m, const std::string& name,
                      const PolicyOptions& po, int64_t prompt, int64_t output, double ttft_x,
                      double tpot_x, double load = 0) {
  auto top = make_policy("performance", m);
  device::SimDevice d0(m, device::CorunnerTrace::constant(load));
  SlackRun out;
  out.top = run_workload(d0, *top, {req(0, prompt, output, 1, 1)}, {}, {}).front();
  auto pol = make_policy(name, m, po);
  device::SimDevice d(m, device::CorunnerTrace::constant(load));
  out.r = run_workload(d, *pol,
                       {req(1, prompt, output, ttft_x * out.top.ttft_s, tpot_x * out.top.tpot_s)},
                       {}, {})
              .front();
  out.switches = d.switches();
  return out;
}

std::vector<workload::Request> chat(size_t n, uint64_t seed) {
  workload::GeneratorSpec g;
  g.n = n, g.seed = seed, g.max_context = 2048;
  return workload::generate(g);
}

PolicyOptions shipped() {
  PolicyOptions o;
  o.learned_path = src("models/dvfs/orin-nx-16gb.json");
  return o;
}

}  // namespace

TEST(Policies, GovernorsBehaveAsNamed) {
  auto m = nx_model();
  auto reqs = chat(6, 3);
  std::map<std::string, Summary> s;
  for (const char* n : {"performance", "powersave", "schedutil", "podgov", "static"}) {
    auto pol = make_policy(n, m);
    device::SimDevice dev(m, device::CorunnerTrace::constant(0));
    s[n] = summarize(n, "idle", run_workload(dev, *pol, reqs, {}, {}));
  }
  EXPECT_LT(s["performance"].tpot_p50, s["powersave"].tpot_p50);
  EXPECT_EQ(s["performance"].switches_per_token, 0);
  // schedutil sees decode's low compute utilisation and drops the clock.
  EXPECT_GT(s["schedutil"].tpot_p50, 1.5 * s["performance"].tpot_p50);
  // podgov sees the GPU busy all the time while it serves: it stays near the top clock.
  EXPECT_LT(s["podgov"].tpot_p50, 1.05 * s["performance"].tpot_p50);
  // static picks one clock per request that meets the (idle) SLO with less energy.
  EXPECT_GE(s["static"].attainment, s["performance"].attainment);
  EXPECT_LT(s["static"].energy_j, s["performance"].energy_j);
  EXPECT_THROW(make_policy("turbo", m), Error);
  PolicyOptions missing;
  missing.learned_path = "/nonexistent/policy.json";
  EXPECT_THROW(make_policy("learned", m, missing), Error);
}

// podgov follows busy time: a request after an idle gap starts at a low clock and ramps
// up while the GPU stays busy; static takes the cheapest feasible clock, not the lowest.
TEST(Policies, LoadGovernorRampsAndStaticTakesTheCheapestClock) {
  auto m = nx_model();
  auto gov = make_policy("podgov", m);
  State s;
  s.level = m->max_level();
  s.last_layer_s = 0.001;
  s.now_s = 0.001;
  EXPECT_EQ(gov->decide(s), m->max_level());
  s.now_s = 1.0;  // idle for a second, then one short layer: load ~0.1%
  const int after_gap = gov->decide(s);
  EXPECT_EQ(after_gap, 0);
  int level = after_gap;
  for (int i = 0; i < 200; ++i) {  // busy back to back
    s.now_s += s.last_layer_s;
    level = gov->decide(s);
  }
  EXPECT_EQ(level, m->max_level());

  // Static: with a generous SLO every level is feasible; it takes the one of least predicted
  // energy, which is not the lowest clock on this board (static power makes slow runs cost).
  RequestInfo r;
  r.prompt = 128, r.predicted_output = 64, r.ttft_target_s = 1e3, r.tpot_target_s = 1e3;
  auto st = make_policy("static", m);
  st->begin(r, nullptr);
  const int chosen = st->decide(State{});
  auto energy_at = [&](int k) {
    double e = 0;
    for (int64_t pos = 0; pos < 128; pos += 512)
      for (int l = 0; l <= m->n_layer(); ++l)
        e += m->cost(m->work(l, Phase::Prefill, 0, 128), k, 0).energy_j;
    for (int l = 0; l <= m->n_layer(); ++l)
      e += 63 * m->cost(m->work(l, Phase::Decode, 128 + 32, 1), k, 0).energy_j;
    return e;
  };
  EXPECT_GT(chosen, 0);
  for (int k = 0; k <= m->max_level(); ++k) EXPECT_LE(energy_at(chosen), energy_at(k)) << k;
}

// Static moves the clock once, before the prefill, and that move stalls the board (500 us
// on an Orin NX's GPU without fast switching): on a short request the stall is a large part
// of the TTFT target, so the prediction it picks the clock by must count it.
TEST(Policies, StaticCountsTheSwitchItMakesAgainstTheTtftTarget) {
  device::CostOptions o;
  const auto m = std::make_shared<const device::CostModel>(
      device::DeviceProfile::load(src("profiles/orin-nx-16gb.json")), model_preset("base"), o);
  ASSERT_GT(m->switch_time_s(), 4e-4);
  const auto run = [&](const std::string& name, const workload::Request& r) {
    auto pol = make_policy(name, m);
    device::SimDevice dev(m, device::CorunnerTrace::constant(0));
    return run_workload(dev, *pol, {r}, {}, {}).front();
  };
  const RequestResult top = run("performance", req(0, 128, 64, 1, 1));
  // TTFT: the top clock's and a third of a stall more; TPOT: twice the top clock's, so a
  // slower clock is worth taking once the prefill is done.
  const workload::Request r = req(1, 128, 64, top.ttft_s + m->switch_time_s() / 3, 2 * top.tpot_s);
  const RequestResult st = run("static", r);
  EXPECT_TRUE(st.met) << "TTFT " << st.ttft_s << " s against " << r.ttft_target_s << " s";
  EXPECT_LE(st.energy_j, top.energy_j * (1 + 1e-9));
  // With the time to switch and prefill at a lower clock, it does move, and saves by it.
  const workload::Request loose =
      req(2, 128, 64, 4 * top.ttft_s + m->switch_time_s(), 2 * top.tpot_s);
  const RequestResult slow = run("static", loose);
  EXPECT_TRUE(slow.met);
  EXPECT_LT(slow.energy_j, 0.98 * top.energy_j);
}

// The oracle against exhaustive search on a problem small enough to enumerate.
// A decode token's time grows with its position; the estimate a controller plans the rest of
// a decode with follows it: exact at the first and last token, between them a chord of a
// convex curve (long by little), and a late token costs more than the mid-generation one.
TEST(Estimates, DecodeTokenTimeFollowsThePosition) {
  auto m = nx_model();
  const int64_t prompt = 1500, out = 2000;
  const auto e = estimate(*m, prompt, out, 512);
  auto token = [&](int64_t pos) {
    double t = 0;
    for (int l = 0; l <= m->n_layer(); ++l)
      t += m->cost(m->work(l, Phase::Decode, pos, 1), m->max_level(), 0).time_s;
    return t;
  };
  EXPECT_NEAR(e.decode_token_at(prompt), token(prompt), 1e-12);
  EXPECT_NEAR(e.decode_token_at(prompt + out - 1), token(prompt + out - 1), 1e-12);
  EXPECT_GT(e.decode_token_at(prompt + out - 1), e.decode_token_s * 1.002);
  for (int64_t pos : {prompt + 1, prompt + 700, prompt + 1999}) {
    EXPECT_GE(e.decode_token_at(pos), token(pos) * (1 - 1e-12)) << pos;
    EXPECT_LE(e.decode_token_at(pos), token(pos) * 1.002) << pos;
  }
}

// What the request driver tells a controller is left of a decode (work_left_s, idle
// co-runner, the true length predicted): the rest of this token from its layer on and every
// later token, at the top clock. All along a long generation it is within 0.2% of the cost
// model's own sum, and short of it by less than 1% of one token (the current token's layers
// are taken at mid-generation); planned with every later token at the mid-generation one's
// time, it would fall short by more than a token late in the decode.
TEST(Runner, PlansTheRestOfADecodeAtThePositionsItHasLeft) {
  auto m = nx_model();
  struct Recorder : Policy {
    int top = 0;
    std::vector<State> seen;
    std::string name() const override { return "recorder"; }
    int decide(const State& s) override {
      if (s.phase == Phase::Decode) seen.push_back(s);
      return top;
    }
  } rec;
  rec.top = m->max_level();
  const int64_t prompt = 1500, out = 2000;
  device::SimDevice dev(m, device::CorunnerTrace::constant(0));
  RunOptions whole;
  whole.decode_horizon = 0;  // the plan over the whole rest of the decode is what is checked
  run_workload(dev, rec, {req(0, prompt, out, 100, 1)}, {}, whole);
  ASSERT_EQ(rec.seen.size(), static_cast<size_t>((out - 1) * (m->n_layer() + 1)));
  // Decode passes run at positions prompt .. prompt + out - 2; suffix sums of their layers.
  const int64_t first = prompt, last = prompt + out - 2;
  std::vector<std::vector<double>> layer_s(static_cast<size_t>(last - first + 1));
  std::vector<double> after(layer_s.size() + 1, 0.0);  // the tokens after index i
  for (int64_t p = last; p >= first; --p) {
    auto& t = layer_s[static_cast<size_t>(p - first)];
    for (int l = 0; l <= m->n_layer(); ++l)
      t.push_back(m->cost(m->work(l, Phase::Decode, p, 1), m->max_level(), 0).time_s);
    double tok = 0;
    for (double x : t) tok += x;
    after[static_cast<size_t>(p - first)] = after[static_cast<size_t>(p - first + 1)] + tok;
  }
  const Estimates e = estimate(*m, prompt, out, 512);
  double long_rel = 0, short_s = 0, mid_short_s = 0;
  for (const State& s : rec.seen) {
    const auto i = static_cast<size_t>(s.pos - first);
    double truth = after[i + 1];
    for (int l = s.layer; l <= m->n_layer(); ++l) truth += layer_s[i][static_cast<size_t>(l)];
    long_rel = std::max(long_rel, s.work_left_s / truth - 1);
    short_s = std::max(short_s, truth - s.work_left_s);
    const double mid = truth - after[i + 1] + e.decode_token_s * static_cast<double>(last - s.pos);
    mid_short_s = std::max(mid_short_s, truth - mid);
  }
  EXPECT_LT(long_rel, 0.002);
  EXPECT_LT(short_s, 0.01 * e.decode_token_s);
  // What following the position is for: more than a token short, a hundred times worse.
  EXPECT_GT(mid_short_s, e.decode_token_s);
  EXPECT_GT(mid_short_s, 100 * short_s);
}

TEST(Oracle, MatchesExhaustiveSearchOnATinyProblem) {
  auto prof = device::DeviceProfile::load(src("profiles/orin-nx-16gb.json"));
  prof.compute().levels = {{306, 0.6}, {612, 0.7}, {918, 0.95}};
  ModelConfig tiny = model_preset("gemma-2b");
  tiny.layers.resize(2);
  auto m = std::make_shared<const device::CostModel>(prof, tiny);
  auto trace = device::CorunnerTrace::constant(0);
  device::SimDevice base(m, trace);
  // At the top clock: TTFT t0, TPOT p0. Give 30% slack on each.
  auto top = device::run_fixed(m, trace, 64, 4, -1, 512);
  auto r = req(0, 64, 4, 1.3 * top.ttft_s, 1.3 * top.tpot_s);
  std::vector<LayerEvent> ev;
  device::for_each_request_event(2, 64, 4, 512, [&](const LayerEvent& e) {
    ev.push_back(e);
    return true;
  });
  ASSERT_EQ(ev.size(), 12u);  // (2 layers + head) x (prefill + 3 decode passes)
  double best = 1e300;
  std::vector<int> lv(ev.size(), 0);
  std::function<void(size_t)> rec = [&](size_t i) {
    if (i == ev.size()) {
      device::SimDevice d = base;
      double first = 0;
      for (size_t k = 0; k < ev.size(); ++k) {
        d.set_level(lv[k]);
        d.on_layer(ev[k]);
        if (k == 2) first = d.now_s();
      }
      if (first <= r.ttft_target_s && (d.now_s() - first) / 3 <= r.tpot_target_s)
        best = std::min(best, d.energy_j());
      return;
    }
    for (int k = 0; k < 3; ++k) lv[i] = k, rec(i + 1);
  };
  rec(0);
  auto oracle = make_policy("oracle", m);
  device::SimDevice dev = base;
  auto res = run_workload(dev, *oracle, {r}, {}, {});
  ASSERT_TRUE(res[0].met);
  EXPECT_LE(res[0].energy_j, best * 1.02)
      << "oracle " << res[0].energy_j << " J, exhaustive " << best << " J";
  EXPECT_GE(res[0].energy_j, best * (1 - 1e-9));
}

TEST(Oracle, MeetsEveryFeasibleSloWithLessEnergyThanPerformance) {
  auto m = nx_model();
  auto reqs = chat(12, 9);
  for (const char* pat : {"idle", "bursty"}) {
    auto trace = device::CorunnerTrace::make(pat, 2);
    auto perf = make_policy("performance", m), orc = make_policy("oracle", m);
    device::SimDevice d1(m, trace), d2(m, trace);
    auto rp = run_workload(d1, *perf, reqs, {}, {}), ro = run_workload(d2, *orc, reqs, {}, {});
    double ep = 0, eo = 0;
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(rp[i].feasible, ro[i].feasible) << pat << " request " << i;
      if (ro[i].feasible) {
        EXPECT_TRUE(ro[i].met) << pat << " request " << i;
      }
      ep += rp[i].energy_j, eo += ro[i].energy_j;
    }
    EXPECT_LT(eo, ep) << pat;
  }
}

// Each request alone from the same start, under co-runners that change over time, on both
// paper boards (Orin Nano + bursty is where the oracle used to spend more than performance):
// on a request that a controller serves in time, the oracle spends no more than it. A
// controller below the oracle there is a bug (of the oracle).
TEST(Oracle, NoControllerThatMeetsTheSloSpendsLessThanTheOracle) {
  for (const char* board : {"orin-nano-8gb", "orin-nx-16gb"}) {
    auto m = std::make_shared<const device::CostModel>(
        device::DeviceProfile::load(src(std::string("profiles/") + board + ".json")),
        model_preset("gemma-2b"));
    PolicyOptions po;
    po.learned_path = src(std::string("models/dvfs/") + board + ".json");
    workload::GeneratorSpec g;
    g.n = 6, g.seed = 5, g.max_context = 2048;
    g.slo_scale = std::string(board) == "orin-nano-8gb" ? 1.6 : 1.2;  // the Nano is slower
    const auto reqs = workload::generate(g);
    for (const char* pat : {"bursty", "web-search"}) {
      auto trace = device::CorunnerTrace::make(pat, 3);
      int feasible = 0;
      for (size_t i = 0; i < reqs.size(); ++i) {
        workload::Request r = reqs[i];
        r.arrival_s = 7.0 * static_cast<double>(i);  // meet the co-runner at another phase
        auto run = [&](const char* ctl) {
          auto pol = make_policy(ctl, m, po);
          device::SimDevice dev(m, trace);
          return run_workload(dev, *pol, {r}, {}, {})[0];
        };
        const RequestResult o = run("oracle");
        if (!o.feasible) continue;
        ++feasible;
        EXPECT_TRUE(o.met) << board << " " << pat << " request " << i;
        for (const char* c :
             {"performance", "powersave", "schedutil", "podgov", "static", "learned"}) {
          const RequestResult x = run(c);
          if (x.met) {
            EXPECT_LE(o.energy_j, x.energy_j * (1 + 1e-9))
                << board << " " << pat << " request " << i << ": " << c;
          }
        }
      }
      EXPECT_GT(feasible, 0) << board << " " << pat;
    }
  }
}

// Robustness to model error: the controllers plan with the fitted profile while the board
// runs 25% slower in its memory-bound decode than they think. The static clock chosen from
// the (wrong) model misses SLOs it met before; the oracle, which knows the board, still
// meets every feasible one; with the same board as the model the run is unchanged.
TEST(Robustness, ControllersPlanWithTheProfileWhileTheBoardDiffers) {
  auto m = nx_model();
  const auto prof = device::DeviceProfile::load(src("profiles/orin-nx-16gb.json"));
  workload::GeneratorSpec g;
  g.n = 16, g.seed = 4, g.max_context = 2048, g.slo_scale = 0.9;
  const auto reqs = workload::generate(g);
  auto run = [&](std::shared_ptr<const device::CostModel> board) {
    SweepSpec sp;
    sp.controllers = {"static", "learned", "oracle"};
    sp.corunners = {"idle"};
    sp.policy = shipped();
    sp.device_model = board;
    return sweep(m, reqs, sp);
  };
  const SweepResult same = run(nullptr);
  const SweepResult same2 =
      run(std::make_shared<const device::CostModel>(prof, model_preset("gemma-2b")));
  for (size_t i = 0; i < same.summaries.size(); ++i)
    EXPECT_EQ(same.summaries[i].energy_j, same2.summaries[i].energy_j) << i;
  const SweepResult slow = run(std::make_shared<const device::CostModel>(
      device::perturbed(prof, "core_bytes_per_cycle=0.75,dram_efficiency=0.75"),
      model_preset("gemma-2b")));
  const Summary& st0 = same.summaries[0];
  const Summary& st1 = slow.summaries[0];
  EXPECT_EQ(st1.controller, "static");
  EXPECT_LT(st1.attainment, st0.attainment);
  const Summary& orc = slow.summaries[2];
  EXPECT_EQ(orc.controller, "oracle");
  EXPECT_LT(orc.infeasible, orc.n);
  EXPECT_DOUBLE_EQ(orc.attainment_feasible, 100.0);
  // Bad specs name what is wrong.
  EXPECT_THROW(device::perturbed(prof, "speed=2"), Error);
  EXPECT_THROW(device::perturbed(prof, "board_idle_w=-1"), Error);
  EXPECT_THROW(device::perturbed(prof, "board_idle_w=2,board_idle_w=3"), Error);
  EXPECT_DOUBLE_EQ(device::perturbed(prof, "board_idle_w=2").board_idle_w, 2 * prof.board_idle_w);
}

TEST(Slo, ImpossibleTargetsAreReportedInfeasible) {
  auto m = nx_model();
  auto r = req(0, 128, 20, 0.010, 0.050);  // 10 ms TTFT, 50 ms TPOT: no clock can do it
  device::SimDevice dev(m, device::CorunnerTrace::constant(0));
  EXPECT_FALSE(feasible_at_top(dev, r, 0, 512));
  for (const char* n : {"performance", "oracle", "learned"}) {
    auto pol = make_policy(n, m, shipped());
    device::SimDevice d(m, device::CorunnerTrace::constant(0));
    auto res = run_workload(d, *pol, {r}, {}, {});
    EXPECT_FALSE(res[0].feasible) << n;
    EXPECT_FALSE(res[0].met) << n;
    EXPECT_EQ(summarize(n, "idle", res).infeasible, 1u);
  }
  auto ok = req(1, 128, 20, 1.0, 0.25);
  EXPECT_TRUE(feasible_at_top(dev, ok, 0, 512));
  auto no_slo = req(2, 128, 20, 0, 0);
  auto pol = make_policy("performance", m);
  EXPECT_THROW(run_workload(dev, *pol, {no_slo}, {}, {}), Error);
}

// The analytic path and the hook path (what the engine calls) are the same charges.
TEST(CoSim, HookDrivenRunEqualsAnalytic) {
  auto m = nx_model();
  auto r = req(0, 700, 9, 3.0, 0.3);  // 700 tokens: two prefill passes of at most 512
  for (const char* n : {"performance", "learned", "oracle"}) {
    auto p1 = make_policy(n, m, shipped()), p2 = make_policy(n, m, shipped());
    device::SimDevice a(m, device::CorunnerTrace::make("web-search", 4)), b = a;
    RunOptions ro;
    auto ra = run_workload(a, *p1, {r}, {}, ro);
    // The engine's order: prefill passes of n_batch, then one pass per new token; the hook
    // fires before every layer and once more before the head.
    RequestDriver drv(b, *p2, r, b.now_s() + r.think_s, r.output, 512);
    b.idle_until(b.now_s() + r.think_s);
    LayerHook hook = drv.hook();
    for (int64_t pos = 0; pos < 700; pos += 512)
      for (int l = 0; l <= 18; ++l)
        hook(LayerEvent{Phase::Prefill, l, 18, pos, std::min<int64_t>(512, 700 - pos)});
    for (int64_t k = 1; k < 9; ++k)
      for (int l = 0; l <= 18; ++l) hook(LayerEvent{Phase::Decode, l, 18, 700 + k - 1, 1});
    auto rb = drv.finish();
    EXPECT_NEAR(ra[0].energy_j, rb.energy_j, 1e-9 * ra[0].energy_j) << n;
    EXPECT_NEAR(ra[0].ttft_s, rb.ttft_s, 1e-9) << n;
    EXPECT_NEAR(ra[0].e2e_s, rb.e2e_s, 1e-9) << n;
    EXPECT_EQ(ra[0].switches, rb.switches) << n;
  }
}

TEST(Learned, ShippedPolicyIsSmallAndLoads) {
  Mlp net = Mlp::load(src("models/dvfs/orin-nx-16gb.json"));
  EXPECT_EQ(net.n_in, kFeatures);
  // The network computed here from the file's numbers, in double: normalise, tanh layer,
  // sigmoid output. The parameter count is what the file holds.
  std::ifstream in(src("models/dvfs/orin-nx-16gb.json"));
  const auto j = nlohmann::json::parse(in);
  const auto w1 = j.at("w1").get<std::vector<double>>(), b1 = j.at("b1").get<std::vector<double>>(),
             w2 = j.at("w2").get<std::vector<double>>(),
             mean = j.at("mean").get<std::vector<double>>(),
             scale = j.at("scale").get<std::vector<double>>();
  const double b2 = j.at("b2").get<double>();
  const size_t H = b1.size(), F = kFeatures;
  ASSERT_EQ(w1.size(), H * F);
  EXPECT_EQ(static_cast<size_t>(net.n_params()), w1.size() + b1.size() + w2.size() + 1);
  EXPECT_LT(net.n_params(), 1000);
  const float xs[3][kFeatures] = {{0, 1, 0.5f, 1, 0.3f, 0.5f, 4, 0.2f, 0.1f},
                                  {1, 0, 0.9f, 0, 0.8f, 0.1f, 0.5f, 0.9f, 0.7f},
                                  {0.2f, 0.4f, 0, 0.6f, 0, 1, 9, 0, 0.3f}};
  std::vector<float> outs;
  for (const auto& x : xs) {
    double o = b2;
    for (size_t h = 0; h < H; ++h) {
      double a = b1[h];
      for (size_t i = 0; i < F; ++i) a += w1[h * F + i] * (x[i] - mean[i]) * scale[i];
      o += w2[h] * std::tanh(a);
    }
    const float u = net.forward(x);
    EXPECT_NEAR(u, 1 / (1 + std::exp(-o)), 1e-5);
    outs.push_back(u);
  }
  // The inputs matter: different states give different clocks.
  EXPECT_GT(std::max({outs[0], outs[1], outs[2]}) - std::min({outs[0], outs[1], outs[2]}), 0.01f);
  // Each shipped profile has its own policy, and the default path finds it.
  for (const char* prof : {"orin-nx-16gb", "orin-nano-8gb"}) {
    Mlp p = Mlp::load(src(std::string("models/dvfs/") + prof + ".json"));
    EXPECT_LT(p.n_params(), 1000) << prof;
    auto m = std::make_shared<const device::CostModel>(
        device::DeviceProfile::load(src(std::string("profiles/") + prof + ".json")),
        model_preset("gemma-2b"));
    EXPECT_EQ(make_policy("learned", m)->name(), "learned") << prof;
  }
  std::string bad = std::string(CLONE_BINARY_DIR) + "/bad_mlp.json";
  net.w1.pop_back();
  net.save(bad);
  EXPECT_THROW(Mlp::load(bad), Error);
}

// Without --dvfs-policy a model gets the weights trained for the shape nearest its own:
// Gemma-2B's for Gemma-sized models, the base model's for the base model and every model cut
// from it (a tailoring search's candidates), the power mode's before the shape.
TEST(Learned, DefaultWeightsAreTheOnesTrainedForTheNearestModelShape) {
  set_resource_dir(Resource::Models, src("models"));
  auto path_for = [](const std::string& prof, const ModelConfig& mc, const std::string& mode) {
    device::CostOptions o;
    o.mode = mode;
    const device::CostModel m(device::DeviceProfile::load(src("profiles/" + prof + ".json")), mc,
                              o);
    return std::filesystem::relative(default_learned_path(m), src("models")).string();
  };
  const ModelConfig base = ModelConfig::from_gguf(*GgufFile::open(src("models/base/model.gguf")));
  ModelConfig cut = base;  // a tailored model: fewer layers, the rest narrower
  cut.layers.resize(cut.layers.size() / 2);
  for (auto& l : cut.layers) l.n_ff /= 2;
  for (const char* prof : {"orin-nx-16gb", "orin-nano-8gb"}) {
    const std::string p = prof;
    EXPECT_EQ(path_for(p, model_preset("gemma-2b"), ""), "dvfs/" + p + ".json");
    EXPECT_EQ(path_for(p, model_preset("tinyllama-1.1b"), ""), "dvfs/" + p + ".json");
    EXPECT_EQ(path_for(p, base, ""), "dvfs/base/" + p + ".json");
    EXPECT_EQ(path_for(p, cut, ""), "dvfs/base/" + p + ".json");
    // The file says what it was trained for, and that is the model's real size.
    EXPECT_EQ(load_mlp_meta(src("models/dvfs/base/" + p + ".json")).model_params, base.n_params());
    EXPECT_EQ(load_mlp_meta(src("models/dvfs/" + p + ".json")).model_params,
              model_preset("gemma-2b").n_params());
  }
  // A power mode's weights come first; the base shape has none in 15W, so Gemma's 15W ones.
  EXPECT_EQ(path_for("orin-nano-super-8gb", base, "15W"), "dvfs/orin-nano-super-8gb.15W.json");
  EXPECT_EQ(path_for("orin-nano-super-8gb", base, ""), "dvfs/orin-nano-super-8gb.json");

  // Files that do not say what they were trained for lose to one that does, and among
  // themselves the top folder's wins.
  const auto dir = std::filesystem::path(CLONE_BINARY_DIR) / "learned_lookup";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "dvfs" / "a");
  std::filesystem::create_directories(dir / "dvfs" / "b");
  Mlp net = Mlp::load(src("models/dvfs/orin-nx-16gb.json"));
  net.save((dir / "dvfs" / "orin-nx-16gb.json").string());
  net.save((dir / "dvfs" / "a" / "orin-nx-16gb.json").string());
  set_resource_dir(Resource::Models, dir.string());
  auto rel = [&](const std::filesystem::path& p) {
    return std::filesystem::relative(p, src("models")).string();
  };
  EXPECT_EQ(path_for("orin-nx-16gb", base, ""), rel(dir / "dvfs" / "orin-nx-16gb.json"));
  net.save((dir / "dvfs" / "b" / "orin-nx-16gb.json").string(),
           "{\"model_params\":" + std::to_string(2 * base.n_params()) + "}");
  EXPECT_EQ(path_for("orin-nx-16gb", base, ""), rel(dir / "dvfs" / "b" / "orin-nx-16gb.json"));
  // Nothing for the profile: the path the error names is the top folder's.
  EXPECT_EQ(path_for("orin-nano-8gb", base, ""), rel(dir / "dvfs" / "orin-nano-8gb.json"));
  set_resource_dir(Resource::Models, "");
}

// The judged criteria, on a small chat workload (the full numbers come from
// `clone sim`, see docs/device.md): attainment within one point of performance, energy
// within 10% of the oracle, less energy than every governor; and against the strongest
// simple baseline, one clock per request chosen from the model ("static"): at least its
// attainment everywhere, and no more energy where both meet the same SLOs (idle), within
// the reserve the learned policy keeps and static does not (1% of each phase's budget, for
// the co-runners that static misses under: on these 30 requests static's one clock is
// within 0.1% of the oracle, and the reserve costs the learned policy 0.04-0.13% over it;
// on the 200 of docs/device.md it is 2.3% below static).
TEST(Learned, JudgedCriteriaOnASmallWorkload) {
  auto reqs = chat(30, 17);
  for (bool sfu : {false, true}) {
    auto m = nx_model(sfu);
    SweepSpec sp;
    sp.controllers = {"performance", "powersave", "schedutil", "static", "learned", "oracle"};
    sp.corunners = {"idle", "web-search"};
    sp.policy = shipped();
    auto res = sweep(m, reqs, sp);
    std::map<std::string, Summary> s;
    for (const auto& x : res.summaries) s[x.corunner + "/" + x.controller] = x;
    for (const char* pat : {"idle", "web-search"}) {
      std::string p = pat;
      const Summary& l = s[p + "/learned"];
      EXPECT_GE(l.attainment, s[p + "/performance"].attainment - 1.0 - 100.0 / 30 * 0.01)
          << p << " sfu " << sfu;
      EXPECT_LE(l.energy_j, 1.10 * s[p + "/oracle"].energy_j) << p;
      for (const char* g : {"performance", "powersave", "schedutil"})
        EXPECT_LT(l.energy_j, s[p + "/" + g].energy_j) << p << " vs " << g;
      EXPECT_GE(l.attainment, s[p + "/static"].attainment) << p << " sfu " << sfu;
    }
    EXPECT_LT(s["idle/learned"].energy_j, 1.002 * s["idle/static"].energy_j) << "sfu " << sfu;
  }
}

TEST(Learned, NoisyLengthPredictionDegradesGracefully) {
  auto m = nx_model();
  auto reqs = chat(20, 23);
  LengthPredictor exact, noisy{0.5, 7};
  int diff = 0;
  for (const auto& r : reqs) diff += noisy.predict(r) != r.output;
  EXPECT_GT(diff, 15);
  auto run = [&](const LengthPredictor& p) {
    auto pol = make_policy("learned", m, shipped());
    device::SimDevice d(m, device::CorunnerTrace::constant(0));
    return summarize("learned", "idle", run_workload(d, *pol, reqs, p, {}));
  };
  Summary a = run(exact), b = run(noisy);
  // Mean-TPOT budgets are per token, so a wrong length mostly moves energy, not attainment.
  EXPECT_GE(b.attainment, a.attainment - 10);
  EXPECT_LT(std::abs(b.energy_j / a.energy_j - 1), 0.1);
}

// A reserve moves every prediction by the same number of the predictor's standard
// deviations (exp(reserve * noise)), nothing with the true length.
TEST(Learned, ALengthReserveScalesEveryPredictionByItsOwnError) {
  auto reqs = chat(50, 23);
  const LengthPredictor plain{0.5, 7}, longer{0.5, 7, 1.0}, shorter{0.5, 7, -2.0},
      exact_reserve{0.0, 7, 1.0};
  for (const auto& r : reqs) {
    // Within the rounding of the plain prediction (to a whole token), scaled.
    const auto p = static_cast<double>(plain.predict(r));
    EXPECT_NEAR(static_cast<double>(longer.predict(r)), p * std::exp(0.5), 1.5) << r.id;
    EXPECT_NEAR(static_cast<double>(shorter.predict(r)), std::max(1.0, p * std::exp(-1.0)), 1.0)
        << r.id;
    EXPECT_EQ(exact_reserve.predict(r), r.output);
  }
}

// On a small cut model a token takes about a millisecond and a clock change on an Orin NX's
// GPU stalls the board 500 us: the learned controller must not move down to a clock that
// its guard has to leave a layer later (it did: 25 changes in one request, 12% over the
// oracle's energy on the tailoring search's pick).
TEST(Learned, MovesTheClockDownOnlyToOneItCanHold) {
  ModelConfig cut = model_preset("base");
  for (size_t l = 0; l < cut.layers.size(); ++l) {
    if (l % 3 == 0) cut.layers[l].n_head = 0, cut.layers[l].n_head_kv = 0;
    cut.layers[l].n_ff = l % 2 ? 320 : 640;
  }
  const auto m = std::make_shared<const device::CostModel>(
      device::DeviceProfile::load(src("profiles/orin-nx-16gb.json")), cut);
  ASSERT_GT(m->switch_time_s(), 4e-4);
  PolicyOptions po;
  po.learned_path = src("models/dvfs/base/orin-nx-16gb.json");
  const auto run = [&](const std::string& name, double tpot_scale) {
    const SlackRun x = run_at_slack(m, name, po, 128, 242, 1.5, tpot_scale);
    return std::pair{x.r, x.switches};
  };
  for (double slack : {1.05, 1.13, 1.3}) {
    const auto [learned, switches] = run("learned", slack);
    const auto [oracle, oracle_switches] = run("oracle", slack);
    EXPECT_LE(oracle_switches, 3) << slack;
    EXPECT_TRUE(learned.met) << slack;
    // Without the rule: 30 and 73 changes, 12.9% and 19% over the oracle at slack 1.05 and
    // 1.13; with it 7-8 changes, 8.4% and 5.4% (the oracle changes once or twice); with the
    // guard reading the cost model and the policy trained on relative SLOs too, 5 and 7
    // changes, 5.1% and 1.2%.
    EXPECT_LE(switches, 10) << slack;
    EXPECT_LE(learned.energy_j, 1.09 * oracle.energy_j) << slack;
  }
}

// The tailoring search's pick at the Orin NX's 80% TPOT / 65% energy budgets (docs/tailor.md,
// co-design under `--dvfs learned`), served one chat request at the budget's TPOT target.
// The net asks for a clock a little too slow to hold for the rest it plans over; the hold
// rule kept the top clock for the first 22 decode tokens then, 2.16% over the oracle, where
// a clock between the two can be held: now 1.63% (the rest is the controllers' reserve for
// two switches and the estimate's error, over a 16-token horizon).
TEST(Learned, MovesDownAsFarAsAClockItCanHoldWhenTheNetAsksForLess) {
  ModelConfig pick = ModelConfig::from_gguf(*GgufFile::open(src("models/base/model.gguf")));
  pick.arch = "deci";
  const int64_t heads[] = {3, 0, 6, 4, 6, 6, 6, 6, 6, 6, 6, 6};
  const int64_t kv[] = {1, 0, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2};
  const int64_t ff[] = {512, 512, 0, 0, 0, 0, 0, 512, 512, 512, 512, 512};
  ASSERT_EQ(pick.layers.size(), 12u);
  for (size_t l = 0; l < 12; ++l) pick.layers[l] = {heads[l], kv[l], ff[l]};
  const auto m = std::make_shared<const device::CostModel>(
      device::DeviceProfile::load(src("profiles/orin-nx-16gb.json")), pick);
  PolicyOptions po;
  po.learned_path = src("models/dvfs/base/orin-nx-16gb.json");
  // The cell's targets over the pick's own top-clock times: TTFT 1.8278 / 1.3265 ms, TPOT
  // 1.1955 / 1.0969 ms.
  const double ttft_x = 1.378, tpot_x = 1.0899;
  const SlackRun oracle = run_at_slack(m, "oracle", po, 128, 242, ttft_x, tpot_x);
  ASSERT_TRUE(oracle.r.met);
  ASSERT_LT(oracle.r.energy_j, 0.9 * oracle.top.energy_j);  // there is a saving to find
  for (const char* name : {"learned", "mpc", "mpc-switch"}) {
    const SlackRun x = run_at_slack(m, name, po, 128, 242, ttft_x, tpot_x);
    EXPECT_TRUE(x.r.met) << name;
    EXPECT_LE(x.switches, 3) << name;
    EXPECT_LE(x.r.energy_j, 1.019 * oracle.r.energy_j) << name;
  }
}

// Under a loaded board the online controllers' rules must agree on what is behind schedule:
// on a model whose layers are mostly fixed overhead, the learned guard (by the estimates,
// which scale a whole layer for the co-runner) sent the clock up at one layer and the hold
// rule (by the cost model) let it down at the next, a switch a token; the MPC teacher, whose
// plan moved with the load at each layer, switched 1.5 times a token. Both then spent more
// than the top clock.
TEST(Learned, KeepsItsClockUnderALoadedBoardOnAModelOfSmallLayers) {
  const ModelConfig base = ModelConfig::from_gguf(*GgufFile::open(src("models/base/model.gguf")));
  const auto m = std::make_shared<const device::CostModel>(
      device::DeviceProfile::load(src("profiles/orin-nx-16gb.json")), base);
  PolicyOptions po;
  po.learned_path = src("models/dvfs/base/orin-nx-16gb.json");
  const auto run = [&](const std::string& name, double slack, double load) {
    const SlackRun x = run_at_slack(m, name, po, 480, 218, slack, slack, load);
    return std::tuple{x.r, x.switches, x.top};
  };
  for (double load : {0.3, 0.7})
    for (double slack : {1.1, 1.3}) {
      const auto [oracle, oracle_switches, top] = run("oracle", slack, load);
      for (const char* name : {"learned", "mpc"}) {
        const auto [r, switches, _] = run(name, slack, load);
        const std::string what = std::string(name) + " at load " + std::to_string(load) +
                                 ", slack " + std::to_string(slack);
        EXPECT_TRUE(r.met) << what;
        EXPECT_LT(r.energy_j, top.energy_j) << what;
        // Before: 0.9-1.7 changes a token. The MPC teacher still changes 40 times in the
        // tightest case (load 0.7, slack 1.1), between two clocks either side of the target:
        // down when 16 tokens at the lower one fit the slack, up a token later when they no
        // longer do, at +6.0% over the oracle (32 times and +5.0% before a proposal below
        // the clock it can hold was taken as far as that clock: it moves down more often);
        // the learned controller there changes once, +2.3%.
        EXPECT_LE(switches, 40) << what;
        if (std::string(name) == "learned") {
          EXPECT_LE(switches, 4) << what;
          EXPECT_LE(r.energy_j, 1.03 * oracle.energy_j) << what;
        }
        EXPECT_LE(r.energy_j, 1.065 * oracle.energy_j) << what;
      }
    }
}

// The MPC whose plan prices the switch, where the plain MPC alternates between two clocks
// either side of the target (the case above: 40 changes and +6.0% over the oracle at load
// 0.7, slack 1.1). Measured when written: 7 changes, +1.9%; elsewhere 1-2 changes and at
// most +0.9%, as the plain MPC.
TEST(MpcSwitch, KeepsItsClockWhereThePlainMpcAlternates) {
  const ModelConfig base = ModelConfig::from_gguf(*GgufFile::open(src("models/base/model.gguf")));
  const auto m = std::make_shared<const device::CostModel>(
      device::DeviceProfile::load(src("profiles/orin-nx-16gb.json")), base);
  for (double load : {0.3, 0.7})
    for (double slack : {1.1, 1.3}) {
      const std::string what = "load " + std::to_string(load) + ", slack " + std::to_string(slack);
      const SlackRun oracle = run_at_slack(m, "oracle", {}, 480, 218, slack, slack, load);
      const SlackRun mpc = run_at_slack(m, "mpc", {}, 480, 218, slack, slack, load);
      const SlackRun x = run_at_slack(m, "mpc-switch", {}, 480, 218, slack, slack, load);
      EXPECT_TRUE(x.r.met) << what;
      EXPECT_LE(x.switches, 8) << what;
      EXPECT_LE(x.switches, std::max<int64_t>(mpc.switches, 2)) << what;
      EXPECT_LE(x.r.energy_j, 1.025 * oracle.r.energy_j) << what;
    }
}

// Whatever the state, a plan controller's clock for this layer leaves the rest doable: this
// node at the chosen clock (for mpc-switch in decode the rest of the token), then the top
// clock to the phase's planned end, its two changes' stalls included, fits what is left of
// the budget less the estimate's 1% wherever the top clock alone fits the usable budget.
// Random states over two boards (7 and 63 levels), two models, both phases, loads and slacks.
TEST(MpcSwitch, NeverTakesAClockAfterWhichTheTopClockIsTooLate) {
  const ModelConfig tiny = ModelConfig::from_gguf(*GgufFile::open(src("models/base/model.gguf")));
  Rng rng(7);
  int checked = 0, kept_below_top = 0;
  for (const char* prof : {"orin-nx-16gb", "orin-nano-8gb"})
    for (const ModelConfig& cfg : {tiny, model_preset("gemma-2b")}) {
      device::CostOptions co;
      co.sfu = std::string(prof) == "orin-nx-16gb";
      const auto m = std::make_shared<const device::CostModel>(
          device::DeviceProfile::load(src(std::string("profiles/") + prof + ".json")), cfg, co);
      const int nl = m->n_layer(), top = m->max_level();
      for (int trial = 0; trial < 150; ++trial) {
        State s;
        s.n_layer = nl;
        s.phase = rng.uniform() < 0.5 ? Phase::Prefill : Phase::Decode;
        s.layer = static_cast<int>(rng.below(static_cast<uint64_t>(nl + 1)));
        s.corunner = rng.uniform(0, 0.8);
        s.corunner_ahead = rng.uniform(0, 0.8);
        // The rest of the phase the plan covers, and its time at the top clock.
        std::vector<std::pair<device::Work, double>> rest;  // (work, load), this layer first
        const double ahead = std::max(s.corunner, s.corunner_ahead);
        if (s.phase == Phase::Prefill) {
          s.prompt = 1 + static_cast<int64_t>(rng.below(1500));
          s.n_tokens = std::min<int64_t>(512, s.prompt);
          s.pos = 0;
          for (int64_t p = 0; p < s.prompt; p += 512)
            for (int l = p == 0 ? s.layer : 0; l <= nl; ++l)
              rest.push_back({m->work(l, Phase::Prefill, p, std::min<int64_t>(512, s.prompt - p)),
                              rest.empty() ? s.corunner : ahead});
        } else {
          s.prompt = 200, s.n_tokens = 1, s.pos = 200 + static_cast<int64_t>(rng.below(300));
          s.predicted_remaining = 1 + static_cast<int64_t>(rng.below(16));
          for (int l = s.layer; l <= nl; ++l)
            rest.push_back(
                {m->work(l, Phase::Decode, s.pos, 1), rest.empty() ? s.corunner : ahead});
          const int64_t more = s.predicted_remaining - 1;
          for (int64_t i = 0; i < more; ++i)
            for (int l = 0; l <= nl; ++l)
              rest.push_back({m->work(l, Phase::Decode, s.pos + 1 + more / 2, 1), ahead});
        }
        double at_top = 0;
        for (const auto& [w, load] : rest) at_top += m->cost(w, top, load).time_s;
        s.phase_elapsed_s = rng.uniform(0, 2) * at_top;
        s.budget_left_s = at_top * rng.uniform(0.9, 1.6) + 2 * m->switch_time_s();
        if (usable_budget(*m, s) < at_top + 2 * m->switch_time_s()) continue;
        // From every clock (every fifth on the finer grid): the rule that keeps the current
        // clock must still check that the plan it keeps fits.
        for (s.level = 0; s.level <= top; s.level += top > 10 ? 5 : 1)
          for (const char* name : {"mpc", "mpc-switch"}) {
            const int k = make_policy(name, m)->decide(s);
            // This layer at k (for mpc-switch in decode the rest of this token, its plan's
            // node), the rest at the top clock.
            const bool token = s.phase == Phase::Decode && std::string(name) == "mpc-switch";
            const size_t first = token ? static_cast<size_t>(nl - s.layer + 1) : 1;
            double t =
                (k != s.level ? m->switch_time_s() : 0) + (k != top ? m->switch_time_s() : 0);
            for (size_t i = 0; i < rest.size(); ++i)
              t += m->cost(rest[i].first, i < first ? k : top, rest[i].second).time_s;
            const double reserve = 0.01 * (s.budget_left_s + s.phase_elapsed_s);
            EXPECT_LE(t, s.budget_left_s - reserve + 1e-12)
                << name << " " << prof << " " << nl << " trial " << trial << " from " << s.level
                << " to " << k;
            ++checked;
            kept_below_top += k < top;
          }
      }
    }
  EXPECT_GT(checked, 3000);
  EXPECT_GT(kept_below_top, checked / 4);  // the states leave room below the top clock
}

// Against every plan, on decode states small enough to list them all (the rest of this
// token and up to three more, 7 clocks: 7^4 plans): mpc-switch's clock starts a plan that
// fits the usable budget, and the cheapest such plan costs little more than the cheapest of
// all (energy, the switches' included). Measured when written: 216 states, 191 of them below
// the top clock; at most 3.4% over, where the rule that keeps the current clock keeps it
// though a plan that leaves it now is cheaper (on such short horizons a whole token is a
// coarse step; on 16 tokens, the runs above, that rule saves changes and energy). Keeping
// the clock without checking that the kept plan fits gives 13.4%.
TEST(MpcSwitch, StartsANearlyCheapestPlanThatFits) {
  const ModelConfig tiny = ModelConfig::from_gguf(*GgufFile::open(src("models/base/model.gguf")));
  Rng rng(11);
  double worst = 0;
  int checked = 0, below_top = 0;
  for (const ModelConfig& cfg : {tiny, model_preset("gemma-2b")}) {
    const auto m = std::make_shared<const device::CostModel>(
        device::DeviceProfile::load(src("profiles/orin-nx-16gb.json")), cfg);
    const int nl = m->n_layer(), top = m->max_level(), L = top + 1;
    ASSERT_EQ(L, 7);
    for (int trial = 0; trial < 120; ++trial) {
      State s;
      s.n_layer = nl, s.phase = Phase::Decode, s.n_tokens = 1, s.prompt = 200;
      s.layer = static_cast<int>(rng.below(static_cast<uint64_t>(nl + 1)));
      s.pos = 200 + static_cast<int64_t>(rng.below(300));
      s.predicted_remaining = 1 + static_cast<int64_t>(rng.below(4));
      s.corunner = rng.uniform(0, 0.8), s.corunner_ahead = rng.uniform(0, 0.8);
      s.level = static_cast<int>(rng.below(static_cast<uint64_t>(L)));
      const double ahead = std::max(s.corunner, s.corunner_ahead);
      // The plan's nodes: the rest of this token, then each later token (at the middle one).
      std::vector<std::vector<device::Cost>> node;
      std::vector<device::Cost> c(static_cast<size_t>(L));
      for (int l = s.layer; l <= nl; ++l)
        for (int k = 0; k < L; ++k) {
          const device::Cost x =
              m->cost(m->work(l, Phase::Decode, s.pos, 1), k, l == s.layer ? s.corunner : ahead);
          c[static_cast<size_t>(k)].time_s += x.time_s,
              c[static_cast<size_t>(k)].energy_j += x.energy_j;
        }
      node.push_back(c);
      const int64_t more = s.predicted_remaining - 1;
      std::fill(c.begin(), c.end(), device::Cost{});
      for (int l = 0; l <= nl; ++l)
        for (int k = 0; k < L; ++k) {
          const device::Cost x =
              m->cost(m->work(l, Phase::Decode, s.pos + 1 + more / 2, 1), k, ahead);
          c[static_cast<size_t>(k)].time_s += x.time_s,
              c[static_cast<size_t>(k)].energy_j += x.energy_j;
        }
      for (int64_t i = 0; i < more; ++i) node.push_back(c);
      double at_top = 0;
      for (const auto& n : node) at_top += n[static_cast<size_t>(top)].time_s;
      s.phase_elapsed_s = rng.uniform(0, 2) * at_top;
      s.budget_left_s = at_top * rng.uniform(0.95, 1.5) + 3 * m->switch_time_s();
      const double usable = usable_budget(*m, s);
      // The cheapest plan that fits, over all and by first clock.
      std::vector<double> best(static_cast<size_t>(L), std::numeric_limits<double>::infinity());
      std::vector<int> plan(node.size(), 0);
      for (;;) {
        double t = 0, e = 0;
        int prev = s.level;
        for (size_t i = 0; i < node.size(); ++i) {
          const int k = plan[i];
          if (k != prev) t += m->switch_time_s(), e += m->switch_cost_j();
          t += node[i][static_cast<size_t>(k)].time_s,
              e += node[i][static_cast<size_t>(k)].energy_j;
          prev = k;
        }
        if (t <= usable)
          best[static_cast<size_t>(plan[0])] = std::min(best[static_cast<size_t>(plan[0])], e);
        size_t i = 0;
        while (i < plan.size() && ++plan[i] == L) plan[i++] = 0;
        if (i == plan.size()) break;
      }
      const double cheapest = *std::min_element(best.begin(), best.end());
      if (!std::isfinite(cheapest)) continue;  // nothing fits: the top clock, tested elsewhere
      const int k = make_policy("mpc-switch", m)->decide(s);
      ASSERT_TRUE(std::isfinite(best[static_cast<size_t>(k)]))
          << "no plan that fits starts with " << k << " (from " << s.level << "), trial " << trial;
      worst = std::max(worst, best[static_cast<size_t>(k)] / cheapest - 1);
      ++checked;
      below_top += k < top;
    }
  }
  std::printf(
      "mpc-switch against every plan: %d states, %d below the top clock, at most %.2f%% over\n",
      checked, below_top, 100 * worst);
  EXPECT_GT(checked, 150);
  EXPECT_GT(below_top, checked / 4);
  EXPECT_LE(worst, 0.04);
}

// Gemma-2B on the Orin Nano with a TPOT target just above what the top clock gives (a
// smart-reply request of the chat workload: 0.25 s against 0.2475 at mid-generation): the
// slack a token earns lets a few layers of the next run one clock lower. The plain MPC
// takes them each token (about a change a token); a plan that only prices the switch takes
// them too, at two changes a token, since its later nodes are whole tokens and only the
// current token's last layers are fine enough to fit the slack. Keeping the clock where a
// plan that starts with it fits, the controller leaves a clock once, when its plan cannot
// go on with it. Measured when written
// (150 in, 1000 out): plain MPC 983 changes, 1548.34 J; this one 16, 1546.74 J; the oracle
// 1 change, 1546.04 J; the top clock 1551.06 J.
TEST(MpcSwitch, SpendsATokensSlackInWholeTokens) {
  auto m = std::make_shared<const device::CostModel>(
      device::DeviceProfile::load(src("profiles/orin-nano-8gb.json")), model_preset("gemma-2b"));
  const auto run = [&](const char* name) {
    device::SimDevice d(m, device::CorunnerTrace::constant(0));
    auto pol = make_policy(name, m);
    const RequestResult r = run_workload(d, *pol, {req(0, 150, 1000, 0.725, 0.25)}, {}, {}).front();
    return std::pair{r, d.switches()};
  };
  const auto [top, top_sw] = run("performance");
  const auto [oracle, oracle_sw] = run("oracle");
  const auto [mpc, mpc_sw] = run("mpc");
  const auto [x, x_sw] = run("mpc-switch");
  ASSERT_TRUE(oracle.met);
  ASSERT_LT(oracle.energy_j, top.energy_j - 3);  // a saving to find
  EXPECT_GT(mpc_sw, 500);                        // the plain MPC's way, for the record
  EXPECT_TRUE(x.met);
  EXPECT_LE(x_sw, 40);
  // Most of the saving the oracle finds: (top - x) >= 0.6 (top - oracle).
  EXPECT_LE(x.energy_j - oracle.energy_j, 0.4 * (top.energy_j - oracle.energy_j));
  EXPECT_LT(x.energy_j, mpc.energy_j);
}

// The base model's policies are trained with half their requests' SLOs set relative to the
// top clock's own times (TrainOptions::relative_share): on class SLOs alone the base model
// meets every target at any clock, the policy never saw a tight state, and on the Nano it
// held the top clock wherever the SLO was tight (as the tailoring search's budgets are).
TEST(Learned, TheBaseModelsPolicyFindsTheSavingUnderATightSlo) {
  const ModelConfig base = ModelConfig::from_gguf(*GgufFile::open(src("models/base/model.gguf")));
  for (const char* prof : {"orin-nano-8gb", "orin-nx-16gb"}) {
    const auto m = std::make_shared<const device::CostModel>(
        device::DeviceProfile::load(src(std::string("profiles/") + prof + ".json")), base);
    PolicyOptions po;
    po.learned_path = src(std::string("models/dvfs/base/") + prof + ".json");
    // TPOT slack as given, TTFT 1.5x the top clock's (the tailoring search's budgets bind
    // the TPOT and leave the TTFT at the dense model's own).
    auto energy = [&](const std::string& name, double slack) {
      const RequestResult r = run_at_slack(m, name, po, 128, 242, 1.5, slack).r;
      EXPECT_TRUE(r.met) << name << " " << prof << " " << slack;
      return r.energy_j;
    };
    for (double slack : {1.05, 1.15}) {
      const double top = energy("performance", slack), oracle = energy("oracle", slack),
                   learned = energy("learned", slack);
      ASSERT_LT(oracle, 0.98 * top) << prof << " " << slack;  // there is a saving to find
      // It finds most of it. The policy trained on class SLOs alone found none on the Nano
      // (the top clock throughout) and 28% of it on the NX at the tighter TPOT; this one
      // 55-99%.
      EXPECT_LT(learned - oracle, 0.5 * (top - oracle)) << prof << " " << slack;
    }
  }
}

// Told of 4x the tokens that come, the learned controller spends the early ones slowly and
// misses the mean-TPOT target when the output ends; planned over a short horizon it keeps the
// running mean near the target whatever the length. The state it is told says so.
TEST(Learned, AShortDecodeHorizonKeepsOverPredictedRequestsInTime) {
  auto m = std::make_shared<const device::CostModel>(
      device::DeviceProfile::load(src("profiles/orin-nano-8gb.json")), model_preset("gemma-2b"));
  PolicyOptions po;
  po.learned_path = src("models/dvfs/orin-nano-8gb.json");
  const auto reqs = chat(60, 11);
  // Every prediction 4x the true length: exp(noise * (N(0,1) + reserve)) with a negligible
  // noise and reserve = ln 4 / noise.
  const double tiny = 1e-6;
  const LengthPredictor four_x{tiny, 7, std::log(4.0) / tiny};
  for (const auto& r : reqs) EXPECT_LE(std::abs(four_x.predict(r) - 4 * r.output), 1) << r.id;
  auto run = [&](int64_t horizon) {
    auto pol = make_policy("learned", m, po);
    device::SimDevice d(m, device::CorunnerTrace::constant(0));
    RunOptions ro;
    ro.decode_horizon = horizon;
    int misses = 0, feasible = 0;
    for (const auto& r : run_workload(d, *pol, reqs, four_x, ro)) {
      feasible += r.feasible;
      misses += r.feasible && !r.met;
    }
    EXPECT_GT(feasible, 40);
    return misses;
  };
  const int whole = run(0), short_h = run(16);
  // (Since the controller moves the clock down only to one it can hold for the rest of what
  // it plans over, the whole-length plan misses 2 here, not 5 or more: told of 4x the
  // tokens, it seldom finds a lower clock it could hold that long.)
  EXPECT_GE(whole, 2) << "over-prediction no longer costs the whole-length plan anything";
  EXPECT_EQ(short_h, 0) << whole << " misses planned over the whole prediction";
  // What the controller is told: never more than the horizon left.
  struct Recorder : Policy {
    int top = 0;
    int64_t most = 0;
    std::string name() const override { return "recorder"; }
    int decide(const State& s) override {
      if (s.phase == Phase::Decode) most = std::max(most, s.predicted_remaining);
      return top;
    }
  } rec;
  rec.top = m->max_level();
  device::SimDevice d(m, device::CorunnerTrace::constant(0));
  RunOptions ro;
  ro.decode_horizon = 16;
  run_workload(d, rec, {req(0, 100, 200, 10, 1)}, {}, ro);
  EXPECT_EQ(rec.most, 16);
}

// LoRA expert sets switching between requests: a set other than the loaded one is swapped
// in before the request runs (inside its TTFT and energy); with the LPU the swap is the
// on-chip 5 us and the adapters cost no DRAM traffic, so totals drop.
TEST(Accelerator, ExpertSetsSwapBetweenRequestsAndTheLpuRemovesTheCost) {
  auto model = [](bool lpu) {
    device::CostOptions o;
    o.lpu = lpu, o.n_experts = 4;
    return std::make_shared<const device::CostModel>(
        device::DeviceProfile::load(src("profiles/orin-nx-16gb.json")), model_preset("gemma-2b"),
        o);
  };
  std::vector<workload::Request> base;
  for (int i = 0; i < 4; ++i) base.push_back(req(i, 100, 20, 10, 1));
  auto with_sets = base;
  const int32_t sets[4] = {0, 0, 1, 0};  // loads, keeps, swaps, swaps back
  for (size_t i = 0; i < 4; ++i) with_sets[i].expert_set = sets[i];
  auto run = [](std::shared_ptr<const device::CostModel> m,
                const std::vector<workload::Request>& rs) {
    auto pol = make_policy("performance", m);
    device::SimDevice d(m, device::CorunnerTrace::constant(0));
    return run_workload(d, *pol, rs, {}, {});
  };
  double total_off = 0, total_on = 0;
  for (bool lpu : {false, true}) {
    auto m = model(lpu);
    const double swap_s = m->expert_swap_s(), swap_j = m->expert_swap_j();
    if (lpu)
      EXPECT_NEAR(swap_s, 5e-6, 1e-12);
    else
      EXPECT_GT(swap_s, 0.01);  // 4 rank-8 experts of Gemma-2B from storage: tens of ms
    auto a = run(m, base), b = run(m, with_sets);
    for (size_t i = 0; i < 4; ++i) {
      const bool swapped = i != 1;
      SCOPED_TRACE(i);
      EXPECT_NEAR(b[i].ttft_s - a[i].ttft_s, swapped ? swap_s : 0, 1e-9);
      EXPECT_NEAR(b[i].e2e_s - a[i].e2e_s, swapped ? swap_s : 0, 1e-9);
      EXPECT_NEAR(b[i].energy_j - a[i].energy_j, swapped ? swap_j : 0, 1e-9 * a[i].energy_j);
      (lpu ? total_on : total_off) += b[i].energy_j;
    }
  }
  EXPECT_LT(total_on, 0.99 * total_off);
}

// Energy split by feasibility: means over feasible and infeasible requests and the
// distribution over the feasible ones, from hand-made results.
TEST(Summary, EnergyIsSplitByFeasibility) {
  std::vector<RequestResult> rs(5);
  const double e[5] = {10, 20, 30, 40, 1000};
  for (int i = 0; i < 5; ++i) rs[i].energy_j = e[i], rs[i].output = 2, rs[i].met = i < 4;
  rs[4].feasible = false;
  const Summary s = summarize("x", "idle", rs);
  EXPECT_DOUBLE_EQ(s.energy_j, 1100.0 / 5);
  EXPECT_DOUBLE_EQ(s.energy_feasible_j, 25);
  EXPECT_DOUBLE_EQ(s.energy_infeasible_j, 1000);
  EXPECT_DOUBLE_EQ(s.energy_feasible_p50_j, 25);
  EXPECT_DOUBLE_EQ(s.energy_feasible_p90_j, 37);  // numpy.percentile([10,20,30,40], 90)
  EXPECT_EQ(s.infeasible, 1u);
  EXPECT_DOUBLE_EQ(s.attainment_feasible, 100);
}
