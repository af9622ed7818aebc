// clone tailor end to end on a tiny model and corpora: every baseline sampled, search
// rounds run, the best candidate written as a model of its shape, the report files; an
// interrupted run (here: run again on the same folder) evaluates nothing twice and ends
// with the same result; a cache from another run is refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "clone/core/error.h"
#include "clone/data/tokenizer_train.h"
#include "clone/engine/model.h"
#include "clone/prune/tailor.h"
#include "prune/fixture.h"

using namespace cln;
using namespace cln::prune;
namespace fs = std::filesystem;

TEST(Tailor, SearchesResumesAndWritesTheBestModel) {
  const auto t = cln::prune::testing::tiny_model("tailor", 3);
  const std::string dir = data::testing::temp_dir("tailor-run");
  TailorOptions o;
  o.model = t.path;
  o.data_dir = t.data;
  o.out_dir = dir + "/out";
  o.units = Method::Magnitude;
  o.val.seq_len = 16, o.val.windows = 2;
  o.calib_seqs = 4, o.calib_len = 16;
  o.random_samples = 4, o.rounds = 2, o.per_round = 3;
  o.nao.epochs = 60;
  o.threads = 1;
  std::vector<std::string> lines;
  o.log = [&](const std::string& s) { lines.push_back(s); };
  const TailorResult r = tailor(o);
  write_report(o, r);

  // Samples of every baseline, then the search's proposals.
  std::set<std::string> sources;
  for (const Candidate& k : r.candidates) sources.insert(k.source.substr(0, k.source.find(' ')));
  for (const char* s : {"uniform", "shortgpt", "flap", "random", "search"})
    EXPECT_TRUE(sources.count(s)) << s;
  EXPECT_TRUE(sources.count("puzzle") || sources.count("puzzle (over)"));
  ASSERT_EQ(r.rounds.size(), 2u);
  EXPECT_GT(r.rounds[0].proposed, 0);
  // The best is the highest score among those within budget, and the model has its shape.
  for (const Candidate& k : r.candidates) {
    if (k.within == r.feasible) {
      EXPECT_LE(k.score, r.best.score);
    }
  }
  const auto best = Model::load(o.out_dir + "/model.gguf");
  std::string key;
  for (const LayerShape& l : best->config().layers)
    key += (key.empty() ? "" : ",") + std::to_string(l.n_head) + "/" + std::to_string(l.n_head_kv) +
           "/" + std::to_string(l.n_ff);
  EXPECT_EQ(key, r.best.key);
  // The written model's perplexity, measured again from the file, is the search's number.
  Validation val = o.val;
  val.data_dir = o.data_dir;
  EXPECT_NEAR(validation_ppl(o.out_dir + "/model.gguf", val), r.best.ppl, 1e-9 * r.best.ppl);
  EXPECT_LT(r.best.tpot_s, r.dense.tpot_s);
  for (const char* f : {"summary.md", "candidates.csv", "rounds.csv", "candidates.jsonl"})
    EXPECT_TRUE(fs::exists(o.out_dir + "/" + f)) << f;
  EXPECT_NE(lines.back().find("tailor: best"), std::string::npos) << lines.back();

  // Run again on the same folder: nothing evaluated again, the same result.
  lines.clear();
  const TailorResult again = tailor(o);
  EXPECT_EQ(again.best.key, r.best.key);
  EXPECT_EQ(again.candidates.size(), r.candidates.size());
  EXPECT_NE(lines.back().find(" 0 evaluations run"), std::string::npos) << lines.back();

  // Another run's cache is refused.
  TailorOptions other = o;
  other.profile = "orin-nano-8gb";
  EXPECT_THROW(tailor(other), Error);
}
