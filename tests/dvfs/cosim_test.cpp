// Co-simulation with the real engine: a tiny random model really generates tokens on the
// host; at every layer-boundary hook the simulator charges that layer on the modelled
// device at the controller's clock. The totals equal the analytic run of the same request.
#include <gtest/gtest.h>

#include <filesystem>

#include "clone/device/calibrate.h"
#include "clone/dvfs/runner.h"
#include "clone/engine/context.h"
#include "clone/engine/model.h"
#include "clone/engine/model_writer.h"

using namespace cln;
using namespace cln::dvfs;

TEST(CoSim, EngineHookEqualsAnalytic) {
  ModelConfig c;
  c.name = "cosim-tiny";
  c.n_vocab = 300, c.n_embd = 64, c.head_dim_k = c.head_dim_v = 16, c.n_ctx_train = 256;
  c.layers = {LayerShape{4, 2, 128}, LayerShape{4, 2, 96}, LayerShape{2, 1, 128}};
  std::string path = std::string(CLONE_BINARY_DIR) + "/cosim_tiny.gguf";
  init_model(c, {5, DType::F32, 0.05f}, nullptr, path);
  auto model = Model::load(path);
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
    std::vector<int32_t> prompt(40);
    for (int i = 0; i < 40; ++i) prompt[static_cast<size_t>(i)] = 3 + (i * 7) % 290;
    auto logits = ctx.eval(prompt);
    for (int k = 1; k < r.output; ++k) {
      int32_t next =
          static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      logits = ctx.eval(std::span<const int32_t>(&next, 1));
    }
    auto rb = drv.finish();
    EXPECT_EQ(rb.output, r.output) << n;
    EXPECT_NEAR(ra[0].energy_j, rb.energy_j, 1e-9 * ra[0].energy_j) << n;
    EXPECT_NEAR(ra[0].e2e_s, rb.e2e_s, 1e-12) << n;
    EXPECT_NEAR(ra[0].ttft_s, rb.ttft_s, 1e-12) << n;
  }
}
