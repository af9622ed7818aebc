// What routing one prompt part costs on this machine: the unigram router (count the part's
// tokens, a dot product per expert: what `clone serve` runs per 32-token part), the TF-IDF
// one, and the base model's hidden:4 embedding the paper's router runs on the whole prompt.
// Ten experts, the shipped model's vocabulary. Build: target router_bench.
//   build-*/bench/router_bench
#include <benchmark/benchmark.h>

#include <cmath>

#include "clone/engine/model.h"
#include "clone/serve/embed.h"
#include "clone/serve/router.h"
#include "clone/tokenizer/tokenizer.h"

using namespace cln;

namespace {

constexpr int kExperts = 10;

std::shared_ptr<const Model> base() {
  static auto m = Model::load(std::string(CLONE_SOURCE_DIR) + "/models/base/model.gguf");
  return m;
}

// A 32-token part of real text, BOS first.
std::vector<int32_t> part(int64_t n) {
  const Tokenizer tok = Tokenizer::from_gguf(base()->gguf());
  std::vector<int32_t> t = tok.encode(
      "And the LORD spake unto Moses, saying, Speak unto the children of Israel, and say unto "
      "them, When any man of you bring an offering unto the LORD, ye shall bring your offering "
      "of the cattle, even of the herd, and of the flock.",
      true);
  t.resize(static_cast<size_t>(n));
  return t;
}

// Keys of the right shape: what is timed does not depend on their values.
std::vector<serve::ExpertKey> keys(const std::string& embedder, int64_t dim) {
  std::vector<serve::ExpertKey> k;
  for (int e = 0; e < kExperts; ++e) {
    std::vector<float> v(static_cast<size_t>(dim));
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = embedder == "unigram" ? -8.0f - static_cast<float>((i * 7 + e) % 5)
                                   : std::cos(static_cast<float>(i * (e + 1)));
    k.push_back({embedder, v, 1});
  }
  return k;
}

void BM_UnigramPart(benchmark::State& st) {
  const auto V = base()->config().n_vocab;
  serve::UnigramEmbedder e(V, 1);
  serve::RouterOptions o;
  o.temperature = 0.1;
  const serve::Router r(keys("unigram", V), o);
  const auto p = part(st.range(0));
  for (auto _ : st) benchmark::DoNotOptimize(r.weights(e.embed(p)));
}
BENCHMARK(BM_UnigramPart)->Arg(32)->Unit(benchmark::kMicrosecond);

void BM_TfIdfPart(benchmark::State& st) {
  const auto V = base()->config().n_vocab;
  serve::TfIdfEmbedder e(std::vector<float>(static_cast<size_t>(V), 1.5f));
  const serve::Router r(keys("tfidf", V));
  const auto p = part(st.range(0));
  for (auto _ : st) benchmark::DoNotOptimize(r.weights(e.embed(p)));
}
BENCHMARK(BM_TfIdfPart)->Arg(32)->Unit(benchmark::kMicrosecond);

void BM_HiddenPart(benchmark::State& st) {
  auto e = serve::make_hidden_embedder("hidden:4", base(), 1);
  const serve::Router r(keys(e->name(), e->dim()));
  const auto p = part(st.range(0));
  for (auto _ : st) benchmark::DoNotOptimize(r.weights(e->embed(p)));
}
BENCHMARK(BM_HiddenPart)->Arg(32)->Arg(64)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
