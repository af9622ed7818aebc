#include "clone/engine/perplexity.h"

#include <chrono>
#include <cmath>
#include <vector>

#include "clone/core/error.h"

namespace cln {

PerplexityResult perplexity(Context& ctx, std::span<const int32_t> tokens, const PerplexityParams& p,
                            const std::function<void(int64_t, int64_t, double)>& progress) {
  const int64_t C = p.n_ctx, S = p.stride > 0 ? p.stride : p.n_ctx;
  const int64_t F = p.score_from >= 0 ? p.score_from : p.n_ctx / 2;
  const auto N = static_cast<int64_t>(tokens.size());
  if (C < 2) fail("perplexity: context must be at least 2 tokens, got ", C);
  if (C > ctx.n_ctx()) fail("perplexity: window of ", C, " exceeds the context of ", ctx.n_ctx());
  if (F > C - 2) fail("perplexity: score_from ", F, " leaves nothing to score in a window of ", C);
  if (N < C) fail("perplexity: the text has ", N, " tokens, fewer than one window of ", C);
  const int64_t n_chunks = (N - C) / S + 1;
  const int64_t nv = ctx.model().config().n_vocab;
  const auto t0 = std::chrono::steady_clock::now();
  double nll = 0;
  int64_t scored = 0;
  std::vector<int32_t> win(static_cast<size_t>(C));
  for (int64_t k = 0; k < n_chunks; ++k) {
    std::copy(tokens.begin() + k * S, tokens.begin() + k * S + C, win.begin());
    if (p.bos >= 0) win[0] = p.bos;
    ctx.reset();
    auto logits = ctx.eval(win, true);
    for (int64_t j = F; j < C - 1; ++j) {
      const float* l = logits.data() + j * nv;
      double mx = l[0];
      for (int64_t v = 1; v < nv; ++v) mx = std::max(mx, static_cast<double>(l[v]));
      double sum = 0;
      for (int64_t v = 0; v < nv; ++v) sum += std::exp(static_cast<double>(l[v]) - mx);
      nll += (std::log(sum) + mx) - l[win[static_cast<size_t>(j + 1)]];
      ++scored;
    }
    if (progress) progress(k + 1, n_chunks, std::exp(nll / static_cast<double>(scored)));
  }
  PerplexityResult r;
  r.n_scored = scored;
  r.n_chunks = n_chunks;
  r.mean_nll = nll / static_cast<double>(scored);
  r.ppl = std::exp(r.mean_nll);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.tokens_per_s = static_cast<double>(n_chunks * C) / r.seconds;
  return r;
}

}  // namespace cln
