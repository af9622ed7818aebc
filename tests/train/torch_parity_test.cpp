// One training step of a small deci model (GQA, per-layer heads and FFN widths, a layer
// without attention and one without an FFN) against an independent PyTorch
// implementation (tests/train/torch_llama.py, Debian's python3 with torch 1.13), without
// and with two LoRA adapters of different weights, with cross entropy and with the
// distillation loss (KL to a teacher's logits, mixed with cross entropy): the loss and every
// gradient agree
// within 1e-4 of each tensor's largest magnitude, and one AdamW step matches
// torch.optim.AdamW (clipping, decoupled weight decay on matrices only) to 1e-5 of each
// tensor's largest change.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "clone/core/rng.h"
#include "clone/train/llama.h"
#include "clone/train/optim.h"
#include "data/fixture.h"

namespace cln::train {
namespace {

struct Case {
  const char* name;
  bool lora;
  bool tied;
  float kd_weight = -1;  // >= 0: the loss is op::distill_cross_entropy from random teacher logits
};
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

class TorchParity : public ::testing::TestWithParam<Case> {};

ModelConfig deci_config(bool tied) {
  ModelConfig c;
  c.n_vocab = 37;
  c.n_embd = 16;
  c.n_ctx_train = 16;
  c.head_dim_k = c.head_dim_v = 4;
  c.tied_output = tied;
  // GQA 4 on 2, a zero-FFN layer, a zero-head layer, 2 heads on 1 with another width.
  c.layers = {{4, 2, 24}, {2, 2, 0}, {0, 0, 20}, {2, 1, 12}};
  return c;
}

void perturb(const std::vector<TensorP>& ts, double norm_scale, double mat_scale) {
  for (const TensorP& p : ts) {  // norms away from 1, weights larger than at init
    Rng r(std::hash<std::string>{}(p->name));
    const double s = p->shape.size() == 1 ? norm_scale : mat_scale;
    for (int64_t i = 0; i < p->numel(); ++i) p->data()[i] += static_cast<float>(r.normal() * s);
  }
}

TEST_P(TorchParity, OneStepLossGradientsAndAdamW) {
  if (!std::filesystem::exists(CLONE_PYTHON)) GTEST_SKIP() << CLONE_PYTHON << " not found";
  const Case tc = GetParam();
  const int64_t n_seq = 2, seq_len = 9;
  const ModelConfig c = deci_config(tc.tied);
  LlamaModel m = LlamaModel::init(c, 11);
  perturb(m.params(), 0.2, 0.1);
  std::vector<TensorP> trained = m.params();
  if (tc.lora) {
    Adapter& a =
        m.add_lora("a", 2, 4.0f, {LayerMatrix::Q, LayerMatrix::V, LayerMatrix::Up}, 5, 0.7f);
    Adapter& b =
        m.add_lora("b", 3, 6.0f, {LayerMatrix::K, LayerMatrix::O, LayerMatrix::Down}, 6, -0.4f);
    for (const Adapter* ad : {&a, &b}) {
      perturb(ad->params(), 0, 0.2);  // B starts at 0: give it values so every path counts
      for (const TensorP& p : ad->params()) trained.push_back(p);
    }
  }
  std::vector<int32_t> tok, tgt;
  Rng r(3);
  for (int64_t i = 0; i < n_seq * seq_len; ++i) {
    tok.push_back(static_cast<int32_t>(r.below(37)));
    tgt.push_back(i % 7 == 3 ? -1 : static_cast<int32_t>(r.below(37)));  // some ignored
  }
  TensorP teacher = make_tensor({n_seq * seq_len, c.n_vocab});
  for (int64_t i = 0; i < teacher->numel(); ++i)
    teacher->data()[i] = static_cast<float>(r.normal() * 2.0);
  Graph g(nullptr);
  const TensorP logits = m.forward(g, tok, n_seq, seq_len);
  TensorP loss = tc.kd_weight >= 0
                     ? op::distill_cross_entropy(g, logits, teacher, tgt, tc.kd_weight)
                     : op::cross_entropy(g, logits, tgt);
  g.backward(loss);
  std::vector<std::vector<float>> grads;
  for (const TensorP& p : trained) grads.emplace_back(p->grad(), p->grad() + p->numel());
  std::vector<std::vector<float>> before;
  for (const TensorP& p : trained) before.emplace_back(p->data(), p->data() + p->numel());
  AdamWConfig ac;
  ac.weight_decay = 0.1;
  ac.clip = 0.5;  // below the gradient norm of this model: clipping is exercised
  // A first Adam step moves each weight by about lr * g / (|g| + eps): with a tiny eps it is
  // lr * sign(g), and a gradient that is ~0 in both implementations could take either sign.
  // An eps above the rounding noise of the gradients keeps the step a smooth function of g.
  ac.eps = 1e-3;
  AdamW opt(trained, ac);
  const double lr = 1e-2;
  const double gnorm = opt.step(lr);
  EXPECT_GT(gnorm, ac.clip);

  const std::string dir = data::testing::temp_dir(std::string("torch-") + tc.name);
  const std::string in = dir + "/in.bin", out = dir + "/out.bin";
  {
    nlohmann::json layers = nlohmann::json::array();
    for (const LayerShape& l : c.layers) layers.push_back({l.n_head, l.n_head_kv, l.n_ff});
    nlohmann::json h = {{"n_embd", c.n_embd},
                        {"head_dim", c.head_dim_k},
                        {"eps", c.rms_eps},
                        {"rope_base", c.rope_base},
                        {"layers", layers},
                        {"tied", c.tied_output},
                        {"n_seq", n_seq},
                        {"seq_len", seq_len},
                        {"adapters", nlohmann::json::array()},
                        {"kd_weight", tc.kd_weight},
                        {"adamw",
                         {{"lr", lr},
                          {"beta1", ac.beta1},
                          {"beta2", ac.beta2},
                          {"eps", ac.eps},
                          {"weight_decay", ac.weight_decay},
                          {"clip", ac.clip}}}};
    for (const Adapter& a : m.adapters()) {
      nlohmann::json names = nlohmann::json::array();
      for (const TensorP& p : a.params()) names.push_back(p->name);
      h["adapters"].push_back({{"scale", a.weight * a.scale()}, {"tensors", names}});
    }
    for (const TensorP& p : trained) h["tensors"].push_back({p->name, p->shape});
    std::ofstream f(in, std::ios::binary);
    f << h.dump() << "\n";
    for (const auto& v : before)
      f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
    f.write(reinterpret_cast<const char*>(tok.data()),
            static_cast<std::streamsize>(tok.size() * 4));
    f.write(reinterpret_cast<const char*>(tgt.data()),
            static_cast<std::streamsize>(tgt.size() * 4));
    f.write(reinterpret_cast<const char*>(teacher->data()),
            static_cast<std::streamsize>(teacher->numel() * 4));
  }
  const std::string cmd = std::string(CLONE_PYTHON) + " " + CLONE_SOURCE_DIR +
                          "/tests/train/torch_llama.py parity " + in + " " + out;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream f(out, std::ios::binary);
  double torch_loss = 0;
  f.read(reinterpret_cast<char*>(&torch_loss), 8);
  ASSERT_TRUE(f);
  EXPECT_NEAR(loss->data()[0], torch_loss, 1e-5 * std::fabs(torch_loss));
  const auto compare = [&](const std::vector<float>& ours, const std::string& what, double rel,
                           const std::vector<float>* origin) {
    std::vector<float> theirs(ours.size());
    f.read(reinterpret_cast<char*>(theirs.data()), static_cast<std::streamsize>(ours.size() * 4));
    ASSERT_TRUE(f) << "short output at " << what;
    // Scale: the largest gradient, or for the step the largest change torch made.
    double mag = 0, diff = 0;
    for (size_t i = 0; i < ours.size(); ++i) {
      const double base = origin ? (*origin)[i] : 0.0;
      mag = std::max(mag, std::fabs(theirs[i] - base));
      diff = std::max(diff, std::fabs(double{ours[i]} - theirs[i]));
    }
    EXPECT_GT(mag, 0.0) << what;
    EXPECT_LE(diff, rel * mag) << what << ": max |diff| " << diff << " vs scale " << mag;
  };
  for (size_t k = 0; k < trained.size(); ++k)
    compare(grads[k], trained[k]->name + " gradient", 1e-4, nullptr);
  for (size_t k = 0; k < trained.size(); ++k) {
    std::vector<float> after(trained[k]->data(), trained[k]->data() + trained[k]->numel());
    compare(after, trained[k]->name + " after AdamW", 1e-4, &before[k]);
  }
}

INSTANTIATE_TEST_SUITE_P(Deci, TorchParity,
                         ::testing::Values(Case{"no_lora", false, false},
                                           Case{"two_loras", true, false},
                                           Case{"two_loras_tied_head", true, true},
                                           Case{"distilled", false, false, 1.0f},
                                           Case{"distilled_mixed_lora", true, true, 0.4f}),
                         [](const auto& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace cln::train
