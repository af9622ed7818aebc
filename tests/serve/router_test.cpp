// The router: weights against a softmax computed by hand, keys that survive a round trip
// through the adapter file (which still loads), the base-model embedding against an
// independent PyTorch forward cut after k layers, and TF-IDF against counts by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "clone/core/error.h"
#include "clone/engine/lora.h"
#include "clone/engine/model_writer.h"
#include "clone/serve/embed.h"
#include "clone/serve/router.h"
#include "engine/test_util.h"

namespace cln::serve {
namespace {

TEST(Router, SoftmaxOfCosinesByHand) {
  const float r2 = static_cast<float>(1 / std::sqrt(2.0));
  const std::vector<ExpertKey> keys = {{"e", {1, 0}, 1}, {"e", {0, 2}, 1}, {"e", {r2, r2}, 1}};
  const std::vector<float> x = {3, 0};  // cosines 1, 0, 0.7071
  RouterOptions o;
  o.temperature = 0.5;
  o.threshold = 0.0;
  const std::vector<double> w = Router(keys, o).weights(x);
  const double a = 1, b = std::exp(-2.0), c = std::exp((std::sqrt(0.5) - 1) / 0.5);
  EXPECT_NEAR(w[0], a / (a + b + c), 1e-12);
  EXPECT_NEAR(w[1], b / (a + b + c), 1e-12);
  EXPECT_NEAR(w[2], c / (a + b + c), 1e-12);
  // A threshold above the smallest weight drops it and renormalises the rest.
  o.threshold = 0.15;  // w[1] = 0.082
  const std::vector<double> t = Router(keys, o).weights(x);
  EXPECT_EQ(t[1], 0.0);
  EXPECT_NEAR(t[0], a / (a + c), 1e-12);
  o.mixing = Mixing::Top1;
  EXPECT_EQ(Router(keys, o).weights(x), (std::vector<double>{1, 0, 0}));
  o.mixing = Mixing::Uniform;
  EXPECT_EQ(Router(keys, o).weights(x), (std::vector<double>{1 / 3.0, 1 / 3.0, 1 / 3.0}));
  // Keys from different embeddings do not mix.
  EXPECT_THROW(Router({{"hidden:4", {1, 0}, 1}, {"tfidf", {1, 0}, 1}}), Error);
}

TEST(Router, KeyRoundTripKeepsTheAdapter) {
  const ModelConfig c = test::per_layer_config();
  const std::string model = test::tmp_path("router_model.gguf");
  init_model(c, {5, DType::F32, 0.05f}, nullptr, model);
  const std::string ad =
      test::random_adapter(c, {LayerMatrix::Q, LayerMatrix::Down}, 4, 8.0f, 3, "router_ad.gguf");
  const auto before = GgufFile::open(ad);
  std::vector<std::vector<uint8_t>> bytes;
  for (const auto& t : before->tensors())
    bytes.emplace_back(before->tensor_data(t), before->tensor_data(t) + t.nbytes);
  const ExpertKey key{"hidden:2", {0.5f, -1.25f, 3.0f}, 17};
  write_key(ad, key);
  const auto after = GgufFile::open(ad);
  const auto back = read_key(*after);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->embedder, "hidden:2");
  EXPECT_EQ(back->key, key.key);
  EXPECT_EQ(back->prompts, 17);
  ASSERT_EQ(after->tensors().size(), bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    const auto& t = after->tensors()[i];
    EXPECT_EQ(0, std::memcmp(after->tensor_data(t), bytes[i].data(), t.nbytes)) << t.name;
  }
  EXPECT_NO_THROW(LoraAdapter::load(ad, *Model::load(model)));
  EXPECT_FALSE(read_key(*GgufFile::open(model)).has_value());
  EXPECT_THROW(write_key(model, key), Error);  // not an adapter
}

TEST(Embed, HiddenStatesEqualPyTorchCutAfterKLayers) {
  if (!std::filesystem::exists(CLONE_PYTHON)) GTEST_SKIP() << CLONE_PYTHON << " not found";
  const ModelConfig c = test::per_layer_config();
  const std::string model = test::tmp_path("router_hidden.gguf");
  init_model(c, {9, DType::F32, 0.08f}, nullptr, model);
  const std::vector<int32_t> toks = {1, 17, 250, 3, 99, 42, 7, 128, 5};
  const std::string tok_file = test::tmp_path("router_tokens.txt");
  {
    std::ofstream f(tok_file);
    for (int32_t t : toks) f << t << " ";
  }
  const auto m = Model::load(model);
  for (int64_t k : {0, 1, 3, 5}) {
    const std::string out = test::tmp_path("router_hidden.bin");
    const std::string cmd = "HIDDEN_LAYERS=" + std::to_string(k) + " " + CLONE_PYTHON + " " +
                            CLONE_SOURCE_DIR + "/tests/engine/torch_reference.py " + model + " " +
                            tok_file + " " + out;
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::ifstream in(out, std::ios::binary);
    std::vector<double> ref(static_cast<size_t>(c.n_embd));
    in.read(reinterpret_cast<char*>(ref.data()), static_cast<std::streamsize>(ref.size() * 8));
    ASSERT_TRUE(in.good());
    Context ctx(m, {16, 1, 4});  // passes of 4 tokens: the mean spans passes
    const std::vector<float> got = ctx.mean_hidden(toks, k);
    double worst = 0, mag = 0;
    for (size_t j = 0; j < ref.size(); ++j)
      worst = std::max(worst, std::fabs(got[j] - ref[j])), mag = std::max(mag, std::fabs(ref[j]));
    EXPECT_LT(worst, 1e-5 * std::max(1.0, mag)) << "k = " << k;
    EXPECT_EQ(ctx.n_past(), 0);
  }
}

TEST(Embed, TfIdfByHand) {
  // 3 documents; token 5 in all, token 6 in one: idf(5) = ln(4/4) + 1 = 1, idf(6) = ln(4/2) + 1.
  TfIdfEmbedder e(10, {{5, 6}, {5}, {5, 7}});
  const std::vector<float> v = e.embed(std::vector<int32_t>{5, 6, 6});
  const double i6 = std::log(2.0) + 1;
  const double norm = std::sqrt(1 + 4 * i6 * i6);
  EXPECT_NEAR(v[5], 1 / norm, 1e-6);
  EXPECT_NEAR(v[6], 2 * i6 / norm, 1e-6);
  EXPECT_EQ(v[7], 0.0f);
  EXPECT_THROW(e.embed(std::vector<int32_t>{}), Error);
}

}  // namespace
}  // namespace cln::serve
