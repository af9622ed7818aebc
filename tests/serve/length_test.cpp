// The output-length predictor: it learns lengths that depend on the prompt (beating the
// global mean by far on held-out prompts), survives a save/load round trip exactly, the
// judgement's means and buckets match a count by hand, and bad files are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "clone/core/error.h"
#include "clone/core/rng.h"
#include "clone/engine/model_writer.h"
#include "clone/serve/length.h"
#include "engine/test_util.h"

using namespace cln;

namespace {

std::shared_ptr<const Model> tiny() {
  return test::random_model("length.gguf", 5, 0.5f);
}

// Two kinds of prompt: low token ids and short (answer: 3-5 tokens), high ids and longer
// (a story: 60-89 tokens), each spread within its length bucket.
std::vector<serve::LengthSample> samples(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<serve::LengthSample> out;
  for (size_t i = 0; i < n; ++i) {
    const bool longer = i % 2 == 1;
    serve::LengthSample s;
    s.source = longer ? "story" : "answer";
    s.prompt.push_back(1);
    const int64_t len =
        longer ? 20 + static_cast<int64_t>(rng.below(10)) : 4 + static_cast<int64_t>(rng.below(4));
    for (int64_t k = 0; k < len; ++k)
      s.prompt.push_back(static_cast<int32_t>((longer ? 200 : 10) + rng.below(80)));
    s.length =
        longer ? 60 + static_cast<int64_t>(rng.below(30)) : 3 + static_cast<int64_t>(rng.below(3));
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

TEST(LengthPredictor, LearnsLengthsThatDependOnThePrompt) {
  auto emb = serve::make_hidden_embedder("hidden:2", tiny(), 1);
  const auto train = samples(200, 1), test = samples(60, 2);
  const auto m = serve::OutputLengthModel::train(train, *emb, 256, 16, 3);
  const serve::LengthEval r = serve::evaluate_lengths(m, *emb, train, test);
  const auto& all = r.rows.back();
  ASSERT_EQ(all.source, "all");
  EXPECT_EQ(all.n, 60);
  // The global mean (~40) is off by ~35 tokens for every prompt; the predictor, which is
  // not told the kind, by a few (the source mean, which is, by ~5).
  EXPECT_GT(all.mae_global_mean, 30);
  EXPECT_LT(all.mae_model, 0.3 * all.mae_global_mean) << serve::length_table(r).markdown();
  // The global mean's bucket is right for the stories only (50%), its log error ~1.6.
  EXPECT_GT(all.bucket_model, 85) << serve::length_table(r).markdown();  // measured 93
  EXPECT_LT(r.log_sigma_model, 0.6);                                     // measured 0.42
}

TEST(LengthPredictor, SaveAndLoadPredictTheSame) {
  auto emb = serve::make_hidden_embedder("hidden:2", tiny(), 1);
  const auto train = samples(80, 4);
  const auto m = serve::OutputLengthModel::train(train, *emb, 128, 8, 5);
  const std::string p = test::tmp_path("length.json");
  m.save(p, R"({"note": "test"})");
  auto back = serve::OutputLengthModel::load(p, tiny(), 1);
  EXPECT_EQ(back.cap(), 128);
  EXPECT_EQ(back.embedder_name(), "hidden:2");
  for (const auto& s : samples(20, 6))
    EXPECT_EQ(back.predict(s.prompt), m.predict(s.prompt, emb->embed(s.prompt)));
}

TEST(LengthPredictor, TheJudgementCountsByHand) {
  auto emb = serve::make_hidden_embedder("hidden:2", tiny(), 1);
  const auto train = samples(40, 7);
  const auto m = serve::OutputLengthModel::train(train, *emb, 256, 8, 8);
  const auto test = samples(6, 9);
  const serve::LengthEval r = serve::evaluate_lengths(m, *emb, train, test);
  // By hand: per-source training means, then absolute errors and buckets.
  double sum_a = 0, sum_s = 0, n_a = 0, n_s = 0, all = 0;
  for (const auto& s : train) {
    (s.source == "answer" ? sum_a : sum_s) += static_cast<double>(s.length);
    (s.source == "answer" ? n_a : n_s) += 1;
    all += static_cast<double>(s.length);
  }
  const double gm = all / static_cast<double>(train.size());
  double mae_m = 0, mae_s = 0, mae_g = 0, bm = 0;
  auto bucket = [](double v) { return v < 8 ? 0 : v < 32 ? 1 : v < 128 ? 2 : 3; };
  for (const auto& s : test) {
    const double t = static_cast<double>(s.length);
    const double pm = static_cast<double>(m.predict(s.prompt, emb->embed(s.prompt)));
    const double ps = s.source == "answer" ? sum_a / n_a : sum_s / n_s;
    mae_m += std::fabs(pm - t), mae_s += std::fabs(ps - t), mae_g += std::fabs(gm - t);
    bm += bucket(pm) == bucket(t);
  }
  const auto& row = r.rows.back();
  EXPECT_NEAR(row.mae_model, mae_m / 6, 1e-9);
  EXPECT_NEAR(row.mae_source_mean, mae_s / 6, 1e-9);
  EXPECT_NEAR(row.mae_global_mean, mae_g / 6, 1e-9);
  EXPECT_NEAR(row.bucket_model, 100 * bm / 6, 1e-9);
  ASSERT_EQ(r.rows.size(), 3u);  // answer, story, all
  EXPECT_EQ(r.rows[0].source, "answer");
  EXPECT_EQ(r.rows[0].n + r.rows[1].n, 6);
}

TEST(LengthPredictor, RefusesWhatIsNotAPredictor) {
  const std::string p = test::tmp_path("not_length.json");
  std::ofstream(p) << R"({"format": "clone.dvfs-mlp/1", "n_in": 1, "n_hidden": 1, "w1": [0],
    "b1": [0], "w2": [0], "b2": 0, "mean": [0], "scale": [1], "meta": {"kind": "dvfs"}})";
  try {
    (void)serve::OutputLengthModel::load(p, tiny(), 1);
    FAIL() << "loaded a DVFS policy as a length predictor";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("clone.output-length"), std::string::npos) << e.what();
  }
  auto emb = serve::make_hidden_embedder("hidden:2", tiny(), 1);
  EXPECT_THROW(serve::OutputLengthModel::train({}, *emb, 256), Error);
}
