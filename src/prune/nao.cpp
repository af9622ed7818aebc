#include "clone/prune/nao.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "clone/core/error.h"
#include "clone/core/rng.h"

namespace cln::prune {

using train::Graph;
using train::TensorP;
namespace op = train::op;

namespace {

TensorP constant(std::vector<int64_t> shape, const std::vector<float>& v);

TensorP param(Rng& rng, std::vector<int64_t> shape, double bound) {
  TensorP t = train::make_tensor(std::move(shape), true);
  for (int64_t i = 0; i < t->numel(); ++i)
    t->data()[i] = static_cast<float>(rng.uniform(-bound, bound));
  return t;
}

TensorP constant(std::vector<int64_t> shape, const std::vector<float>& v) {
  TensorP t = train::make_tensor(std::move(shape), false);
  std::copy(v.begin(), v.end(), t->data());
  return t;
}

}  // namespace

Nao::Nao(int64_t seq_len, NaoOptions o) : seq_len_(seq_len), o_(o) {
  if (seq_len < 1) fail("search model: sequences must have at least one token");
  if (o.levels < 2) fail("search model: at least two ratio levels");
  Rng rng(o.seed);
  const int64_t H = o.hidden, K = o.levels;
  const double bh = 1.0 / std::sqrt(static_cast<double>(H));
  const int64_t F = features();
  const double bf = 1.0 / std::sqrt(static_cast<double>(F));
  for (Lstm* l : {&enc_, &dec_}) {
    // The decoder reads the embedding at every step beside the previous token.
    l->wx = l == &dec_ ? param(rng, {4 * H, F + H}, 1.0 / std::sqrt(static_cast<double>(F + H)))
                       : param(rng, {4 * H, F}, bf);
    l->wh = param(rng, {4 * H, H}, bh);
    l->b = param(rng, {4 * H}, 0.0);
    for (int64_t i = H; i < 2 * H; ++i) l->b->data()[i] = 1.0f;  // forget gate open at first
  }
  w1_ = param(rng, {H, H}, bh), b1_ = param(rng, {H}, 0.0);
  w2_ = param(rng, {1, H}, bh), b2_ = param(rng, {1}, 0.0);
  wout_ = param(rng, {K, H}, bh), bout_ = param(rng, {K}, 0.0);
  train::AdamWConfig c;
  c.weight_decay = 1e-4;
  opt_ = std::make_unique<train::AdamW>(params(), c);
}

std::vector<TensorP> Nao::params() const {
  return {enc_.wx, enc_.wh, enc_.b, dec_.wx, dec_.wh, dec_.b, w1_, b1_, w2_, b2_, wout_, bout_};
}

int64_t Nao::features() const {
  return 2 + seq_len_;
}

// A token as the LSTMs read it: its ratio, a start flag (the decoder's first input), and
// the position one-hot, so that the encoder sees ratios as numbers, not names.
TensorP Nao::inputs(const std::vector<int32_t>& tokens, int64_t t) const {
  const int64_t F = features();
  std::vector<float> x(tokens.size() * static_cast<size_t>(F), 0.0f);
  for (size_t i = 0; i < tokens.size(); ++i) {
    float* r = x.data() + i * static_cast<size_t>(F);
    if (tokens[i] >= o_.levels)
      r[1] = 1.0f;
    else
      r[0] = static_cast<float>(tokens[i]) / static_cast<float>(o_.levels - 1);
    r[2 + t] = 1.0f;
  }
  return constant({static_cast<int64_t>(tokens.size()), F}, x);
}

Nao::State Nao::step(Graph& g, const Lstm& l, const TensorP& x, const State& s) const {
  const int64_t H = o_.hidden;
  TensorP z = op::add_bias(g, op::add(g, op::linear(g, x, l.wx), op::linear(g, s.h, l.wh)), l.b);
  TensorP i = op::sigmoid(g, op::slice_cols(g, z, 0, H));
  TensorP f = op::sigmoid(g, op::slice_cols(g, z, H, 2 * H));
  TensorP u = op::tanh(g, op::slice_cols(g, z, 2 * H, 3 * H));
  TensorP o = op::sigmoid(g, op::slice_cols(g, z, 3 * H, 4 * H));
  TensorP c = op::add(g, op::mul(g, f, s.c), op::mul(g, i, u));
  return {op::mul(g, o, op::tanh(g, c)), c};
}

// The embeddings [B, H] of a batch of sequences: the mean of the encoder's hidden states.
TensorP Nao::encode_t(Graph& g, const std::vector<Seq>& seqs) const {
  const auto B = static_cast<int64_t>(seqs.size());
  State s{constant({B, o_.hidden}, std::vector<float>(static_cast<size_t>(B * o_.hidden), 0.0f)),
          constant({B, o_.hidden}, std::vector<float>(static_cast<size_t>(B * o_.hidden), 0.0f))};
  TensorP sum;
  for (int64_t t = 0; t < seq_len_; ++t) {
    std::vector<int32_t> ids;
    for (const Seq& q : seqs) {
      if (static_cast<int64_t>(q.size()) != seq_len_)
        fail("search model: a sequence of ", q.size(), " tokens, expected ", seq_len_);
      const int v = q[static_cast<size_t>(t)];
      if (v < 0 || v >= o_.levels) fail("search model: token ", v, " outside [0, ", o_.levels, ")");
      ids.push_back(v);
    }
    s = step(g, enc_, inputs(ids, t), s);
    sum = sum ? op::add(g, sum, s.h) : s.h;
  }
  return op::scale(g, sum, 1.0f / static_cast<float>(seq_len_));
}

TensorP Nao::evaluate_t(Graph& g, const TensorP& e) const {
  return op::sigmoid(
      g, op::add_bias(
             g, op::linear(g, op::relu(g, op::add_bias(g, op::linear(g, e, w1_), b1_)), w2_), b2_));
}

std::pair<double, double> Nao::train(const std::vector<Seq>& seqs,
                                     const std::vector<double>& scores) {
  if (seqs.size() != scores.size() || seqs.empty())
    fail("search model: ", seqs.size(), " sequences and ", scores.size(), " scores");
  lo_ = *std::min_element(scores.begin(), scores.end());
  hi_ = *std::max_element(scores.begin(), scores.end());
  std::vector<float> target;
  for (double s : scores)
    target.push_back(static_cast<float>(hi_ > lo_ ? (s - lo_) / (hi_ - lo_) : 0.5));
  const auto B = static_cast<int64_t>(seqs.size());
  double last_mse = 0, last_ce = 0;
  for (int ep = 0; ep < o_.epochs; ++ep) {
    Graph g(nullptr);
    TensorP e = encode_t(g, seqs);
    TensorP mse = op::mse(g, evaluate_t(g, e), target);
    // Reconstruction with teacher forcing: the decoder starts from the embedding.
    State s{e,
            constant({B, o_.hidden}, std::vector<float>(static_cast<size_t>(B * o_.hidden), 0.0f))};
    std::vector<int32_t> prev(static_cast<size_t>(B), o_.levels);  // the start token
    TensorP ce;
    for (int64_t t = 0; t < seq_len_; ++t) {
      s = step(g, dec_, op::concat_cols(g, inputs(prev, t), e), s);
      std::vector<int32_t> tgt;
      for (const Seq& q : seqs) tgt.push_back(q[static_cast<size_t>(t)]);
      TensorP l = op::cross_entropy(g, op::add_bias(g, op::linear(g, s.h, wout_), bout_), tgt);
      ce = ce ? op::add(g, ce, l) : l;
      prev = tgt;
    }
    ce = op::scale(g, ce, 1.0f / static_cast<float>(seq_len_));
    last_mse = mse->data()[0], last_ce = ce->data()[0];
    TensorP loss = op::add(g, op::scale(g, mse, static_cast<float>(o_.score_weight)),
                           op::scale(g, ce, static_cast<float>(1 - o_.score_weight)));
    g.backward(loss);
    opt_->step(o_.lr);
  }
  return {last_mse, last_ce};
}

std::vector<float> Nao::encode(const Seq& s) const {
  Graph g(nullptr);
  g.grad_enabled = false;
  TensorP e = encode_t(g, {s});
  return {e->data(), e->data() + e->numel()};
}

double Nao::predict(const Seq& s) const {
  Graph g(nullptr);
  g.grad_enabled = false;
  return evaluate_t(g, encode_t(g, {s}))->data()[0];
}

Seq Nao::decode(const std::vector<float>& emb) const {
  struct Beam {
    Seq seq;
    double logp = 0;
    std::vector<float> h, c;
  };
  const int64_t H = o_.hidden;
  std::vector<Beam> beams{{{}, 0.0, emb, std::vector<float>(static_cast<size_t>(H), 0.0f)}};
  for (int64_t t = 0; t < seq_len_; ++t) {
    std::vector<Beam> next;
    for (const Beam& b : beams) {
      Graph g(nullptr);
      g.grad_enabled = false;
      const int32_t prev = b.seq.empty() ? o_.levels : b.seq.back();
      State s = step(g, dec_, op::concat_cols(g, inputs({prev}, t), constant({1, H}, emb)),
                     {constant({1, H}, b.h), constant({1, H}, b.c)});
      TensorP logits = op::add_bias(g, op::linear(g, s.h, wout_), bout_);
      const float* l = logits->data();
      const double mx = *std::max_element(l, l + o_.levels);
      double z = 0;
      for (int k = 0; k < o_.levels; ++k) z += std::exp(l[k] - mx);
      for (int k = 0; k < o_.levels; ++k) {
        Beam n{b.seq,
               b.logp + (l[k] - mx) - std::log(z),
               {s.h->data(), s.h->data() + H},
               {s.c->data(), s.c->data() + H}};
        n.seq.push_back(k);
        next.push_back(std::move(n));
      }
    }
    std::stable_sort(next.begin(), next.end(),
                     [](const Beam& a, const Beam& b) { return a.logp > b.logp; });
    next.resize(std::min(next.size(), static_cast<size_t>(std::max(1, o_.beam))));
    beams = std::move(next);
  }
  return beams.front().seq;
}

Seq Nao::improve(const Seq& s, const std::set<Seq>& seen, int max_steps) const {
  Graph g(nullptr);
  TensorP e0 = encode_t(g, {s});
  g.clear();
  TensorP e = train::make_tensor({1, o_.hidden}, true);
  std::copy(e0->data(), e0->data() + e0->numel(), e->data());
  TensorP f = evaluate_t(g, e);
  g.backward(f);
  for (const TensorP& p : params())
    if (p->has_grad()) p->zero_grad();  // only the embedding's gradient is wanted
  std::vector<float> grad(e->grad(), e->grad() + e->numel());
  double gn = 0, en = 0;
  for (size_t i = 0; i < grad.size(); ++i)
    gn += grad[i] * grad[i], en += e->data()[i] * e->data()[i];
  gn = std::sqrt(gn), en = std::sqrt(en);
  if (gn == 0) return {};
  // Growing steps along the gradient's direction, in units of a tenth of the embedding's norm.
  for (int k = 1; k <= max_steps; ++k) {
    const double eta = 0.1 * k * std::max(en, 1e-3) / gn;
    std::vector<float> moved(grad.size());
    for (size_t i = 0; i < grad.size(); ++i)
      moved[i] = e->data()[i] + static_cast<float>(eta * grad[i]);
    Seq d = decode(moved);
    if (!seen.count(d)) return d;
  }
  return {};
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.size() < 2) fail("spearman: needs two equal lists of 2 or more");
  const auto ranks = [](const std::vector<double>& v) {
    std::vector<size_t> idx(v.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](size_t x, size_t y) { return v[x] < v[y]; });
    std::vector<double> r(v.size());
    for (size_t i = 0; i < idx.size();) {
      size_t j = i;
      while (j + 1 < idx.size() && v[idx[j + 1]] == v[idx[i]]) ++j;
      for (size_t k = i; k <= j; ++k) r[idx[k]] = 0.5 * static_cast<double>(i + j);
      i = j + 1;
    }
    return r;
  };
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n,
               mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb), saa += (ra[i] - ma) * (ra[i] - ma),
        sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : 0.0;
}

}  // namespace cln::prune
