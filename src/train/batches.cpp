// Training batches: windows of token streams, and task items packed into rows. The batch
// of step s depends only on (seed, s), so a resumed run needs no loader state.
#include "clone/train/batches.h"

#include "clone/core/error.h"
#include "clone/core/rng.h"

namespace cln::train {

void WindowSampler::add(std::string name, std::vector<uint16_t> tokens, double weight) {
  if (!(weight > 0)) fail("sampler: stream '", name, "' needs a positive weight");
  streams_.push_back({std::move(name), std::move(tokens), weight});
}

double WindowSampler::share(size_t i) const {
  double total = 0;
  for (const Stream& s : streams_) total += s.weight;
  return streams_[i].weight / total;
}

void WindowSampler::batch(uint64_t seed, int64_t step, int64_t n_seq, int64_t seq_len,
                          std::vector<int32_t>* tokens, std::vector<int32_t>* targets) const {
  if (streams_.empty()) fail("sampler: no token streams");
  double total = 0;
  for (const Stream& s : streams_) {
    if (static_cast<int64_t>(s.tokens.size()) < seq_len + 2)
      fail("sampler: stream '", s.name, "' has ", s.tokens.size(),
           " tokens, fewer than one window of ", seq_len + 1);
    total += s.weight;
  }
  Rng rng(seed * 0x9e3779b97f4a7c15ull ^ (static_cast<uint64_t>(step) + 0x632be59bd9b4e019ull));
  rng.next();
  tokens->resize(static_cast<size_t>(n_seq * seq_len));
  targets->resize(static_cast<size_t>(n_seq * seq_len));
  for (int64_t b = 0; b < n_seq; ++b) {
    double u = rng.uniform() * total;
    size_t k = 0;
    while (k + 1 < streams_.size() && u >= streams_[k].weight) u -= streams_[k++].weight;
    const std::vector<uint16_t>& t = streams_[k].tokens;
    const uint64_t span = t.size() - static_cast<uint64_t>(seq_len) - 1;
    const uint64_t off = rng.next() % span;
    for (int64_t i = 0; i < seq_len; ++i) {
      (*tokens)[static_cast<size_t>(b * seq_len + i)] = t[off + static_cast<uint64_t>(i)];
      (*targets)[static_cast<size_t>(b * seq_len + i)] = t[off + static_cast<uint64_t>(i) + 1];
    }
  }
}

void task_batch(const std::vector<std::vector<int32_t>>& items,
                const std::vector<int32_t>& prompt_len, uint64_t seed, int64_t step, int64_t n_seq,
                int64_t seq_len, int32_t pad, std::vector<int32_t>* tokens,
                std::vector<int32_t>* targets) {
  if (items.empty()) fail("task batch: no items");
  Rng rng(seed * 0xd1b54a32d192ed03ull ^ (static_cast<uint64_t>(step) + 0x8cb92ba72f3d8dd7ull));
  rng.next();
  tokens->assign(static_cast<size_t>(n_seq * seq_len), pad);
  targets->assign(static_cast<size_t>(n_seq * seq_len), -1);
  for (int64_t b = 0; b < n_seq; ++b) {
    int64_t pos = 0;
    for (;;) {
      const size_t k = static_cast<size_t>(rng.next() % items.size());
      const std::vector<int32_t>& it = items[k];  // BOS prompt answer EOS
      const auto len = static_cast<int64_t>(it.size());
      if (len > seq_len + 1) fail("task item of ", len, " tokens does not fit a row of ", seq_len);
      if (pos + len - 1 > seq_len) break;
      for (int64_t i = 0; i + 1 < len; ++i) {
        const size_t at = static_cast<size_t>(b * seq_len + pos + i);
        (*tokens)[at] = it[static_cast<size_t>(i)];
        // predict the answer and EOS: positions whose next token is past the prompt
        if (i + 1 >= prompt_len[k]) (*targets)[at] = it[static_cast<size_t>(i + 1)];
      }
      pos += len - 1;
    }
  }
}

TaskItems encode_task_items(const std::vector<data::TaskItem>& items, const Tokenizer& tok) {
  TaskItems out;
  for (const data::TaskItem& it : items) {
    std::vector<int32_t> full = tok.encode(it.prompt + it.answer, true);
    const std::vector<int32_t> p = tok.encode(it.prompt, true);
    size_t common = 0;  // the answer starts where prompt and full part
    while (common < p.size() && common < full.size() && p[common] == full[common]) ++common;
    if (common == full.size()) continue;  // empty answer
    full.push_back(tok.eos());
    out.items.push_back(std::move(full));
    out.prompt_len.push_back(static_cast<int32_t>(common));
  }
  return out;
}

}  // namespace cln::train
