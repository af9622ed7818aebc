// The search model on a synthetic objective with a known optimum (each position's level
// should be near a target pattern): it learns to rank held-out candidates, to spell back
// what it encodes, and its gradient step proposes new candidates better than those it was
// trained on. Spearman's correlation against hand-checked values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "clone/core/error.h"
#include "clone/core/rng.h"
#include "clone/prune/nao.h"

using namespace cln;
using namespace cln::prune;

namespace {

const Seq kTarget = {6, 2, 7, 1, 4, 8, 0, 5};

double truth(const Seq& s) {
  double d = 0;
  for (size_t i = 0; i < s.size(); ++i) d += std::abs(s[i] - kTarget[i]);
  return -d;
}

Seq random_seq(Rng& rng) {
  Seq s;
  for (size_t i = 0; i < kTarget.size(); ++i) s.push_back(static_cast<int>(rng.uniform() * 9));
  return s;
}

}  // namespace

TEST(Nao, SpearmanMatchesHandValues) {
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0);
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  // Ranks (1, 2.5, 2.5, 4) against (1, 2, 3, 4): r = 4.5 / sqrt(4.5 * 5) = 0.9487
  EXPECT_NEAR(spearman({1, 5, 5, 9}, {1, 2, 3, 4}), 0.948683, 1e-6);
  EXPECT_THROW(spearman({1}, {1}), Error);
}

TEST(Nao, LearnsToRankReconstructAndImprove) {
  Rng rng(3);
  std::vector<Seq> train_x, test_x;
  std::vector<double> train_y, test_y;
  std::set<Seq> seen;
  while (train_x.size() < 160) {
    Seq s = random_seq(rng);
    if (!seen.insert(s).second) continue;
    train_x.push_back(s), train_y.push_back(truth(s));
  }
  while (test_x.size() < 60) {
    Seq s = random_seq(rng);
    if (seen.count(s)) continue;
    test_x.push_back(s), test_y.push_back(truth(s));
  }
  NaoOptions o;
  o.seed = 5;
  o.hidden = 48;
  o.epochs = 300;
  Nao nao(static_cast<int64_t>(kTarget.size()), o);
  const auto [mse, ce] = nao.train(train_x, train_y);
  EXPECT_LT(ce, 0.8) << "reconstruction (chance: ln 9 = 2.2)";
  std::vector<double> pred;
  for (const Seq& s : test_x) pred.push_back(nao.predict(s));
  const double rho = spearman(pred, test_y);
  EXPECT_GT(rho, 0.6) << "held-out rank correlation";
  // Held-out sequences spelled back: tokens within one level of the original (chance: 3
  // of 9 levels, about 0.3).
  int near = 0, total = 0;
  for (const Seq& s : test_x) {
    const Seq d = nao.decode(nao.encode(s));
    for (size_t i = 0; i < s.size(); ++i) near += std::abs(d[i] - s[i]) <= 1, ++total;
  }
  std::printf("held-out: rank correlation %.3f, tokens within one level %.3f\n", rho,
              static_cast<double>(near) / total);
  EXPECT_GT(static_cast<double>(near) / total, 0.6);

  // From the 10 best training candidates, the gradient step proposes new ones; the best
  // proposal beats the median of their starting points and is new.
  std::vector<size_t> order(train_x.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return train_y[a] > train_y[b]; });
  double best_new = -1e9;
  int proposals = 0;
  for (size_t i = 0; i < 10; ++i) {
    const Seq p = nao.improve(train_x[order[i]], seen);
    if (p.empty()) continue;
    EXPECT_FALSE(seen.count(p));
    ++proposals;
    best_new = std::max(best_new, truth(p));
  }
  EXPECT_GE(proposals, 5);
  EXPECT_GT(best_new, train_y[order[5]]);
}
