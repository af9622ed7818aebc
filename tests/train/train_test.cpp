// The optimizer, the schedule, checkpoints that resume bit for bit, the GGUF the trainer
// writes, and the clear stops on bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "clone/core/error.h"
#include "clone/core/rng.h"
#include "clone/data/corpus.h"
#include "clone/data/token_file.h"
#include "clone/data/tokenizer_train.h"
#include "clone/engine/context.h"
#include "clone/engine/lora.h"
#include "clone/engine/model.h"
#include "clone/eval/nll.h"
#include "clone/gguf/gguf.h"
#include "clone/tokenizer/tokenizer.h"
#include "clone/train/batches.h"
#include "clone/train/checkpoint.h"
#include "clone/train/trainer.h"
#include "data/fixture.h"
#include "util/expect_error.h"

namespace cln::train {
namespace {
namespace fs = std::filesystem;
namespace testing = data::testing;

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

using data::testing::slurp;
using test_util::expect_error;

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
  // The first gradient of mean((w - 0.5)^2) is (w - 0.5) / 6 with w - 0.5 = -5.5 .. 5.5:
  // its norm is sqrt(143) / 6 = 1.993, above the clip of 1.
  EXPECT_NEAR(first_norm, std::sqrt(143.0) / 6.0, 1e-6);
  EXPECT_LT(last, 1e-3 * first);
}

// Two AdamW steps against the update written out here in double: clipping scales the
// gradient by clip / norm, decoupled weight decay shrinks matrices only, bias-corrected
// moments.
TEST(AdamW, TwoStepsEqualTheUpdateByHand) {
  TensorP w = make_param("w", {2, 2});
  TensorP n = make_param("norm", {2});
  const float w0[4] = {0.5f, -1.0f, 2.0f, 0.25f}, n0[2] = {1.0f, -0.5f};
  std::copy(w0, w0 + 4, w->data());
  std::copy(n0, n0 + 2, n->data());
  AdamWConfig c;  // beta 0.9 / 0.95, eps 1e-8, decay 0.1, clip 1
  AdamW opt({w, n}, c);
  const std::vector<std::vector<float>> grads = {{3.0f, -1.0f, 0.5f, 2.0f, 1.5f, -0.25f},
                                                 {0.2f, 0.1f, -0.3f, 0.05f, 0.0f, 0.4f}};
  std::vector<double> p(w0, w0 + 4), m(6, 0), v(6, 0);
  p.insert(p.end(), n0, n0 + 2);
  const double lr[2] = {0.1, 0.05};
  for (int t = 0; t < 2; ++t) {
    const std::vector<float>& g = grads[static_cast<size_t>(t)];
    for (int i = 0; i < 4; ++i) w->grad()[i] = g[static_cast<size_t>(i)];
    for (int i = 0; i < 2; ++i) n->grad()[i] = g[static_cast<size_t>(4 + i)];
    opt.step(lr[t]);
    double norm = 0;
    for (float x : g) norm += double{x} * x;
    norm = std::sqrt(norm);
    const double scale = norm > 1.0 ? 1.0 / norm : 1.0;
    for (size_t i = 0; i < 6; ++i) {
      const double gi = g[i] * scale;
      m[i] = 0.9 * m[i] + 0.1 * gi;
      v[i] = 0.95 * v[i] + 0.05 * gi * gi;
      const double mh = m[i] / (1 - std::pow(0.9, t + 1)), vh = v[i] / (1 - std::pow(0.95, t + 1));
      if (i < 4) p[i] -= lr[t] * 0.1 * p[i];  // decay: the matrix only
      p[i] -= lr[t] * mh / (std::sqrt(vh) + 1e-8);
    }
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(w->data()[i], p[static_cast<size_t>(i)], 2e-6) << t;
    for (int i = 0; i < 2; ++i) EXPECT_NEAR(n->data()[i], p[static_cast<size_t>(4 + i)], 2e-6) << t;
  }
}

TEST(AdamW, NanGradientStopsBeforeAnyUpdate) {
  TensorP w = make_param("blk.0.attn_q.weight", {2, 2});
  w->grad()[1] = std::nanf("");
  AdamW opt({w}, AdamWConfig{});
  expect_error([&] { opt.step(0.1); }, "blk.0.attn_q.weight");
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
  // Each row is a contiguous window of one stream, and over many steps the streams are
  // drawn by weight: b three times as often as a.
  int64_t from_b = 0, rows = 0;
  for (int64_t step = 0; step < 500; ++step) {
    s.batch(7, step, 8, 10, &t1, &g1);
    for (int64_t r = 0; r < 8; ++r) {
      const int32_t first = t1[static_cast<size_t>(r * 10)];
      for (int64_t i = 1; i < 10; ++i) ASSERT_EQ(t1[static_cast<size_t>(r * 10 + i)], first + i);
      const bool b_row = first >= 1000;
      ASSERT_LE(first + 10, b_row ? 1049 : 99);  // the window and its last target fit
      from_b += b_row;
      ++rows;
    }
  }
  EXPECT_NEAR(static_cast<double>(from_b) / static_cast<double>(rows), 0.75, 0.02);
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
  expect_error([&] { train_base(wrong); }, "another shape");
  EXPECT_EQ(before, slurp(b + "/checkpoint.bin"));
}

TEST(Train, ResumeWithAnotherStepCountRetargetsTheSchedule) {
  const std::string dir = testing::temp_dir("retarget");
  BaseTrainOptions first = tiny_options(dir);
  first.stop_after = 3;
  train_base(first);
  BaseTrainOptions longer = tiny_options(dir);
  longer.sched.steps = 9;  // a run extended while validation still falls
  longer.verbose = true;   // train.log is the verbose log
  const TrainReport r = train_base(longer);
  EXPECT_EQ(r.first_step, 3);
  EXPECT_EQ(r.last_step, 9);
  ASSERT_EQ(r.losses.size(), 6u);
  // The lr column follows the 9-step schedule from step 3 on, and the log says where.
  std::ifstream csv(dir + "/loss.csv");
  std::string line;
  std::getline(csv, line);
  for (int64_t step = 0; std::getline(csv, line); ++step) {
    const double lr = std::stod(line.substr(line.find(',') + 1));
    const double want = step < 3 ? first.sched.at(step) : longer.sched.at(step);
    EXPECT_NEAR(lr, want, 1e-8 * want) << "step " << step;  // the CSV keeps 9 digits
  }
  EXPECT_NE(slurp(dir + "/train.log").find("resumed from"), std::string::npos);
  EXPECT_NE(slurp(dir + "/train.log").find("at step 3 of 9"), std::string::npos);
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
  // The parameter count is the file's tensors' element count: embedding and head 300 x 16
  // each, per layer 2 norms of 16, q and o 16 x 16, k and v 8 x 16, gate/up/down 24 x 16.
  int64_t in_file = 0;
  for (const auto& t : f->tensors()) in_file += t.n_elements();
  EXPECT_EQ(in_file, 2 * 300 * 16 + 16 + 2 * (2 * 16 + 2 * 256 + 2 * 128 + 3 * 384));
  EXPECT_EQ(c.n_params(), in_file);
  // Weights round-trip exactly: written, read back, every value equal.
  LlamaModel m = LlamaModel::init(llama_shape(300, 16, 2, 2, 1, 24, 16), 77);
  m.write_gguf(out + "/rt.gguf", Tokenizer::from_gguf(*f).vocab());
  const LlamaModel back = LlamaModel::from_gguf(*GgufFile::open(out + "/rt.gguf"));
  ASSERT_EQ(back.params().size(), m.params().size());
  for (size_t k = 0; k < m.params().size(); ++k) {
    ASSERT_EQ(back.params()[k]->name, m.params()[k]->name);
    ASSERT_EQ(back.params()[k]->shape, m.params()[k]->shape);
    EXPECT_EQ(0, std::memcmp(back.params()[k]->data(), m.params()[k]->data(),
                             static_cast<size_t>(m.params()[k]->numel()) * 4))
        << m.params()[k]->name;
  }
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
  const Adapter& ad =
      m.add_lora("test", 4, 8.0f, {kAllLayerMatrices.begin(), kAllLayerMatrices.end()}, 2);
  for (const TensorP& p : ad.params()) {
    Rng r(std::hash<std::string>{}(p->name));
    for (int64_t i = 0; i < p->numel(); ++i) p->data()[i] += static_cast<float>(r.normal() * 0.05);
  }
  const Vocab v = data::vocab_from_sentencepiece(data_dir() + "/tokenizer.model");
  m.write_gguf(dir + "/m.gguf", v);
  m.write_lora_gguf(dir + "/a.gguf", ad);
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
  expect_error([&] { train_base(o); }, "another tokenizer");
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
  // The last checkpoint is the last step whose loss was finite, and its weights are finite.
  std::ifstream csv(out + "/loss.csv");
  std::string line;
  int64_t finite_steps = 0;
  std::getline(csv, line);
  while (std::getline(csv, line)) ++finite_steps;  // only finite losses are logged
  const ModelConfig c = llama_shape(300, 16, 2, 2, 1, 24, 16);
  LlamaModel m = LlamaModel::init(c, 1);
  AdamW opt(m.params(), AdamWConfig{});
  EXPECT_EQ(load_checkpoint(out + "/checkpoint.bin", opt, nullptr), finite_steps);
  for (const TensorP& p : m.params())
    for (int64_t i = 0; i < p->numel(); ++i) ASSERT_TRUE(std::isfinite(p->data()[i])) << p->name;
}

TEST(Data, DomainWithoutDocumentsStops) {
  const std::string dir = testing::temp_dir("empty");
  fs::copy(data_dir(), dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  testing::write_docs(dir + "/corpus/quotes/valid.jsonl", {});
  expect_error([&] { data::encode_corpora(dir, dir + "/tokenizer.model", false); },
               "no valid documents");
}

TEST(Lora, TaskBatchTrainsOnAnswersOnly) {
  // items: BOS prompt answer EOS; prompt_len counts BOS and the prompt. One item (5 tokens,
  // 4 of them inputs) fits twice in a row of 9 inputs, then the row is padded with EOS (2).
  const std::vector<std::vector<int32_t>> items = {{1, 10, 11, 12, 2}};
  const std::vector<int32_t> plen = {3};
  std::vector<int32_t> tok, tgt;
  task_batch(items, plen, 3, 0, 2, 9, 2, &tok, &tgt);
  const std::vector<int32_t> row_tok = {1, 10, 11, 12, 1, 10, 11, 12, 2};
  const std::vector<int32_t> row_tgt = {-1, -1, 12, 2, -1, -1, 12, 2, -1};
  ASSERT_EQ(tok.size(), 18u);
  for (size_t r = 0; r < 2; ++r)
    for (size_t i = 0; i < 9; ++i) {
      EXPECT_EQ(tok[r * 9 + i], row_tok[i]) << r << "," << i;
      EXPECT_EQ(tgt[r * 9 + i], row_tgt[i]) << r << "," << i;
    }
}

TEST(Lora, TrainsOnAFrozenBaseAndWritesAnAdapterTheEngineLoads) {
  const std::string out = testing::temp_dir("lora");
  train_base(tiny_options(out));
  const std::string base = out + "/model.gguf";
  fs::create_directories(data_dir() + "/tasks/addition");
  {
    std::ofstream f(data_dir() + "/tasks/addition/train.jsonl");
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
        std::string(which) == "domain" ? "code" : "addition";
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

// A deci model (per-layer heads, a layer without attention, one without an FFN, a tied
// head) with random weights and the fixture's tokenizer, written as the trainer writes.
std::string deci_base(const std::string& dir) {
  ModelConfig c;
  c.n_vocab = 300, c.n_embd = 16, c.n_ctx_train = 32, c.head_dim_k = c.head_dim_v = 4;
  c.tied_output = true;
  c.layers = {{4, 2, 24}, {0, 0, 20}, {2, 1, 0}};
  const LlamaModel m = LlamaModel::init(c, 3);
  const std::string path = dir + "/deci.gguf";
  m.write_gguf(path, data::vocab_from_sentencepiece(data_dir() + "/tokenizer.model"));
  return path;
}

// Fine-tuning `model` for 8 short steps into `out`, validated and tested only at the end.
FinetuneOptions tiny_finetune(const std::string& model, const std::string& out) {
  FinetuneOptions o;
  o.model = model;
  o.data_dir = data_dir();
  o.out_dir = out;
  o.batch = 2, o.seq_len = 16;
  o.sched = Schedule{1e-2, 2, 8, 0.1};
  o.eval_every = 0, o.eval_windows = 2, o.test_tokens = 0, o.ckpt_every = 4;
  o.threads = 2, o.verbose = false;
  return o;
}

TrainReport run_training(const FinetuneOptions& o) {
  return train_finetune(o);
}
TrainReport run_training(const BaseTrainOptions& o) {
  return train_base(o);
}

// The options of run `o` (fine-tuning or base training) stopped at step 4 in `out` (its
// checkpoint there), to be resumed with something changed.
template <class Options>
Options stopped_run(Options o, const std::string& out) {
  o.out_dir = out;
  o.stop_after = 4;
  run_training(o);
  o.stop_after = -1;
  return o;
}

TEST(Finetune, TrainsEveryWeightOfADeciModelAndKeepsItsShape) {
  const std::string dir = testing::temp_dir("finetune");
  const std::string src = deci_base(dir);
  FinetuneOptions o = tiny_finetune(src, dir + "/run");
  o.eval_every = 4, o.test_tokens = 32;
  FinetuneOptions first = o;
  first.stop_after = 5;
  const TrainReport r1 = train_finetune(first);
  EXPECT_EQ(r1.last_step, 5);
  const TrainReport r2 = train_finetune(o);  // resumes at step 5
  EXPECT_EQ(r2.first_step, 5);
  ASSERT_TRUE(r2.done);
  const auto in = GgufFile::open(src), out = GgufFile::open(dir + "/run/model.gguf");
  const ModelConfig a = ModelConfig::from_gguf(*in), b = ModelConfig::from_gguf(*out);
  EXPECT_EQ(b.arch, "deci");
  EXPECT_EQ(a.layers, b.layers);
  EXPECT_TRUE(b.tied_output);
  EXPECT_EQ(a.n_params(), b.n_params());
  // Every tensor was trained (norms included), and the engine runs the result.
  ASSERT_EQ(in->tensors().size(), out->tensors().size());
  for (const auto& t : in->tensors()) {
    const GgufTensorInfo* u = out->find_tensor(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    EXPECT_NE(0, std::memcmp(in->tensor_data(t), out->tensor_data(*u), t.nbytes)) << t.name;
  }
  EXPECT_TRUE(fs::exists(dir + "/run/perplexity.md"));
  EXPECT_NE(out->get_string("clone.training.run").find("\"model\":\"deci.gguf\""),
            std::string::npos);
}

// A teacher for distillation: a dense model of the same vocabulary whose tied embedding
// is scaled up, so its next-token distributions are sharp and far from a fresh model's.
std::string sharp_teacher(const std::string& dir) {
  ModelConfig c;
  c.n_vocab = 300, c.n_embd = 16, c.n_ctx_train = 32, c.head_dim_k = c.head_dim_v = 4;
  c.tied_output = true;
  c.layers = {{4, 2, 24}, {4, 2, 24}, {4, 2, 24}, {4, 2, 24}};
  const LlamaModel m = LlamaModel::init(c, 11);
  const TensorP e = m.find("token_embd.weight");
  for (int64_t i = 0; i < e->numel(); ++i) e->data()[i] *= 8.0f;
  const std::string path = dir + "/teacher.gguf";
  m.write_gguf(path, data::vocab_from_sentencepiece(data_dir() + "/tokenizer.model"));
  return path;
}

// A teacher whose tokenizer is another one (320 tokens, trained on data named `name`).
std::string foreign_teacher(const std::string& dir, const std::string& name) {
  const std::string other = testing::tiny_data(name, 320);
  ModelConfig c;
  c.n_vocab = 320, c.n_embd = 16, c.n_ctx_train = 32, c.head_dim_k = c.head_dim_v = 4;
  c.layers = {{4, 2, 24}};
  const std::string path = dir + "/other.gguf";
  LlamaModel::init(c, 1).write_gguf(path,
                                    data::vocab_from_sentencepiece(other + "/tokenizer.model"));
  return path;
}

// Run `o` again in `out`, distilled from `teacher` alone (KL only, no cross entropy).
template <class Options>
Options distilled(Options o, const std::string& out, const std::string& teacher) {
  o.out_dir = out;
  o.teacher = teacher;
  o.kd_weight = 1.0f;
  return o;
}

// KL(teacher || model) per token on a fixed batch of random tokens.
double kl_to_teacher(const std::string& teacher, const std::string& model) {
  const LlamaModel t = LlamaModel::from_gguf(*GgufFile::open(teacher));
  const LlamaModel m = LlamaModel::from_gguf(*GgufFile::open(model));
  Rng r(5);
  std::vector<int32_t> tokens(2 * 16);
  for (int32_t& v : tokens) v = static_cast<int32_t>(r.below(300));
  Graph g(nullptr);
  g.grad_enabled = false;
  return op::distill_cross_entropy(g, m.forward(g, tokens, 2, 16), t.forward(g, tokens, 2, 16),
                                   std::vector<int32_t>(tokens.size(), 0), 1.0f)
      ->data()[0];
}

TEST(Finetune, DistillationPullsThePrunedModelTowardsItsTeacher) {
  // The same run with and without the teacher: distillation leaves the model much closer
  // to the teacher than it started and than plain fine-tuning does.
  const std::string dir = testing::temp_dir("distill");
  const std::string src = deci_base(dir), teacher = sharp_teacher(dir);
  FinetuneOptions o = tiny_finetune(src, dir + "/ce");
  ASSERT_TRUE(train_finetune(o).done);
  const FinetuneOptions kd = distilled(o, dir + "/kd", teacher);
  ASSERT_TRUE(train_finetune(kd).done);
  const double before = kl_to_teacher(teacher, src);
  const double ce = kl_to_teacher(teacher, o.out_dir + "/model.gguf");
  const double distilled = kl_to_teacher(teacher, kd.out_dir + "/model.gguf");
  std::printf("KL(teacher || model): before %.4f, fine-tuned %.4f, distilled %.4f\n", before, ce,
              distilled);
  EXPECT_LT(distilled, 0.85 * before);
  EXPECT_LT(distilled, 0.75 * ce);
  const auto out = GgufFile::open(kd.out_dir + "/model.gguf");
  EXPECT_NE(out->get_string("general.description").find("distilled from teacher.gguf"),
            std::string::npos);
  EXPECT_NE(out->get_string("clone.training.run").find("\"kd_weight\":1.0"), std::string::npos)
      << out->get_string("clone.training.run");

  // A run resumed with another distillation weight stops and names the difference.
  FinetuneOptions half = stopped_run(kd, dir + "/kd-resume");
  half.kd_weight = 0.5f;
  expect_error([&] { train_finetune(half); }, "kd_weight");
}

TEST(Finetune, TeacherWithAnotherTokenizerStops) {
  const std::string dir = testing::temp_dir("distill-mismatch");
  FinetuneOptions o;
  o.model = deci_base(dir);
  o.teacher = foreign_teacher(dir, "other");
  o.data_dir = data_dir();
  o.out_dir = dir + "/run";
  o.verbose = false;
  expect_error([&] { train_finetune(o); }, "the teacher's tokenizer differs");
}

TEST(Train, DistilledFromTheFirstStepAModelFromScratchComesCloserToItsTeacher) {
  // The same run from random weights with and without a teacher (the strongest form of a
  // small model trained from scratch beside a pruned one: given the dense model's outputs
  // too): the distilled model ends much closer to the teacher.
  const std::string dir = testing::temp_dir("distill-base");
  const std::string teacher = sharp_teacher(dir);
  BaseTrainOptions o = tiny_options(dir + "/ce");
  o.sched = Schedule{1e-2, 2, 30, 0.1};
  o.eval_every = 0;
  ASSERT_TRUE(train_base(o).done);
  const BaseTrainOptions kd = distilled(o, dir + "/kd", teacher);
  ASSERT_TRUE(train_base(kd).done);
  const double ce = kl_to_teacher(teacher, o.out_dir + "/model.gguf");
  const double distilled = kl_to_teacher(teacher, kd.out_dir + "/model.gguf");
  std::printf("KL(teacher || model): trained %.4f, distilled %.4f\n", ce, distilled);
  EXPECT_LT(distilled, 0.75 * ce);
  const auto out = GgufFile::open(kd.out_dir + "/model.gguf");
  EXPECT_NE(out->get_string("general.description").find("distilled from teacher.gguf"),
            std::string::npos);
  EXPECT_NE(out->get_string("clone.training.run").find("\"teacher\":\"teacher.gguf\""),
            std::string::npos)
      << out->get_string("clone.training.run");

  // A checkpoint resumes only with its own teacher and weight: resumed with another weight,
  // without the teacher, or a plain run's checkpoint resumed with one, the run stops and
  // names the difference.
  const BaseTrainOptions stopped = stopped_run(kd, dir + "/kd-resume");
  BaseTrainOptions half = stopped;
  half.kd_weight = 0.5f;
  expect_error([&] { train_base(half); }, "kd_weight");
  BaseTrainOptions plain = stopped;
  plain.teacher.clear();
  expect_error([&] { train_base(plain); }, "teacher");
  BaseTrainOptions with = stopped_run(o, dir + "/ce-resume");
  with.teacher = teacher;
  expect_error([&] { train_base(with); }, "teacher");
}

TEST(Train, TeacherWithAnotherTokenizerStops) {
  const std::string dir = testing::temp_dir("distill-base-mismatch");
  BaseTrainOptions o = tiny_options(dir + "/run");
  o.teacher = foreign_teacher(dir, "other-base");
  expect_error([&] { train_base(o); }, "the teacher's tokenizer differs");
}

TEST(Lora, FoldedIntoTheWeightsTheAdaptersGiveTheSameLogits) {
  // Two adapters with weights on a deci model: the adapted forward (a low-rank path beside
  // each matrix) against a plain model whose weights had them folded in.
  ModelConfig c;
  c.n_vocab = 300, c.n_embd = 16, c.n_ctx_train = 32, c.head_dim_k = c.head_dim_v = 4;
  c.layers = {{4, 2, 24}, {0, 0, 20}, {2, 1, 0}};
  LlamaModel m = LlamaModel::init(c, 3);
  Adapter& a = m.add_lora("a", 2, 16.0f, {LayerMatrix::Q, LayerMatrix::Down}, 5, 0.7f);
  Adapter& b = m.add_lora("b", 3, 6.0f, {kAllLayerMatrices.begin(), kAllLayerMatrices.end()}, 6);
  Rng r(9);
  for (const Adapter* ad : {&a, &b})
    for (const TensorP& t : ad->params())  // B starts at zero: give it values
      for (int64_t i = 0; i < t->numel(); ++i) t->data()[i] = static_cast<float>(r.normal() * 0.1);
  LlamaModel folded = LlamaModel::init(c, 4);  // other weights, overwritten
  m.fold_adapters_into(folded);
  std::vector<int32_t> tokens(2 * 12);
  for (int32_t& v : tokens) v = static_cast<int32_t>(r.below(300));
  Graph g(nullptr);
  g.grad_enabled = false;
  const TensorP want = m.forward(g, tokens, 2, 12), got = folded.forward(g, tokens, 2, 12);
  const LlamaModel plain = LlamaModel::init(c, 3);  // the same base, no adapters
  const TensorP base = plain.forward(g, tokens, 2, 12);
  double diff = 0, moved = 0, scale = 0;
  for (int64_t i = 0; i < want->numel(); ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(want->data()[i] - got->data()[i])));
    moved = std::max(moved, static_cast<double>(std::abs(want->data()[i] - base->data()[i])));
    scale = std::max(scale, static_cast<double>(std::abs(want->data()[i])));
  }
  EXPECT_LT(diff, 1e-5 * scale + 1e-6);
  EXPECT_GT(moved, 100 * diff);  // the adapters change the logits: the check can fail
  ModelConfig shallower = c;
  shallower.layers.pop_back();
  LlamaModel other = LlamaModel::init(shallower, 1);
  expect_error([&] { m.fold_adapters_into(other); }, "another shape");
}

// The mean validation loss of a model file as the fine-tuning run computes it (every
// domain's valid split in `windows` even windows of seq_len, the mean over domains).
double valid_loss(const std::string& model_path, int64_t seq_len, int64_t windows) {
  const auto model = Model::load(model_path);
  const Tokenizer tok = Tokenizer::from_gguf(*GgufFile::open(model_path));
  Context ctx(model, {seq_len, 1, seq_len});
  double sum = 0;
  for (const std::string& name : data::domain_names()) {
    const data::TokenFile f = data::read_token_file(
        data::token_file_path(data_dir(), name, "valid"), tok.vocab(), model_path);
    const eval::Windows w =
        eval::even_windows(static_cast<int64_t>(f.tokens.size()), seq_len, windows);
    sum += eval::windowed_nll(ctx, std::span<const uint16_t>(f.tokens), w).mean_nll;
  }
  return sum / static_cast<double>(data::domain_names().size());
}

TEST(Finetune, LoraThenMergeFreezesTheModelAndWritesWhatItValidated) {
  const std::string dir = testing::temp_dir("finetune-lora");
  const std::string src = deci_base(dir);
  FinetuneOptions o = tiny_finetune(src, dir + "/run");
  o.lora_rank = 2;
  o.eval_every = 4;
  FinetuneOptions first = o;
  first.stop_after = 5;
  ASSERT_EQ(train_finetune(first).last_step, 5);
  const TrainReport r = train_finetune(o);  // resumes at step 5
  EXPECT_EQ(r.first_step, 5);
  ASSERT_TRUE(r.done);
  const std::string written = dir + "/run/model.gguf";
  const auto in = GgufFile::open(src), out = GgufFile::open(written);
  EXPECT_EQ(ModelConfig::from_gguf(*in).layers, ModelConfig::from_gguf(*out).layers);
  // Only the matrices moved (each by its adapter); norms and the embedding stayed frozen.
  ASSERT_EQ(in->tensors().size(), out->tensors().size());
  for (const auto& t : in->tensors()) {
    const GgufTensorInfo* u = out->find_tensor(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    const bool same = std::memcmp(in->tensor_data(t), out->tensor_data(*u), t.nbytes) == 0;
    const bool matrix = t.name.starts_with("blk.") && t.name.find("norm") == std::string::npos;
    EXPECT_EQ(same, !matrix) << t.name;
  }
  // The file is the model the run validated last (valid.csv's last step), not the source.
  std::istringstream csv(slurp(dir + "/run/valid.csv"));
  std::string line, last;
  while (std::getline(csv, line)) last = line;
  ASSERT_TRUE(last.starts_with("7,")) << last;  // steps count from 0
  const double logged = std::stod(last.substr(2));
  EXPECT_NEAR(valid_loss(written, o.seq_len, o.eval_windows), logged, 1e-5);
  EXPECT_GT(std::abs(valid_loss(src, o.seq_len, o.eval_windows) - logged), 1e-4);
  EXPECT_NE(out->get_string("general.description").find("rank-2 LoRA adapter, merged"),
            std::string::npos);
  // A run resumed with another rank, or as full fine-tuning, stops and names the difference.
  FinetuneOptions other = stopped_run(o, dir + "/resume");
  other.lora_rank = 3;
  expect_error([&] { train_finetune(other); }, "lora_rank");
  other.lora_rank = 0;  // the LoRA keys are in the checkpoint only
  expect_error([&] { train_finetune(other); }, "was written by a run with lora_");
}

TEST(Lora, TrainsOnADeciBaseAndAdaptsOnlyTheMatricesItHas) {
  const std::string dir = testing::temp_dir("lora-deci");
  const std::string base = deci_base(dir);
  LoraTrainOptions o;
  o.base = base;
  o.data_dir = data_dir();
  o.domain = "code";
  o.out = dir + "/code.gguf";
  o.rank = 2, o.batch = 2, o.seq_len = 16;
  o.sched = Schedule{1e-2, 2, 10, 0.1};
  o.verbose = false;
  const TrainReport r = train_lora(o);
  EXPECT_LT(r.losses.back(), r.losses.front());
  auto model = Model::load(base);
  auto adapter = LoraAdapter::load(o.out, *model);
  EXPECT_NE(adapter->find("blk.0.attn_q.weight"), nullptr);
  EXPECT_NE(adapter->find("blk.1.ffn_up.weight"), nullptr);
  EXPECT_EQ(adapter->find("blk.1.attn_q.weight"), nullptr);  // layer 1 has no attention
  EXPECT_EQ(adapter->find("blk.2.ffn_up.weight"), nullptr);  // layer 2 has no FFN
  // layers 0 and 2 with attention (4 matrices each), layers 0 and 1 with an FFN (3 each)
  EXPECT_EQ(adapter->pairs().size(), 4u + 4u + 3u + 3u);
  EXPECT_EQ(GgufFile::open(o.out)->get_string("general.architecture"), "deci");
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
  expect_error([&] { train_lora(other); }, "domain");
  EXPECT_EQ(before, slurp(dir + "/resumed.train/checkpoint.bin"));
}

}  // namespace
}  // namespace cln::train
