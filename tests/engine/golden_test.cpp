// Golden files written and quantized by llama.cpp's own tools: clone must reproduce the
// perplexity each gives under llama-perplexity's protocol (shared/data/golden-gguf/README.md).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "clone/engine/context.h"
#include "clone/eval/nll.h"

using namespace cln;

namespace {

std::string golden(const std::string& f) {
  return std::string(CLONE_SHARED_DIR) + "/data/golden-gguf/" + f;
}

std::vector<int32_t> golden_ids() {
  std::ifstream in(golden("jargon-slice.ids"));
  std::string s((std::istreambuf_iterator<char>(in)), {});
  for (char& c : s)
    if (c == '[' || c == ']' || c == ',') c = ' ';
  std::istringstream is(s);
  std::vector<int32_t> ids;
  int32_t v;
  while (is >> v) ids.push_back(v);
  return ids;
}

struct Case {
  const char* file;
  double exact;  // float64 reference with dequantized weights
  double rel_tol;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.file;
}

class Golden : public ::testing::TestWithParam<Case> {};

}  // namespace

TEST_P(Golden, PerplexityMatchesReference) {
  const Case c = GetParam();
  const auto ids = golden_ids();
  ASSERT_EQ(ids.size(), 10400u);
  auto m = Model::load(golden(c.file));
  Context ctx(m, {128, 0, 128});
  const eval::NllResult r = eval::windowed_nll(
      ctx, ids, eval::llama_windows(static_cast<int64_t>(ids.size()), 128, 128, 64, 1));
  EXPECT_EQ(r.windows, 81);
  EXPECT_EQ(r.scored, 5103);
  EXPECT_NEAR(r.ppl(), c.exact, c.exact * c.rel_tol) << c.file;
}

// F32 to about 1e-4 relative; quantized paths within 1% of the exact value (README).
INSTANTIATE_TEST_SUITE_P(LlamaCpp, Golden,
                         ::testing::Values(Case{"golden-f32.gguf", 1228.4508, 1e-4},
                                           Case{"golden-q8_0.gguf", 1222.0819, 0.01},
                                           Case{"golden-q4_0.gguf", 1234.0310, 0.01},
                                           Case{"golden-per-layer-f32.gguf", 1949.0707, 1e-4},
                                           Case{"golden-per-layer-q8_0.gguf", 1950.2319, 0.01},
                                           Case{"golden-per-layer-q4_0.gguf", 1901.6083, 0.01}),
                         [](const auto& param_info) {
                           std::string n = param_info.param.file;
                           n = n.substr(0, n.find('.'));
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

TEST(GoldenShapes, DeciPerLayerShapesAreRead) {
  auto m = Model::load(golden("golden-per-layer-f32.gguf"));
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, "deci");
  ASSERT_EQ(c.n_layer(), 4);
  EXPECT_EQ(c.layers[0], (LayerShape{4, 2, 256}));
  EXPECT_EQ(c.layers[1], (LayerShape{2, 1, 128}));
  EXPECT_EQ(c.layers[2], (LayerShape{0, 0, 192}));
  EXPECT_EQ(c.layers[3], (LayerShape{3, 1, 64}));
  EXPECT_EQ(c.head_dim_k, 32);
  EXPECT_FALSE(c.tied_output);
}
