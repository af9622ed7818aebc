// Every backward op against central finite differences (computed in double from the
// F32 forward), on awkward shapes. The loss is sum(y * r) for a fixed random r, so
// every output element's gradient is exercised.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "clone/core/rng.h"
#include "clone/kernels/thread_pool.h"
#include "clone/train/autograd.h"
#include "clone/train/llama.h"

namespace cln::train {
namespace {

TensorP random_tensor(std::vector<int64_t> shape, uint64_t seed, float scale = 1.0f,
                      bool rg = true) {
  TensorP t = make_tensor(std::move(shape), rg);
  Rng r(seed);
  for (int64_t i = 0; i < t->numel(); ++i) t->data()[i] = static_cast<float>(r.normal()) * scale;
  return t;
}

// f builds the output from the inputs; checks d sum(f * r) / d input for every input.
void check_grad(const std::vector<TensorP>& inputs, const std::function<TensorP(Graph&)>& f,
                double tol = 2e-2, kernels::ThreadPool* pool = nullptr) {
  auto loss_of = [&](Graph& g) {
    TensorP y = f(g);
    if (y->numel() == 1) return y;
    TensorP r = make_tensor(y->shape, false);
    Rng rng(99);
    for (int64_t i = 0; i < r->numel(); ++i) r->data()[i] = static_cast<float>(rng.normal());
    return op::sum(g, op::mul(g, y, r));
  };
  for (const TensorP& x : inputs) x->zero_grad();
  Graph g(pool);
  TensorP loss = loss_of(g);
  g.backward(loss);
  for (const TensorP& x : inputs) {
    ASSERT_TRUE(x->has_grad()) << "input " << x->name << " got no gradient";
    double max_g = 0;
    for (int64_t i = 0; i < x->numel(); ++i)
      max_g = std::max(max_g, std::fabs(double{x->grad()[i]}));
    const int64_t stride = std::max<int64_t>(1, x->numel() / 40);
    for (int64_t i = 0; i < x->numel(); i += stride) {
      const float orig = x->data()[i];
      const float h = 1e-2f * std::max(1.0f, std::fabs(orig));
      double lp, lm;
      {
        x->data()[i] = orig + h;
        Graph gg(pool);
        gg.grad_enabled = false;
        lp = loss_of(gg)->data()[0];
      }
      {
        x->data()[i] = orig - h;
        Graph gg(pool);
        gg.grad_enabled = false;
        lm = loss_of(gg)->data()[0];
      }
      x->data()[i] = orig;
      const double num = (lp - lm) / (2.0 * h);
      EXPECT_NEAR(x->grad()[i], num, tol * std::max(1.0, max_g))
          << "input " << x->name << " element " << i;
    }
  }
}

TEST(Grad, Linear) {
  auto x = random_tensor({5, 7}, 1), w = random_tensor({3, 7}, 2);
  check_grad({x, w}, [&](Graph& g) { return op::linear(g, x, w); });
}

TEST(Grad, LinearThreaded) {
  kernels::ThreadPool pool(2);
  auto x = random_tensor({33, 19}, 1), w = random_tensor({17, 19}, 2);
  check_grad(
      {x, w}, [&](Graph& g) { return op::linear(g, x, w); }, 2e-2, &pool);
}

TEST(Grad, Embedding) {
  auto t = random_tensor({11, 6}, 3);
  std::vector<int32_t> ids = {3, 0, 10, 3, 7};
  check_grad({t}, [&](Graph& g) { return op::embedding(g, t, ids); });
}

TEST(Grad, RmsNorm) {
  auto x = random_tensor({4, 9}, 4), w = random_tensor({9}, 5);
  check_grad({x, w}, [&](Graph& g) { return op::rmsnorm(g, x, w, 1e-5f); });
}

TEST(Grad, Rope) {
  auto x = random_tensor({5, 3 * 8}, 6);
  std::vector<int32_t> pos = {0, 1, 2, 7, 100};
  check_grad({x}, [&](Graph& g) { return op::rope(g, x, 3, 8, pos, 10000.0f); });
}

TEST(Grad, AttentionCausalGqa) {
  // 2 sequences of 5 tokens; 4 query heads on 2 KV heads; dk 6, dv 4.
  const kernels::AttentionShape s{4, 2, 6, 4};
  auto q = random_tensor({10, 24}, 7), k = random_tensor({10, 12}, 8),
       v = random_tensor({10, 8}, 9);
  check_grad({q, k, v}, [&](Graph& g) { return op::attention(g, q, k, v, 2, 5, s); });
}

TEST(Grad, AttentionThreaded) {
  kernels::ThreadPool pool(2);
  const kernels::AttentionShape s{2, 1, 4, 4};
  auto q = random_tensor({21, 8}, 7), k = random_tensor({21, 4}, 8), v = random_tensor({21, 4}, 9);
  check_grad(
      {q, k, v}, [&](Graph& g) { return op::attention(g, q, k, v, 3, 7, s); }, 2e-2, &pool);
}

TEST(Grad, SiluMul) {
  auto a = random_tensor({3, 5}, 10), b = random_tensor({3, 5}, 11);
  check_grad({a, b}, [&](Graph& g) { return op::silu_mul(g, a, b); });
}

TEST(Grad, AddScaleMulSameInput) {
  auto a = random_tensor({3, 4}, 12), b = random_tensor({3, 4}, 13);
  check_grad({a, b}, [&](Graph& g) {
    return op::add(g, op::scale(g, op::mul(g, a, a), 0.5f), op::mul(g, a, b));
  });
}

TEST(Grad, CrossEntropyWithIgnoredRows) {
  auto x = random_tensor({4, 9}, 14, 2.0f);
  std::vector<int32_t> t = {3, -1, 8, 0};
  check_grad({x}, [&](Graph& g) { return op::cross_entropy(g, x, t); });
}

TEST(Grad, SmallNetOps) {
  auto x = random_tensor({3, 6}, 15), b = random_tensor({6}, 16), y = random_tensor({3, 2}, 17);
  check_grad({x, b, y}, [&](Graph& g) {
    TensorP h = op::add_bias(g, x, b);
    TensorP c = op::concat_cols(g, op::tanh(g, op::slice_cols(g, h, 0, 2)),
                                op::sigmoid(g, op::slice_cols(g, h, 2, 5)));
    return op::concat_cols(g, op::relu(g, c), y);
  });
  std::vector<float> target(18, 0.25f);
  check_grad({x}, [&](Graph& g) { return op::mse(g, x, target); });
}

TEST(Grad, TinyLlamaEndToEnd) {
  const ModelConfig c = llama_shape(13, 8, 2, 2, 1, 12, 16);
  LlamaModel m = LlamaModel::init(c, 5);
  for (const TensorP& p : m.params()) {  // larger weights so every path matters
    Rng r(std::hash<std::string>{}(p->name));
    for (int64_t i = 0; i < p->numel(); ++i) p->data()[i] += static_cast<float>(r.normal() * 0.3);
  }
  std::vector<int32_t> tok = {1, 5, 7, 2, 12, 0, 3, 3, 9, 4}, tgt = {5, 7, 2, 12, 0, 3, 3, 9, 4, 1};
  check_grad(m.params(),
             [&](Graph& g) { return op::cross_entropy(g, m.forward(g, tok, 2, 5), tgt); });
}

TEST(Grad, LoraOnFrozenBase) {
  const ModelConfig c = llama_shape(13, 8, 2, 2, 1, 12, 16);
  LlamaModel m = LlamaModel::init(c, 5);
  const Adapter& a =
      m.add_lora("t", 2, 4.0f, {LayerMatrix::Q, LayerMatrix::V, LayerMatrix::Down}, 3);
  m.set_trainable(false);
  for (const TensorP& p : a.params()) {
    Rng r(std::hash<std::string>{}(p->name));
    for (int64_t i = 0; i < p->numel(); ++i) p->data()[i] += static_cast<float>(r.normal() * 0.3);
  }
  std::vector<int32_t> tok = {1, 5, 7, 2, 12, 0}, tgt = {5, 7, 2, 12, 0, 3};
  check_grad(a.params(),
             [&](Graph& g) { return op::cross_entropy(g, m.forward(g, tok, 1, 6), tgt); });
  for (const TensorP& p : m.params()) EXPECT_FALSE(p->has_grad()) << p->name << " is frozen";
}

}  // namespace
}  // namespace cln::train
