// Engine behaviour: prefill equals decode, the layer hook, LoRA on the fly against the
// merged model, quantization, and bad inputs failing with clear errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

#include "clone/core/error.h"
#include "clone/engine/context.h"
#include "clone/engine/sampler.h"
#include "test_util.h"

using namespace cln;

namespace {

std::shared_ptr<const Model> per_layer_model(DType t = DType::F32) {
  static std::map<DType, std::string> made;
  if (!made.count(t)) {
    ModelConfig c = test::per_layer_config();
    if (t != DType::F32 && t != DType::F16) c.head_dim_k = c.head_dim_v = 32;  // whole blocks
    made[t] = test::tmp_path(std::string("engine_") + std::string(dtype_name(t)) + ".gguf");
    init_model(c, {3, t, 0.08f}, nullptr, made[t]);
  }
  return Model::load(made[t]);
}

double max_abs_diff(std::span<const float> a, std::span<const float> b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i)
    d = std::max(d, static_cast<double>(std::fabs(a[i] - b[i])));
  return d;
}

const std::vector<int32_t> kToks = {1, 5, 77, 200, 13, 9, 150, 42, 8, 299, 4};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Engine, DecodeMatchesPrefill) {
  auto m = per_layer_model();
  const int64_t nv = m->config().n_vocab;
  Context a(m, {32, 2, 512}), b(m, {32, 2, 512});
  auto all = a.eval(kToks, true);
  std::vector<float> full(all.begin(), all.end());
  for (size_t t = 0; t < kToks.size(); ++t) {
    auto l = b.eval(std::span<const int32_t>(&kToks[t], 1));
    EXPECT_LT(max_abs_diff(l, std::span<const float>(full.data() + t * static_cast<size_t>(nv),
                                                     static_cast<size_t>(nv))),
              2e-5)
        << t;
  }
  // A prompt longer than one batch runs as several passes with the same result.
  Context c(m, {32, 2, 3});
  auto chunked = c.eval(kToks, true);
  EXPECT_LT(max_abs_diff(chunked, full), 2e-5);
}

TEST(Engine, HookSeesEveryLayerBoundary) {
  auto m = per_layer_model();
  Context ctx(m, {32, 2, 512});
  std::vector<LayerEvent> ev;
  ctx.set_hook([&](const LayerEvent& e) { ev.push_back(e); });
  ctx.eval(std::span<const int32_t>(kToks.data(), 4));
  const int32_t one[1] = {7};
  ctx.eval(one);
  const int32_t L = static_cast<int32_t>(m->config().n_layer());
  ASSERT_EQ(ev.size(), static_cast<size_t>(2 * (L + 1)));
  for (int32_t i = 0; i <= L; ++i) {
    EXPECT_EQ(ev[static_cast<size_t>(i)].phase, Phase::Prefill);
    EXPECT_EQ(ev[static_cast<size_t>(i)].layer, i);
    EXPECT_EQ(ev[static_cast<size_t>(i)].n_tokens, 4);
    EXPECT_EQ(ev[static_cast<size_t>(i)].pos, 0);
    const LayerEvent& d = ev[static_cast<size_t>(L + 1 + i)];
    EXPECT_EQ(d.phase, Phase::Decode);
    EXPECT_EQ(d.layer, i);
    EXPECT_EQ(d.n_layer, L);
    EXPECT_EQ(d.pos, 4);
    EXPECT_EQ(d.n_tokens, 1);
  }
}

TEST(Engine, LoraOnTheFlyEqualsMergedModel) {
  auto m = per_layer_model();
  const ModelConfig& c = m->config();
  const std::string p1 = test::random_adapter(
      c, {kAllLayerMatrices.begin(), kAllLayerMatrices.end()}, 8, 16.0f, 5, "eng_l1.gguf");
  const std::string p2 =
      test::random_adapter(c, {LayerMatrix::V, LayerMatrix::Down}, 4, 4.0f, 6, "eng_l2.gguf");
  auto l1 = LoraAdapter::load(p1, *m), l2 = LoraAdapter::load(p2, *m);
  EXPECT_EQ(l1->rank(), 8);
  EXPECT_FLOAT_EQ(l1->scale(), 2.0f);

  Context base(m, {32, 2, 512});
  std::vector<float> base_logits;
  {
    auto l = base.eval(kToks, true);
    base_logits.assign(l.begin(), l.end());
  }
  // Weight 0 is the base model.
  Context zero(m, {32, 2, 512});
  zero.set_loras({{l1, 0.0f}});
  EXPECT_EQ(max_abs_diff(zero.eval(kToks, true), base_logits), 0.0);

  std::vector<ActiveLora> mix = {{l1, 0.6f}, {l2, -0.4f}};
  Context fly(m, {32, 2, 512});
  fly.set_loras(mix);
  std::vector<float> fly_logits;
  {
    auto l = fly.eval(kToks, true);
    fly_logits.assign(l.begin(), l.end());
  }
  EXPECT_GT(max_abs_diff(fly_logits, base_logits), 1e-3);  // the experts change the output

  const std::string merged = test::tmp_path("eng_merged.gguf");
  merge_lora(*m, mix, merged);
  Context mc(Model::load(merged), {32, 2, 512});
  EXPECT_LT(max_abs_diff(mc.eval(kToks, true), fly_logits), 1e-4);

  // Switching experts between requests needs no reload: back to base gives base logits.
  fly.reset();
  fly.set_loras({});
  EXPECT_EQ(max_abs_diff(fly.eval(kToks, true), base_logits), 0.0);
}

TEST(Engine, QuantizedModelsMatchTheirDequantizedWeights) {
  // A quantized model must compute what an F32 model holding its dequantized weights
  // computes; what differs is only the optimized kernels' own rounding (activations
  // quantized to 8 bits for the integer dot products, as llama.cpp also does).
  auto m = per_layer_model();
  for (DType t : {DType::F16, DType::Q8_0, DType::Q4_0}) {
    const std::string name(dtype_name(t));
    const std::string p = test::tmp_path("eng_quant_" + name + ".gguf");
    const std::string back = test::tmp_path("eng_dequant_" + name + ".gguf");
    // Layer 3 has 3 heads of 16: its output projection's rows (48) are not whole blocks.
    EXPECT_EQ(quantize_model(m->gguf(), t, p), t == DType::F16 ? 0 : 1);
    auto q = Model::load(p);
    EXPECT_EQ(q->config().weight_type, t);
    EXPECT_EQ(q->layers[3][LayerMatrix::O].type, DType::F16);
    EXPECT_EQ(q->layers[0][LayerMatrix::Q].type, t);
    // The config records the matrix that fell back (the accounting counts its bytes so).
    if (t != DType::F16)
      EXPECT_EQ(q->config().type_overrides.at("blk.3.attn_output.weight"), DType::F16);
    else
      EXPECT_TRUE(q->config().type_overrides.empty());
    // Every stored weight is the original within its format's rounding: F16 to 2^-11
    // relative; Q8_0 to d/2 with d = amax/127 of its block of 32, plus |q| <= 127 times the
    // rounding of d itself to F16 (2^-11 d); Q4_0 to d = amax/8 (the clamp at +7 d can cost a
    // whole step) plus 8 times d's F16 rounding.
    for (const auto& ti : q->gguf().tensors()) {
      const GgufTensorInfo* to = m->gguf().find_tensor(ti.name);
      ASSERT_NE(to, nullptr) << ti.name;
      const int64_t cols = ti.ne[0], rows = ti.n_elements() / cols;
      std::vector<float> orig(static_cast<size_t>(cols)), deq(orig.size());
      for (int64_t r = 0; r < rows; ++r) {
        kernels::ref::dequantize_row(to->type, m->gguf().tensor_data(*to) + r * dtype_row_bytes(to->type, cols), orig.data(), cols);
        kernels::ref::dequantize_row(ti.type, q->gguf().tensor_data(ti) + r * dtype_row_bytes(ti.type, cols), deq.data(), cols);
        for (int64_t b = 0; b < cols; b += 32) {
          float amax = 0;
          for (int64_t j = b; j < std::min(cols, b + 32); ++j) amax = std::max(amax, std::fabs(orig[static_cast<size_t>(j)]));
          for (int64_t j = b; j < std::min(cols, b + 32); ++j) {
            const float o = orig[static_cast<size_t>(j)], d = deq[static_cast<size_t>(j)];
            const double bound = ti.type == DType::F32    ? 0.0
                                 : ti.type == DType::F16  ? std::fabs(o) * 0x1p-11 + 1e-7
                                 : ti.type == DType::Q8_0
                                     ? amax / 127.0 * (0.5 + 127 * 0x1p-11) * 1.001
                                     : amax / 8.0 * (1.0 + 8 * 0x1p-11) * 1.001;
            ASSERT_LE(std::fabs(o - d), bound) << name << " " << ti.name << " row " << r << " col " << j;
          }
        }
      }
    }
    quantize_model(q->gguf(), DType::F32, back);
    Context cq(q, {32, 2, 512}), cb(Model::load(back), {32, 2, 512});
    std::vector<float> ref;
    {
      auto l = cb.eval(kToks, true);
      ref.assign(l.begin(), l.end());
    }
    auto got = cq.eval(kToks, true);
    double se = 0, ss = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      se += (got[i] - ref[i]) * static_cast<double>(got[i] - ref[i]);
      ss += ref[i] * static_cast<double>(ref[i]);
    }
    // Relative RMS error. 8-bit activations round each value by up to 1/254 of its block's
    // largest magnitude; this random 5-layer model amplifies that to 1-2% of the logits
    // (measured), while a wrong block layout or scale gives errors of order 100%. The
    // tight check of the quantized paths is the golden perplexity (within 1%).
    const double rel = std::sqrt(se / ss);
    std::printf("%s: relative RMS difference %.2e\n", name.c_str(), rel);
    EXPECT_LT(rel, t == DType::F16 ? 1e-5 : 5e-2) << name;
  }
}

TEST(Engine, InitModelIsSeededWithTheAskedSpread) {
  ModelConfig c = test::per_layer_config();
  const std::string a = test::tmp_path("det_a.gguf"), b = test::tmp_path("det_b.gguf"),
                    other = test::tmp_path("det_c.gguf");
  init_model(c, {11, DType::F32, 0.02f}, nullptr, a);
  init_model(c, {11, DType::F32, 0.02f}, nullptr, b);
  init_model(c, {12, DType::F32, 0.02f}, nullptr, other);
  auto fa = GgufFile::open(a), fb = GgufFile::open(b), fc = GgufFile::open(other);
  for (const auto& t : fa->tensors()) {
    const auto* x = reinterpret_cast<const float*>(fa->tensor_data(t));
    const auto* y = reinterpret_cast<const float*>(fb->tensor_data(*fb->find_tensor(t.name)));
    const auto* z = reinterpret_cast<const float*>(fc->tensor_data(*fc->find_tensor(t.name)));
    int64_t same = 0, differ = 0;
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < t.n_elements(); ++i) {
      same += x[i] == y[i];
      differ += x[i] != z[i];
      sum += x[i], sq += double{x[i]} * x[i];
    }
    EXPECT_EQ(same, t.n_elements()) << t.name << ": the same seed gives the same weights";
    EXPECT_GT(differ, t.n_elements() * 9 / 10) << t.name << ": another seed, other weights";
    const double n = static_cast<double>(t.n_elements()), mean = sum / n;
    if (t.ne.size() == 2) {  // uniform with standard deviation 0.02
      EXPECT_NEAR(std::sqrt(sq / n - mean * mean), 0.02, 0.002) << t.name;
      EXPECT_NEAR(mean, 0.0, 0.002) << t.name;
    } else {  // norms: uniform in [0.8, 1.2)
      EXPECT_NEAR(mean, 1.0, 0.05) << t.name;
    }
  }
}

TEST(Engine, UniformModelsAreWrittenAsLlamaAndPerLayerAsDeci) {
  ModelConfig c = test::per_layer_config();
  const std::string p = test::tmp_path("arch_deci.gguf");
  init_model(c, {1, DType::F32, 0.02f}, nullptr, p);
  EXPECT_EQ(GgufFile::open(p)->get_string("general.architecture"), "deci");
  c.layers.assign(3, LayerShape{4, 2, 96});
  init_model(c, {1, DType::F32, 0.02f}, nullptr, p);
  auto m = Model::load(p);
  EXPECT_EQ(m->config().arch, "llama");
  EXPECT_EQ(m->config().layers, c.layers);
}

TEST(Engine, BadInputsFailClearly) {
  auto m = per_layer_model();
  Context ctx(m, {16, 1, 512});
  std::vector<int32_t> long_prompt(17, 5);
  EXPECT_NE(error_of([&] { ctx.eval(long_prompt); }).find("exceed the context of 16"),
            std::string::npos);
  const int32_t bad[1] = {300};
  EXPECT_NE(error_of([&] { ctx.eval(bad); }).find("outside the vocabulary"), std::string::npos);
  EXPECT_NE(error_of([&] { ctx.eval({}); }).find("no tokens"), std::string::npos);

  // An adapter made for another shape does not load against this model.
  ModelConfig other = test::per_layer_config();
  other.n_embd = 32;
  const std::string wrong =
      test::random_adapter(other, {LayerMatrix::Q}, 4, 8.0f, 9, "eng_wrong.gguf");
  EXPECT_NE(error_of([&] { LoraAdapter::load(wrong, *m); }).find("does not match"),
            std::string::npos);
  // A model file is not an adapter and vice versa.
  EXPECT_NE(error_of([&] {
              LoraAdapter::load(test::tmp_path("engine_f32.gguf"), *m);
            }).find("not a LoRA"),
            std::string::npos);
  EXPECT_NE(error_of([&] { Model::load(wrong); }).find("not a model"), std::string::npos);

  // Metadata and tensors that disagree.
  GgufWriter w;
  for (const auto& [k, v] : m->gguf().metadata()) w.set(k, v);
  for (const auto& t : m->gguf().tensors())
    if (t.name != "blk.1.ffn_up.weight")
      w.add_tensor(t.name, t.type, t.ne, m->gguf().tensor_data(t), t.nbytes);
  const std::string missing = test::tmp_path("eng_missing.gguf");
  w.write(missing);
  EXPECT_NE(error_of([&] { Model::load(missing); }).find("missing tensor 'blk.1.ffn_up.weight'"),
            std::string::npos);

  GgufWriter w2;
  for (const auto& [k, v] : m->gguf().metadata()) w2.set(k, v);
  w2.set("deci.attention.head_count_kv", GgufValue::arr_i32({3, 1, 0, 1, 4}));
  for (const auto& t : m->gguf().tensors())
    w2.add_tensor(t.name, t.type, t.ne, m->gguf().tensor_data(t), t.nbytes);
  w2.write(missing);
  EXPECT_NE(error_of([&] { Model::load(missing); }).find("not a multiple"), std::string::npos);

  GgufWriter w3;
  for (const auto& [k, v] : m->gguf().metadata()) w3.set(k, v);
  w3.set("deci.feed_forward_length", GgufValue::arr_i32({96, 64, 32, 0, 64, 8}));
  w3.write(missing);
  EXPECT_NE(error_of([&] { Model::load(missing); }).find("layers"), std::string::npos);
}

TEST(Sampler, GreedyTopKTopPAndSeeds) {
  std::vector<float> logits = {0.1f, 2.0f, 1.9f, -1.0f, 0.5f};
  Sampler greedy({0.0f, 40, 1.0f, 1});
  EXPECT_EQ(greedy.sample(logits), 1);
  Sampler top1({1.0f, 1, 1.0f, 1});
  for (int i = 0; i < 20; ++i) EXPECT_EQ(top1.sample(logits), 1);
  // Top-2 at temperature 1: tokens 1 and 2 with probabilities e^2 / (e^2 + e^1.9) = 0.525
  // and 0.475; 4000 draws put token 1's share within 0.525 +- 0.025 (3.2 sigma).
  Sampler top2({1.0f, 2, 1.0f, 3});
  int ones = 0;
  for (int i = 0; i < 4000; ++i) {
    const int32_t t = top2.sample(logits);
    ASSERT_TRUE(t == 1 || t == 2);
    ones += t == 1;
  }
  EXPECT_NEAR(ones / 4000.0, 1.0 / (1.0 + std::exp(-0.1)), 0.025);
  Sampler nucleus({1.0f, 0, 0.3f, 3});  // token 1 alone holds more than 30% of the mass
  for (int i = 0; i < 20; ++i) EXPECT_EQ(nucleus.sample(logits), 1);
  // Seeds: one seed repeats its draws, another draws otherwise.
  Sampler s1({1.0f, 0, 1.0f, 99}), s2({1.0f, 0, 1.0f, 99}), s3({1.0f, 0, 1.0f, 100});
  int differ = 0;
  for (int i = 0; i < 200; ++i) {
    const int32_t a = s1.sample(logits);
    EXPECT_EQ(a, s2.sample(logits));
    differ += a != s3.sample(logits);
  }
  EXPECT_GT(differ, 40);
  std::vector<float> bad = {0.0f, std::nanf("")};
  EXPECT_THROW(greedy.sample(bad), Error);
  EXPECT_THROW(Sampler({-1.0f, 0, 1.0f, 0}), Error);
}
