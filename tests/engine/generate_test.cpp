// generate(): the one generation loop, against a loop written here from Context::eval and
// the Sampler, for greedy and seeded sampling; EOS, the limit and a full context stop it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "clone/core/error.h"
#include "clone/engine/context.h"
#include "clone/engine/generate.h"
#include "test_util.h"

using namespace cln;

namespace {

std::shared_ptr<const Model> model() {
  return test::random_model("generate.gguf", 7, 0.3f);
}

// Every token after the prompt, sampled, then fed back: no stop but the count.
std::vector<int32_t> by_hand(Context& ctx, const std::vector<int32_t>& prompt,
                             const SamplerParams& sp, int n) {
  Sampler s(sp);
  std::vector<int32_t> out;
  auto logits = ctx.eval(prompt);
  for (int i = 0; i < n; ++i) {
    out.push_back(s.sample(logits));
    const int32_t one[1] = {out.back()};
    logits = ctx.eval(one);
  }
  return out;
}

}  // namespace

TEST(Generate, EqualsAHandWrittenLoopAndStopsWhereItShould) {
  const auto m = model();
  const std::vector<int32_t> prompt = {1, 40, 7, 99};
  for (const SamplerParams sp :
       {SamplerParams{0.0f, 40, 1.0f, 1}, SamplerParams{0.9f, 20, 0.9f, 5}}) {
    Context a(m, {64, 1, 64}), b(m, {64, 1, 64});
    const std::vector<int32_t> ref = by_hand(a, prompt, sp, 12);
    GenerateParams p;
    p.max_new = 12;
    p.sampling = sp;
    std::vector<int32_t> streamed;
    const Generation g = generate(b, prompt, p, [&](int32_t t) {
      streamed.push_back(t);
      return true;
    });
    EXPECT_EQ(g.tokens, ref);
    EXPECT_EQ(streamed, ref);
    EXPECT_EQ(g.stop, StopReason::Limit);
    EXPECT_EQ(b.n_past(), 4 + 11);  // the last token is not run
    // The same with one of the tokens as EOS: it stops there, without it.
    const int32_t eos = ref[5];
    const auto first = std::find(ref.begin(), ref.end(), eos) - ref.begin();
    Context c(m, {64, 1, 64});
    p.eos = eos;
    const Generation ge = generate(c, prompt, p);
    EXPECT_EQ(ge.stop, StopReason::Eos);
    EXPECT_EQ(ge.tokens, std::vector<int32_t>(ref.begin(), ref.begin() + first));
    // The caller can stop it.
    Context d(m, {64, 1, 64});
    p.eos = -1;
    const Generation gc = generate(d, prompt, p, [](int32_t) { return false; });
    EXPECT_EQ(gc.stop, StopReason::Caller);
    EXPECT_EQ(gc.tokens.size(), 1u);
  }
  // A context of 8 holds the 4-token prompt and 4 more tokens.
  Context small(m, {8, 1, 8});
  GenerateParams p;
  p.max_new = 100;
  p.sampling.temperature = 0;
  const Generation g = generate(small, prompt, p);
  EXPECT_EQ(g.stop, StopReason::ContextFull);
  EXPECT_EQ(g.tokens.size(), 5u);
  // A prompt that fills the context is refused with a message that says so.
  Context tiny(m, {4, 1, 4});
  try {
    generate(tiny, prompt, p);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the context holds 4"), std::string::npos) << e.what();
  }
}

TEST(ModelView, RunsWeightsInMemoryAsTheFileDoes) {
  const auto file = model();
  // Copy every tensor out of the file as F32 and view the copies.
  std::map<std::string, std::vector<float>> mem;
  for (const TensorSpec& s : model_tensors(file->config())) {
    const GgufTensorInfo* t = file->gguf().find_tensor(s.name);
    std::vector<float>& v = mem[s.name];
    v.resize(static_cast<size_t>(s.numel()));
    std::memcpy(v.data(), file->gguf().tensor_data(*t), v.size() * 4);
  }
  const auto view =
      Model::view_f32(file->config(), [&](const TensorSpec& s) { return mem.at(s.name).data(); });
  const std::vector<int32_t> toks = {1, 5, 77, 200, 13, 9};
  Context a(file, {16, 1, 16}), b(view, {16, 1, 16});
  const auto la = a.eval(toks, true);
  const std::vector<float> ref(la.begin(), la.end());
  const auto lb = b.eval(toks, true);
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(ref[i], lb[i]) << i;
  // The view follows the memory: change a weight and the logits change.
  mem.at("output_norm.weight")[0] += 1.0f;
  b.reset();
  const auto lc = b.eval(toks, true);
  EXPECT_NE(lc[0], ref[0]);
  EXPECT_THROW(view->gguf(), Error);
}
