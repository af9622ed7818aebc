#include "clone/dvfs/mlp_fit.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "clone/core/error.h"
#include "clone/core/rng.h"
#include "clone/train/optim.h"

namespace cln::dvfs {

namespace {

train::TensorP param(const char* name, std::vector<int64_t> shape, const float* from) {
  train::TensorP t = train::make_param(name, std::move(shape));
  std::memcpy(t->data(), from, sizeof(float) * static_cast<size_t>(t->numel()));
  return t;
}

}  // namespace

MlpTensors::MlpTensors(const Mlp& net) {
  const int64_t H = net.n_hidden, I = net.n_in;
  w1 = param("w1", {H, I}, net.w1.data());
  b1 = param("b1", {H}, net.b1.data());
  w2 = param("w2", {1, H}, net.w2.data());
  b2 = param("b2", {1}, &net.b2);
}

void MlpTensors::copy_to(Mlp& net) const {
  net.w1.assign(w1->data(), w1->data() + w1->numel());
  net.b1.assign(b1->data(), b1->data() + b1->numel());
  net.w2.assign(w2->data(), w2->data() + w2->numel());
  net.b2 = b2->data()[0];
}

train::TensorP MlpTensors::forward(train::Graph& g, const train::TensorP& xn) const {
  namespace op = train::op;
  train::TensorP h = op::tanh(g, op::add_bias(g, op::linear(g, xn, w1), b1));
  return op::sigmoid(g, op::add_bias(g, op::linear(g, h, w2), b2));
}

std::vector<float> normalise(const Mlp& net, const std::vector<float>& x) {
  const size_t I = static_cast<size_t>(net.n_in);
  if (I == 0 || x.size() % I != 0) fail("dvfs fit: ", x.size(), " inputs are not rows of ", I);
  std::vector<float> xn(x.size());
  for (size_t k = 0; k < x.size(); ++k) xn[k] = (x[k] - net.mean[k % I]) * net.scale[k % I];
  return xn;
}

double fit(Mlp& net, const std::vector<float>& x, const std::vector<float>& y,
           const FitOptions& opt, uint64_t seed) {
  const size_t n = y.size(), I = static_cast<size_t>(net.n_in);
  if (n == 0) fail("dvfs fit: no training rows");
  if (x.size() != n * I) fail("dvfs fit: ", x.size(), " inputs for ", n, " rows of ", I);
  if (opt.epochs < 1 || opt.batch < 1) fail("dvfs fit: epochs and batch must be positive");
  // Normalisation from the data.
  for (size_t i = 0; i < I; ++i) {
    double s = 0, s2 = 0;
    for (size_t k = 0; k < n; ++k) {
      const double v = x[k * I + i];
      s += v, s2 += v * v;
    }
    const double mu = s / static_cast<double>(n), var = s2 / static_cast<double>(n) - mu * mu;
    net.mean[i] = static_cast<float>(mu);
    net.scale[i] = static_cast<float>(1 / std::sqrt(std::max(var, 1e-6)));
  }
  const std::vector<float> xn = normalise(net, x);

  MlpTensors p(net);
  train::AdamWConfig ac;
  ac.beta1 = 0.9, ac.beta2 = 0.999, ac.eps = 1e-8, ac.weight_decay = opt.weight_decay, ac.clip = 0;
  train::AdamW adam(p.params(), ac);
  train::Graph g(nullptr);  // single-threaded: the same sums in the same order every run

  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  Rng rng(seed);
  std::vector<float> target;
  double mse = 0;
  for (int ep = 0; ep < opt.epochs; ++ep) {
    shuffle(order, rng);
    const double lr = opt.lr * (ep < opt.epochs * 2 / 3 ? 1.0 : 0.2);
    mse = 0;
    for (size_t b0 = 0; b0 < n; b0 += static_cast<size_t>(opt.batch)) {
      const size_t b1 = std::min(n, b0 + static_cast<size_t>(opt.batch)), nb = b1 - b0;
      train::TensorP xb = train::make_tensor({static_cast<int64_t>(nb), net.n_in});
      target.resize(nb);
      for (size_t r = 0; r < nb; ++r) {
        const size_t k = order[b0 + r];
        std::memcpy(xb->data() + r * I, &xn[k * I], sizeof(float) * I);
        target[r] = y[k];
      }
      train::TensorP loss = train::op::mse(g, p.forward(g, xb), target);
      mse += double{loss->data()[0]} * static_cast<double>(nb);
      g.backward(loss);
      adam.step(lr);
    }
    mse /= static_cast<double>(n);
  }
  p.copy_to(net);
  return mse;
}

}  // namespace cln::dvfs
