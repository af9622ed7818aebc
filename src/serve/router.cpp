#include "clone/serve/router.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "clone/core/error.h"
#include "clone/serve/embed.h"
#include "clone/serve/prompts.h"

namespace cln::serve {

namespace {
// A float array of the adapter's metadata (empty where absent).
std::vector<float> floats(const GgufFile& f, const char* name) {
  const GgufValue* v = f.find(name);
  if (!v) return {};
  if (v->type != GgufType::ARRAY || v->af.empty())
    fail(f.path(), ": ", name, " must be a non-empty float array");
  return std::vector<float>(v->af.begin(), v->af.end());
}
GgufValue float_array(const std::vector<float>& v) {
  return GgufValue::arr_f32(std::vector<double>(v.begin(), v.end()));
}
}  // namespace

std::optional<ExpertKey> read_key(const GgufFile& f) {
  if (!f.find("clone.router.key")) return std::nullopt;
  ExpertKey k;
  k.embedder = f.get_string("clone.router.embedder");
  k.key = floats(f, "clone.router.key");
  k.prompts = f.get_int_or("clone.router.prompts", 0);
  k.tfidf_idf = floats(f, "clone.router.tfidf.idf");
  k.tfidf_key = floats(f, "clone.router.tfidf.key");
  if (k.tfidf_idf.size() != k.tfidf_key.size())
    fail(f.path(), ": clone.router.tfidf.idf has ", k.tfidf_idf.size(),
         " entries and clone.router.tfidf.key ", k.tfidf_key.size());
  k.unigram_logp = floats(f, "clone.router.unigram.logp");
  for (float x : k.unigram_logp)
    if (!(std::isfinite(x) && x <= 0))
      fail(f.path(), ": clone.router.unigram.logp holds ", x, ", not a log-probability");
  return k;
}

void write_key(const std::string& path, const ExpertKey& key) {
  if (key.key.empty()) fail("write_key: empty key");
  const auto f = GgufFile::open(path);
  if (f->get_string_or("general.type", "") != "adapter")
    fail(path, ": not a LoRA adapter (general.type is not 'adapter')");
  if (key.tfidf_idf.size() != key.tfidf_key.size())
    fail("write_key: a TF-IDF key of ", key.tfidf_key.size(), " entries over ",
         key.tfidf_idf.size(), " frequencies");
  // A key without a TF-IDF half keeps the one the adapter has (it belongs to the bank), and
  // one without a unigram part the adapter's.
  const bool keep_tfidf = key.tfidf_key.empty(), keep_unigram = key.unigram_logp.empty();
  GgufWriter w;
  for (const auto& [k, v] : f->metadata())
    if (k != "general.alignment" &&
        (!k.starts_with("clone.router.") || (keep_tfidf && k.starts_with("clone.router.tfidf.")) ||
         (keep_unigram && k.starts_with("clone.router.unigram."))))
      w.set(k, v);
  w.set("clone.router.embedder", GgufValue::str(key.embedder));
  w.set("clone.router.key", float_array(key.key));
  w.set("clone.router.prompts", GgufValue::u32(static_cast<uint32_t>(key.prompts)));
  if (!keep_tfidf) {
    w.set("clone.router.tfidf.idf", float_array(key.tfidf_idf));
    w.set("clone.router.tfidf.key", float_array(key.tfidf_key));
  }
  if (!keep_unigram) w.set("clone.router.unigram.logp", float_array(key.unigram_logp));
  for (const auto& t : f->tensors())
    w.add_tensor(t.name, t.type, t.ne, f->tensor_data(t), t.nbytes);
  w.write(path, f->alignment());
}

ExpertKey make_key(Embedder& e, const std::string& data_dir, const std::string& source,
                   const Tokenizer& tok, const std::string& tok_source, int64_t n_prompts) {
  const PromptSet p = prompt_set(data_dir, source, "train", tok, tok_source, n_prompts, 64, 0);
  return {e.name(), mean_embedding(e, p.prompts), static_cast<int64_t>(p.prompts.size())};
}

std::vector<ExpertKey> make_tfidf_keys(const std::string& data_dir,
                                       const std::vector<std::string>& sources,
                                       const Tokenizer& tok, const std::string& tok_source,
                                       int64_t n_prompts) {
  std::vector<std::vector<std::vector<int32_t>>> prompts;
  std::vector<std::vector<int32_t>> all;
  for (const std::string& s : sources) {
    prompts.push_back(prompt_set(data_dir, s, "train", tok, tok_source, n_prompts, 64, 0).prompts);
    all.insert(all.end(), prompts.back().begin(), prompts.back().end());
  }
  TfIdfEmbedder tfidf(tok.n_vocab(), all);
  std::vector<ExpertKey> keys;
  for (const auto& p : prompts) {
    ExpertKey k;
    k.tfidf_idf = tfidf.idf();
    k.tfidf_key = mean_embedding(tfidf, p);
    keys.push_back(std::move(k));
  }
  return keys;
}

std::vector<ExpertKey> make_unigram_keys(const std::string& data_dir,
                                         const std::vector<std::string>& sources,
                                         const Tokenizer& tok, const std::string& tok_source) {
  constexpr double alpha = 0.1;  // add-alpha smoothing: a token unseen in one source is rare there
  const auto V = static_cast<size_t>(tok.n_vocab());
  std::vector<ExpertKey> keys;
  for (const std::string& s : sources) {
    std::vector<double> count(V, alpha);
    double total = alpha * static_cast<double>(V);
    for (const auto& head :
         source_heads(data_dir, s, "train", tok, tok_source, unigram_head_tokens))
      for (int32_t t : head)
        if (t != tok.bos()) count[static_cast<size_t>(t)] += 1, total += 1;
    ExpertKey k;
    k.embedder = "unigram";
    for (double c : count) k.unigram_logp.push_back(static_cast<float>(std::log(c / total)));
    keys.push_back(std::move(k));
  }
  return keys;
}

std::vector<ExpertKey> unigram_router_keys(const std::vector<ExpertKey>& keys) {
  std::vector<ExpertKey> u;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i].unigram_logp.empty())
      fail("expert ", i, " has no unigram router key (`clone lora keys --unigram` writes it)");
    if (keys[i].unigram_logp.size() != keys.front().unigram_logp.size())
      fail("expert ", i, "'s unigram key spans ", keys[i].unigram_logp.size(),
           " tokens, expert 0's ", keys.front().unigram_logp.size());
    u.push_back({"unigram", keys[i].unigram_logp, keys[i].prompts, {}, {}, {}});
  }
  return u;
}

std::vector<ExpertKey> tfidf_router_keys(const std::vector<ExpertKey>& keys) {
  std::vector<ExpertKey> tf;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i].tfidf_key.empty())
      fail("expert ", i, " has no TF-IDF router key (`clone lora keys --tfidf` writes the bank's)");
    if (keys[i].tfidf_idf != keys.front().tfidf_idf)
      fail("expert ", i,
           "'s TF-IDF key was fitted on another bank than expert 0's: key them "
           "together with `clone lora keys --tfidf`");
    tf.push_back({"tfidf", keys[i].tfidf_key, keys[i].prompts, {}, {}});
  }
  return tf;
}

Mixing mixing_from_name(const std::string& s) {
  if (s == "soft") return Mixing::Soft;
  if (s == "top1") return Mixing::Top1;
  if (s == "uniform") return Mixing::Uniform;
  fail("unknown mixing '", s, "' (soft, top1, uniform)");
}

const char* mixing_name(Mixing m) {
  switch (m) {
    case Mixing::Soft:
      return "soft";
    case Mixing::Top1:
      return "top1";
    case Mixing::Uniform:
      return "uniform";
  }
  return "?";
}

double cosine(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size()) fail("cosine: sizes ", a.size(), " and ", b.size());
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i)
    ab += double{a[i]} * b[i], aa += double{a[i]} * a[i], bb += double{b[i]} * b[i];
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0.0;
}

Router::Router(std::vector<ExpertKey> keys, RouterOptions o) : keys_(std::move(keys)), o_(o) {
  if (keys_.empty()) fail("router: no experts");
  for (const ExpertKey& k : keys_) {
    if (k.key.size() != keys_.front().key.size() || k.embedder != keys_.front().embedder)
      fail("router: the experts' keys come from different embeddings (", keys_.front().embedder,
           " and ", k.embedder, ")");
  }
  if (!(o_.temperature > 0)) fail("router: the temperature must be positive");
  if (o_.threshold < 0 || o_.threshold >= 1) fail("router: the threshold must be in [0, 1)");
  if (o_.centre && keys_.front().embedder == "unigram")
    fail("router: centring applies to cosine routers, not to unigram log-likelihoods");
  if (o_.centre) {
    if (keys_.size() < 2) fail("router: centring needs at least two experts");
    const size_t d = keys_.front().key.size();
    std::vector<double> m(d, 0.0);
    for (const ExpertKey& k : keys_)
      for (size_t i = 0; i < d; ++i) m[i] += k.key[i];
    mean_.resize(d);
    for (size_t i = 0; i < d; ++i)
      mean_[i] = static_cast<float>(m[i] / static_cast<double>(keys_.size()));
    for (const ExpertKey& k : keys_) {
      centred_.emplace_back(d);
      for (size_t i = 0; i < d; ++i) centred_.back()[i] = k.key[i] - mean_[i];
    }
  }
}

std::vector<double> Router::similarities(std::span<const float> e) const {
  std::vector<double> s;
  if (keys_.front().embedder == "unigram") {  // mean log-likelihood per token
    if (e.size() != keys_.front().key.size())
      fail("router: an embedding of ", e.size(), " for unigram keys of ", keys_.front().key.size());
    std::vector<size_t> nz;  // a part's frequencies are mostly zero: visit only its tokens
    for (size_t i = 0; i < e.size(); ++i)
      if (e[i] != 0) nz.push_back(i);
    for (const ExpertKey& k : keys_) {
      double dot = 0;
      for (size_t i : nz) dot += double{e[i]} * k.key[i];
      s.push_back(dot);
    }
    return s;
  }
  if (!o_.centre) {
    for (const ExpertKey& k : keys_) s.push_back(cosine(e, k.key));
    return s;
  }
  if (e.size() != mean_.size())
    fail("router: an embedding of ", e.size(), " for keys of ", mean_.size());
  std::vector<float> c(e.size());
  for (size_t i = 0; i < e.size(); ++i) c[i] = e[i] - mean_[i];
  for (const auto& k : centred_) s.push_back(cosine(c, k));
  return s;
}

std::vector<double> Router::weights(std::span<const float> e) const {
  const std::vector<double> s = similarities(e);
  const size_t n = s.size();
  std::vector<double> w(n, 0.0);
  const size_t best = static_cast<size_t>(std::max_element(s.begin(), s.end()) - s.begin());
  if (o_.mixing == Mixing::Top1) {
    w[best] = 1;
    return w;
  }
  if (o_.mixing == Mixing::Uniform) {
    std::fill(w.begin(), w.end(), 1.0 / static_cast<double>(n));
    return w;
  }
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += (w[i] = std::exp((s[i] - s[best]) / o_.temperature));
  double kept = 0;
  for (size_t i = 0; i < n; ++i) {
    w[i] /= total;
    if (w[i] < o_.threshold && i != best) w[i] = 0;
    kept += w[i];
  }
  const double norm = o_.scale_to_max ? w[best] : kept;
  for (double& x : w) x /= norm;
  return w;
}

std::vector<int32_t> segment_window_tokens(std::span<const int32_t> text, int64_t start,
                                           int64_t end, SegmentRoute how, int64_t window,
                                           int32_t bos) {
  const auto n = static_cast<int64_t>(text.size());
  if (start < 0 || end <= start || end > n)
    fail("segment [", start, ", ", end, ") outside a text of ", n, " tokens");
  // The span [from, to) of the text that routes the segment; one that starts at the text's
  // start carries its own BOS, any other gets one in front.
  int64_t from = start, to = end;
  switch (how) {
    case SegmentRoute::Own:
      break;
    case SegmentRoute::Before:
      if (start == 0) break;  // the first segment is a prompt: its own tokens
      if (window < 1) fail("segment routing window of ", window, " tokens");
      from = std::max<int64_t>(1, start - window), to = start;
      break;
    case SegmentRoute::Around:
      if (window < 0) fail("segment routing window of ", window, " tokens");
      from = start - window, to = std::min(n, end + window);
      break;
  }
  if (from <= 0) return {text.begin(), text.begin() + to};
  std::vector<int32_t> w = {bos};
  w.insert(w.end(), text.begin() + from, text.begin() + to);
  return w;
}

namespace {
// The index of the largest weight (the first of equals); w not empty.
std::ptrdiff_t top_expert(const std::vector<double>& w) {
  return std::max_element(w.begin(), w.end()) - w.begin();
}
}  // namespace

std::vector<double> blend_weights(const std::vector<double>& segment,
                                  const std::vector<double>& request, double lambda, bool gated,
                                  double min_top) {
  if (segment.size() != request.size())
    fail("blending ", segment.size(), " segment weights with ", request.size(), " request weights");
  if (!(lambda >= 0 && lambda <= 1)) fail("segment blend ", lambda, " outside [0, 1]");
  if (!(min_top >= 0 && min_top <= 1)) fail("segment confidence ", min_top, " outside [0, 1]");
  if (segment.empty()) return request;
  const std::ptrdiff_t top = top_expert(segment);
  if (gated && top == top_expert(request)) return request;
  const double total = std::accumulate(segment.begin(), segment.end(), 0.0);
  if (min_top > 0 && !(total > 0 && segment[static_cast<size_t>(top)] >= min_top * total))
    return request;
  std::vector<double> w(segment.size());
  for (size_t e = 0; e < w.size(); ++e) w[e] = lambda * segment[e] + (1 - lambda) * request[e];
  return w;
}

std::vector<bool> agrees_with_a_neighbour(const std::vector<std::vector<double>>& segments) {
  std::vector<std::ptrdiff_t> top;
  for (const auto& w : segments) {
    if (w.empty()) fail("a segment with no expert weights");
    top.push_back(top_expert(w));
  }
  std::vector<bool> agrees(segments.size());
  for (size_t i = 0; i < top.size(); ++i)
    agrees[i] = (i > 0 && top[i - 1] == top[i]) || (i + 1 < top.size() && top[i + 1] == top[i]);
  return agrees;
}

std::vector<bool> same_top_expert(const std::vector<std::vector<double>>& a,
                                  const std::vector<std::vector<double>>& b) {
  if (a.size() != b.size())
    fail("comparing two routers' weights for ", a.size(), " and ", b.size(), " segments");
  std::vector<bool> same(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].empty() || a[i].size() != b[i].size())
      fail("segment ", i, ": two routers' weights over ", a[i].size(), " and ", b[i].size(),
           " experts");
    same[i] = top_expert(a[i]) == top_expert(b[i]);
  }
  return same;
}

std::vector<bool> top_expert_in_whole(const std::vector<std::vector<double>>& segments,
                                      const std::vector<double>& whole, double min_share) {
  const double total = std::accumulate(whole.begin(), whole.end(), 0.0);
  if (whole.empty() || !(total > 0)) fail("a whole text with no expert weights");
  std::vector<bool> in(segments.size());
  for (size_t i = 0; i < segments.size(); ++i) {
    if (segments[i].size() != whole.size())
      fail("segment ", i, ": weights over ", segments[i].size(), " experts, the whole text's over ",
           whole.size());
    in[i] = whole[static_cast<size_t>(top_expert(segments[i]))] >= min_share * total;
  }
  return in;
}

}  // namespace cln::serve
