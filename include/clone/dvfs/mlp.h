// The learned controller's network: inputs -> tanh hidden -> sigmoid output, the output
// being the clock as a fraction of the way from the lowest to the highest level.
// Plain arrays, no allocation per call: a decision is a few hundred multiply-adds.
// Trained by dvfs/mlp_fit.h through the shared autograd; this is the inference copy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cln::dvfs {

struct Mlp {
  int n_in = 0, n_hidden = 0;
  std::vector<float> w1;  // [n_hidden, n_in]
  std::vector<float> b1;  // [n_hidden]
  std::vector<float> w2;  // [n_hidden]
  float b2 = 0;
  std::vector<float> mean, scale;  // per-input normalisation: (x - mean) * scale

  void init(int inputs, int hidden, uint64_t seed);
  int n_params() const { return n_hidden * n_in + n_hidden + n_hidden + 1; }
  float forward(const float* x) const;  // in (0, 1); x raw, normalised here

  void save(const std::string& path, const std::string& meta_json = "{}") const;
  static Mlp load(const std::string& path);  // throws cln::Error naming the bad field
};

// What a weights file's "meta" says about how it was made; fields it lacks stay empty / 0.
struct MlpMeta {
  std::string profile, mode, model;
  int64_t model_params = 0;  // parameter count of the model trained for (0: not recorded)
};
MlpMeta load_mlp_meta(const std::string& path);  // throws cln::Error as Mlp::load

}  // namespace cln::dvfs
