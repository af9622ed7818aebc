// The replay rules `clone sim` applies to a trace: clipped lengths, SLO classes where the
// trace has none (the generator's mix), seeded think times, seeded expert sets.
#include "clone/workload/replay.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "clone/core/error.h"

using namespace cln;
using namespace cln::workload;

namespace {

Request req(int64_t prompt, int64_t output, const std::string& slo = "") {
  Request r;
  r.prompt = prompt, r.output = output, r.slo = slo;
  return r;
}

std::vector<Request> many(size_t n) {
  std::vector<Request> v;
  for (size_t i = 0; i < n; ++i) v.push_back(req(100 + static_cast<int64_t>(i), 20));
  return v;
}

TEST(Replay, ClipsLengthsToTheContext) {
  std::vector<Request> v = {req(3000, 3000), req(4000, 100), req(100, 50), req(5000, 2048)};
  apply_replay_rules(v, {});
  EXPECT_EQ(v[0].output, 2048);
  EXPECT_EQ(v[0].prompt, 4096 - 2048);
  EXPECT_EQ(v[1].output, 100);
  EXPECT_EQ(v[1].prompt, 3996);
  EXPECT_EQ(v[2].prompt, 100);
  EXPECT_EQ(v[2].output, 50);
  EXPECT_EQ(v[3].prompt, 2048);
  ReplayRules tight;
  tight.max_output = 64, tight.max_context = 512;
  std::vector<Request> w = {req(1000, 1000)};
  apply_replay_rules(w, tight);
  EXPECT_EQ(w[0].output, 64);
  EXPECT_EQ(w[0].prompt, 448);
}

TEST(Replay, AssignsClassesOnlyWhereMissingAndDeterministically) {
  std::vector<Request> v = many(2000);
  v[5].slo = "code-completion", v[5].ttft_target_s = 7, v[5].tpot_target_s = 8;
  ReplayRules r;
  r.seed = 9, r.slo_scale = 2;
  std::vector<Request> a = v, b = v, c = v;
  apply_replay_rules(a, r);
  apply_replay_rules(b, r);
  r.seed = 10;
  apply_replay_rules(c, r);
  // A class that came with the trace stays, targets and all.
  EXPECT_EQ(a[5].slo, "code-completion");
  EXPECT_EQ(a[5].ttft_target_s, 7);
  EXPECT_EQ(a[5].tpot_target_s, 8);
  std::map<std::string, int> n;
  size_t same_class = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].slo, b[i].slo) << i;
    EXPECT_EQ(a[i].think_s, b[i].think_s) << i;
    same_class += a[i].slo == c[i].slo;
    ++n[a[i].slo];
    if (i == 5) continue;
    // Targets are the class's, scaled.
    Request want = a[i];
    apply_slo(want, slo_class(a[i].slo), 2);
    EXPECT_DOUBLE_EQ(a[i].ttft_target_s, want.ttft_target_s) << i;
    EXPECT_DOUBLE_EQ(a[i].tpot_target_s, want.tpot_target_s) << i;
  }
  // The generator's chat mix: 70% chatbot, 30% smart-reply (2000 draws: within 3.5 points).
  EXPECT_EQ(n.size(), 3u);
  EXPECT_NEAR(n["chatbot"] / 1999.0, 0.7, 0.035);
  EXPECT_NEAR(n["smart-reply"] / 1999.0, 0.3, 0.035);
  // Another seed draws other classes for a good share of the requests.
  EXPECT_LT(same_class, a.size() - 300);
}

TEST(Replay, CodeTracesGetCodeCompletionAndThinkTimesAreSeeded) {
  std::vector<Request> v = many(1000);
  ReplayRules r;
  r.code = true;
  apply_replay_rules(v, r);
  double sum = 0;
  for (const auto& x : v) {
    EXPECT_EQ(x.slo, "code-completion");
    EXPECT_GT(x.think_s, 0);
    sum += x.think_s;
  }
  EXPECT_NEAR(sum / 1000, 10, 1.0);  // exponential, mean 10 s
  EXPECT_NE(v[0].think_s, v[1].think_s);
}

TEST(Replay, LoadWorkloadByName) {
  // Generated workloads are the generator's.
  GeneratorSpec g;
  g.kind = "code", g.n = 12, g.seed = 3, g.slo_scale = 1.5;
  auto want = generate(g);
  auto got = load_workload("code", 12, 3, 1.5);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].prompt, want[i].prompt);
    EXPECT_EQ(got[i].think_s, want[i].think_s);
    EXPECT_EQ(got[i].tpot_target_s, want[i].tpot_target_s);
  }
  // A CSV goes through the replay rules and is cut to n.
  const std::string path = std::string(CLONE_BINARY_DIR) + "/replay_test.csv";
  std::ofstream(path) << "arrival_s,prompt,output\n0,100,50\n5,3000,3000\n9,200,30\n";
  auto csv = load_workload(path, 2, 42);
  ASSERT_EQ(csv.size(), 2u);
  EXPECT_EQ(csv[1].output, 2048);
  EXPECT_EQ(csv[1].prompt, 2048);
  EXPECT_FALSE(csv[0].slo.empty());
  EXPECT_GT(csv[0].think_s, 0);
  EXPECT_THROW(load_workload(std::string(CLONE_BINARY_DIR) + "/no-such.csv", 2, 1), Error);
}

TEST(Replay, ExpertSetsAreSeededAndInRange) {
  std::vector<Request> a = many(500), b = a, c = a;
  assign_expert_sets(a, 4, 7);
  assign_expert_sets(b, 4, 7);
  assign_expert_sets(c, 0, 7);
  std::map<int32_t, int> seen;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].expert_set, b[i].expert_set);
    EXPECT_GE(a[i].expert_set, 0);
    EXPECT_LT(a[i].expert_set, 4);
    EXPECT_EQ(c[i].expert_set, -1);
    ++seen[a[i].expert_set];
  }
  EXPECT_EQ(seen.size(), 4u);
  for (const auto& [set, n] : seen) EXPECT_GT(n, 80) << set;  // uniform: about 125 each
}

}  // namespace
