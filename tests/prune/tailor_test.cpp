// clone tailor end to end on a tiny model and corpora: every baseline sampled, search
// rounds run, the best candidate written as a model of its shape, the report files; an
// interrupted run (here: run again on the same folder) evaluates nothing twice and ends
// with the same result; a cache from another run is refused; the best recovered by
// distillation from the dense model, interrupted and resumed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include "clone/core/error.h"
#include "clone/data/tokenizer_train.h"
#include "clone/engine/model.h"
#include "clone/gguf/gguf.h"
#include "clone/prune/tailor.h"
#include "prune/fixture.h"
#include "util/expect_error.h"

using namespace cln;
using namespace cln::prune;
namespace fs = std::filesystem;

namespace {

using data::testing::slurp;

// The Puzzle pick alone (one candidate, no rounds), recovered by a few distilled steps.
TailorOptions puzzle_then_recovery(const cln::prune::testing::TinyModel& t,
                                   const std::string& out) {
  TailorOptions o;
  o.model = t.path;
  o.data_dir = t.data;
  o.out_dir = out;
  o.units = Method::Magnitude;
  o.val.seq_len = 16, o.val.windows = 2;
  o.calib_seqs = 4, o.calib_len = 16;
  o.baselines = false, o.random_samples = 0, o.rounds = 0;
  o.threads = 1;
  train::FinetuneOptions& r = o.recovery;
  r.batch = 2, r.seq_len = 16;
  r.sched = train::Schedule{1e-2, 2, 8, 0.1};
  r.eval_every = 0, r.test_tokens = 0, r.ckpt_every = 4;
  r.kd_weight = 0.5f;
  r.verbose = false;
  return o;
}

}  // namespace

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
  const auto best = Model::load(o.out_dir + "/pruned.gguf");
  std::string key;
  for (const LayerShape& l : best->config().layers)
    key += (key.empty() ? "" : ",") + std::to_string(l.n_head) + "/" + std::to_string(l.n_head_kv) +
           "/" + std::to_string(l.n_ff);
  EXPECT_EQ(key, r.best.key);
  // The written model's perplexity, measured again from the file, is the search's number.
  Validation val = o.val;
  val.data_dir = o.data_dir;
  EXPECT_NEAR(validation_ppl(o.out_dir + "/pruned.gguf", val), r.best.ppl, 1e-9 * r.best.ppl);
  // Without recovery the model to ship is the cut itself.
  EXPECT_EQ(r.recovered_ppl, 0);
  EXPECT_EQ(slurp(o.out_dir + "/model.gguf"), slurp(o.out_dir + "/pruned.gguf"));
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

  // The Puzzle baseline alone (`clone tailor --puzzle-only`): one candidate, the same pick
  // as among the full run's samples.
  TailorOptions alone = o;
  alone.out_dir = dir + "/puzzle";
  alone.baselines = false, alone.random_samples = 0, alone.rounds = 0;
  const TailorResult pz = tailor(alone);
  write_report(alone, pz);
  ASSERT_EQ(pz.candidates.size(), 1u);
  EXPECT_EQ(pz.candidates[0].source.rfind("puzzle", 0), 0u) << pz.candidates[0].source;
  for (const Candidate& k : r.candidates) {
    if (k.source.rfind("puzzle", 0) == 0) {
      EXPECT_EQ(k.key, pz.candidates[0].key);
    }
  }
  EXPECT_TRUE(fs::exists(alone.out_dir + "/model.gguf"));

  // Another run's cache is refused.
  TailorOptions other = o;
  other.profile = "orin-nano-8gb";
  EXPECT_THROW(tailor(other), Error);
  other = o;  // also one costed under another DVFS controller
  other.workload.dvfs = "static";
  EXPECT_THROW(tailor(other), Error);

  // Under a controller each candidate's request is served to a TPOT target at the budget:
  // a shape evaluated both ways costs no more energy than at the top clock, and stays
  // within the TPOT budget wherever the top clock was; the budgets stay the dense model's
  // top-clock ones.
  // (The oracle: on a model this small the 500 us clock switch before the prefill would
  // spend the whole TTFT target, so a single clock per request stays at the top; the oracle
  // switches after the first token.)
  other.workload.dvfs = "oracle";
  other.out_dir = dir + "/oracle";
  const TailorResult st = tailor(other);
  write_report(other, st);
  EXPECT_DOUBLE_EQ(st.latency_budget_s, r.latency_budget_s);
  EXPECT_DOUBLE_EQ(st.energy_budget_j, r.energy_budget_j);
  std::map<std::string, const Candidate*> top;
  for (const Candidate& k : r.candidates) top[k.key] = &k;
  int both = 0, cheaper = 0;
  for (const Candidate& k : st.candidates) {
    const auto it = top.find(k.key);
    if (it == top.end()) continue;
    ++both;
    EXPECT_LE(k.energy_j, it->second->energy_j * (1 + 1e-9)) << k.key;
    if (it->second->tpot_s <= r.latency_budget_s) {
      EXPECT_LE(k.tpot_s, r.latency_budget_s * (1 + 1e-9)) << k.key;
    }
    cheaper += k.energy_j < 0.99 * it->second->energy_j;
  }
  EXPECT_GE(both, 10);
  EXPECT_GE(cheaper, 1);
  // The Puzzle baseline gets the controller too: its knapsack also runs at raised energy
  // budgets (what a controller saves does not add up per block), and those picks are served
  // by the controller and judged against the real budgets like any sample.
  const auto relaxed = [](const TailorResult& tr) {
    return std::count_if(tr.candidates.begin(), tr.candidates.end(),
                         [](const Candidate& k) { return k.source.rfind("puzzle e+", 0) == 0; });
  };
  EXPECT_EQ(relaxed(r), 0);
  TailorOptions loose = other;  // a TPOT budget the energy one binds under
  loose.latency_budget = 0.95, loose.out_dir = dir + "/oracle-loose";
  loose.random_samples = 0, loose.rounds = 0;
  EXPECT_GE(relaxed(tailor(loose)), 1);
  std::ifstream summary(other.out_dir + "/summary.md");
  const std::string text((std::istreambuf_iterator<char>(summary)), {});
  EXPECT_NE(text.find("served by the oracle DVFS controller"), std::string::npos) << text;
}

TEST(Tailor, RecoversTheBestByDistillationAndResumes) {
  const auto t = cln::prune::testing::tiny_model("tailor-recover", 3);
  const std::string dir = data::testing::temp_dir("tailor-recover-run");
  TailorOptions o = puzzle_then_recovery(t, dir + "/whole");
  std::vector<std::string> lines;
  o.log = [&](const std::string& s) { lines.push_back(s); };
  const TailorResult r = tailor(o);
  write_report(o, r);
  // model.gguf: the cut's shape, every weight trained, distilled from the dense model, and
  // better on validation than the cut; the search's own numbers are the cut's.
  const auto cut = GgufFile::open(o.out_dir + "/pruned.gguf");
  const auto rec = GgufFile::open(o.out_dir + "/model.gguf");
  EXPECT_EQ(ModelConfig::from_gguf(*cut).layers, ModelConfig::from_gguf(*rec).layers);
  ASSERT_EQ(cut->tensors().size(), rec->tensors().size());
  for (const auto& ti : cut->tensors()) {
    const GgufTensorInfo* u = rec->find_tensor(ti.name);
    ASSERT_NE(u, nullptr) << ti.name;
    EXPECT_NE(0, std::memcmp(cut->tensor_data(ti), rec->tensor_data(*u), ti.nbytes)) << ti.name;
  }
  const GgufValue* desc = rec->find("general.description");
  ASSERT_NE(desc, nullptr);
  EXPECT_NE(desc->s.find("distilled from dense.gguf into pruned.gguf"), std::string::npos)
      << desc->s;
  Validation val = o.val;
  val.data_dir = o.data_dir;
  EXPECT_NEAR(validation_ppl(o.out_dir + "/pruned.gguf", val), r.best.ppl, 1e-9 * r.best.ppl);
  EXPECT_NEAR(validation_ppl(o.out_dir + "/model.gguf", val), r.recovered_ppl,
              1e-9 * r.recovered_ppl);
  EXPECT_LT(r.recovered_ppl, 0.9 * r.best.ppl);
  EXPECT_NE(lines.back().find("tailor: recovered"), std::string::npos) << lines.back();
  const std::string summary = slurp(o.out_dir + "/summary.md");
  EXPECT_NE(summary.find("distilled from the dense model (KD weight 0.5)"), std::string::npos)
      << summary;

  // Interrupted in the recovery (the search done, recovery stopped at step 4 of 8) and run
  // again: it resumes and writes the same model as the uninterrupted run.
  TailorOptions cut_short = puzzle_then_recovery(t, dir + "/resumed");
  cut_short.recovery.stop_after = 4;
  EXPECT_THROW(tailor(cut_short), Error);
  EXPECT_FALSE(fs::exists(cut_short.out_dir + "/model.gguf"));
  TailorOptions again = puzzle_then_recovery(t, dir + "/resumed");
  again.recovery.verbose = true;  // train.log
  const TailorResult resumed = tailor(again);
  EXPECT_NE(slurp(again.out_dir + "/recover/train.log").find("at step 4 of 8"), std::string::npos);
  EXPECT_EQ(resumed.recovered_ppl, r.recovered_ppl);
  EXPECT_EQ(slurp(cut_short.out_dir + "/model.gguf"), slurp(o.out_dir + "/model.gguf"));
  // A recovery window longer than the model's context is refused before the search runs.
  TailorOptions too_long = puzzle_then_recovery(t, dir + "/too-long");
  too_long.recovery.seq_len = 128;
  test_util::expect_error([&] { tailor(too_long); },
                          "recovery windows of 128 tokens exceed the model's context of 64");
  EXPECT_FALSE(fs::exists(too_long.out_dir + "/candidates.jsonl"));
  // Another distillation weight on the same folder is another run: refused, named.
  TailorOptions other = puzzle_then_recovery(t, dir + "/whole");
  other.recovery.kd_weight = 0.25f;
  test_util::expect_error([&] { tailor(other); }, "kd_weight");
}
