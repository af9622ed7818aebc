// Structured pruning's surgery on the shipped base model: for every unit kind (query heads
// within a group, a whole KV group, FFN channels, a whole attention half, a whole FFN half,
// and all at once in different layers), the pruned model's logits on real text equal the
// dense model's with the removed units' outputs zeroed; the file carries its plan and
// tokenizer; bad plans name the layer and what is wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "clone/core/error.h"
#include "clone/engine/context.h"
#include "clone/engine/model.h"
#include "clone/prune/surgery.h"
#include "clone/tokenizer/tokenizer.h"

using namespace cln;
using namespace cln::prune;
namespace fs = std::filesystem;

namespace {

const std::string kBase = std::string(CLONE_SOURCE_DIR) + "/models/base/model.gguf";
const char* kText =
    "The quick brown fox jumps over the lazy dog. In the beginning God created the heaven "
    "and the earth. int main(void) { return 0; } A computer is a machine that computes.";

std::string out_path(const std::string& name) {
  const fs::path d = fs::path(CLONE_BINARY_DIR) / "prune_test";
  fs::create_directories(d);
  return (d / name).string();
}

std::vector<float> logits(const std::string& path, const std::vector<int32_t>& ids) {
  auto m = Model::load(path);
  Context ctx(m, {256, 1, 256});
  const auto l = ctx.eval(ids, true);
  return {l.begin(), l.end()};
}

// Pruned vs masked dense: the same function, so equal up to summation order.
void expect_same_function(const PrunePlan& plan, const std::string& tag) {
  const auto f = GgufFile::open(kBase);
  const std::string pruned = out_path(tag + ".pruned.gguf"),
                    masked = out_path(tag + ".masked.gguf");
  write_pruned(*f, plan, pruned, {{"clone.pruning.method", "test"}});
  write_masked(*f, plan, masked);
  const Tokenizer tok = Tokenizer::from_gguf(*f);
  const std::vector<int32_t> ids = tok.encode(kText, true);
  const std::vector<float> a = logits(pruned, ids), b = logits(masked, ids), d = logits(kBase, ids);
  ASSERT_EQ(a.size(), b.size());
  double max_diff = 0, max_abs = 0, moved = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    max_diff = std::max(max_diff, static_cast<double>(std::fabs(a[i] - b[i])));
    max_abs = std::max(max_abs, static_cast<double>(std::fabs(b[i])));
    moved = std::max(moved, static_cast<double>(std::fabs(b[i] - d[i])));
  }
  EXPECT_LT(max_diff, 1e-4 * max_abs) << tag;
  // And the cut mattered: the masked model is not the dense one.
  EXPECT_GT(moved, 1e-2) << tag;
}

ModelConfig base_config() {
  return ModelConfig::from_gguf(*GgufFile::open(kBase));
}

}  // namespace

TEST(Surgery, QueryHeadsWithinAGroup) {
  const ModelConfig c = base_config();
  ASSERT_GE(c.layers[0].n_head / c.layers[0].n_head_kv, 2);
  PrunePlan p = PrunePlan::dense(c);
  for (auto& g : p.layers[1].q) g.erase(g.begin());  // the first query head of each group
  EXPECT_EQ(p.shape(c).layers[1].n_head, c.layers[1].n_head - c.layers[1].n_head_kv);
  EXPECT_EQ(p.shape(c).arch, "deci");
  expect_same_function(p, "q-heads");
}

TEST(Surgery, AWholeKvGroup) {
  const ModelConfig c = base_config();
  ASSERT_GE(c.layers[2].n_head_kv, 2);
  PrunePlan p = PrunePlan::dense(c);
  p.layers[2].kv.erase(p.layers[2].kv.begin());
  p.layers[2].q.erase(p.layers[2].q.begin());
  expect_same_function(p, "kv-group");
}

TEST(Surgery, FfnChannels) {
  const ModelConfig c = base_config();
  PrunePlan p = PrunePlan::dense(c);
  std::vector<int64_t> keep;
  for (int64_t f = 0; f < c.layers[3].n_ff; ++f)
    if (f % 3 != 1) keep.push_back(f);  // a third, scattered
  p.layers[3].ff = keep;
  expect_same_function(p, "ffn-channels");
}

TEST(Surgery, WholeHalvesOfLayers) {
  const ModelConfig c = base_config();
  PrunePlan p = PrunePlan::dense(c);
  p.layers[4].kv.clear(), p.layers[4].q.clear();  // no attention
  p.layers[5].ff.clear();                         // no FFN
  const ModelConfig s = p.shape(c);
  EXPECT_FALSE(s.layers[4].has_attention());
  EXPECT_FALSE(s.layers[5].has_ffn());
  expect_same_function(p, "halves");
}

TEST(Surgery, EveryKindAtOnceAndTheFileSaysWhatWasKept) {
  const ModelConfig c = base_config();
  PrunePlan p = PrunePlan::dense(c);
  const int64_t last = c.n_layer() - 1;
  for (auto& g : p.layers[0].q) g.resize(1);
  p.layers[1].kv.resize(1), p.layers[1].q.resize(1);
  p.layers[2].ff.resize(static_cast<size_t>(c.layers[2].n_ff / 4));
  p.layers[static_cast<size_t>(last)].kv.clear(), p.layers[static_cast<size_t>(last)].q.clear();
  p.layers[static_cast<size_t>(last - 1)].ff.clear();
  expect_same_function(p, "all");
  const auto f = GgufFile::open(out_path("all.pruned.gguf"));
  EXPECT_EQ(PrunePlan::from_json(f->get_string("clone.pruning.plan")), p);
  EXPECT_EQ(f->get_string("clone.pruning.method"), "test");
  EXPECT_EQ(f->get_string("general.architecture"), "deci");
  EXPECT_EQ(ModelConfig::from_gguf(*f).layers, p.shape(c).layers);
  const auto dense = GgufFile::open(kBase);
  EXPECT_EQ(Tokenizer::from_gguf(*f).encode(kText, true),
            Tokenizer::from_gguf(*dense).encode(kText, true));
  EXPECT_LT(fs::file_size(out_path("all.pruned.gguf")), fs::file_size(kBase));
}

TEST(Surgery, BadPlansNameTheLayerAndTheProblem) {
  const ModelConfig c = base_config();
  const auto expect_error = [&](const PrunePlan& p, const std::string& want) {
    try {
      p.validate(c);
      FAIL() << "expected an error containing: " << want;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  PrunePlan p = PrunePlan::dense(c);
  p.layers.pop_back();
  expect_error(p, "layers for a model of");
  p = PrunePlan::dense(c);
  p.layers[3].ff.push_back(c.layers[3].n_ff);
  expect_error(p, "layer 3: FFN channel " + std::to_string(c.layers[3].n_ff) + " is out of range");
  p = PrunePlan::dense(c);
  p.layers[2].q[0].resize(1);  // groups of unequal size
  expect_error(p, "layer 2: query groups of unequal size");
  p = PrunePlan::dense(c);
  std::swap(p.layers[1].q[0], p.layers[1].q[1]);  // heads under the wrong KV head
  expect_error(p, "layer 1: query head");
  p = PrunePlan::dense(c);
  p.layers[0].q[0].clear(), p.layers[0].q[1].clear();
  expect_error(p, "layer 0: KV head 0 is kept with no query head");
  p = PrunePlan::dense(c);
  std::reverse(p.layers[5].ff.begin(), p.layers[5].ff.end());
  expect_error(p, "layer 5: FFN channels must be ascending");
  EXPECT_THROW(PrunePlan::from_json("{\"kv\": 1}"), Error);
  EXPECT_THROW(PrunePlan::from_json("[{\"kv\": [0]}]"), Error);
}
