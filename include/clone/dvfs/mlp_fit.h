// Fitting the controller's network by regression, through the shared reverse-mode autograd
// (cln::train ops) and AdamW. Training is the only user: at decision time the Mlp's plain
// arrays serve, and the fitted parameters are copied into them.
#pragma once

#include <cstdint>
#include <vector>

#include "clone/dvfs/mlp.h"
#include "clone/train/autograd.h"

namespace cln::dvfs {

// The Mlp's parameters as autograd leaves (copies): w1 [H, I], b1 [H], w2 [1, H], b2 [1].
struct MlpTensors {
  train::TensorP w1, b1, w2, b2;

  explicit MlpTensors(const Mlp& net);
  void copy_to(Mlp& net) const;
  std::vector<train::TensorP> params() const { return {w1, b1, w2, b2}; }
  // xn [n, I], already normalised -> [n, 1]: sigmoid(w2 tanh(w1 xn + b1) + b2).
  train::TensorP forward(train::Graph& g, const train::TensorP& xn) const;
};

// Rows of x [n, net.n_in] through the net's per-input normalisation.
std::vector<float> normalise(const Mlp& net, const std::vector<float>& x);

struct FitOptions {
  int epochs = 60;
  int batch = 128;
  double lr = 3e-3;         // for the first two thirds of the epochs, then a fifth of it
  double weight_decay = 0;  // AdamW's decoupled decay of the weight matrices (not biases)
};

// Sets net.mean/scale from x [n, net.n_in], then fits the net (starting from its current
// weights) to y [n] by mean squared error with minibatch Adam (betas 0.9 / 0.999, eps 1e-8,
// no weight decay or clipping), the rows shuffled each epoch from seed. Deterministic for a
// seed. Returns the last epoch's training MSE (each batch measured before its update).
// Throws cln::Error on mismatched sizes or no data.
double fit(Mlp& net, const std::vector<float>& x, const std::vector<float>& y,
           const FitOptions& opt, uint64_t seed);

}  // namespace cln::dvfs
