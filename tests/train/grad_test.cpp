// Every backward op against central finite differences, on awkward shapes. The loss is
// sum(y * r) for a fixed random r (accumulated in double for the differences), so every
// output element's gradient is exercised.
//
// The comparison is per element: |analytic - numeric| <= kRtol |numeric| + kAtol max|g|,
// a relative tolerance wherever the gradient is not tiny next to the largest one, so a
// backward pass off by a few percent fails (scaling any one op's backward by 1.03 fails
// its test here; the commit that made this check lists them). The numeric derivative is
// Richardson-extrapolated from central differences at h and h/2, which removes the
// O(h^2) truncation error; what is left is the F32 rounding of the forward pass, about
// 1e-7 of the loss over h, far below kRtol. Every element is checked when a tensor is
// small; larger ones are sampled, and the elements with the largest gradients are always
// among those sampled.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <string>

#include "clone/core/error.h"
#include "clone/core/rng.h"
#include "clone/kernels/thread_pool.h"
#include "clone/train/autograd.h"
#include "clone/train/llama.h"

namespace cln::train {
namespace {

constexpr double kRtol = 5e-3;      // a 3% error in any op's backward is six times this
constexpr double kAtol = 1e-4;      // of the tensor's largest |gradient|
constexpr int64_t kCheckAll = 600;  // tensors up to this size: every element
constexpr int64_t kSampled = 200;   // larger ones: this many, the largest |g| among them

TensorP random_tensor(const char* name, std::vector<int64_t> shape, uint64_t seed,
                      float scale = 1.0f) {
  TensorP t = make_tensor(std::move(shape), true);
  t->name = name;
  Rng r(seed);
  for (int64_t i = 0; i < t->numel(); ++i) t->data()[i] = static_cast<float>(r.normal()) * scale;
  return t;
}

// The elements of x to check: all of a small tensor; otherwise the kSampled / 4 largest
// |g| and an even spread of the rest.
std::vector<int64_t> elements_to_check(const TensorP& x) {
  std::vector<int64_t> idx(static_cast<size_t>(x->numel()));
  std::iota(idx.begin(), idx.end(), int64_t{0});
  if (x->numel() <= kCheckAll) return idx;
  const float* g = x->grad();
  std::partial_sort(idx.begin(), idx.begin() + kSampled / 4, idx.end(),
                    [&](int64_t a, int64_t b) { return std::fabs(g[a]) > std::fabs(g[b]); });
  std::vector<int64_t> pick(idx.begin(), idx.begin() + kSampled / 4);
  const int64_t stride = x->numel() / (kSampled - kSampled / 4);
  for (int64_t i = 0; i < x->numel(); i += stride) pick.push_back(i);
  std::sort(pick.begin(), pick.end());
  pick.erase(std::unique(pick.begin(), pick.end()), pick.end());
  return pick;
}

struct GradOptions {
  kernels::ThreadPool* pool = nullptr;
  // Set: the loss is the cross entropy of f's output (logits) with these targets, built with
  // op::cross_entropy for the backward pass and computed here in double for the differences
  // (an F32 scalar loss would put its own rounding into them).
  const std::vector<int32_t>* targets = nullptr;
  float h = 1e-2f;      // step, relative to max(1, |x|)
  double atol = kAtol;  // the absolute floor, of the tensor's largest |gradient|
  // Set (both): another scalar loss of f's output, as a graph and in double.
  std::function<TensorP(Graph&, const TensorP&)> loss = nullptr;
  std::function<double(const Tensor&)> loss_double = nullptr;
};

// A whole model's loss is a mean over a few tokens through F32 layers: the rounding of the
// forward pass puts noise of up to about 4e-3 of the largest gradient into the differences
// of its weakest paths (the attention queries, whose gradients are a few percent of the
// largest), measured on these tests on every SIMD target. A larger step and a floor above
// that noise; the relative tolerance is the same, and a 3% error of the gradients above
// 0.4 of the largest still fails.
constexpr float kModelStep = 3e-2f;
constexpr double kModelAtol = 1e-2;

// Mean over the rows with a target >= 0 of -log softmax(logits)[target], in double.
double cross_entropy_double(const Tensor& y, const std::vector<int32_t>& targets) {
  const int64_t V = y.cols();
  double total = 0;
  int n = 0;
  for (int64_t i = 0; i < y.rows(); ++i) {
    const int32_t t = targets[static_cast<size_t>(i)];
    if (t < 0) continue;
    const float* row = y.data() + i * V;
    double m = row[0], z = 0;
    for (int64_t j = 1; j < V; ++j) m = std::max(m, double{row[j]});
    for (int64_t j = 0; j < V; ++j) z += std::exp(row[j] - m);
    total += std::log(z) + m - row[t];
    ++n;
  }
  return total / n;
}

// f builds the output from the inputs; checks d sum(f * r) / d input for every input, and
// prints the largest relative error among the elements above the floor (the margin).
void check_grad(const std::vector<TensorP>& inputs, const std::function<TensorP(Graph&)>& f,
                const GradOptions& opt = {}) {
  kernels::ThreadPool* pool = opt.pool;
  std::vector<float> r;
  auto weights = [&](int64_t n) {
    if (static_cast<int64_t>(r.size()) != n) {
      Rng rng(99);
      r.resize(static_cast<size_t>(n));
      for (float& v : r) v = static_cast<float>(rng.normal());
    }
  };
  // The loss as a graph (for backward): sum(y * r), or y itself when it is a scalar.
  auto loss_of = [&](Graph& g) {
    TensorP y = f(g);
    if (opt.targets) return op::cross_entropy(g, y, *opt.targets);
    if (opt.loss) return opt.loss(g, y);
    if (y->numel() == 1) return y;
    weights(y->numel());
    TensorP rt = make_tensor(y->shape, false);
    std::copy(r.begin(), r.end(), rt->data());
    return op::sum(g, op::mul(g, y, rt));
  };
  // The same loss in double, for the differences.
  auto value = [&] {
    Graph g(pool);
    g.grad_enabled = false;
    TensorP y = f(g);
    if (opt.targets) return cross_entropy_double(*y, *opt.targets);
    if (opt.loss_double) return opt.loss_double(*y);
    if (y->numel() == 1) return double{y->data()[0]};
    weights(y->numel());
    double s = 0;
    for (int64_t i = 0; i < y->numel(); ++i) s += double{y->data()[i]} * r[static_cast<size_t>(i)];
    return s;
  };
  for (const TensorP& x : inputs) x->zero_grad();
  {
    Graph g(pool);
    TensorP loss = loss_of(g);
    g.backward(loss);
  }
  for (const TensorP& x : inputs) {
    if (!x->has_grad()) {
      ADD_FAILURE() << "input " << x->name << " got no gradient";
      continue;
    }
    double max_g = 0;
    for (int64_t i = 0; i < x->numel(); ++i)
      max_g = std::max(max_g, std::fabs(double{x->grad()[i]}));
    EXPECT_GT(max_g, 0.0) << "input " << x->name << ": all gradients zero";
    int bad = 0;
    int64_t checked = 0;
    double worst_x = 0, worst_at = 0;
    for (int64_t i : elements_to_check(x)) {
      const float orig = x->data()[i];
      auto central = [&](float h) {
        x->data()[i] = orig + h;
        const double hp = double{x->data()[i]} - orig;  // the step actually taken
        const double lp = value();
        x->data()[i] = orig - h;
        const double hm = orig - double{x->data()[i]};
        const double lm = value();
        x->data()[i] = orig;
        return (lp - lm) / (hp + hm);
      };
      const float h = opt.h * std::max(1.0f, std::fabs(orig));
      const double num = (4 * central(h / 2) - central(h)) / 3;
      const double got = x->grad()[i], err = std::fabs(got - num);
      const double floor = opt.atol * max_g;
      if (err > kRtol * std::fabs(num) + floor && bad++ < 5)
        ADD_FAILURE() << "input " << x->name << " element " << i << ": backward " << got
                      << ", finite differences " << num << " (relative error "
                      << err / std::max(std::fabs(num), 1e-30) << ")";
      if (std::fabs(num) > floor / kRtol) {
        if (err / std::fabs(num) > worst_x) worst_at = std::fabs(num) / max_g;
        worst_x = std::max(worst_x, err / std::fabs(num));
      }
      ++checked;
    }
    std::printf(
        "  %-28s %5lld of %5lld elements checked, largest relative error %.1e at |g| = %.2f max\n",
        x->name.c_str(), static_cast<long long>(checked), static_cast<long long>(x->numel()),
        worst_x, worst_at);
  }
}

TEST(Grad, Linear) {
  auto x = random_tensor("x", {5, 7}, 1), w = random_tensor("w", {3, 7}, 2);
  check_grad({x, w}, [&](Graph& g) { return op::linear(g, x, w); });
}

TEST(Grad, LinearThreaded) {
  kernels::ThreadPool pool(2);
  auto x = random_tensor("x", {33, 19}, 1), w = random_tensor("w", {17, 19}, 2);
  check_grad({x, w}, [&](Graph& g) { return op::linear(g, x, w); }, {&pool});
}

TEST(Grad, Embedding) {
  auto t = random_tensor("table", {11, 6}, 3);
  std::vector<int32_t> ids = {3, 0, 10, 3, 7};
  check_grad({t}, [&](Graph& g) { return op::embedding(g, t, ids); });
}

TEST(Grad, RmsNorm) {
  auto x = random_tensor("x", {4, 9}, 4), w = random_tensor("w", {9}, 5);
  check_grad({x, w}, [&](Graph& g) { return op::rmsnorm(g, x, w, 1e-5f); });
}

TEST(Grad, Rope) {
  auto x = random_tensor("x", {5, 3 * 8}, 6);
  std::vector<int32_t> pos = {0, 1, 2, 7, 100};
  check_grad({x}, [&](Graph& g) { return op::rope(g, x, 3, 8, pos, 10000.0f); });
}

TEST(Grad, AttentionCausalGqa) {
  // 2 sequences of 5 tokens; 4 query heads on 2 KV heads; dk 6, dv 4.
  const kernels::AttentionShape s{4, 2, 6, 4};
  auto q = random_tensor("q", {10, 24}, 7), k = random_tensor("k", {10, 12}, 8),
       v = random_tensor("v", {10, 8}, 9);
  check_grad({q, k, v}, [&](Graph& g) { return op::attention(g, q, k, v, 2, 5, s); });
}

TEST(Grad, AttentionThreadedAcrossBackwardBlocks) {
  // On a 2-thread pool, and longer than the blocks of 48 query (and key) rows into which the
  // backward pass cuts its GEMMs to skip the causal mask's zeros: 2 sequences of 101 tokens
  // (three blocks, the last partial), 3 query heads on 1 KV head.
  kernels::ThreadPool pool(2);
  const kernels::AttentionShape s{3, 1, 4, 4};
  auto q = random_tensor("q", {202, 12}, 7), k = random_tensor("k", {202, 4}, 8),
       v = random_tensor("v", {202, 4}, 9);
  check_grad({q, k, v}, [&](Graph& g) { return op::attention(g, q, k, v, 2, 101, s); }, {&pool});
}

TEST(Grad, SiluMul) {
  auto a = random_tensor("gate", {3, 5}, 10), b = random_tensor("up", {3, 5}, 11);
  check_grad({a, b}, [&](Graph& g) { return op::silu_mul(g, a, b); });
}

TEST(Grad, AddScaleMulSameInput) {
  auto a = random_tensor("a", {3, 4}, 12), b = random_tensor("b", {3, 4}, 13);
  check_grad({a, b}, [&](Graph& g) {
    return op::add(g, op::scale(g, op::mul(g, a, a), 0.5f), op::mul(g, a, b));
  });
}

TEST(Grad, CrossEntropyWithIgnoredRows) {
  // The backward of op::cross_entropy against differences of the loss computed in double.
  auto x = random_tensor("logits", {4, 9}, 14, 2.0f);
  std::vector<int32_t> t = {3, -1, 8, 0};
  check_grad({x}, [&](Graph&) { return x; }, {nullptr, &t});
  // And its F32 value against that double one.
  Graph g(nullptr);
  g.grad_enabled = false;
  EXPECT_NEAR(op::cross_entropy(g, x, t)->data()[0], cross_entropy_double(*x, t), 1e-6);
}

// Mean over the rows with a target >= 0 of (1 - w) * -log q[target] + w * KL(p || q), in
// double, from log-softmax computed here (q: the logits', p: the teacher's).
double distill_double(const Tensor& y, const Tensor& teacher, const std::vector<int32_t>& targets,
                      double w) {
  const int64_t V = y.cols();
  auto log_softmax = [V](const float* row) {
    double m = row[0], z = 0;
    for (int64_t j = 1; j < V; ++j) m = std::max(m, double{row[j]});
    for (int64_t j = 0; j < V; ++j) z += std::exp(row[j] - m);
    std::vector<double> l(static_cast<size_t>(V));
    for (int64_t j = 0; j < V; ++j) l[static_cast<size_t>(j)] = row[j] - m - std::log(z);
    return l;
  };
  double total = 0;
  int n = 0;
  for (int64_t i = 0; i < y.rows(); ++i) {
    const int32_t t = targets[static_cast<size_t>(i)];
    if (t < 0) continue;
    const std::vector<double> lq = log_softmax(y.data() + i * V);
    const std::vector<double> lp = log_softmax(teacher.data() + i * V);
    double kl = 0;
    for (size_t j = 0; j < lq.size(); ++j) kl += std::exp(lp[j]) * (lp[j] - lq[j]);
    total += (1 - w) * -lq[static_cast<size_t>(t)] + w * kl;
    ++n;
  }
  return total / n;
}

TEST(Grad, DistillCrossEntropyWithIgnoredRows) {
  // The backward of op::distill_cross_entropy against differences of the loss computed in
  // double, at the two ends and between; the teacher gets no gradient.
  auto x = random_tensor("logits", {4, 9}, 14, 2.0f);
  auto teacher = random_tensor("teacher", {4, 9}, 15, 3.0f);
  teacher->requires_grad = false;
  std::vector<int32_t> t = {3, -1, 8, 0};
  for (float w : {0.0f, 0.3f, 1.0f}) {
    SCOPED_TRACE(w);
    GradOptions opt;
    opt.loss = [&](Graph& g, const TensorP& y) {
      return op::distill_cross_entropy(g, y, teacher, t, w);
    };
    opt.loss_double = [&](const Tensor& y) { return distill_double(y, *teacher, t, w); };
    check_grad(
        {x}, [&](Graph&) { return x; }, opt);
    EXPECT_FALSE(teacher->has_grad());
    Graph g(nullptr);
    g.grad_enabled = false;
    EXPECT_NEAR(op::distill_cross_entropy(g, x, teacher, t, w)->data()[0],
                distill_double(*x, *teacher, t, w), 1e-6);
  }
  // Bad input names what is wrong.
  Graph g(nullptr);
  auto narrow = random_tensor("narrow", {4, 8}, 16);
  EXPECT_THROW(op::distill_cross_entropy(g, x, narrow, t, 1.0f), Error);
  EXPECT_THROW(op::distill_cross_entropy(g, x, teacher, t, 1.5f), Error);
}

TEST(Grad, SmallNetOps) {
  auto x = random_tensor("x", {3, 6}, 15), b = random_tensor("b", {6}, 16),
       y = random_tensor("y", {3, 2}, 17);
  check_grad({x, b, y}, [&](Graph& g) {
    TensorP h = op::add_bias(g, x, b);
    TensorP c = op::concat_cols(g, op::tanh(g, op::slice_cols(g, h, 0, 2)),
                                op::sigmoid(g, op::slice_cols(g, h, 2, 5)));
    return op::concat_cols(g, op::relu(g, c), y);
  });
  std::vector<float> target(18, 0.25f);
  check_grad({x}, [&](Graph& g) { return op::mse(g, x, target); });
}

// Adds 0.3 N(0, 1) to every value of every tensor: larger weights so every path matters.
void perturb(const std::vector<TensorP>& ps) {
  for (const TensorP& p : ps) {
    Rng r(std::hash<std::string>{}(p->name));
    for (int64_t i = 0; i < p->numel(); ++i) p->data()[i] += static_cast<float>(r.normal() * 0.3);
  }
}

TEST(Grad, TinyLlamaEndToEnd) {
  const ModelConfig c = llama_shape(13, 8, 2, 2, 1, 12, 16);
  LlamaModel m = LlamaModel::init(c, 5);
  perturb(m.params());
  std::vector<int32_t> tok = {1, 5, 7, 2, 12, 0, 3, 3, 9, 4}, tgt = {5, 7, 2, 12, 0, 3, 3, 9, 4, 1};
  check_grad(m.params(), [&](Graph& g) { return m.forward(g, tok, 2, 5); },
             {nullptr, &tgt, kModelStep, kModelAtol});
}

TEST(Grad, LoraOnFrozenBase) {
  const ModelConfig c = llama_shape(13, 8, 2, 2, 1, 12, 16);
  LlamaModel m = LlamaModel::init(c, 5);
  const Adapter& a =
      m.add_lora("t", 2, 4.0f, {LayerMatrix::Q, LayerMatrix::V, LayerMatrix::Down}, 3);
  m.set_trainable(false);
  perturb(a.params());
  std::vector<int32_t> tok = {1, 5, 7, 2, 12, 0}, tgt = {5, 7, 2, 12, 0, 3};
  check_grad(a.params(), [&](Graph& g) { return m.forward(g, tok, 1, 6); },
             {nullptr, &tgt, kModelStep, kModelAtol});
  for (const TensorP& p : m.params()) EXPECT_FALSE(p->has_grad()) << p->name << " is frozen";
}

}  // namespace
}  // namespace cln::train
