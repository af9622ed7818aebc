// Judging candidates: the search score's penalties, the device cost of pruned shapes,
// validation perplexity of a plan (the dense plan gives the dense model's), and calibration
// windows drawn from the corpora.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "clone/core/error.h"
#include "clone/core/resources.h"
#include "clone/data/tokenizer_train.h"
#include "clone/engine/presets.h"
#include "clone/prune/evaluate.h"
#include "clone/prune/importance.h"
#include "prune/fixture.h"

using namespace cln;
using namespace cln::prune;

TEST(Evaluate, TheScorePenalisesOnlyWhatIsOverBudget) {
  const Budget b{0.1, 2.0, 2, 2};
  EXPECT_DOUBLE_EQ(search_score(10, {0, 0.05, 0, 1.0}, b), 0.1);            // within both
  EXPECT_DOUBLE_EQ(search_score(10, {0, 0.05, 0, 4.0}, b), 0.1 * 0.25);     // energy 2x over
  EXPECT_DOUBLE_EQ(search_score(10, {0, 0.2, 0, 1.0}, b), 0.1 * 0.25);      // latency 2x over
  EXPECT_DOUBLE_EQ(search_score(10, {0, 0.2, 0, 4.0}, b), 0.1 * 0.0625);    // both
  EXPECT_DOUBLE_EQ(search_score(10, {0, 0.2, 0, 4.0}, {0, 0, 2, 2}), 0.1);  // no budgets
  EXPECT_THROW(search_score(0, {}, b), Error);
}

TEST(Evaluate, PrunedShapesCostLessOnTheBoard) {
  const auto nx = device::DeviceProfile::find("orin-nx-16gb");
  const ModelConfig dense = model_preset("tinyllama-1.1b");
  ModelConfig half_ffn = dense, fewer_heads = dense, no_attn = dense;
  for (auto& l : half_ffn.layers) l.n_ff /= 2;
  for (auto& l : fewer_heads.layers) l.n_head /= 2;
  for (size_t i = 0; i < no_attn.layers.size(); i += 2)
    no_attn.layers[i].n_head = 0, no_attn.layers[i].n_head_kv = 0;
  const DeviceCost d = device_cost(dense, nx, {});
  for (const ModelConfig* c : {&half_ffn, &fewer_heads, &no_attn}) {
    const DeviceCost p = device_cost(*c, nx, {});
    EXPECT_LT(p.tpot_s, d.tpot_s);
    EXPECT_LT(p.energy_j, d.energy_j);
    EXPECT_LE(p.ttft_s, d.ttft_s);
  }
  // The decode is memory-bound: halving the FFN saves about its share of the weights.
  EXPECT_LT(device_cost(half_ffn, nx, {}).tpot_s, 0.85 * d.tpot_s);
}

// Under a DVFS controller the request is served to an SLO instead of at the top clock: a
// pruned model given the dense model's top-clock TTFT and TPOT as targets has slack, which
// the controllers turn into energy; too tight a target is missed, and no target is an error.
TEST(Evaluate, UnderADvfsControllerSlackBecomesEnergy) {
  const auto nx = device::DeviceProfile::find("orin-nx-16gb");
  const ModelConfig dense = model_preset("tinyllama-1.1b");
  ModelConfig half = dense;
  for (auto& l : half.layers) l.n_ff /= 2, l.n_head /= 2;
  const DeviceCost d = device_cost(dense, nx, {});
  const DeviceCost top = device_cost(half, nx, {});
  Workload w;
  w.ttft_target_s = d.ttft_s, w.tpot_target_s = d.tpot_s;
  for (const char* name : {"static", "learned", "oracle"}) {
    w.dvfs = name;
    const DeviceCost c = device_cost(half, nx, w);
    EXPECT_LE(c.tpot_s, d.tpot_s * (1 + 1e-6)) << name;
    EXPECT_LE(c.ttft_s, d.ttft_s * (1 + 1e-6)) << name;
    EXPECT_GT(c.tpot_s, top.tpot_s * 1.02) << name;      // it did slow down ...
    EXPECT_LT(c.energy_j, top.energy_j * 0.98) << name;  // ... and saved by it
  }
  // The performance governor ignores the targets: the top clock, as without them.
  w.dvfs = "performance";
  EXPECT_DOUBLE_EQ(device_cost(half, nx, w).energy_j, top.energy_j);
  // A target under what the top clock reaches: the controller cannot meet it.
  w.dvfs = "static", w.tpot_target_s = 0.5 * top.tpot_s;
  EXPECT_GT(device_cost(half, nx, w).tpot_s, w.tpot_target_s);
  w.tpot_target_s = 0;
  try {
    device_cost(half, nx, w);
    ADD_FAILURE() << "no TPOT target accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs TTFT and TPOT targets"), std::string::npos)
        << e.what();
  }
}

// The learned controller plays the weights it is given: the ones trained for the shipped
// base model's shape (models/dvfs/base/) serve a cut base model otherwise than the profile's
// default (trained for Gemma-2B's shape), and a missing file is named.
TEST(Evaluate, TheLearnedControllerPlaysTheWeightsItIsGiven) {
  const auto nx = device::DeviceProfile::find("orin-nx-16gb");
  const ModelConfig dense = model_preset("base");
  ModelConfig cut = dense;
  for (auto& l : cut.layers) l.n_ff /= 2;
  const DeviceCost d = device_cost(dense, nx, {});
  Workload w;
  w.dvfs = "learned", w.ttft_target_s = d.ttft_s, w.tpot_target_s = 0.9 * d.tpot_s;
  const DeviceCost by_default = device_cost(cut, nx, w);
  w.dvfs_policy = resource_path(Resource::Models, "dvfs/orin-nx-16gb.json");  // Gemma's
  const DeviceCost gemmas = device_cost(cut, nx, w);
  w.dvfs_policy = resource_path(Resource::Models, "dvfs/base/orin-nx-16gb.json");
  const DeviceCost own = device_cost(cut, nx, w);
  EXPECT_NE(own.energy_j, gemmas.energy_j);
  EXPECT_LE(own.tpot_s, w.tpot_target_s * (1 + 1e-6));
  // Without a file a model cut from the base gets the weights trained for the base's shape.
  EXPECT_EQ(by_default.energy_j, own.energy_j);
  w.dvfs_policy = data::testing::temp_dir("evaluate-policy") + "/none.json";
  try {
    device_cost(cut, nx, w);
    ADD_FAILURE() << "a missing policy file accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("none.json"), std::string::npos) << e.what();
  }
}

TEST(Evaluate, ValidationPerplexityOfAPlan) {
  const auto t = cln::prune::testing::tiny_model("prune-eval", 2);
  const std::string &data = t.data, &path = t.path;
  const Vocab& v = t.vocab;
  const ModelConfig& c = t.config;
  const Validation val{data, 16, 4, 1};
  const double dense = validation_ppl(path, val);
  EXPECT_GT(dense, 1.0);
  const auto f = GgufFile::open(path);
  const std::string tmp = data::testing::temp_dir("prune-eval-tmp");
  EXPECT_NEAR(validation_ppl(*f, PrunePlan::dense(c), val, tmp), dense, 1e-9 * dense);
  PrunePlan p = PrunePlan::dense(c);
  p.layers[1].ff.resize(8);
  EXPECT_NE(validation_ppl(*f, p, val, tmp), dense);

  // Calibration windows are slices of the training split's token files.
  const Calibration cal = calibration_from_data(data, v, 6, 10, 3);
  ASSERT_EQ(cal.tokens.size(), 6u * 11u);
  const auto& names = data::domain_names();
  for (int64_t s = 0; s < 6; ++s) {
    const auto file = data::read_token_file(
        data::token_file_path(data, names[static_cast<size_t>(s) % names.size()], "train"), v, "t");
    const auto first = cal.tokens.begin() + s * 11;
    const auto it = std::search(file.tokens.begin(), file.tokens.end(), first, first + 11,
                                [](uint16_t a, int32_t b) { return a == b; });
    EXPECT_NE(it, file.tokens.end()) << "window " << s;
  }
  EXPECT_EQ(calibration_from_data(data, v, 6, 10, 3).tokens, cal.tokens);  // seeded
  EXPECT_THROW(calibration_from_data(data + "/nowhere", v, 2, 10, 3), Error);
}
