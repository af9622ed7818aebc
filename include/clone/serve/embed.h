// Prompt embeddings for the router: what it compares with each expert's key. The default
// reads the base model itself (mean-pooled hidden states after its first k layers, no
// adapters: the cost is k layers of prefill, counted in TTFT by whoever serves); a bag of
// tokens weighted by TF-IDF is the baseline that needs no model.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "clone/engine/context.h"

namespace cln::serve {

class Embedder {
 public:
  virtual ~Embedder() = default;
  virtual std::string name() const = 0;  // "hidden:4", "tfidf"
  virtual int64_t dim() const = 0;
  // Embedding of a prompt (token ids, BOS first). Prompts longer than the embedder's
  // window are cut to their first max_tokens() tokens.
  virtual std::vector<float> embed(std::span<const int32_t> tokens) = 0;
  virtual int64_t max_tokens() const = 0;
};

// Mean of the base model's hidden states after its first k layers.
class HiddenEmbedder : public Embedder {
 public:
  HiddenEmbedder(std::shared_ptr<const Model> base, int64_t k, int64_t max_tokens = 256,
                 int threads = 1);
  std::string name() const override { return "hidden:" + std::to_string(k_); }
  int64_t dim() const override { return dim_; }
  int64_t max_tokens() const override { return max_tokens_; }
  std::vector<float> embed(std::span<const int32_t> tokens) override;
  int64_t layers() const { return k_; }

 private:
  Context ctx_;
  int64_t k_, dim_, max_tokens_;
};

// Token counts weighted by inverse document frequency, L2-normalised; the frequencies are
// fitted on a collection of token sequences (add-one smoothed: idf = ln((N + 1) / (df + 1)) + 1).
class TfIdfEmbedder : public Embedder {
 public:
  TfIdfEmbedder(int64_t n_vocab, const std::vector<std::vector<int32_t>>& documents,
                int64_t max_tokens = 256);
  // With frequencies fitted before (idf(), as ExpertKey::tfidf_idf stores them).
  explicit TfIdfEmbedder(std::vector<float> idf, int64_t max_tokens = 256);
  const std::vector<float>& idf() const { return idf_; }
  std::string name() const override { return "tfidf"; }
  int64_t dim() const override { return static_cast<int64_t>(idf_.size()); }
  int64_t max_tokens() const override { return max_tokens_; }
  std::vector<float> embed(std::span<const int32_t> tokens) override;

 private:
  std::vector<float> idf_;
  int64_t max_tokens_;
};

// A prompt as its tokens' relative frequencies (BOS not counted; they sum to 1), so that its
// dot product with an expert's unigram log-probabilities (ExpertKey::unigram_logp) is the
// mean log-likelihood per token of the prompt under that expert's training text: a
// multinomial naive Bayes router, which needs no model and, unlike TF-IDF's cosine to a
// mean, weighs every word by how much likelier one domain makes it than the others.
class UnigramEmbedder : public Embedder {
 public:
  UnigramEmbedder(int64_t n_vocab, int32_t bos, int64_t max_tokens = 256);
  std::string name() const override { return "unigram"; }
  int64_t dim() const override { return n_vocab_; }
  int64_t max_tokens() const override { return max_tokens_; }
  std::vector<float> embed(std::span<const int32_t> tokens) override;

 private:
  int64_t n_vocab_;
  int32_t bos_;
  int64_t max_tokens_;
};

// "hidden:<k>" on the base model; "tfidf" needs documents, so is made with its constructor.
std::unique_ptr<Embedder> make_hidden_embedder(const std::string& spec,
                                               std::shared_ptr<const Model> base, int threads);

// The mean of the embeddings of prompts (an expert's key).
std::vector<float> mean_embedding(Embedder& e, const std::vector<std::vector<int32_t>>& prompts);

}  // namespace cln::serve
