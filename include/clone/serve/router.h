// The parameter-free soft mixture of LoRA experts (CLONE's router): a prompt's embedding is
// compared with each expert's key (the mean embedding of its training prompts) by cosine
// similarity, and the weights are a softmax of the similarities with a temperature; experts
// under a weight threshold are skipped and the rest renormalised. Top-1 and uniform
// averaging are the alternatives the paper compares with.
//
// An expert's key lives in its adapter GGUF as metadata llama.cpp ignores (the adapter still
// loads there): clone.router.embedder (string), clone.router.key (float array),
// clone.router.prompts (how many prompts it averages).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "clone/gguf/gguf.h"

namespace cln {
class Tokenizer;
}

namespace cln::serve {

struct ExpertKey {
  std::string embedder;  // the Embedder::name() it was made with
  std::vector<float> key;
  int64_t prompts = 0;
  // A second router's, by TF-IDF (both empty where the adapter has none): the inverse
  // document frequencies fitted on the training prompts of the whole bank the expert was
  // keyed with (the same in every expert of it) and this expert's key in that space.
  std::vector<float> tfidf_idf = {}, tfidf_key = {};
  // A third's, by unigram frequencies (empty where the adapter has none): the log-probability
  // of every token in the expert's training text (the first unigram_head_tokens of each
  // document of a domain, every prompt of a task; add-0.1 smoothed), what UnigramEmbedder's
  // frequencies are dotted with.
  std::vector<float> unigram_logp = {};
};

// Prompt parts as `clone serve` and `clone run` route them by default: parts of this many
// tokens, each under the unigram router's softmax at this temperature (chosen on the
// validation split, docs/results/route/parts-unigram-*-valid.md; judged on test).
inline constexpr int64_t default_prompt_part = 32;
inline constexpr double unigram_part_temperature = 0.1;

// How much of each training document a unigram key counts: the judged texts are the starts of
// documents, as a prompt is the start of what it asks about.
inline constexpr int64_t unigram_head_tokens = 192;

// The key stored in an adapter, if any.
std::optional<ExpertKey> read_key(const GgufFile& adapter);
// Rewrites the adapter file with the key added (or replaced); tensors and other metadata
// are kept byte for byte. Throws cln::Error if the file is not a LoRA adapter.
void write_key(const std::string& adapter_path, const ExpertKey& key);

class Embedder;
// The key of an expert trained on `source` (a domain or task): the mean embedding of up to
// n_prompts of its training prompts (prompts.h), taken by `e`.
ExpertKey make_key(Embedder& e, const std::string& data_dir, const std::string& source,
                   const Tokenizer& tok, const std::string& tok_source, int64_t n_prompts = 256);

// The TF-IDF router of a bank of experts trained on `sources`: idf fitted on up to n_prompts
// training prompts of every source together, each source's key the mean TF-IDF embedding of
// its own (ExpertKey's tfidf_idf and tfidf_key; the other fields empty).
std::vector<ExpertKey> make_tfidf_keys(const std::string& data_dir,
                                       const std::vector<std::string>& sources,
                                       const Tokenizer& tok, const std::string& tok_source,
                                       int64_t n_prompts = 256);
// The unigram router of experts trained on `sources` (ExpertKey::unigram_logp; the other
// fields empty): each source's token counts over its training text, add-0.1 smoothed.
std::vector<ExpertKey> make_unigram_keys(const std::string& data_dir,
                                         const std::vector<std::string>& sources,
                                         const Tokenizer& tok, const std::string& tok_source);
// The keys' unigram parts as the keys of a "unigram" router (every key must have one, of one
// size: else cln::Error naming the expert); UnigramEmbedder embeds the prompts it routes.
std::vector<ExpertKey> unigram_router_keys(const std::vector<ExpertKey>& keys);

// The keys' TF-IDF halves as the keys of a "tfidf" router (every key must have one, all
// fitted on one bank: else cln::Error naming the expert); TfIdfEmbedder(keys[0].tfidf_idf)
// embeds the prompts it routes.
std::vector<ExpertKey> tfidf_router_keys(const std::vector<ExpertKey>& keys);

enum class Mixing { Soft, Top1, Uniform };
Mixing mixing_from_name(const std::string& s);  // "soft", "top1", "uniform"
const char* mixing_name(Mixing m);

struct RouterOptions {
  Mixing mixing = Mixing::Soft;
  // Chosen on the validation split over the shipped bank (scripts/train_serving.sh step 1a,
  // docs/results/route/tune.md: the smallest mean gap to the right single expert of 20
  // settings; 0.05 / 0.05, the earlier default, broke subtraction answers: 22% vs 98%).
  double temperature = 0.03;  // softmax over cosine similarity / temperature
  double threshold = 0.1;     // soft: experts under this weight are dropped, the rest renormalised
  // Cosine after subtracting the mean of the experts' keys from the prompt's embedding and
  // from every key: mean-pooled hidden states share one large direction, which makes every
  // raw cosine nearly 1 and the softmax flat; centring compares what tells experts apart.
  // Still parameter-free (the mean comes from the keys).
  bool centre = false;
  // Soft: the weights divided by the largest instead of summing to 1 (the top expert at full
  // strength, the others in proportion): a text that needs two experts gets both at full
  // strength rather than each at half.
  bool scale_to_max = false;
};

double cosine(std::span<const float> a, std::span<const float> b);

// A router compares an embedding with each key by cosine, except a "unigram" router: by the
// dot product (the mean log-likelihood per token; centring does not apply).
class Router {
 public:
  // keys: one per expert, all from the same embedder and of one size.
  Router(std::vector<ExpertKey> keys, RouterOptions o = {});
  size_t size() const { return keys_.size(); }
  size_t key_size() const { return keys_.front().key.size(); }
  const RouterOptions& options() const { return o_; }
  const std::string& embedder() const { return keys_.front().embedder; }
  std::vector<double> similarities(std::span<const float> embedding) const;
  // Weights per expert (in key order), summing to 1 (soft with scale_to_max: the largest 1).
  std::vector<double> weights(std::span<const float> embedding) const;

 private:
  std::vector<ExpertKey> keys_;
  RouterOptions o_;
  std::vector<float> mean_;                  // of the keys (centre)
  std::vector<std::vector<float>> centred_;  // keys less mean_ (centre)
};

// How a later segment of a text is routed (segment_window_tokens).
enum class SegmentRoute {
  Before,  // by BOS and the window of tokens before it: a server re-routing a stream
  Own,     // by BOS and its own tokens: a prompt's prefill, which knows its whole text
  Around,  // by BOS, its own tokens and the window of tokens on each side (a prefill too)
};

// The tokens that route the segment [start, end) of `text` (BOS first): the segment itself
// for the first one (as a prompt is routed) and for Own; for Before, BOS and the `window`
// tokens before start; for Around, the segment widened by `window` tokens on each side, as
// far as the text goes (the first one too). Never the text's own BOS twice.
std::vector<int32_t> segment_window_tokens(std::span<const int32_t> text, int64_t start,
                                           int64_t end, SegmentRoute how, int64_t window,
                                           int32_t bos);

// lambda * segment + (1 - lambda) * request, per expert (equal sizes). Gated: the request's
// weights unchanged where the segment's top expert is the request's (a segment moves off the
// request's mixture only where its own routing disagrees). min_top: the request's weights
// unchanged where the segment's top expert holds less than this share of its weights (a
// segment moves off the request's mixture only where its own routing is sure).
std::vector<double> blend_weights(const std::vector<double>& segment,
                                  const std::vector<double>& request, double lambda,
                                  bool gated = false, double min_top = 0);

// Per segment of a text, in order, given each one's own weights: whether its top expert is
// also the top expert of the segment before or after it (a lone segment: false).
std::vector<bool> agrees_with_a_neighbour(const std::vector<std::vector<double>>& segments);

// Per segment, whether two routers' weights for it (equal counts, equal sizes) have the same
// top expert: two embeddings that err apart agree mostly where the text is what they say.
std::vector<bool> same_top_expert(const std::vector<std::vector<double>>& a,
                                  const std::vector<std::vector<double>>& b);

// Per segment, whether its top expert holds at least min_share of the whole text's weights
// (`whole`, one weight per expert, any scale; equal sizes). The idea: a segment of a text that
// mixes two domains names an expert the whole text also leans to, a misrouted segment of a
// one-domain text one it does not; on the shipped bank computing's misrouted parts name
// experts its whole texts lean to as well (docs/serve.md), so it is a measurement, not a
// serving option.
std::vector<bool> top_expert_in_whole(const std::vector<std::vector<double>>& segments,
                                      const std::vector<double>& whole, double min_share);

}  // namespace cln::serve
