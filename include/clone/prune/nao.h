// The tailoring search's model, after Neural Architecture Optimization (Luo et al., 2018),
// as CLONE uses it: a candidate (per layer, the attention and FFN pruning ratios, each one
// of `levels` steps of [0, 1]) is a token sequence; an LSTM encoder maps it to an
// embedding (the mean of its hidden states), an evaluator (MLP) predicts the candidate's
// score from the embedding, and an LSTM decoder, started from the embedding, spells the
// sequence back (reading the embedding at every step). All three train jointly (score regression +
// reconstruction) with the project's autograd. To propose, a good candidate's embedding moves along
// the evaluator's gradient until the beam-search decoding of it is a sequence not yet evaluated.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <vector>

#include "clone/train/autograd.h"
#include "clone/train/optim.h"

namespace cln::prune {

struct NaoOptions {
  int levels = 9;       // ratio steps: level k is ratio k / (levels - 1)
  int64_t hidden = 64;  // LSTM and embedding width
  int epochs = 500;     // full-batch training steps per call to train()
  double lr = 1e-2;
  double score_weight = 0.8;  // lambda: score loss share; 1 - lambda: reconstruction
  int beam = 4;
  uint64_t seed = 1;
};

using Seq = std::vector<int>;

class Nao {
 public:
  Nao(int64_t seq_len, NaoOptions o);

  // Trains (more) on every pair; scores are min-max normalised over the set. Returns the
  // last epoch's (score MSE, reconstruction cross-entropy).
  std::pair<double, double> train(const std::vector<Seq>& seqs, const std::vector<double>& scores);
  // The evaluator's prediction (normalised scale) for a sequence.
  double predict(const Seq& s) const;
  std::vector<float> encode(const Seq& s) const;
  Seq decode(const std::vector<float>& embedding) const;  // beam search, options().beam
  // The NAO step from a sequence: its embedding moved along the evaluator's gradient by
  // growing steps until the decoding is not in `seen`; empty when no step gives one.
  Seq improve(const Seq& s, const std::set<Seq>& seen, int max_steps = 24) const;

  int64_t seq_len() const { return seq_len_; }
  const NaoOptions& options() const { return o_; }

 private:
  struct Lstm {
    train::TensorP wx, wh, b;
  };
  struct State {
    train::TensorP h, c;
  };
  int64_t features() const;
  train::TensorP inputs(const std::vector<int32_t>& tokens, int64_t t) const;
  State step(train::Graph& g, const Lstm& l, const train::TensorP& x, const State& s) const;
  train::TensorP encode_t(train::Graph& g, const std::vector<Seq>& seqs) const;
  train::TensorP evaluate_t(train::Graph& g, const train::TensorP& e) const;
  std::vector<train::TensorP> params() const;

  int64_t seq_len_;
  NaoOptions o_;
  Lstm enc_, dec_;
  train::TensorP w1_, b1_, w2_, b2_, wout_, bout_;
  std::unique_ptr<train::AdamW> opt_;
  double lo_ = 0, hi_ = 1;  // score normalisation of the last train() call
};

// Spearman rank correlation (average ranks for ties).
double spearman(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace cln::prune
