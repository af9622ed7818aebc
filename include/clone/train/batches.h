// Training batches. The batch of step s depends only on (seed, s): resuming a run needs
// no loader state, and two runs with one seed see the same data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "clone/data/corpus.h"
#include "clone/tokenizer/tokenizer.h"

namespace cln::train {

// Windows of seq_len + 1 tokens drawn from several token streams.
class WindowSampler {
 public:
  // weight: relative share of windows drawn from this stream.
  void add(std::string name, std::vector<uint16_t> tokens, double weight);
  // tokens/targets [n_seq * seq_len]: targets are tokens shifted by one.
  void batch(uint64_t seed, int64_t step, int64_t n_seq, int64_t seq_len,
             std::vector<int32_t>* tokens, std::vector<int32_t>* targets) const;
  size_t size() const { return streams_.size(); }
  const std::string& name(size_t i) const { return streams_[i].name; }
  double share(size_t i) const;

 private:
  struct Stream {
    std::string name;
    std::vector<uint16_t> tokens;
    double weight;
  };
  std::vector<Stream> streams_;
};

// Task items as token sequences: BOS prompt answer EOS, and where the answer starts.
struct TaskItems {
  std::vector<std::vector<int32_t>> items;
  std::vector<int32_t> prompt_len;
};
// Encodes items (those whose answer encodes to nothing are left out).
TaskItems encode_task_items(const std::vector<data::TaskItem>& items, const Tokenizer& tok);

// Task items packed into rows of seq_len tokens: BOS prompt answer EOS, repeated; the
// targets are -1 except on the answer and its EOS.
void task_batch(const std::vector<std::vector<int32_t>>& items,
                const std::vector<int32_t>& prompt_len, uint64_t seed, int64_t step, int64_t n_seq,
                int64_t seq_len, int32_t pad, std::vector<int32_t>* tokens,
                std::vector<int32_t>* targets);

}  // namespace cln::train
