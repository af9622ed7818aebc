// Importance scores against independent computations on a tiny random deci model whose
// first layer has no attention (so that layer's FFN inputs can be computed by hand):
// magnitude and structured Wanda from the weights and hand-computed activations, Taylor
// against finite differences of the calibration loss along each group's weights, Block
// Influence zero on a half that was masked out; and the plans the scores select.
#include <gtest/gtest.h>

#include <cmath>

#include "clone/core/error.h"
#include "clone/core/rng.h"
#include "clone/prune/select.h"
#include "prune/fixture.h"

using namespace cln;
using namespace cln::prune;

namespace {

ModelConfig tiny() {
  ModelConfig c = train::llama_shape(64, 16, 3, 4, 2, 24, 32);
  c.layers[0] = {0, 0, 24};  // no attention
  c.layers[2].n_ff = 20;
  c.arch = "deci";
  return c;
}

Calibration calibration(int64_t n_seq = 3, int64_t len = 8) {
  Calibration cal;
  cal.n_seq = n_seq, cal.seq_len = len, cal.batch = 2;
  Rng rng(7);
  for (int64_t i = 0; i < n_seq * (len + 1); ++i)
    cal.tokens.push_back(static_cast<int32_t>(rng.uniform() * 64));
  return cal;
}

float* weight(train::LlamaModel& m, int64_t layer, LayerMatrix lm) {
  return m.find(layer_tensor_name(layer, lm))->data();
}

// Summed next-token loss over the calibration set, as importance's Taylor pass sees it.
double loss(train::LlamaModel& m, const Calibration& cal) {
  double total = 0;
  const int64_t stride = cal.seq_len + 1;
  for (int64_t s = 0; s < cal.n_seq; ++s) {
    std::vector<int32_t> tok, tgt;
    for (int64_t i = 0; i < cal.seq_len; ++i) {
      tok.push_back(cal.tokens[static_cast<size_t>(s * stride + i)]);
      tgt.push_back(cal.tokens[static_cast<size_t>(s * stride + i + 1)]);
    }
    train::Graph g(nullptr);
    total += static_cast<double>(
                 train::op::cross_entropy(g, m.forward(g, tok, 1, cal.seq_len), tgt)->data()[0]) *
             static_cast<double>(cal.seq_len);
  }
  return total;
}

}  // namespace

TEST(Importance, MagnitudeIsTheGroupsSquaredWeights) {
  const ModelConfig c = tiny();
  train::LlamaModel m = train::LlamaModel::init(c, 3);
  const Scores s = score(Method::Magnitude, m, {});
  const int64_t d = c.n_embd, dk = c.head_dim_k, dv = c.head_dim_v;
  // Layer 1, query head 3 (KV group 1): Q rows 3dk.., O columns 3dv..
  double want = 0;
  for (int64_t r = 3 * dk; r < 4 * dk; ++r)
    for (int64_t j = 0; j < d; ++j) want += std::pow(weight(m, 1, LayerMatrix::Q)[r * d + j], 2);
  for (int64_t r = 0; r < d; ++r)
    for (int64_t j = 3 * dv; j < 4 * dv; ++j)
      want += std::pow(weight(m, 1, LayerMatrix::O)[r * 4 * dv + j], 2);
  EXPECT_NEAR(s.head[1][3], want, 1e-9 * want);
  double kv = s.head[1][2] + s.head[1][3];
  for (LayerMatrix lm : {LayerMatrix::K, LayerMatrix::V})
    for (int64_t r = dk; r < 2 * dk; ++r)
      for (int64_t j = 0; j < d; ++j) kv += std::pow(weight(m, 1, lm)[r * d + j], 2);
  EXPECT_NEAR(s.kv[1][1], kv, 1e-9 * kv);
  // Layer 2, FFN channel 5: gate and up rows, down column.
  double ff = 0;
  for (int64_t j = 0; j < d; ++j)
    ff += std::pow(weight(m, 2, LayerMatrix::Gate)[5 * d + j], 2) +
          std::pow(weight(m, 2, LayerMatrix::Up)[5 * d + j], 2) +
          std::pow(weight(m, 2, LayerMatrix::Down)[j * 20 + 5], 2);
  EXPECT_NEAR(s.ff[2][5], ff, 1e-9 * ff);
  EXPECT_TRUE(s.head[0].empty());
  EXPECT_EQ(s.attn[0], 0.0);
}

TEST(Importance, WandaWeighsEachWeightByItsInputsNorm) {
  const ModelConfig c = tiny();
  train::LlamaModel m = train::LlamaModel::init(c, 4);
  const Calibration cal = calibration();
  const Scores s = score(Method::Wanda, m, cal);
  // Layer 0 has no attention: its FFN reads rmsnorm(embedding) * ffn_norm, by hand here.
  const int64_t d = c.n_embd, nf = c.layers[0].n_ff;
  const float* emb = m.find("token_embd.weight")->data();
  const float* nw = m.find(layer_norm_name(0, LayerNorm::Ffn))->data();
  std::vector<double> in_sq(static_cast<size_t>(d), 0.0), act_sq(static_cast<size_t>(nf), 0.0);
  for (int64_t sq = 0; sq < cal.n_seq; ++sq)
    for (int64_t i = 0; i < cal.seq_len; ++i) {
      const int32_t t = cal.tokens[static_cast<size_t>(sq * (cal.seq_len + 1) + i)];
      double ms = 0;
      for (int64_t j = 0; j < d; ++j) ms += std::pow(emb[t * d + j], 2);
      const double inv = 1.0 / std::sqrt(ms / static_cast<double>(d) + c.rms_eps);
      std::vector<double> h(static_cast<size_t>(d));
      for (int64_t j = 0; j < d; ++j) {
        h[static_cast<size_t>(j)] = emb[t * d + j] * inv * nw[j];
        in_sq[static_cast<size_t>(j)] += h[static_cast<size_t>(j)] * h[static_cast<size_t>(j)];
      }
      for (int64_t f = 0; f < nf; ++f) {
        double g = 0, u = 0;
        for (int64_t j = 0; j < d; ++j) {
          g += weight(m, 0, LayerMatrix::Gate)[f * d + j] * h[static_cast<size_t>(j)];
          u += weight(m, 0, LayerMatrix::Up)[f * d + j] * h[static_cast<size_t>(j)];
        }
        const double a = g / (1.0 + std::exp(-g)) * u;
        act_sq[static_cast<size_t>(f)] += a * a;
      }
    }
  for (int64_t f : {0, 7, 23}) {
    double want = 0;
    for (int64_t j = 0; j < d; ++j)
      want += (std::fabs(weight(m, 0, LayerMatrix::Gate)[f * d + j]) +
               std::fabs(weight(m, 0, LayerMatrix::Up)[f * d + j])) *
                  std::sqrt(in_sq[static_cast<size_t>(j)]) +
              std::fabs(weight(m, 0, LayerMatrix::Down)[j * nf + f]) *
                  std::sqrt(act_sq[static_cast<size_t>(f)]);
    EXPECT_NEAR(s.ff[0][static_cast<size_t>(f)], want, 1e-4 * want) << "channel " << f;
  }
}

TEST(Importance, TaylorIsTheLossSlopeAlongEachGroup) {
  const ModelConfig c = tiny();
  train::LlamaModel m = train::LlamaModel::init(c, 5);
  for (const auto& p : m.params())  // larger weights: a loss that moves measurably
    for (int64_t i = 0; i < p->numel(); ++i) p->data()[i] *= 8.0f;
  const Calibration cal = calibration();
  m.set_trainable(false);
  const Scores s = score(Method::Taylor, m, cal);
  EXPECT_FALSE(m.params().front()->requires_grad);  // left as it was
  EXPECT_FALSE(m.params().front()->has_grad());
  // d/de L(w + e w_G) at 0 = sum over G of g w: central differences along the group.
  const auto slope = [&](const std::vector<std::pair<float*, int64_t>>& group) {
    const double eps = 1e-2;  // the loss is float: a smaller step drowns in its rounding
    std::vector<float> saved;
    for (auto [p, i] : group) saved.push_back(p[i]);
    double l[2];
    for (int side = 0; side < 2; ++side) {
      size_t k = 0;
      for (auto [p, i] : group) p[i] = saved[k++] * static_cast<float>(1 + (side ? eps : -eps));
      l[side] = loss(m, cal);
    }
    size_t k = 0;
    for (auto [p, i] : group) p[i] = saved[k++];
    return std::fabs((l[1] - l[0]) / (2 * eps));
  };
  const int64_t d = c.n_embd;
  std::vector<std::pair<float*, int64_t>> ffn;  // layer 2, channel 4
  for (int64_t j = 0; j < d; ++j) {
    ffn.push_back({weight(m, 2, LayerMatrix::Gate), 4 * d + j});
    ffn.push_back({weight(m, 2, LayerMatrix::Up), 4 * d + j});
    ffn.push_back({weight(m, 2, LayerMatrix::Down), j * 20 + 4});
  }
  EXPECT_NEAR(s.ff[2][4], slope(ffn), 0.02 * slope(ffn) + 1e-3);
  std::vector<std::pair<float*, int64_t>> head;  // layer 1, query head 1
  const int64_t dk = c.head_dim_k;
  for (int64_t r = dk; r < 2 * dk; ++r)
    for (int64_t j = 0; j < d; ++j) head.push_back({weight(m, 1, LayerMatrix::Q), r * d + j});
  for (int64_t r = 0; r < d; ++r)
    for (int64_t j = dk; j < 2 * dk; ++j)
      head.push_back({weight(m, 1, LayerMatrix::O), r * 4 * dk + j});
  EXPECT_NEAR(s.head[1][1], slope(head), 0.02 * slope(head) + 1e-3);
}

TEST(Importance, BlockInfluenceIsZeroOnAHalfThatDoesNothing) {
  const ModelConfig c = tiny();
  train::LlamaModel m = train::LlamaModel::init(c, 6);
  for (const auto& p : m.params())  // halves that change the stream measurably
    for (int64_t i = 0; i < p->numel(); ++i) p->data()[i] *= 8.0f;
  float* o = weight(m, 1, LayerMatrix::O);  // layer 1's attention adds nothing
  for (int64_t i = 0; i < c.n_embd * 4 * c.head_dim_v; ++i) o[i] = 0;
  const Scores s = score(Method::Block, m, calibration());
  EXPECT_NEAR(s.attn[1], 0.0, 1e-6);
  EXPECT_GT(s.attn[2], 1e-4);
  for (size_t il = 0; il < 3; ++il) EXPECT_GT(s.ffn[il], 1e-4) << il;
  EXPECT_EQ(s.attn[0], 0.0);  // no attention there
  // ShortGPT: the least influential half goes first.
  const Ratios r = remove_halves(c, s, 1);
  EXPECT_EQ(r.attn[1], 1.0);
  const PrunePlan p = plan_from_ratios(c, s, r);
  EXPECT_FALSE(p.shape(c).layers[1].has_attention());
  EXPECT_THROW(plan_from_ratios(c, s, Ratios::uniform(3, 0.5)), Error);  // units need unit scores
}

TEST(Select, UniformRatiosKeepTheBestUnitsInEvenGroups) {
  const ModelConfig c = tiny();
  const Scores s = cln::prune::testing::rule_scores(
      c, [](size_t, int64_t h) { return static_cast<double>(h % 2); },
      [](size_t, int64_t g) { return static_cast<double>(g); },
      [](size_t, int64_t f) { return static_cast<double>(-f); });
  // Half of 4 heads in 2 groups of 2: 2 groups of 1 (ties go to more groups), the odd head.
  const PrunePlan p = plan_from_ratios(c, s, Ratios::uniform(3, 0.5));
  EXPECT_EQ(p.layers[1].kv, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(p.layers[1].q, (std::vector<std::vector<int64_t>>{{1}, {3}}));
  EXPECT_EQ(p.layers[2].ff.size(), 10u);
  EXPECT_EQ(p.layers[2].ff.front(), 0);  // the best (highest) scores are the first channels
  EXPECT_EQ(p.layers[2].ff.back(), 9);
  // A quarter of the heads: one group of one head, the higher-scored group.
  Ratios q = Ratios::uniform(3, 0.0);
  q.attn[1] = 0.75;
  const PrunePlan p1 = plan_from_ratios(c, s, q);
  EXPECT_EQ(p1.layers[1].kv, (std::vector<int64_t>{1}));
  EXPECT_EQ(p1.layers[1].q, (std::vector<std::vector<int64_t>>{{3}}));
  // Bad ratios name the layer.
  Ratios bad = Ratios::uniform(3, 0.2);
  bad.ffn[2] = 1.5;
  try {
    plan_from_ratios(c, s, bad);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 2: the FFN ratio 1.5 is outside [0, 1]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(plan_from_ratios(c, s, Ratios::uniform(2, 0.2)), Error);
}

TEST(Importance, RandomIsSeeded) {
  const ModelConfig c = tiny();
  train::LlamaModel m = train::LlamaModel::init(c, 6);
  const Scores a = score(Method::Random, m, {}, 11), b = score(Method::Random, m, {}, 11),
               x = score(Method::Random, m, {}, 12);
  EXPECT_EQ(a.ff, b.ff);
  EXPECT_NE(a.ff, x.ff);
  EXPECT_THROW(score(Method::Wanda, m, {}), Error);  // needs calibration text
  EXPECT_THROW(method_from_name("l1"), Error);
}

TEST(Select, GlobalRankingRemovesTheLowestStandardisedUnitsAcrossLayers) {
  const ModelConfig c = tiny();  // layer 0: FFN only (24); layers 1, 2: 4 heads, FFN 24 / 20
  // Layer 2's channels: one very low outlier, the rest alike; others evenly spread.
  const Scores s = cln::prune::testing::rule_scores(
      c, [](size_t, int64_t h) { return 10.0 + static_cast<double>(h); },
      [](size_t, int64_t) { return 1.0; },
      [](size_t il, int64_t f) {
        return il == 2 ? (f == 0 ? -100.0 : 1.0) : static_cast<double>(f);
      });
  EXPECT_EQ(global_ratios(c, s, 0.0).ffn, (std::vector<double>{0, 0, 0}));
  // The smallest step removes the one unit with the lowest z: layer 2's outlier channel.
  const Ratios r = global_ratios(c, s, 1e-6);
  EXPECT_NEAR(r.ffn[2], 1.0 / 20, 1e-12);
  EXPECT_EQ(r.ffn[0] + r.ffn[1] + r.attn[1] + r.attn[2], 0.0);
  // Everything: every ratio 1.
  const Ratios all = global_ratios(c, s, 1.0);
  for (size_t il = 0; il < 3; ++il) EXPECT_NEAR(all.ffn[il], 1.0, 1e-9);
  EXPECT_NEAR(all.attn[1], 1.0, 1e-9);
  EXPECT_EQ(all.attn[0], 0.0);  // layer 0 has no heads to remove
  // About half the prunable weights: ratios between, and not uniform.
  const Ratios half = global_ratios(c, s, 0.5);
  double removed = 0, total = 0;
  const auto d = static_cast<double>(c.n_embd);
  for (size_t il = 0; il < 3; ++il) {
    const LayerShape& sh = c.layers[il];
    const double hw = d * static_cast<double>(c.head_dim_k + c.head_dim_v);
    removed += half.attn[il] * static_cast<double>(sh.n_head) * hw +
               half.ffn[il] * static_cast<double>(sh.n_ff) * 3 * d;
    total += static_cast<double>(sh.n_head) * hw + static_cast<double>(sh.n_ff) * 3 * d;
  }
  EXPECT_NEAR(removed / total, 0.5, 0.05);
  EXPECT_THROW(global_ratios(c, s, 1.5), Error);
}
