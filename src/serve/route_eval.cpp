#include "clone/serve/route_eval.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <numeric>

#include "clone/core/error.h"
#include "clone/data/corpus.h"
#include "clone/data/tasks.h"
#include "clone/device/cost_model.h"
#include "clone/device/profile.h"
#include "clone/engine/context.h"
#include "clone/engine/generate.h"
#include "clone/engine/lora.h"
#include "clone/serve/embed.h"
#include "clone/serve/prompts.h"
#include "clone/tokenizer/tokenizer.h"

namespace cln::serve {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

bool is_domain(const std::string& s) {
  const auto& d = data::domain_names();
  return std::find(d.begin(), d.end(), s) != d.end();
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\n')) ++i;
  return s.substr(i);
}

struct Item {
  std::vector<int32_t> tokens;  // text to score, or a task prompt
  std::string answer;           // tasks
  int64_t joint = 0;            // mixed texts: where the second source's half begins
};

struct Set {
  std::string name;
  std::vector<size_t> right;  // expert indices
  bool text = true;
  int64_t tokens = 0;  // text sets: tokens per text
  std::vector<Item> items;
};

// Per-way accumulators: text sets sum NLL and count tokens, task sets count hits.
struct Acc {
  double sum = 0;
  int64_t n = 0;
  double value(bool text) const {
    return text ? std::exp(sum / static_cast<double>(std::max<int64_t>(1, n)))
                : 100.0 * sum / static_cast<double>(std::max<int64_t>(1, n));
  }
};

// The negative log-likelihood of `target` under one row of logits.
double nll(const float* l, int64_t n_vocab, int32_t target) {
  const float mx = *std::max_element(l, l + n_vocab);
  double s = 0;
  for (int64_t v = 0; v < n_vocab; ++v) s += std::exp(static_cast<double>(l[v] - mx));
  return std::log(s) - static_cast<double>(l[target] - mx);
}

// The text length for a set of `sources` from their documents' lengths (choose_text_length).
int64_t text_length(const RouteEvalOptions& o, const std::vector<std::string>& sources,
                    const Tokenizer& tok) {
  std::vector<std::vector<int64_t>> lengths;
  for (const auto& src : sources)
    lengths.push_back(document_lengths(o.data_dir, src, o.split, tok, o.base));
  return choose_text_length(o.text_tokens, o.per_set, lengths);
}

}  // namespace

RouteEval evaluate_router(const RouteEvalOptions& o) {
  const auto model = Model::load(o.base);
  const Tokenizer tok = Tokenizer::from_gguf(model->gguf());
  if (o.experts.empty()) fail("router evaluation: no experts");
  std::vector<std::shared_ptr<const LoraAdapter>> adapters;
  std::vector<ExpertKey> keys;
  std::vector<std::string> names;
  for (const auto& [name, path] : o.experts) {
    adapters.push_back(LoraAdapter::load(path, *model));
    const auto key = read_key(*GgufFile::open(path));
    if (!key) fail(path, ": no router key (clone lora keys writes one)");
    if (key->embedder != o.embedder)
      fail(path, ": its key was made with ", key->embedder, ", the evaluation uses ", o.embedder);
    keys.push_back(*key);
    names.push_back(name);
  }
  const auto index_of = [&](const std::string& n) -> int64_t {
    const auto it = std::find(names.begin(), names.end(), n);
    return it == names.end() ? -1 : it - names.begin();
  };
  auto hidden = make_hidden_embedder(o.embedder, model, o.threads);
  RouterOptions soft_o = o.router, top1_o = o.router, uni_o = o.router;
  soft_o.mixing = Mixing::Soft, top1_o.mixing = Mixing::Top1, uni_o.mixing = Mixing::Uniform;
  const Router soft(keys, soft_o), top1(keys, top1_o), uniform(keys, uni_o);
  std::vector<Router> grid;
  for (RouterOptions g : o.soft_grid) {
    g.mixing = Mixing::Soft;
    grid.emplace_back(keys, g);
  }

  // The TF-IDF baseline: fitted on, and keyed by, the same training prompts.
  const std::vector<ExpertKey> bank = make_tfidf_keys(o.data_dir, names, tok, o.base);
  TfIdfEmbedder tfidf(bank.front().tfidf_idf);
  const std::vector<ExpertKey> tf_keys = tfidf_router_keys(bank);
  RouterOptions tf_o = top1_o;
  tf_o.centre = false;  // the baseline as it was judged
  const Router tf_router(tf_keys, tf_o);
  // The segments' router (RouteEvalOptions::segment).
  if (o.segment_embedder != "hidden" && o.segment_embedder != "tfidf" &&
      o.segment_embedder != "unigram")
    fail("router evaluation: segment embedder is hidden, tfidf or unigram, not ",
         o.segment_embedder);
  const bool seg_hidden = o.segment_embedder == "hidden";
  UnigramEmbedder unigram(tok.n_vocab(), tok.bos());
  RouterOptions seg_o = soft_o;
  if (o.segment_temperature > 0) seg_o.temperature = o.segment_temperature;
  if (!seg_hidden) seg_o.centre = false;
  const Router seg_router(seg_hidden                      ? keys
                          : o.segment_embedder == "tfidf" ? tf_keys
                                                          : unigram_router_keys(make_unigram_keys(
                                                                o.data_dir, names, tok, o.base)),
                          seg_o);
  Embedder& seg_embedder = seg_hidden                      ? *hidden
                           : o.segment_embedder == "tfidf" ? static_cast<Embedder&>(tfidf)
                                                           : unigram;
  const auto seg_weights = [&](std::span<const int32_t> t) {
    return seg_router.weights(seg_embedder.embed(t));
  };
  // The other embedding's router (RouteEvalOptions::segment_cross_check): the hidden one for
  // TF-IDF or unigram segments, TF-IDF for hidden ones; only its top expert is read.
  const auto other_weights = [&](std::span<const int32_t> t) {
    return seg_hidden ? tf_router.weights(tfidf.embed(t)) : soft.weights(hidden->embed(t));
  };

  // The held-out sets.
  std::vector<Set> sets;
  for (size_t e = 0; e < names.size(); ++e) {
    Set s;
    s.name = names[e];
    s.right = {e};
    s.text = is_domain(names[e]);
    s.tokens = s.text ? text_length(o, {names[e]}, tok) : 0;
    const PromptSet p = prompt_set(o.data_dir, names[e], o.split, tok, o.base, o.per_set,
                                   s.text ? s.tokens : 64, 0);
    for (size_t i = 0; i < p.prompts.size(); ++i)
      s.items.push_back({p.prompts[i], s.text ? "" : p.answers[i]});
    sets.push_back(std::move(s));
  }
  for (const auto& [a, b] : o.mixed_texts) {
    const int64_t ia = index_of(a), ib = index_of(b);
    if (ia < 0 || ib < 0) continue;
    Set s;
    s.name = a + " + " + b;
    s.right = {static_cast<size_t>(ia), static_cast<size_t>(ib)};
    s.tokens = text_length(o, {a, b}, tok);
    const int64_t half = s.tokens / 2, shift = o.mixed_shift;
    if (shift < 0 || shift >= half - 1)
      fail("router evaluation: a mixed-text shift of ", shift, " tokens in texts of ", s.tokens);
    const PromptSet pa =
        prompt_set(o.data_dir, a, o.split, tok, o.base, o.per_set, half + shift, 0);
    const PromptSet pb =
        prompt_set(o.data_dir, b, o.split, tok, o.base, o.per_set, half - shift + 1, 0);
    for (size_t i = 0; i < std::min(pa.prompts.size(), pb.prompts.size()); ++i) {
      Item it{pa.prompts[i], "", static_cast<int64_t>(pa.prompts[i].size())};
      it.tokens.insert(it.tokens.end(), pb.prompts[i].begin() + 1, pb.prompts[i].end());
      s.items.push_back(std::move(it));
    }
    sets.push_back(std::move(s));
  }
  for (const std::string& t : o.mixed_tasks) {
    if (t != "add_words") fail("router evaluation: no expert pair known for mixed task ", t);
    const int64_t ia = index_of("addition"), ib = index_of("number_words");
    if (ia < 0 || ib < 0) continue;
    Set s;
    s.name = t;
    s.right = {static_cast<size_t>(ia), static_cast<size_t>(ib)};
    s.text = false;
    // The data builder writes add_words for the test split only (it judges composition).
    const auto path = std::filesystem::path(o.data_dir) / "tasks" / t / (o.split + ".jsonl");
    if (o.split != "test" && std::filesystem::file_size(path) == 0) continue;
    const PromptSet p = prompt_set(o.data_dir, t, o.split, tok, o.base, o.per_set, 64, 0);
    for (size_t i = 0; i < p.prompts.size(); ++i) s.items.push_back({p.prompts[i], p.answers[i]});
    sets.push_back(std::move(s));
  }

  Context ctx(model, {std::max<int64_t>(o.text_tokens, 64) + o.max_new + 8, o.threads, 256});
  const auto use = [&](const std::vector<double>& w) {
    std::vector<ActiveLora> mix;
    for (size_t e = 0; e < w.size(); ++e)
      if (w[e] > 0) mix.push_back({adapters[e], static_cast<float>(w[e])});
    ctx.set_loras(mix);
  };
  const auto one_hot = [&](size_t e) {
    std::vector<double> w(names.size(), 0.0);
    w[e] = 1;
    return w;
  };
  // Adds a text's score when its parts [starts[i], starts[i + 1]) run under weights[i], one
  // cache throughout (only the experts change between parts).
  const auto score_parts = [&](const std::vector<int32_t>& t, const std::vector<int64_t>& starts,
                               const std::vector<std::vector<double>>& weights, Acc& acc) {
    const auto n = static_cast<int64_t>(t.size());
    const int64_t V = model->config().n_vocab;
    ctx.reset();
    for (size_t i = 0; i < starts.size(); ++i) {
      const int64_t start = starts[i], end = i + 1 < starts.size() ? starts[i + 1] : n;
      use(weights[i]);
      const auto logits = ctx.eval(
          std::span(t).subspan(static_cast<size_t>(start), static_cast<size_t>(end - start)), true);
      for (int64_t j = start; j < end && j + 1 < n; ++j) {
        acc.sum += nll(logits.data() + (j - start) * V, V, t[static_cast<size_t>(j + 1)]);
        ++acc.n;
      }
    }
  };
  // Adds one item's score under weights w: a text as one part, a task by greedy generation.
  const auto score = [&](const Item& it, bool text, const std::vector<double>& w, Acc& acc) {
    if (text) return score_parts(it.tokens, {0}, {w}, acc);
    use(w);
    ctx.reset();
    GenerateParams gp;
    gp.max_new = o.max_new;
    gp.sampling.temperature = 0;
    gp.eos = tok.eos();
    acc.sum += trim(tok.decode(generate(ctx, it.tokens, gp).tokens)) == trim(it.answer);
    ++acc.n;
  };

  // Soft MoE per segment (RouteEvalOptions::segment): a text scored in segments, each under
  // the weights of its segment_window_tokens blended with the request's (the whole text's
  // for Own, its first segment's for Before), once per RouteEvalOptions::segment_blends. A
  // task's prompt is routed the same way and its answer generated under the last part's
  // weights (as the server's output continues the last part). An item of at most one part is
  // routed whole, as the server routes a prompt no longer than a part (the shipped tasks').
  const auto score_segments = [&](const Item& it, bool text, const std::vector<double>& whole,
                                  std::vector<Acc>& accs) {
    const auto& t = it.tokens;
    const auto n = static_cast<int64_t>(t.size());
    if (n <= o.segment) {
      for (Acc& a : accs) score(it, text, whole, a);
      return;
    }
    std::vector<int64_t> starts;
    std::vector<std::vector<double>> ws, others;
    for (int64_t start = 0; start < n; start += o.segment) {
      starts.push_back(start);
      const auto window = segment_window_tokens(t, start, std::min(n, start + o.segment),
                                                o.segment_route, o.segment_window, tok.bos());
      ws.push_back(seg_weights(window));
      if (o.segment_cross_check) others.push_back(other_weights(window));
    }
    const std::vector<double> request = o.segment_route == SegmentRoute::Before ? ws[0] : whole;
    std::vector<bool> agrees =
        o.segment_neighbours ? agrees_with_a_neighbour(ws) : std::vector<bool>(ws.size(), true);
    if (o.segment_cross_check) {
      const std::vector<bool> same = same_top_expert(ws, others);
      for (size_t i = 0; i < agrees.size(); ++i) agrees[i] = agrees[i] && same[i];
    }
    if (o.segment_in_whole > 0) {
      const std::vector<bool> in = top_expert_in_whole(ws, seg_weights(t), o.segment_in_whole);
      for (size_t i = 0; i < agrees.size(); ++i) agrees[i] = agrees[i] && in[i];
    }
    for (size_t b = 0; b < o.segment_blends.size(); ++b) {
      std::vector<std::vector<double>> blended;
      for (size_t i = 0; i < ws.size(); ++i)
        blended.push_back(agrees[i] ? blend_weights(ws[i], request, o.segment_blends[b],
                                                    o.segment_gated, o.segment_confidence)
                                    : request);
      if (text)
        score_parts(t, starts, blended, accs[b]);
      else
        score(it, false, blended.back(), accs[b]);
    }
  };

  RouteEval r;
  if (o.segment > 0) r.segment_blends = o.segment_blends;
  for (const Set& s : sets) {
    RouteSetResult res;
    res.set = s.name;
    for (size_t e : s.right) res.right.push_back(names[e]);
    res.text = s.text;
    res.items = static_cast<int64_t>(s.items.size());
    res.tokens = s.tokens;
    Acc base, soft_a, top1_a, uni_a;
    std::vector<Acc> seg_a(o.segment_blends.size());
    Acc halves;
    std::vector<Acc> single(s.right.size()), grid_a(grid.size());
    int64_t hit_h = 0, hit_t = 0;
    double weight = 0;
    for (const Item& it : s.items) {
      const std::vector<float> eh = hidden->embed(it.tokens);
      const std::vector<double> ws = soft.weights(eh), w1 = top1.weights(eh);
      const auto is_right = [&](const std::vector<double>& w) {
        const auto best = static_cast<size_t>(std::max_element(w.begin(), w.end()) - w.begin());
        return std::find(s.right.begin(), s.right.end(), best) != s.right.end();
      };
      hit_h += is_right(w1);
      hit_t += is_right(tf_router.weights(tfidf.embed(it.tokens)));
      const double total = std::accumulate(ws.begin(), ws.end(), 0.0);
      for (size_t e : s.right) weight += ws[e] / total;  // a share, however the weights scale
      score(it, s.text, std::vector<double>(names.size(), 0.0), base);
      for (size_t k = 0; k < s.right.size(); ++k) score(it, s.text, one_hot(s.right[k]), single[k]);
      score(it, s.text, ws, soft_a);
      score(it, s.text, w1, top1_a);
      score(it, s.text, uniform.weights(eh), uni_a);
      if (o.segment > 0) score_segments(it, s.text, ws, seg_a);
      if (it.joint > 0)  // each half under its own source's expert
        score_parts(it.tokens, {0, it.joint}, {one_hot(s.right[0]), one_hot(s.right[1])}, halves);
      for (size_t g = 0; g < grid.size(); ++g) score(it, s.text, grid[g].weights(eh), grid_a[g]);
    }
    for (const Acc& a : grid_a) res.grid.push_back(a.value(s.text));
    const double n = static_cast<double>(std::max<int64_t>(1, res.items));
    res.top1_hidden = 100.0 * static_cast<double>(hit_h) / n;
    res.top1_tfidf = 100.0 * static_cast<double>(hit_t) / n;
    res.right_weight = weight / n;
    res.base = base.value(s.text);
    res.soft = soft_a.value(s.text);
    res.top1 = top1_a.value(s.text);
    res.uniform = uni_a.value(s.text);
    if (o.segment > 0)
      for (const Acc& a : seg_a) res.segmented.push_back(a.value(s.text));
    if (halves.n > 0) res.right_per_half = halves.value(true);
    res.right_single = single[0].value(s.text);
    for (const Acc& a : single)
      res.right_single = s.text ? std::min(res.right_single, a.value(true))
                                : std::max(res.right_single, a.value(false));
    if (o.verbose)
      std::fprintf(stderr,
                   "router: %-22s %3lld items | top-1 %5.1f%% (tf-idf %5.1f%%) | right weight "
                   "%.2f | base %.3f right %.3f soft %.3f top1 %.3f uniform %.3f segmented %.3f\n",
                   res.set.c_str(), static_cast<long long>(res.items), res.top1_hidden,
                   res.top1_tfidf, res.right_weight, res.base, res.right_single, res.soft, res.top1,
                   res.uniform, res.segmented.empty() ? -1.0 : res.segmented.back());
    r.sets.push_back(res);
  }

  // Cost: the embedding (k layers, no head) against the prefill of the same 64-token prompt.
  std::vector<int32_t> prompt(static_cast<size_t>(r.cost_prompt_tokens));
  for (size_t i = 0; i < prompt.size(); ++i)
    prompt[i] = static_cast<int32_t>(3 + i * 37 % (tok.n_vocab() - 3));
  ctx.set_loras({});
  double embed = 1e30, prefill = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = Clock::now();
    (void)hidden->embed(prompt);
    embed = std::min(embed, ms_since(t0));
    ctx.reset();
    t0 = Clock::now();
    (void)ctx.eval(prompt);
    prefill = std::min(prefill, ms_since(t0));
  }
  r.embed_ms = embed;
  r.prefill_ms = prefill;
  const device::CostModel cm(device::DeviceProfile::find(o.profile), model->config());
  const auto k = static_cast<int>(dynamic_cast<HiddenEmbedder&>(*hidden).layers());
  for (int l = 0; l <= cm.n_layer(); ++l) {
    const double t =
        cm.cost(cm.work(l, Phase::Prefill, 0, r.cost_prompt_tokens), cm.max_level(), 0).time_s *
        1e3;
    r.board_prefill_ms += t;
    if (l < k) r.board_embed_ms += t;
  }
  return r;
}

Table routing_table(const RouteEval& e) {
  Table t({"held-out set", "right experts", "items", "text tokens",
           "top-1 right, base-model embedding (%)", "top-1 right, TF-IDF (%)",
           "soft weight on the right experts"});
  t.set_precision(2);
  for (const auto& s : e.sets) {
    std::string right;
    for (const auto& r : s.right) right += (right.empty() ? "" : " + ") + r;
    t.add({s.set, right, static_cast<long long>(s.items),
           s.text ? std::to_string(s.tokens) : std::string("prompt"), s.top1_hidden, s.top1_tfidf,
           s.right_weight});
  }
  return t;
}

Table quality_table(const RouteEval& e) {
  std::vector<std::string> head = {"held-out set", "measure", "base",   "right single expert",
                                   "soft MoE",     "top-1",   "uniform"};
  const bool halves = std::any_of(e.sets.begin(), e.sets.end(),
                                  [](const auto& s) { return s.right_per_half >= 0; });
  if (halves) head.emplace_back("right expert per half");
  for (double l : e.segment_blends) {
    char h[64];
    if (l == 1.0)
      std::snprintf(h, sizeof h, "soft MoE per segment");
    else
      std::snprintf(h, sizeof h, "soft MoE per segment, blend %.2g", l);
    head.emplace_back(h);
  }
  Table t(head);
  t.set_precision(2);
  for (const auto& s : e.sets) {
    std::vector<Table::Cell> row = {
        s.set,    std::string(s.text ? "perplexity" : "exact match (%)"),
        s.base,   s.right_single,
        s.soft,   s.top1,
        s.uniform};
    if (halves)
      row.push_back(s.right_per_half >= 0 ? Table::Cell(s.right_per_half)
                                          : Table::Cell(std::string("-")));
    for (size_t b = 0; b < e.segment_blends.size(); ++b)
      row.push_back(b < s.segmented.size() ? Table::Cell(s.segmented[b])
                                           : Table::Cell(std::string("-")));
    t.add(row);
  }
  return t;
}

int64_t choose_text_length(int64_t longest, int64_t per_set,
                           const std::vector<std::vector<int64_t>>& doc_lengths) {
  int64_t best = longest, best_n = -1;
  for (int64_t L : {longest, longest * 3 / 4, longest / 2, longest / 3, longest / 4}) {
    if (L < 32) break;
    const int64_t need = doc_lengths.size() == 1 ? L : L / 2 + 1;  // each half of a joined text
    int64_t n = per_set;
    for (const auto& v : doc_lengths)
      n = std::min<int64_t>(
          n, std::count_if(v.begin(), v.end(), [&](int64_t x) { return x >= need; }));
    if (2 * n >= per_set) return L;
    if (n > best_n) best_n = n, best = L;
  }
  return best;
}

double gap_to_right(const RouteSetResult& s, double soft_value) {
  return s.text ? 100.0 * (soft_value / s.right_single - 1.0) : s.right_single - soft_value;
}

size_t best_grid_setting(const RouteEval& e) {
  size_t best = 0;
  double best_gap = 1e300;
  const size_t n = e.sets.empty() ? 0 : e.sets[0].grid.size();
  for (size_t g = 0; g < n; ++g) {
    double sum = 0;
    for (const auto& s : e.sets) sum += gap_to_right(s, s.grid[g]);
    if (sum < best_gap) best_gap = sum, best = g;
  }
  return best;
}

Table grid_table(const RouteEval& e, const std::vector<RouterOptions>& grid) {
  std::vector<std::string> head = {"temperature", "threshold"};
  for (const auto& s : e.sets) head.push_back(s.set + (s.text ? " (ppl)" : " (EM %)"));
  head.push_back("mean gap to the right expert");
  Table t(head);
  t.set_precision(3);
  for (size_t g = 0; g < grid.size(); ++g) {
    std::vector<Table::Cell> row;
    row.emplace_back(grid[g].temperature);
    row.emplace_back(grid[g].threshold);
    double sum = 0;
    for (const auto& s : e.sets) {
      row.push_back(s.grid[g]);
      sum += gap_to_right(s, s.grid[g]);
    }
    row.push_back(sum / static_cast<double>(std::max<size_t>(1, e.sets.size())));
    t.add(row);
  }
  std::vector<Table::Cell> right;
  right.emplace_back(std::string("right expert"));
  right.emplace_back(std::string("-"));
  for (const auto& s : e.sets) right.push_back(s.right_single);
  right.push_back(0.0);
  t.add(right);
  return t;
}

}  // namespace cln::serve
