// The optimizer, the schedule, checkpoints that resume bit for bit, the GGUF the trainer
// writes, and the clear stops on bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "clone/core/error.h"
#include "clone/engine/context.h"
#include "clone/engine/lora.h"
#include "clone/engine/model.h"
#include "clone/gguf/gguf.h"
#include "clone/tokenizer/tokenizer.h"
#include "clone/train/expert_eval.h"
#include "clone/train/samples.h"
#include "clone/train/trainer.h"
#include "fixture.h"

namespace cln::train {
namespace {
namespace fs = std::filesystem;

const std::string& data_dir() {
  static const std::string d = testing::tiny_data("data");
  return d;
}

BaseTrainOptions tiny_options(const std::string& out) {
  BaseTrainOptions o;
  o.data_dir = data_dir();
  o.out_dir = out;
  o.n_embd = 16;
  o.n_layer = 2;
  o.n_head = 2;
  o.n_head_kv = 1;
  o.n_ff = 24;
  o.batch = 2;
  o.seq_len = 16;
  o.sched.steps = 6;
  o.sched.warmup = 2;
  o.sched.lr = 3e-3;
  o.ckpt_every = 3;
  o.eval_every = 3;
  o.eval_windows = 2;
  o.test_tokens = 64;
  o.threads = 2;
  o.verbose = false;
  return o;
}

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// loss.csv without its last column (tokens/s varies from run to run)
std::string csv_without_speed(const std::string& p) {
  std::istringstream in(slurp(p));
  std::string line, out;
  while (std::getline(in, line)) out += line.substr(0, line.rfind(',')) + "\n";
  return out;
}

TEST(Schedule, WarmupPeakAndCosineFloor) {
  Schedule s;
  s.lr = 1.0;
  s.warmup = 10;
  s.steps = 110;
  s.min_lr_ratio = 0.1;
  EXPECT_DOUBLE_EQ(s.at(0), 0.1);
  EXPECT_DOUBLE_EQ(s.at(9), 1.0);
  EXPECT_DOUBLE_EQ(s.at(10), 1.0);
  EXPECT_NEAR(s.at(60), 0.55, 1e-12);
  EXPECT_NEAR(s.at(110), 0.1, 1e-12);
  EXPECT_LT(s.at(80), s.at(70));
}

TEST(AdamW, MinimizesAQuadraticAndClips) {
  TensorP w = make_param("w", {4, 3});
  for (int64_t i = 0; i < w->numel(); ++i) w->data()[i] = static_cast<float>(i) - 5.0f;
  AdamWConfig c;
  c.weight_decay = 0;
  c.clip = 1.0;
  AdamW opt({w}, c);
  std::vector<float> target(12, 0.5f);
  double first = 0, last = 0, first_norm = 0;
  for (int s = 0; s < 300; ++s) {
    Graph g(nullptr);
    TensorP loss = op::mse(g, w, target);
    g.backward(loss);
    const double n = opt.step(0.05);
    if (s == 0) first = loss->data()[0], first_norm = n;
    last = loss->data()[0];
  }
  EXPECT_GT(first_norm, 1.0);  // clipping was active
  EXPECT_LT(last, 1e-3 * first);
}

TEST(AdamW, NanGradientStopsBeforeAnyUpdate) {
  TensorP w = make_param("blk.0.attn_q.weight", {2, 2});
  w->grad()[1] = std::nanf("");
  AdamW opt({w}, AdamWConfig{});
  try {
    opt.step(0.1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("blk.0.attn_q.weight"), std::string::npos);
  }
  for (int i = 0; i < 4; ++i) EXPECT_EQ(w->data()[i], 0.0f);
}

TEST(WindowSampler, SameStepSameBatch) {
  WindowSampler s;
  std::vector<uint16_t> a(100), b(50);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint16_t>(i);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint16_t>(1000 + i);
  s.add("a", a, 1.0);
  s.add("b", b, 3.0);
  std::vector<int32_t> t1, g1, t2, g2, t3, g3;
  s.batch(7, 5, 8, 10, &t1, &g1);
  s.batch(7, 5, 8, 10, &t2, &g2);
  s.batch(7, 6, 8, 10, &t3, &g3);
  EXPECT_EQ(t1, t2);
  EXPECT_NE(t1, t3);
  for (size_t i = 0; i < t1.size(); ++i) EXPECT_EQ(g1[i], t1[i] + 1);  // shifted by one
}

TEST(Train, ResumeRepeatsTheLossCurveBitForBit) {
  const std::string a = testing::temp_dir("full"), b = testing::temp_dir("resumed");
  const TrainReport full = train_base(tiny_options(a));
  ASSERT_EQ(full.losses.size(), 6u);
  EXPECT_LT(full.losses.back(), full.losses.front());

  BaseTrainOptions first = tiny_options(b);
  first.stop_after = 3;
  const TrainReport r1 = train_base(first);
  ASSERT_EQ(r1.last_step, 3);
  EXPECT_FALSE(fs::exists(fs::path(b) / "model.gguf"));
  const TrainReport r2 = train_base(tiny_options(b));  // a new run: resumes from step 3
  EXPECT_EQ(r2.first_step, 3);
  ASSERT_EQ(r2.losses.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(r1.losses[i], full.losses[i]);
    EXPECT_EQ(r2.losses[i], full.losses[i + 3]) << "step " << i + 3;
  }
  EXPECT_EQ(csv_without_speed(a + "/loss.csv"), csv_without_speed(b + "/loss.csv"));
  EXPECT_EQ(slurp(a + "/model.gguf"), slurp(b + "/model.gguf"));
  EXPECT_TRUE(fs::exists(fs::path(a) / "perplexity.md"));

  // Resuming with another shape names the difference and leaves the checkpoint alone.
  const std::string before = slurp(b + "/checkpoint.bin");
  BaseTrainOptions wrong = tiny_options(b);
  wrong.n_ff = 32;
  try {
    train_base(wrong);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("another shape"), std::string::npos) << e.what();
  }
  EXPECT_EQ(before, slurp(b + "/checkpoint.bin"));
}

TEST(Train, WrittenGgufLoadsInTheEngineWithTheTokenizer) {
  const std::string out = testing::temp_dir("gguf");
  train_base(tiny_options(out));
  auto f = GgufFile::open(out + "/model.gguf");
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  const ModelConfig c = ModelConfig::from_gguf(*f);
  EXPECT_EQ(c.n_layer(), 2);
  EXPECT_EQ(c.n_embd, 16);
  EXPECT_EQ(c.layers[0].n_head_kv, 1);
  EXPECT_EQ(c.n_vocab, 300);
  const Tokenizer tok = Tokenizer::from_gguf(*f);
  EXPECT_EQ(tok.n_vocab(), 300);
  auto m = Model::load(out + "/model.gguf");
  EXPECT_EQ(m->config().n_params(), c.n_params());
  // Weights round-trip exactly.
  const LlamaModel back = LlamaModel::from_gguf(*f);
  const GgufTensorInfo* q = f->find_tensor("blk.1.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->ne, (std::vector<int64_t>{16, 16}));
  EXPECT_EQ(back.find("blk.1.attn_q.weight")->numel(), 256);
}

// The trainer's forward and the engine's agree on the GGUF the trainer writes: same
// tensor layout, same RoPE pairing, same GQA grouping; LoRA adapters too.
TEST(Train, EngineComputesTheSameLogitsFromTheWrittenGguf) {
  const std::string dir = testing::temp_dir("engine");
  const ModelConfig c = llama_shape(300, 32, 2, 4, 2, 40, 32);
  LlamaModel m = LlamaModel::init(c, 9);
  for (const TensorP& p : m.params()) {
    Rng r(std::hash<std::string>{}(p->name));
    for (int64_t i = 0; i < p->numel(); ++i) p->data()[i] += static_cast<float>(r.normal() * 0.05);
  }
  m.add_lora(4, 8.0f, {"q", "k", "v", "o", "gate", "up", "down"}, 2);
  for (const TensorP& p : m.lora_params()) {
    Rng r(std::hash<std::string>{}(p->name));
    for (int64_t i = 0; i < p->numel(); ++i) p->data()[i] += static_cast<float>(r.normal() * 0.05);
  }
  const Vocab v = vocab_from_sentencepiece(data_dir() + "/tokenizer.model");
  m.write_gguf(dir + "/m.gguf", v);
  m.write_lora_gguf(dir + "/a.gguf", "test");
  std::vector<int32_t> tok = {1, 17, 250, 3, 99, 4, 18, 2, 7, 120, 11, 5};
  const int64_t n = static_cast<int64_t>(tok.size());

  auto compare = [&](const std::span<const float> engine, bool with_lora) {
    LlamaModel same = m;  // shares the tensors
    Graph g(nullptr);
    g.grad_enabled = false;
    if (!with_lora) {
      LlamaModel base = LlamaModel::from_gguf(*GgufFile::open(dir + "/m.gguf"));
      TensorP y = base.forward(g, tok, 1, n);
      double mx = 0, diff = 0;
      for (int64_t i = 0; i < y->numel(); ++i) {
        mx = std::max(mx, std::fabs(double{y->data()[i]}));
        diff = std::max(diff, std::fabs(double{y->data()[i]} - engine[static_cast<size_t>(i)]));
      }
      EXPECT_LE(diff, 1e-4 * mx) << "base logits";
    } else {
      TensorP y = same.forward(g, tok, 1, n);
      double mx = 0, diff = 0;
      for (int64_t i = 0; i < y->numel(); ++i) {
        mx = std::max(mx, std::fabs(double{y->data()[i]}));
        diff = std::max(diff, std::fabs(double{y->data()[i]} - engine[static_cast<size_t>(i)]));
      }
      EXPECT_LE(diff, 1e-4 * mx) << "logits with LoRA";
    }
  };
  auto model = Model::load(dir + "/m.gguf");
  ContextParams cp;
  cp.n_threads = 1;
  Context ctx(model, cp);
  const auto base_logits = ctx.eval(tok, true);
  ASSERT_EQ(static_cast<int64_t>(base_logits.size()), n * 300);
  compare(std::vector<float>(base_logits.begin(), base_logits.end()), false);
  ctx.reset();
  ctx.set_loras({ActiveLora{LoraAdapter::load(dir + "/a.gguf", *model), 1.0f}});
  const auto lora_logits = ctx.eval(tok, true);
  compare(std::vector<float>(lora_logits.begin(), lora_logits.end()), true);
}

TEST(Train, TokenizerThatDoesNotMatchStops) {
  const std::string other = testing::tiny_data("other", 320);
  BaseTrainOptions o = tiny_options(testing::temp_dir("mismatch"));
  o.tokenizer = other + "/tokenizer.model";
  try {
    train_base(o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("another tokenizer"), std::string::npos) << e.what();
  }
}

TEST(Train, DivergingLossStopsAndKeepsTheCheckpoint) {
  const std::string out = testing::temp_dir("nan");
  BaseTrainOptions o = tiny_options(out);
  o.sched.lr = 1e30;
  o.sched.warmup = 0;
  o.sched.steps = 20;
  o.ckpt_every = 1;
  o.eval_every = 0;
  o.adam.clip = 0;
  try {
    train_base(o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_TRUE(m.find("NaN") != std::string::npos || m.find("nan") != std::string::npos ||
                m.find("inf") != std::string::npos)
        << m;
  }
  // the last checkpoint still loads
  const ModelConfig c = llama_shape(300, 16, 2, 2, 1, 24, 16);
  LlamaModel m = LlamaModel::init(c, 1);
  AdamW opt(m.params(), AdamWConfig{});
  EXPECT_GE(load_checkpoint(out + "/checkpoint.bin", opt, nullptr), 1);
}

TEST(Data, DomainWithoutDocumentsStops) {
  const std::string dir = testing::temp_dir("empty");
  fs::copy(data_dir(), dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  testing::write_docs(dir + "/corpus/quotes/valid.jsonl", {});
  try {
    encode_corpora(dir, dir + "/tokenizer.model", false);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no valid documents"), std::string::npos) << e.what();
  }
}

TEST(Lora, TaskBatchTrainsOnAnswersOnly) {
  // items: BOS prompt answer EOS; prompt_len counts BOS and the prompt
  const std::vector<std::vector<int32_t>> items = {{1, 10, 11, 12, 2}, {1, 20, 21, 2}};
  const std::vector<int32_t> plen = {3, 2};
  std::vector<int32_t> tok, tgt;
  task_batch(items, plen, 3, 0, 4, 12, 2, &tok, &tgt);
  for (size_t i = 0; i < tok.size(); ++i) {
    if (tgt[i] < 0) continue;
    // every target is an answer token or EOS, and follows its own item's previous token
    EXPECT_TRUE(tgt[i] == 12 || tgt[i] == 2 || tgt[i] == 21) << i;
    if (tgt[i] == 12) {
      EXPECT_EQ(tok[i], 11);
    }
    if (tgt[i] == 21) {
      EXPECT_EQ(tok[i], 20);
    }
  }
  int answers = 0;
  for (int32_t t : tgt) answers += t == 12 || t == 21;
  EXPECT_GE(answers, 4);
}

TEST(Lora, TrainsOnAFrozenBaseAndWritesAnAdapterTheEngineLoads) {
  const std::string out = testing::temp_dir("lora");
  train_base(tiny_options(out));
  const std::string base = out + "/model.gguf";
  fs::create_directories(data_dir() + "/tasks/arithmetic");
  {
    std::ofstream f(data_dir() + "/tasks/arithmetic/train.jsonl");
    for (int a = 0; a < 10; ++a)
      f << nlohmann::json{{"prompt", std::to_string(a) + "+1="}, {"answer", std::to_string(a + 1)}}
               .dump()
        << "\n";
  }
  for (const char* which : {"domain", "task"}) {
    LoraTrainOptions o;
    o.base = base;
    o.data_dir = data_dir();
    (std::string(which) == "domain" ? o.domain : o.task) =
        std::string(which) == "domain" ? "code" : "arithmetic";
    o.out = out + "/" + which + ".gguf";
    o.rank = 2;
    o.batch = 2;
    o.seq_len = 16;
    o.sched = Schedule{1e-2, 2, 12, 0.1};
    o.verbose = false;
    const TrainReport r = train_lora(o);
    ASSERT_EQ(r.losses.size(), 12u);
    EXPECT_LT(r.losses.back(), r.losses.front()) << which;
    auto model = Model::load(base);
    auto adapter = LoraAdapter::load(o.out, *model);
    EXPECT_EQ(adapter->rank(), 2);
    EXPECT_FLOAT_EQ(adapter->alpha(), 16.0f);
    EXPECT_NE(adapter->find("blk.1.ffn_down.weight"), nullptr);
  }
}

LoraTrainOptions tiny_lora(const std::string& base, const std::string& out) {
  LoraTrainOptions o;
  o.base = base;
  o.data_dir = data_dir();
  o.domain = "quotes";
  o.out = out;
  o.rank = 2;
  o.batch = 2;
  o.seq_len = 16;
  o.sched = Schedule{1e-2, 2, 8, 0.1};
  o.ckpt_every = 4;
  o.verbose = false;
  return o;
}

TEST(Lora, ResumeRepeatsTheLossCurveAndTheAdapterBitForBit) {
  const std::string dir = testing::temp_dir("lora-resume");
  train_base(tiny_options(dir + "/base"));
  const std::string base = dir + "/base/model.gguf";
  const TrainReport full = train_lora(tiny_lora(base, dir + "/full.gguf"));
  ASSERT_EQ(full.losses.size(), 8u);

  LoraTrainOptions first = tiny_lora(base, dir + "/resumed.gguf");
  first.stop_after = 3;
  const TrainReport r1 = train_lora(first);
  ASSERT_EQ(r1.last_step, 3);
  EXPECT_FALSE(fs::exists(dir + "/resumed.gguf"));
  const TrainReport r2 = train_lora(tiny_lora(base, dir + "/resumed.gguf"));
  EXPECT_EQ(r2.first_step, 3);
  ASSERT_EQ(r2.losses.size(), 5u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(r1.losses[i], full.losses[i]);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(r2.losses[i], full.losses[i + 3]) << "step " << i + 3;
  EXPECT_EQ(csv_without_speed(dir + "/full.train/loss.csv"),
            csv_without_speed(dir + "/resumed.train/loss.csv"));
  EXPECT_EQ(slurp(dir + "/full.gguf"), slurp(dir + "/resumed.gguf"));

  // A checkpoint of another run (here another domain) names the difference, untouched.
  const std::string before = slurp(dir + "/resumed.train/checkpoint.bin");
  LoraTrainOptions other = tiny_lora(base, dir + "/resumed.gguf");
  other.domain = "code";
  try {
    train_lora(other);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("domain"), std::string::npos) << e.what();
  }
  EXPECT_EQ(before, slurp(dir + "/resumed.train/checkpoint.bin"));
}

TEST(ExpertEval, EngineTablesAgreeWithTheTrainerAndScoreTasksExactly) {
  const std::string dir = testing::temp_dir("expert-eval");
  BaseTrainOptions bo = tiny_options(dir + "/base");
  train_base(bo);
  const std::string base = dir + "/base/model.gguf";
  LoraTrainOptions lo = tiny_lora(base, dir + "/quotes.gguf");
  lo.sched = Schedule{3e-2, 2, 30, 0.1};
  train_lora(lo);
  fs::create_directories(data_dir() + "/tasks/arithmetic");
  {
    std::ofstream f(data_dir() + "/tasks/arithmetic/test.jsonl");
    for (int a = 0; a < 6; ++a)
      f << nlohmann::json{{"prompt", std::to_string(a) + "+1="}, {"answer", std::to_string(a + 1)}}
               .dump()
        << "\n";
  }
  ExpertEvalOptions o;
  o.base = base;
  o.data_dir = data_dir();
  o.experts = {{"quotes", dir + "/quotes.gguf"}};
  o.tasks = {"arithmetic"};
  o.seq_len = 16;
  o.max_tokens = 64;
  o.task_items = 4;
  o.max_new = 4;
  o.verbose = false;
  const ExpertEval e = evaluate_experts(o);
  ASSERT_EQ(e.domains, domain_names());
  ASSERT_EQ(e.models, (std::vector<std::string>{"base", "quotes"}));

  // The engine's base row equals the trainer's own perplexity over the same windows.
  const LlamaModel m = LlamaModel::from_gguf(*GgufFile::open(base));
  const auto rows = domain_perplexity(m, data_dir(), "test", 16, 64, 1);
  for (size_t d = 0; d < rows.size(); ++d) {
    EXPECT_NEAR(e.ppl[0][d], rows[d].model_ppl, 1e-4 * rows[d].model_ppl) << rows[d].domain;
    EXPECT_NEAR(e.unigram[d], rows[d].unigram_ppl, 1e-9 * rows[d].unigram_ppl);
    EXPECT_EQ(e.tokens[d], rows[d].tokens);
  }
  // The expert was trained on quotes: it must beat the base there.
  const auto q = static_cast<size_t>(std::find(e.domains.begin(), e.domains.end(), "quotes") -
                                     e.domains.begin());
  EXPECT_LT(e.ppl[1][q], e.ppl[0][q]);
  ASSERT_EQ(e.tasks.size(), 1u);
  EXPECT_EQ(e.tasks[0].items, 4);
  EXPECT_GE(e.tasks[0].base, 0.0);
  EXPECT_LE(e.tasks[0].base, 1.0);
  EXPECT_TRUE(e.tasks[0].right.empty());  // no arithmetic expert in this bank
  EXPECT_EQ(e.tasks[0].wrong, "quotes");
  const Table t = perplexity_table(e);
  EXPECT_EQ(t.rows().size(), 3u);  // unigram, base, quotes
  EXPECT_EQ(task_table(e).rows().size(), 1u);

  // An adapter of another base is named.
  o.experts = {{"wrong", base}};
  EXPECT_THROW(evaluate_experts(o), Error);
}

TEST(Samples, ContinueRealDocumentsAndCountStops) {
  const std::string dir = testing::temp_dir("samples");
  train_base(tiny_options(dir));
  SampleOptions o;
  o.model = dir + "/model.gguf";
  o.data_dir = data_dir();
  o.per_domain = 3;
  o.prompt_tokens = 2;
  o.max_new = 6;
  const auto a = sample_domains(o);
  ASSERT_EQ(a.size(), domain_names().size());
  for (size_t d = 0; d < a.size(); ++d) {
    EXPECT_EQ(a[d].domain, domain_names()[d]);
    EXPECT_EQ(a[d].n, 3);
    ASSERT_EQ(a[d].examples.size(), 3u);
    EXPECT_LE(a[d].ended_with_eos, 3);
    EXPECT_LE(a[d].median_generated, 6.0);
    // Every fixture document starts with its domain's name and has 7 to 26 words.
    const std::string& p = a[d].examples[0].prompt;
    EXPECT_TRUE(!p.empty() && (a[d].domain.rfind(p, 0) == 0 || p.rfind(a[d].domain, 0) == 0)) << p;
    EXPECT_GT(a[d].median_document, 4.0);
    for (const auto& e : a[d].examples) EXPECT_TRUE(e.eos || !e.continuation.empty());
  }
  const auto b = sample_domains(o);  // seeded: the same texts again
  for (size_t d = 0; d < a.size(); ++d)
    for (size_t i = 0; i < 3; ++i)
      EXPECT_EQ(a[d].examples[i].continuation, b[d].examples[i].continuation);
  EXPECT_EQ(eos_table(a).rows().size(), a.size());
  EXPECT_NE(samples_markdown(a, 1).find("## quotes"), std::string::npos);
}

TEST(Flops, CountsMatricesAndCausalAttention) {
  const ModelConfig c = llama_shape(100, 8, 1, 2, 1, 16, 4);
  // matrices: q 8x8, k 4x8, v 4x8, o 8x8, 3 x 16x8, head 100x8
  const double matrix = 64 + 32 + 32 + 64 + 3 * 128 + 800;
  const double attn = 3.0 * 2.0 * 2 * (4.0 * 5 / 2) * (4 + 4);
  EXPECT_DOUBLE_EQ(train_step_flops(c, 1, 4), 6.0 * matrix * 4 + attn);
}

}  // namespace
}  // namespace cln::train
