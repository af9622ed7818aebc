// One training step of a tiny GQA Llama against an independent PyTorch implementation
// (tests/train/torch_llama.py, run by Debian's python3 with torch 1.13): the loss and
// every parameter gradient agree within 1e-4 of each tensor's largest magnitude.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "clone/train/llama.h"
#include "fixture.h"

namespace cln::train {
namespace {

TEST(TorchParity, OneStepLossAndAllGradients) {
  if (!std::filesystem::exists(CLONE_PYTHON)) GTEST_SKIP() << CLONE_PYTHON << " not found";
  const int64_t n_seq = 2, seq_len = 9;
  const ModelConfig c = llama_shape(37, 16, 2, 4, 2, 24, 16);
  LlamaModel m = LlamaModel::init(c, 11);
  for (const TensorP& p : m.params()) {  // norms away from 1, weights larger than at init
    Rng r(std::hash<std::string>{}(p->name));
    const double s = p->shape.size() == 1 ? 0.2 : 0.1;
    for (int64_t i = 0; i < p->numel(); ++i) p->data()[i] += static_cast<float>(r.normal() * s);
  }
  std::vector<int32_t> tok, tgt;
  Rng r(3);
  for (int64_t i = 0; i < n_seq * seq_len; ++i) {
    tok.push_back(static_cast<int32_t>(r.next() % 37));
    tgt.push_back(i % 7 == 3 ? -1 : static_cast<int32_t>(r.next() % 37));  // some ignored
  }
  Graph g(nullptr);
  TensorP loss = op::cross_entropy(g, m.forward(g, tok, n_seq, seq_len), tgt);
  g.backward(loss);

  const std::string dir = testing::temp_dir("torch");
  const std::string in = dir + "/in.bin", out = dir + "/out.bin";
  {
    nlohmann::json h = {{"n_embd", c.n_embd},
                        {"n_head", c.layers[0].n_head},
                        {"n_head_kv", c.layers[0].n_head_kv},
                        {"head_dim", c.head_dim_k},
                        {"n_layer", c.n_layer()},
                        {"eps", c.rms_eps},
                        {"rope_base", c.rope_base},
                        {"n_seq", n_seq},
                        {"seq_len", seq_len}};
    for (const TensorP& p : m.params()) h["tensors"].push_back({p->name, p->shape});
    std::ofstream f(in, std::ios::binary);
    f << h.dump() << "\n";
    for (const TensorP& p : m.params())
      f.write(reinterpret_cast<const char*>(p->data()), p->numel() * 4);
    f.write(reinterpret_cast<const char*>(tok.data()),
            static_cast<std::streamsize>(tok.size() * 4));
    f.write(reinterpret_cast<const char*>(tgt.data()),
            static_cast<std::streamsize>(tgt.size() * 4));
  }
  const std::string cmd = std::string(CLONE_PYTHON) + " " + CLONE_SOURCE_DIR +
                          "/tests/train/torch_llama.py parity " + in + " " + out;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream f(out, std::ios::binary);
  double torch_loss = 0;
  f.read(reinterpret_cast<char*>(&torch_loss), 8);
  ASSERT_TRUE(f);
  EXPECT_NEAR(loss->data()[0], torch_loss, 1e-4 * std::fabs(torch_loss));
  for (const TensorP& p : m.params()) {
    std::vector<float> tg(static_cast<size_t>(p->numel()));
    f.read(reinterpret_cast<char*>(tg.data()), p->numel() * 4);
    ASSERT_TRUE(f) << "short output at " << p->name;
    double max_mag = 0, max_diff = 0;
    for (int64_t i = 0; i < p->numel(); ++i) {
      max_mag = std::max(max_mag, std::fabs(double{tg[static_cast<size_t>(i)]}));
      max_diff = std::max(max_diff, std::fabs(double{p->grad()[i]} - tg[static_cast<size_t>(i)]));
    }
    EXPECT_GT(max_mag, 0.0) << p->name;
    EXPECT_LE(max_diff, 1e-4 * max_mag)
        << p->name << ": max |diff| " << max_diff << " vs max |grad| " << max_mag;
  }
}

}  // namespace
}  // namespace cln::train
