// The engine's logits against an independent PyTorch implementation
// (tests/engine/torch_reference.py, float64) for a small random model with GQA,
// per-layer shapes, a zero-head layer, a zero-FFN layer and two LoRA adapters with
// per-request weights. Prefill and decode are both compared.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "clone/engine/context.h"
#include "test_util.h"

using namespace cln;

TEST(TorchParity, LogitsMatchPyTorchWithin1e4) {
  ModelConfig c = test::per_layer_config();
  const std::string model = test::tmp_path("parity.gguf");
  init_model(c, {42, DType::F32, 0.08f}, nullptr, model);
  const std::string a1 =
      test::random_adapter(c, {LayerMatrix::Q, LayerMatrix::V, LayerMatrix::Up, LayerMatrix::Down},
                           4, 8.0f, 1, "lora_a.gguf");
  const std::string a2 = test::random_adapter(
      c, {LayerMatrix::K, LayerMatrix::O, LayerMatrix::Gate}, 8, 16.0f, 2, "lora_b.gguf");

  std::vector<int32_t> toks = {1, 17, 250, 3, 99, 42, 7, 128, 5, 260, 11, 64};
  auto m = Model::load(model);
  Context ctx(m, {32, 2, 512});
  ctx.set_loras({{LoraAdapter::load(a1, *m), 0.7f}, {LoraAdapter::load(a2, *m), 0.3f}});
  const int64_t n_prefill = 8, nv = c.n_vocab;
  std::vector<float> engine;
  auto pre = ctx.eval(std::span<const int32_t>(toks.data(), n_prefill), true);
  engine.assign(pre.begin(), pre.end());
  for (size_t t = n_prefill; t < toks.size(); ++t) {
    auto l = ctx.eval(std::span<const int32_t>(&toks[t], 1));
    engine.insert(engine.end(), l.begin(), l.end());
  }

  const std::string tok_file = test::tmp_path("parity_tokens.txt"),
                    out = test::tmp_path("parity_logits.bin");
  {
    std::ofstream f(tok_file);
    for (int32_t t : toks) f << t << " ";
  }
  const std::string cmd = std::string(CLONE_PYTHON) + " " + CLONE_SOURCE_DIR +
                          "/tests/engine/torch_reference.py " + model + " " + tok_file + " " + out +
                          " " + a1 + ":0.7 " + a2 + ":0.3";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(out, std::ios::binary);
  std::vector<double> ref(toks.size() * static_cast<size_t>(nv));
  in.read(reinterpret_cast<char*>(ref.data()), static_cast<std::streamsize>(ref.size() * 8));
  ASSERT_TRUE(in.good()) << "reference output missing";
  ASSERT_EQ(engine.size(), ref.size());
  double max_diff = 0, max_ref = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(engine[i] - ref[i]));
    max_ref = std::max(max_ref, std::fabs(ref[i]));
  }
  std::printf("max |engine - torch| = %.3g over %zu logits (max |logit| %.3g)\n", max_diff,
              ref.size(), max_ref);
  EXPECT_LT(max_diff, 1e-4);
  EXPECT_GT(max_ref, 0.1);  // the model is not trivially zero
}
