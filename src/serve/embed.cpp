#include "clone/serve/embed.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "clone/core/error.h"

namespace cln::serve {

HiddenEmbedder::HiddenEmbedder(std::shared_ptr<const Model> base, int64_t k, int64_t max_tokens,
                               int threads)
    : ctx_(base, {max_tokens, threads, max_tokens}),
      k_(k),
      dim_(base->config().n_embd),
      max_tokens_(max_tokens) {
  if (k < 1 || k > base->config().n_layer())
    fail("router embedding: k = ", k, " layers, the model has ", base->config().n_layer());
}

std::vector<float> HiddenEmbedder::embed(std::span<const int32_t> tokens) {
  if (tokens.empty()) fail("router embedding: the prompt has no tokens");
  const auto n = std::min<size_t>(tokens.size(), static_cast<size_t>(max_tokens_));
  return ctx_.mean_hidden(tokens.first(n), k_);
}

TfIdfEmbedder::TfIdfEmbedder(int64_t n_vocab, const std::vector<std::vector<int32_t>>& documents,
                             int64_t max_tokens)
    : idf_(static_cast<size_t>(n_vocab), 0.0f), max_tokens_(max_tokens) {
  std::vector<int64_t> df(static_cast<size_t>(n_vocab), 0);
  std::vector<int64_t> seen(static_cast<size_t>(n_vocab), -1);
  for (size_t d = 0; d < documents.size(); ++d)
    for (int32_t t : documents[d]) {
      if (t < 0 || t >= n_vocab) fail("tf-idf: token ", t, " outside the vocabulary of ", n_vocab);
      if (seen[static_cast<size_t>(t)] != static_cast<int64_t>(d))
        seen[static_cast<size_t>(t)] = static_cast<int64_t>(d), ++df[static_cast<size_t>(t)];
    }
  const double n = static_cast<double>(documents.size());
  for (size_t t = 0; t < idf_.size(); ++t)
    idf_[t] = static_cast<float>(std::log((n + 1) / (static_cast<double>(df[t]) + 1)) + 1);
}

TfIdfEmbedder::TfIdfEmbedder(std::vector<float> idf, int64_t max_tokens)
    : idf_(std::move(idf)), max_tokens_(max_tokens) {
  if (idf_.empty()) fail("tf-idf: no inverse document frequencies");
  for (float f : idf_)
    if (!(std::isfinite(f) && f > 0)) fail("tf-idf: an inverse document frequency of ", f);
}

std::vector<float> TfIdfEmbedder::embed(std::span<const int32_t> tokens) {
  if (tokens.empty()) fail("tf-idf embedding: the prompt has no tokens");
  std::vector<float> v(idf_.size(), 0.0f);
  const auto n = std::min<size_t>(tokens.size(), static_cast<size_t>(max_tokens_));
  for (size_t i = 0; i < n; ++i) {
    const int32_t t = tokens[i];
    if (t < 0 || static_cast<size_t>(t) >= v.size()) fail("tf-idf: token ", t, " out of range");
    v[static_cast<size_t>(t)] += idf_[static_cast<size_t>(t)];
  }
  double ss = 0;
  for (float x : v) ss += double{x} * x;
  const auto inv = static_cast<float>(1.0 / std::sqrt(std::max(ss, 1e-30)));
  for (float& x : v) x *= inv;
  return v;
}

UnigramEmbedder::UnigramEmbedder(int64_t n_vocab, int32_t bos, int64_t max_tokens)
    : n_vocab_(n_vocab), bos_(bos), max_tokens_(max_tokens) {
  if (n_vocab < 1) fail("unigram embedding: a vocabulary of ", n_vocab);
}

std::vector<float> UnigramEmbedder::embed(std::span<const int32_t> tokens) {
  std::vector<float> v(static_cast<size_t>(n_vocab_), 0.0f);
  const auto n = std::min<size_t>(tokens.size(), static_cast<size_t>(max_tokens_));
  int64_t counted = 0;
  for (size_t i = 0; i < n; ++i) {
    const int32_t t = tokens[i];
    if (t < 0 || t >= n_vocab_) fail("unigram embedding: token ", t, " out of range");
    if (t == bos_) continue;
    v[static_cast<size_t>(t)] += 1.0f;
    ++counted;
  }
  if (counted == 0) fail("unigram embedding: the prompt has no tokens but BOS");
  for (float& x : v) x /= static_cast<float>(counted);
  return v;
}

std::unique_ptr<Embedder> make_hidden_embedder(const std::string& spec,
                                               std::shared_ptr<const Model> base, int threads) {
  if (!spec.starts_with("hidden:"))
    fail("router embedding '", spec, "': expected hidden:<layers> (e.g. hidden:4)");
  int64_t k = 0;
  try {
    size_t used = 0;
    k = std::stoll(spec.substr(7), &used);
    if (used != spec.size() - 7) throw std::invalid_argument(spec);
  } catch (const std::exception&) {
    fail("router embedding '", spec, "': the layer count is not a number");
  }
  return std::make_unique<HiddenEmbedder>(std::move(base), k, 256, threads);
}

std::vector<float> mean_embedding(Embedder& e, const std::vector<std::vector<int32_t>>& prompts) {
  if (prompts.empty()) fail("expert key: no prompts to average");
  std::vector<double> sum(static_cast<size_t>(e.dim()), 0.0);
  for (const auto& p : prompts) {
    const std::vector<float> v = e.embed(p);
    for (size_t j = 0; j < sum.size(); ++j) sum[j] += v[j];
  }
  std::vector<float> mean(sum.size());
  for (size_t j = 0; j < sum.size(); ++j)
    mean[j] = static_cast<float>(sum[j] / static_cast<double>(prompts.size()));
  return mean;
}

}  // namespace cln::serve
