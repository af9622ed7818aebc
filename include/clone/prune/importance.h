// How much each prunable unit matters, by five methods behind one call (higher = keep):
//
//   magnitude   sum of squared weights over the unit's coupled group
//   wanda       structured Wanda: sum over the group of |w| x the L2 norm (over calibration
//               tokens) of the input feature the weight reads
//   taylor      first-order Taylor (LLM-Pruner, vector-wise): |sum over the group of g w|,
//               g the gradient of the calibration loss, i.e. the loss change when the group
//               is zeroed, to first order
//   block       Block Influence (ShortGPT), halves only: 1 - mean over tokens of the cosine
//               between a half's residual stream before and after it
//   random      uniform draws from the seed
//
// Groups: a query head is its Q rows and its O columns; a KV group is its query heads plus
// its K and V rows; an FFN channel is its gate row, up row and down column; a half is all
// of its matrices.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "clone/train/llama.h"

namespace cln::prune {

enum class Method { Magnitude, Wanda, Taylor, Block, Random };
Method method_from_name(const std::string& name);  // throws listing the names
std::string method_name(Method m);

struct Scores {
  Method method = Method::Magnitude;
  std::vector<std::vector<double>> head;  // [layer][n_head] (empty for block)
  std::vector<std::vector<double>> kv;    // [layer][n_head_kv] (empty for block)
  std::vector<std::vector<double>> ff;    // [layer][n_ff] (empty for block)
  std::vector<double> attn, ffn;          // [layer]; 0 where the layer has no such half
};

// Calibration text: n_seq sequences of seq_len tokens (next-token targets are the
// tokens shifted by one, so tokens.size() == n_seq * (seq_len + 1)), run in batches of
// `batch` sequences. Magnitude and random read no data.
struct Calibration {
  std::vector<int32_t> tokens;
  int64_t n_seq = 0, seq_len = 0, batch = 4;
  int threads = 1;
};

// n_seq windows of seq_len + 1 tokens from the corpora's `split` token files (clone data
// build), the domains in turn, each at a seeded random position. Throws naming a missing
// file or a tokenizer that is not the model's.
Calibration calibration_from_data(const std::string& data_dir, const Vocab& vocab, int64_t n_seq,
                                  int64_t seq_len, uint64_t seed,
                                  const std::string& split = "train");

// The model's weights are read (and, for taylor, gradients computed through them); the
// model is left as it was.
Scores score(Method m, train::LlamaModel& model, const Calibration& cal, uint64_t seed = 1);

}  // namespace cln::prune
