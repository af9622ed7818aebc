// Windowed negative log-likelihood through the engine: the one scoring loop behind every
// perplexity clone reports (`clone perplexity`, the trainer's validation loss and test
// table, the expert tables). A protocol says which windows of a token stream are run, each
// from an empty cache, and which predictions in each window are scored; two protocols are
// named here so that every table can state which one it used.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "clone/engine/context.h"

namespace cln::eval {

struct Windows {
  std::vector<int64_t> starts;  // first token of each window in the stream
  int64_t n_ctx = 0;            // tokens run per window
  // In each window, the logits at positions j in [score_from, score_to) are scored against
  // token start + j + 1 (score_to may be n_ctx: the token right after the window).
  int64_t score_from = 0, score_to = 0;
  int32_t bos = -1;  // >= 0: replaces each window's first token (llama-perplexity)
  int64_t scored() const { return static_cast<int64_t>(starts.size()) * (score_to - score_from); }
  // One line for a table: "windows of 256 tokens, 64 evenly spaced, all 256 predictions scored".
  std::string describe() const;
};

// llama-perplexity's protocol: windows of n_ctx tokens every `stride` tokens (0: n_ctx),
// first token replaced by BOS, predictions j in [score_from, n_ctx - 2] scored (score_from
// -1: n_ctx / 2), so only tokens inside the window are predicted.
Windows llama_windows(int64_t n_tokens, int64_t n_ctx, int64_t stride = 0, int64_t score_from = -1,
                      int32_t bos = 1);
// The training protocol: up to max_windows windows of seq_len tokens spread evenly over
// the stream (first at 0, last ending one token before the end), every prediction scored,
// the last one's target being the token after the window.
Windows even_windows(int64_t n_tokens, int64_t seq_len, int64_t max_windows);

struct NllResult {
  double mean_nll = 0;  // nats per scored token
  int64_t scored = 0, windows = 0;
  double seconds = 0;
  double tokens_per_s = 0;  // tokens run (windows x n_ctx) per second
  double ppl() const;
};

// Runs every window through ctx (from an empty cache; the context's LoRA experts apply)
// and scores it. Throws cln::Error if a window does not fit the stream or the context.
// progress(window, n_windows, running ppl) after each window, if set.
using Progress = std::function<void(int64_t, int64_t, double)>;
NllResult windowed_nll(Context& ctx, std::span<const int32_t> tokens, const Windows& w,
                       const Progress& progress = {});
NllResult windowed_nll(Context& ctx, std::span<const uint16_t> tokens, const Windows& w,
                       const Progress& progress = {});

// The same predictions under a unigram model fitted on `train` with add-one smoothing
// over a vocabulary of n_vocab: the floor any language model must beat.
double unigram_nll(std::span<const uint16_t> train, int64_t n_vocab,
                   std::span<const uint16_t> tokens, const Windows& w);

}  // namespace cln::eval
