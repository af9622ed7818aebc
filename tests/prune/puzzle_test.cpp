// The Puzzle-style optimiser against exhaustive search on small random libraries: what it
// picks meets both budgets, is optimal on the rounded costs, never beats the true optimum,
// and a budget nothing meets is reported as such with the most saving picks.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "clone/core/rng.h"
#include "clone/data/tokenizer_train.h"
#include "clone/prune/puzzle.h"
#include "prune/fixture.h"

using namespace cln;
using namespace cln::prune;

namespace {

std::vector<Block> random_library(Rng& rng, int blocks) {
  std::vector<Block> lib;
  for (int b = 0; b < blocks; ++b) {
    Block k{b / 2, b % 2 == 0, {Variant{}}};
    const int n = 2 + static_cast<int>(rng.uniform() * 3);
    for (int i = 1; i <= n; ++i) {
      Variant v;
      v.ratio = static_cast<double>(i) / n;
      v.dloss = rng.uniform(-0.01, 0.3) * i;
      v.dtime_s = -rng.uniform(0.5, 1.5) * i * 1e-3;
      v.denergy_j = -rng.uniform(0.5, 1.5) * i * 1e-2;
      k.choices.push_back(v);
    }
    lib.push_back(k);
  }
  return lib;
}

// Every combination; `rounded` applies the optimiser's rounding of savings to bins.
double exhaustive(const std::vector<Block>& lib, double need_t, double need_e, int bins,
                  bool rounded) {
  double best = std::numeric_limits<double>::infinity();
  std::vector<size_t> at(lib.size(), 0);
  for (;;) {
    double loss = 0, st = 0, se = 0;
    int bt = 0, be = 0;
    for (size_t g = 0; g < lib.size(); ++g) {
      const Variant& v = lib[g].choices[at[g]];
      loss += v.dloss, st -= v.dtime_s, se -= v.denergy_j;
      bt += static_cast<int>(std::floor(-v.dtime_s / need_t * bins + 1e-9));
      be += static_cast<int>(std::floor(-v.denergy_j / need_e * bins + 1e-9));
    }
    const bool ok = rounded ? bt >= bins && be >= bins : st >= need_t && se >= need_e;
    if (ok) best = std::min(best, loss);
    size_t g = 0;
    while (g < lib.size() && ++at[g] == lib[g].choices.size()) at[g++] = 0;
    if (g == lib.size()) break;
  }
  return best;
}

}  // namespace

TEST(Puzzle, TheOptimiserMatchesExhaustiveSearch) {
  Rng rng(21);
  int feasible = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const std::vector<Block> lib = random_library(rng, 6);
    double max_t = 0, max_e = 0;
    for (const Block& b : lib)
      max_t += -b.choices.back().dtime_s, max_e += -b.choices.back().denergy_j;
    const double need_t = rng.uniform(0.1, 0.9) * max_t, need_e = rng.uniform(0.1, 0.9) * max_e;
    const int bins = 100;
    const Choice c = choose(lib, 3, -need_t, -need_e, bins);
    const double rounded = exhaustive(lib, need_t, need_e, bins, true);
    const double exact = exhaustive(lib, need_t, need_e, bins, false);
    if (!std::isfinite(rounded)) {
      EXPECT_FALSE(c.feasible) << trial;
      continue;
    }
    ++feasible;
    ASSERT_TRUE(c.feasible) << trial;
    EXPECT_NEAR(c.dloss, rounded, 1e-9) << trial;    // optimal on the rounded costs
    EXPECT_GE(c.dloss, exact - 1e-9) << trial;       // never better than the optimum
    EXPECT_LE(c.dtime_s, -need_t + 1e-12) << trial;  // truly within both budgets
    EXPECT_LE(c.denergy_j, -need_e + 1e-12) << trial;
    // The ratios say which variant each block got.
    double dl = 0;
    for (const Block& b : lib) {
      const double r = (b.attn ? c.ratios.attn : c.ratios.ffn)[static_cast<size_t>(b.layer)];
      for (const Variant& v : b.choices)
        if (v.ratio == r) dl += v.dloss;
    }
    EXPECT_NEAR(dl, c.dloss, 1e-9) << trial;
  }
  EXPECT_GT(feasible, 20);
}

TEST(Puzzle, ABudgetNothingMeetsIsReportedWithTheClosestPicks) {
  Rng rng(4);
  const std::vector<Block> lib = random_library(rng, 4);
  double max_t = 0;
  for (const Block& b : lib) {
    double m = 0;
    for (const Variant& v : b.choices) m = std::min(m, v.dtime_s);
    max_t -= m;
  }
  const Choice c = choose(lib, 2, -2 * max_t, 0, 50);
  EXPECT_FALSE(c.feasible);
  EXPECT_NEAR(c.dtime_s, -max_t, 1e-12);  // every block at its most saving variant
  // No budget at all: nothing is cut that costs loss; cuts that lower the loss are taken.
  const Choice free = choose(lib, 2, 0, 0, 50);
  EXPECT_TRUE(free.feasible);
  double best = 0;
  for (const Block& b : lib) {
    double m = 0;
    for (const Variant& v : b.choices) m = std::min(m, v.dloss);
    best += m;
  }
  EXPECT_NEAR(free.dloss, best, 1e-12);
}

TEST(Puzzle, TheLibraryScoresEachBlockAlone) {
  auto t = cln::prune::testing::tiny_model("puzzle-lib", 2);
  const std::string &data = t.data, &path = t.path;
  const ModelConfig& c = t.config;
  train::LlamaModel& m = t.model;
  const auto f = GgufFile::open(path);
  const Scores s = score(Method::Magnitude, m, {});
  LibraryOptions o;
  // 4 heads in 2 KV groups keep 4, 2 (2 x 1 or 1 x 2) or 1: 0.25, 0.5 and 0.6 all keep 2
  // (ties go to fewer heads), scored once.
  o.attn_ratios = {0.25, 0.5, 0.6, 1.0};
  o.ffn_ratios = {0.5, 1.0};
  o.tmp_dir = data::testing::temp_dir("puzzle-lib-tmp");
  int calls = 0;
  o.progress = [&](int, int) { ++calls; };
  const Validation val{data, 16, 2, 1};
  const auto lib = build_library(*f, s, val, device::DeviceProfile::find("orin-nx-16gb"), {}, o);
  ASSERT_EQ(lib.size(), 4u);  // 2 layers x (attention, FFN)
  EXPECT_EQ(calls,
            1 + 2 * 2 + 2 * 2);  // the dense model, then 2 attention and 2 FFN variants per layer
  EXPECT_TRUE(lib[0].attn);
  ASSERT_EQ(lib[0].choices.size(), 3u);  // dense, 2 of 4 heads, none
  EXPECT_EQ(lib[0].choices[0].dloss, 0.0);
  for (const Block& b : lib)
    for (size_t k = 1; k < b.choices.size(); ++k) {
      EXPECT_LT(b.choices[k].dtime_s, 0) << b.layer;
      EXPECT_LT(b.choices[k].denergy_j, 0) << b.layer;
      EXPECT_NE(b.choices[k].dloss, 0) << b.layer;
    }
  // A cut of the whole FFN of layer 1 costs the same loss as measuring that plan directly.
  Ratios r = Ratios::uniform(2, 0.0);
  r.ffn[1] = 1.0;
  const double base = std::log(validation_ppl(path, val));
  const double cut = std::log(validation_ppl(*f, plan_from_ratios(c, s, r), val, o.tmp_dir));
  EXPECT_NEAR(lib[3].choices.back().dloss, cut - base, 1e-9);
}
