// Co-simulation with the real engine: a tiny random model really generates tokens on the
// host; at every layer-boundary hook the simulator charges that layer on the modelled
// device at the controller's clock. The totals equal the analytic run of the same request,
// whether driven through RequestDriver directly or through dvfs::CoSim (what `clone run
// --device` uses), whose per-layer trace must match the analytic timeline layer by layer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "clone/core/error.h"
#include "clone/device/calibrate.h"
#include "clone/dvfs/cosim.h"
#include "clone/dvfs/runner.h"
#include "clone/engine/context.h"
#include "clone/engine/model.h"
#include "clone/engine/model_writer.h"
#include "engine/test_util.h"

using namespace cln;
using namespace cln::dvfs;

namespace {

std::shared_ptr<const Model> tiny_model() {
  static std::shared_ptr<const Model> m = [] {
    ModelConfig c;
    c.name = "cosim-tiny";
    c.n_vocab = 300, c.n_embd = 64, c.head_dim_k = c.head_dim_v = 16, c.n_ctx_train = 256;
    c.layers = {LayerShape{4, 2, 128}, LayerShape{4, 2, 96}, LayerShape{2, 1, 128}};
    // One file per process: ctest -j runs this file's tests as processes side by side, and
    // two writers of one path raced for its temporary file (CI, ASan build).
    const std::string path = cln::test::tmp_path("cosim_tiny.gguf");
    init_model(c, {5, DType::F32, 0.05f}, nullptr, path);
    auto model = Model::load(path);
    std::filesystem::remove(path);  // loaded (a mapping outlives the name)
    return model;
  }();
  return m;
}

std::vector<int32_t> prompt_ids(int n) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) p[static_cast<size_t>(i)] = 3 + (i * 7) % 290;
  return p;
}

// Greedy generation of n_out tokens: the prompt pass, then one pass per further token.
void generate(Context& ctx, const std::vector<int32_t>& prompt, int n_out) {
  auto logits = ctx.eval(prompt);
  for (int k = 1; k < n_out; ++k) {
    int32_t next =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    logits = ctx.eval(std::span<const int32_t>(&next, 1));
  }
}

}  // namespace

TEST(CoSim, EngineHookEqualsAnalytic) {
  auto model = tiny_model();
  auto prof =
      device::DeviceProfile::load(std::string(CLONE_SOURCE_DIR) + "/profiles/orin-nx-16gb.json");
  auto cm = std::make_shared<const device::CostModel>(prof, model->config());
  workload::Request r;
  r.id = 0, r.prompt = 40, r.output = 6, r.ttft_target_s = 1, r.tpot_target_s = 0.01,
  r.slo = "test";
  for (const char* n : {"performance", "oracle", "schedutil"}) {
    auto p1 = make_policy(n, cm), p2 = make_policy(n, cm);
    device::SimDevice a(cm, device::CorunnerTrace::make("bursty", 3)), b = a;
    RunOptions ro;
    ro.n_batch = 16;  // several prefill passes, as the engine will do with n_batch 16
    auto ra = run_workload(a, *p1, {r}, {}, ro);

    ContextParams cp;
    cp.n_ctx = 128, cp.n_threads = 1, cp.n_batch = 16;
    Context ctx(model, cp);
    b.idle_until(b.now_s() + r.think_s);
    RequestDriver drv(b, *p2, r, b.now_s(), r.output, 16);
    ctx.set_hook(drv.hook());
    generate(ctx, prompt_ids(40), static_cast<int>(r.output));
    auto rb = drv.finish();
    EXPECT_EQ(rb.output, r.output) << n;
    EXPECT_NEAR(ra[0].energy_j, rb.energy_j, 1e-9 * ra[0].energy_j) << n;
    EXPECT_NEAR(ra[0].e2e_s, rb.e2e_s, 1e-12) << n;
    EXPECT_NEAR(ra[0].ttft_s, rb.ttft_s, 1e-12) << n;
  }
}

// The library's CoSim, as `clone run --device` drives it: profile by name (found through the
// run-time resource lookup), a TPOT target tight enough that the clock must move (the tiny
// model's decode is dominated by the per-layer overhead), a bursty co-runner so it has
// reason to (or a constant one, busy from the start), several prefill passes.
TEST(CoSim, TraceMatchesTheAnalyticTimelineLayerByLayer) {
  auto model = tiny_model();
  const int n_out = 7, n_prompt = 40;
  const int64_t n_batch = 16;
  for (const char* ctl : {"performance", "learned", "oracle", "schedutil"})
    for (const char* corunner : {"bursty", "const:0.4"}) {
      SCOPED_TRACE(std::string(ctl) + " " + corunner);
      CoSimOptions o;
      o.device = "orin-nx-16gb", o.controller = ctl, o.ttft_target_s = 3e-3,
      o.tpot_target_s = 0.5e-3;
      o.corunner = corunner, o.corunner_seed = 3, o.n_batch = n_batch;
      CoSim cs(model->config(), o, n_prompt, n_out);
      ContextParams cp;
      cp.n_ctx = 128, cp.n_threads = 1, cp.n_batch = n_batch;
      Context ctx(model, cp);
      ctx.set_hook(cs.hook());
      generate(ctx, prompt_ids(n_prompt), n_out);
      const RequestResult got = cs.finish();
      const auto& rows = cs.trace();

      // The same request served analytically.
      const auto& cm = cs.cost_model();
      auto cmp = std::make_shared<const device::CostModel>(cm.profile(), cm.model());
      workload::Request req;
      req.prompt = n_prompt, req.output = n_out, req.ttft_target_s = 3e-3,
      req.tpot_target_s = 0.5e-3;
      device::SimDevice dev(cmp, device::CorunnerTrace::make(corunner, 3));
      PolicyOptions po;
      po.n_batch = n_batch;
      auto pol = make_policy(ctl, cmp, po);
      std::vector<TimelinePoint> tl;
      RunOptions ro;
      ro.n_batch = n_batch, ro.timeline_request = 0, ro.timeline = &tl;
      auto res = run_workload(dev, *pol, {req}, {}, ro);
      ASSERT_EQ(res.size(), 1u);

      // Every layer boundary of the engine (3 prefill passes, 6 decode passes), at the
      // analytic run's clock.
      const size_t passes = 3 + (n_out - 1);
      ASSERT_EQ(rows.size(), tl.size());
      ASSERT_EQ(rows.size(), static_cast<size_t>(cm.n_layer() + 1) * passes);
      double energy = 0, busiest = 0;
      int64_t prefill_tokens = 0;
      for (size_t i = 0; i < rows.size(); ++i) {
        EXPECT_EQ(rows[i].layer, tl[i].layer) << i;
        EXPECT_EQ(rows[i].pass, tl[i].pass) << i;
        EXPECT_EQ(rows[i].phase, tl[i].phase) << i;
        EXPECT_EQ(rows[i].mhz, tl[i].mhz) << "layer boundary " << i;
        EXPECT_EQ(rows[i].corunner, tl[i].corunner) << i;
        energy += rows[i].energy_j;
        busiest = std::max(busiest, rows[i].corunner);
        if (rows[i].phase == Phase::Prefill && rows[i].layer == 0) {
          EXPECT_EQ(rows[i].token, prefill_tokens) << i;  // first prompt position of the pass
          prefill_tokens += rows[i].n_tokens;
        }
      }
      EXPECT_EQ(prefill_tokens, n_prompt);
      if (std::string(corunner) == "const:0.4") {
        EXPECT_DOUBLE_EQ(busiest, 0.4);
      }
      EXPECT_EQ(rows.back().phase, Phase::Decode);
      EXPECT_EQ(rows.back().token, n_out - 1);  // decode rows count the output tokens
      EXPECT_NEAR(energy, res[0].energy_j, 1e-9 * res[0].energy_j);
      EXPECT_NEAR(got.energy_j, res[0].energy_j, 1e-9 * res[0].energy_j);
      EXPECT_NEAR(rows.back().t_start_s + rows.back().time_s, res[0].e2e_s, 1e-12);
      const auto first_decode = std::find_if(
          rows.begin(), rows.end(), [](const TraceRow& r) { return r.phase == Phase::Decode; });
      ASSERT_NE(first_decode, rows.end());
      EXPECT_NEAR(first_decode->t_start_s, res[0].ttft_s, 1e-12);
      EXPECT_EQ(got.switches, res[0].switches);
      EXPECT_EQ(got.met, res[0].met);
      if (std::string(ctl) == "performance") {
        EXPECT_EQ(got.switches, 0);
      }

      // The summary line reports the same numbers.
      const std::string line = cs.summary_line(got);
      char buf[64];
      std::snprintf(buf, sizeof buf, "energy %.4f J", res[0].energy_j);
      EXPECT_NE(line.find(buf), std::string::npos) << line;
      std::snprintf(buf, sizeof buf, "TTFT %.1f ms", res[0].ttft_s * 1e3);
      EXPECT_NE(line.find(buf), std::string::npos) << line;
      std::snprintf(buf, sizeof buf, "%lld frequency switches",
                    static_cast<long long>(res[0].switches));
      EXPECT_NE(line.find(buf), std::string::npos) << line;
      EXPECT_NE(line.find(got.met ? "SLO met" : "SLO missed"), std::string::npos) << line;
      EXPECT_NE(line.find(std::string("controller ") + ctl), std::string::npos) << line;
    }
}

TEST(CoSim, TraceCsvRoundTrips) {
  auto model = tiny_model();
  CoSimOptions o;
  o.device = "orin-nano-8gb", o.controller = "schedutil", o.slo = "chatbot";
  CoSim cs(model->config(), o, 12, 4);
  Context ctx(model, {128, 1, 512});
  ctx.set_hook(cs.hook());
  generate(ctx, prompt_ids(12), 4);
  const auto r = cs.finish();
  EXPECT_TRUE(r.met);
  EXPECT_EQ(cs.request().slo, "chatbot");
  const std::string path = std::string(CLONE_BINARY_DIR) + "/cosim_trace.csv";
  cs.write_trace(path);
  std::ifstream f(path);
  std::string line;
  ASSERT_TRUE(std::getline(f, line));
  EXPECT_EQ(line, "pass,phase,layer,token,n_tokens,mhz,t_start_s,time_s,energy_j,corunner");
  size_t i = 0;
  while (std::getline(f, line)) {
    ASSERT_LT(i, cs.trace().size());
    const TraceRow& t = cs.trace()[i++];
    std::stringstream ss(line);
    std::string c[10];
    for (auto& x : c) std::getline(ss, x, ',');
    EXPECT_EQ(std::stoll(c[0]), t.pass);
    EXPECT_EQ(c[1], t.phase == Phase::Prefill ? "prefill" : "decode");
    EXPECT_EQ(std::stoi(c[2]), t.layer);
    EXPECT_EQ(std::stoll(c[4]), t.n_tokens);
    EXPECT_EQ(std::stod(c[7]), t.time_s);  // 17 digits: exact
    EXPECT_EQ(std::stod(c[8]), t.energy_j);
  }
  EXPECT_EQ(i, cs.trace().size());
  EXPECT_THROW(cs.write_trace(std::string(CLONE_BINARY_DIR) + "/no/such/dir/t.csv"), Error);
}

TEST(CoSim, BadOptionsAndInfeasibleTargets) {
  auto cfg = tiny_model()->config();
  CoSimOptions o;
  o.device = "orin-nx-16gb", o.controller = "performance";
  try {
    CoSim cs(cfg, o, 10, 4);
    FAIL() << "no SLO targets accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SLO targets"), std::string::npos) << e.what();
  }
  o.ttft_target_s = 1;  // one target is not enough
  EXPECT_THROW(CoSim(cfg, o, 10, 4), Error);
  o.tpot_target_s = 1, o.controller = "nonsense";
  EXPECT_THROW(CoSim(cfg, o, 10, 4), Error);
  o.controller = "performance", o.device = "no-such-board";
  EXPECT_THROW(CoSim(cfg, o, 10, 4), Error);
  // Targets no clock can meet: missed, and flagged infeasible.
  o.device = "orin-nx-16gb", o.ttft_target_s = 1e-6, o.tpot_target_s = 1e-6;
  auto model = tiny_model();
  CoSim cs(cfg, o, 10, 3);
  Context ctx(model, {128, 1, 512});
  ctx.set_hook(cs.hook());
  generate(ctx, prompt_ids(10), 3);
  const auto r = cs.finish();
  EXPECT_FALSE(r.met);
  EXPECT_FALSE(r.feasible);
  EXPECT_NE(cs.summary_line(r).find("SLO missed (infeasible"), std::string::npos);
}
