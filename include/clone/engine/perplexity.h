// Perplexity over a token sequence, chunked as llama-perplexity does: windows of n_ctx
// tokens starting every `stride` tokens, each run from an empty cache with its first
// token replaced by BOS, scoring the prediction of token j+1 from the logits at j for
// j in [score_from, n_ctx - 2]. Defaults (stride = n_ctx, score_from = n_ctx / 2) are
// llama-perplexity's protocol.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "clone/engine/context.h"

namespace cln {

struct PerplexityParams {
  int64_t n_ctx = 512;
  int64_t stride = 0;      // 0 = n_ctx
  int64_t score_from = -1; // -1 = n_ctx / 2
  int32_t bos = 1;         // replaces each window's first token; -1 keeps it
};

struct PerplexityResult {
  double ppl = 0;
  double mean_nll = 0;
  int64_t n_scored = 0;
  int64_t n_chunks = 0;
  double seconds = 0;
  double tokens_per_s = 0;  // tokens evaluated (windows x n_ctx) per second
};

// progress(chunk, n_chunks, running ppl) after each window, if set.
PerplexityResult perplexity(Context& ctx, std::span<const int32_t> tokens, const PerplexityParams& p,
                            const std::function<void(int64_t, int64_t, double)>& progress = {});

}  // namespace cln
