#include "clone/eval/nll.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "clone/core/error.h"

namespace cln::eval {

std::string Windows::describe() const {
  std::string s = std::to_string(starts.size()) + " windows of " + std::to_string(n_ctx) +
                  " tokens, predictions " + std::to_string(score_from) + ".." +
                  std::to_string(score_to - 1) + " scored (" + std::to_string(scored()) +
                  " tokens)";
  if (bos >= 0) s += ", first token replaced by BOS";
  return s;
}

double NllResult::ppl() const {
  return std::exp(mean_nll);
}

Windows llama_windows(int64_t n_tokens, int64_t n_ctx, int64_t stride, int64_t score_from,
                      int32_t bos) {
  const int64_t S = stride > 0 ? stride : n_ctx;
  const int64_t F = score_from >= 0 ? score_from : n_ctx / 2;
  if (n_ctx < 2) fail("perplexity: context must be at least 2 tokens, got ", n_ctx);
  if (F > n_ctx - 2)
    fail("perplexity: score_from ", F, " leaves nothing to score in a window of ", n_ctx);
  if (n_tokens < n_ctx)
    fail("perplexity: the text has ", n_tokens, " tokens, fewer than one window of ", n_ctx);
  Windows w;
  for (int64_t k = 0; k < (n_tokens - n_ctx) / S + 1; ++k) w.starts.push_back(k * S);
  w.n_ctx = n_ctx;
  w.score_from = F;
  w.score_to = n_ctx - 1;
  w.bos = bos;
  return w;
}

Windows even_windows(int64_t n_tokens, int64_t seq_len, int64_t max_windows) {
  if (seq_len < 1) fail("evaluation: the window must hold at least one token");
  const int64_t avail = n_tokens - seq_len - 1;
  if (avail < 0)
    fail("evaluation: a stream of ", n_tokens, " tokens is shorter than one window of ",
         seq_len + 1);
  const int64_t n = std::min<int64_t>(std::max<int64_t>(1, max_windows), avail / seq_len + 1);
  Windows w;
  for (int64_t k = 0; k < n; ++k) w.starts.push_back(n > 1 ? k * (avail / (n - 1)) : 0);
  w.n_ctx = seq_len;
  w.score_from = 0;
  w.score_to = seq_len;
  return w;
}

namespace {

template <typename T>
NllResult run(Context& ctx, std::span<const T> tokens, const Windows& w, const Progress& progress) {
  const int64_t C = w.n_ctx, N = static_cast<int64_t>(tokens.size());
  if (C > ctx.n_ctx()) fail("perplexity: window of ", C, " exceeds the context of ", ctx.n_ctx());
  if (w.score_from < 0 || w.score_to > C || w.score_from >= w.score_to)
    fail("perplexity: scored positions [", w.score_from, ", ", w.score_to,
         ") do not fit a window of ", C);
  const int64_t nv = ctx.model().config().n_vocab;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<int32_t> win(static_cast<size_t>(C));
  NllResult r;
  double nll = 0;
  for (size_t k = 0; k < w.starts.size(); ++k) {
    const int64_t s = w.starts[k];
    if (s < 0 || s + C > N || s + w.score_to >= N)  // inputs and every target in the stream
      fail("perplexity: window ", k, " at ", s, " runs past the ", N, "-token stream");
    for (int64_t j = 0; j < C; ++j)
      win[static_cast<size_t>(j)] = static_cast<int32_t>(tokens[static_cast<size_t>(s + j)]);
    if (w.bos >= 0) win[0] = w.bos;
    ctx.reset();
    const std::span<const float> logits = ctx.eval(win, true);
    for (int64_t j = w.score_from; j < w.score_to; ++j) {
      const float* l = logits.data() + j * nv;
      double mx = l[0];
      for (int64_t v = 1; v < nv; ++v) mx = std::max(mx, static_cast<double>(l[v]));
      double sum = 0;
      for (int64_t v = 0; v < nv; ++v) sum += std::exp(static_cast<double>(l[v]) - mx);
      const auto target = static_cast<int32_t>(tokens[static_cast<size_t>(s + j + 1)]);
      nll += (std::log(sum) + mx) - static_cast<double>(l[target]);
      ++r.scored;
    }
    ++r.windows;
    if (progress)
      progress(r.windows, static_cast<int64_t>(w.starts.size()),
               std::exp(nll / static_cast<double>(r.scored)));
  }
  if (r.scored == 0) fail("perplexity: no prediction to score");
  r.mean_nll = nll / static_cast<double>(r.scored);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.tokens_per_s = static_cast<double>(r.windows * C) / std::max(r.seconds, 1e-9);
  return r;
}

}  // namespace

NllResult windowed_nll(Context& ctx, std::span<const int32_t> tokens, const Windows& w,
                       const Progress& progress) {
  return run(ctx, tokens, w, progress);
}
NllResult windowed_nll(Context& ctx, std::span<const uint16_t> tokens, const Windows& w,
                       const Progress& progress) {
  return run(ctx, tokens, w, progress);
}

double unigram_nll(std::span<const uint16_t> train, int64_t n_vocab,
                   std::span<const uint16_t> tokens, const Windows& w) {
  std::vector<double> counts(static_cast<size_t>(n_vocab), 1.0);
  for (uint16_t t : train) {
    if (t >= n_vocab) fail("unigram: token ", t, " is outside the vocabulary of ", n_vocab);
    counts[t] += 1.0;
  }
  double total = 0;
  for (double c : counts) total += c;
  double nll = 0;
  for (int64_t s : w.starts)
    for (int64_t j = w.score_from; j < w.score_to; ++j)
      nll -= std::log(counts.at(tokens[static_cast<size_t>(s + j + 1)]) / total);
  return nll / static_cast<double>(w.scored());
}

}  // namespace cln::eval
