// Evaluation through the engine, checked against what is computed independently: the
// windows of each protocol counted by hand, the windowed NLL against the trainer's own
// (autograd) forward pass over the same windows, task accuracy against greedy decoding
// written here with the trainer's forward, and the samples' stop rules.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "clone/core/error.h"
#include "clone/core/stats.h"
#include "clone/data/token_file.h"
#include "clone/engine/context.h"
#include "clone/engine/model.h"
#include "clone/eval/domains.h"
#include "clone/eval/expert_eval.h"
#include "clone/eval/nll.h"
#include "clone/eval/samples.h"
#include "clone/tokenizer/tokenizer.h"
#include "clone/train/trainer.h"
#include "data/fixture.h"

namespace cln::eval {
namespace {
namespace fs = std::filesystem;
namespace testing = data::testing;

const std::string& data_dir() {
  static const std::string d = testing::tiny_data("eval");
  return d;
}

// A small base model trained once per test binary.
const std::string& base_model() {
  static const std::string path = [] {
    train::BaseTrainOptions o;
    o.data_dir = data_dir();
    o.out_dir = testing::temp_dir("eval-base");
    o.n_embd = 16, o.n_layer = 2, o.n_head = 2, o.n_head_kv = 1, o.n_ff = 24;
    o.batch = 2, o.seq_len = 16;
    o.sched.steps = 6, o.sched.warmup = 2, o.sched.lr = 3e-3;
    o.eval_every = 0, o.test_tokens = 0, o.threads = 2, o.verbose = false;
    train::train_base(o);
    return o.out_dir + "/model.gguf";
  }();
  return path;
}

// Mean NLL of the windows' predictions by the trainer's autograd forward pass, a
// computation that shares nothing with the engine's KV-cache path but the kernels.
double trainer_nll(const train::LlamaModel& m, const std::vector<uint16_t>& t,
                   const std::vector<int64_t>& starts, int64_t seq_len) {
  double total = 0;
  for (int64_t s : starts) {
    std::vector<int32_t> tok(static_cast<size_t>(seq_len)), tgt(tok.size());
    for (int64_t i = 0; i < seq_len; ++i) {
      tok[static_cast<size_t>(i)] = t[static_cast<size_t>(s + i)];
      tgt[static_cast<size_t>(i)] = t[static_cast<size_t>(s + i + 1)];
    }
    train::Graph g(nullptr);
    g.grad_enabled = false;
    total += train::op::cross_entropy(g, m.forward(g, tok, 1, seq_len), tgt)->data()[0];
  }
  return total / static_cast<double>(starts.size());
}

TEST(Windows, ProtocolsCountedByHand) {
  // llama-perplexity over the golden slice: 10400 tokens, n_ctx 128 -> 81 windows of 63.
  const Windows l = llama_windows(10400, 128);
  EXPECT_EQ(l.starts.size(), 81u);
  EXPECT_EQ(l.starts[80], 80 * 128);
  EXPECT_EQ(l.scored(), 81 * 63);
  EXPECT_EQ(l.bos, 1);
  EXPECT_EQ(llama_windows(10400, 128, 64).starts.size(), 161u);  // (10400 - 128) / 64 + 1
  // Even windows: 100 tokens, windows of 16 + 1: room for 84 starts (0..83), at most 6
  // windows; 4 asked for land at 0, 27, 54, 81 (83 / 3 = 27).
  const Windows e = even_windows(100, 16, 4);
  EXPECT_EQ(e.starts, (std::vector<int64_t>{0, 27, 54, 81}));
  EXPECT_EQ(e.scored(), 64);
  EXPECT_EQ(even_windows(100, 16, 50).starts.size(), 6u);
  EXPECT_THROW(even_windows(16, 16, 1), Error);  // no room for the last target
  EXPECT_THROW(llama_windows(100, 128), Error);
}

TEST(Windows, EngineNllEqualsTheTrainersForward) {
  const std::string path = base_model();
  const auto model = Model::load(path);
  const train::LlamaModel tm = train::LlamaModel::from_gguf(*GgufFile::open(path));
  const Tokenizer tok = Tokenizer::from_gguf(model->gguf());
  const data::TokenFile f =
      data::read_token_file(data::token_file_path(data_dir(), "quotes", "test"), tok.vocab(), path);
  const Windows w = even_windows(static_cast<int64_t>(f.tokens.size()), 16, 5);
  Context ctx(model, {16, 1, 16});
  const NllResult r = windowed_nll(ctx, std::span<const uint16_t>(f.tokens), w);
  EXPECT_EQ(r.scored, 5 * 16);
  const double ref = trainer_nll(tm, f.tokens, w.starts, 16);
  EXPECT_NEAR(r.mean_nll, ref, 1e-5 * ref);
  // The llama protocol scores fewer predictions of the same windows: it must differ.
  Windows half = w;
  half.score_from = 8;
  EXPECT_NE(windowed_nll(ctx, std::span<const uint16_t>(f.tokens), half).mean_nll, r.mean_nll);
}

// Greedy decoding with the trainer's forward, re-running the whole sequence each step.
std::string trainer_greedy(const train::LlamaModel& m, const Tokenizer& tok,
                           const std::string& prompt, int64_t max_new) {
  std::vector<int32_t> ids = tok.encode(prompt, true), out;
  for (int64_t k = 0; k < max_new; ++k) {
    train::Graph g(nullptr);
    g.grad_enabled = false;
    const train::TensorP y = m.forward(g, ids, 1, static_cast<int64_t>(ids.size()));
    const float* last = y->data() + (static_cast<int64_t>(ids.size()) - 1) * y->cols();
    const auto next = static_cast<int32_t>(std::max_element(last, last + y->cols()) - last);
    if (next == tok.eos()) break;
    out.push_back(next);
    ids.push_back(next);
  }
  return tok.decode(out);
}

TEST(ExpertEval, TablesAgreeWithIndependentComputations) {
  const std::string dir = testing::temp_dir("expert-eval");
  const std::string base = base_model();
  train::LoraTrainOptions lo;
  lo.base = base;
  lo.data_dir = data_dir();
  lo.domain = "quotes";
  lo.out = dir + "/quotes.gguf";
  lo.rank = 2, lo.batch = 2, lo.seq_len = 16;
  lo.sched = train::Schedule{3e-2, 2, 30, 0.1};
  lo.verbose = false;
  train::train_lora(lo);
  fs::create_directories(data_dir() + "/tasks/addition");
  std::vector<data::TaskItem> items;
  for (int a = 0; a < 6; ++a) items.push_back({std::to_string(a) + "+1=", std::to_string(a + 1)});
  {
    std::ofstream f(data_dir() + "/tasks/addition/test.jsonl");
    for (const auto& it : items)
      f << nlohmann::json{{"prompt", it.prompt}, {"answer", it.answer}}.dump() << "\n";
  }
  ExpertEvalOptions o;
  o.base = base;
  o.data_dir = data_dir();
  o.experts = {{"quotes", dir + "/quotes.gguf"}};
  o.tasks = {"addition"};
  o.seq_len = 16;
  o.max_tokens = 64;
  o.task_items = 6;
  o.max_new = 4;
  o.verbose = false;
  const ExpertEval e = evaluate_experts(o);
  ASSERT_EQ(e.domains, data::domain_names());
  ASSERT_EQ(e.models, (std::vector<std::string>{"base", "quotes"}));

  // The base row against the trainer's forward over the same windows, and the unigram
  // fitted here by hand.
  const auto f = GgufFile::open(base);
  const train::LlamaModel tm = train::LlamaModel::from_gguf(*f);
  const Tokenizer tok = Tokenizer::from_gguf(*f);
  for (size_t d = 0; d < e.domains.size(); ++d) {
    const auto test = data::read_token_file(data::token_file_path(data_dir(), e.domains[d], "test"),
                                            tok.vocab(), base);
    const auto train = data::read_token_file(
        data::token_file_path(data_dir(), e.domains[d], "train"), tok.vocab(), base);
    const Windows w = even_windows(static_cast<int64_t>(test.tokens.size()), 16, 4);
    EXPECT_NEAR(std::log(e.ppl[0][d]), trainer_nll(tm, test.tokens, w.starts, 16), 1e-4)
        << e.domains[d];
    std::vector<double> counts(static_cast<size_t>(tok.n_vocab()), 1.0);
    for (uint16_t t : train.tokens) counts[t] += 1;
    const double total = static_cast<double>(train.tokens.size()) + tok.n_vocab();
    double uni = 0;
    for (int64_t s : w.starts)
      for (int64_t i = 1; i <= 16; ++i)
        uni -= std::log(counts[test.tokens[static_cast<size_t>(s + i)]] / total);
    EXPECT_NEAR(std::log(e.unigram[d]), uni / 64, 1e-9) << e.domains[d];
    EXPECT_EQ(e.tokens[d], 64);
  }
  // The expert was trained on quotes: it must beat the base there.
  const auto q = static_cast<size_t>(std::find(e.domains.begin(), e.domains.end(), "quotes") -
                                     e.domains.begin());
  EXPECT_LT(e.ppl[1][q], e.ppl[0][q]);
  // Task accuracy: greedy answers decoded here with the trainer's forward.
  ASSERT_EQ(e.tasks.size(), 1u);
  EXPECT_EQ(e.tasks[0].items, 6);
  int hits = 0;
  const auto trim = [](std::string s) {
    while (!s.empty() && s.back() == ' ') s.pop_back();
    while (!s.empty() && s.front() == ' ') s.erase(s.begin());
    return s;
  };
  for (const auto& it : items) hits += trim(trainer_greedy(tm, tok, it.prompt, 4)) == it.answer;
  EXPECT_DOUBLE_EQ(e.tasks[0].base, hits / 6.0);
  EXPECT_TRUE(e.tasks[0].right.empty());  // no addition expert in this bank
  EXPECT_EQ(e.tasks[0].wrong, "quotes");
  EXPECT_EQ(perplexity_table(e).rows().size(), 3u);  // unigram, base, quotes

  // An adapter of another base is named.
  o.experts = {{"wrong", base}};
  EXPECT_THROW(evaluate_experts(o), Error);
}

TEST(Samples, ContinueRealDocumentsAndStopOnlyAtEosOrTheLimit) {
  SampleOptions o;
  o.model = base_model();
  o.data_dir = data_dir();
  o.per_domain = 3;
  o.prompt_tokens = 2;
  o.max_new = 6;
  const auto a = sample_domains(o);
  ASSERT_EQ(a.size(), data::domain_names().size());
  int eos_total = 0;
  for (size_t d = 0; d < a.size(); ++d) {
    EXPECT_EQ(a[d].domain, data::domain_names()[d]);
    ASSERT_EQ(a[d].examples.size(), 3u);
    std::vector<double> lens;
    int64_t eos = 0;
    for (const auto& e : a[d].examples) {
      // Generation stops at EOS (fewer tokens than the limit) or exactly at the limit.
      if (e.eos)
        EXPECT_LT(e.n_generated, 6);
      else
        EXPECT_EQ(e.n_generated, 6);
      eos += e.eos;
      lens.push_back(static_cast<double>(e.n_generated));
    }
    eos_total += static_cast<int>(eos);
    EXPECT_EQ(a[d].ended_with_eos, eos);
    EXPECT_EQ(a[d].median_generated, median(lens));
    // Every fixture document starts with its domain's name and has 7 to 26 words.
    const std::string& p = a[d].examples[0].prompt;
    EXPECT_TRUE(!p.empty() && (a[d].domain.rfind(p, 0) == 0 || p.rfind(a[d].domain, 0) == 0)) << p;
    EXPECT_GT(a[d].median_document, 4.0);
  }
  const auto b = sample_domains(o);  // seeded: the same texts again
  for (size_t d = 0; d < a.size(); ++d)
    for (size_t i = 0; i < 3; ++i)
      EXPECT_EQ(a[d].examples[i].continuation, b[d].examples[i].continuation);
  EXPECT_NE(samples_markdown(a, 1).find("## quotes"), std::string::npos);
}

}  // namespace
}  // namespace cln::eval
