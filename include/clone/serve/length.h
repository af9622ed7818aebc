// The output-length predictor: how many tokens a request will generate, from its prompt
// alone (its length and the router's prompt embedding), so the DVFS controller can plan a
// request's decode before seeing its end. Trained on (prompt, generated length) pairs that
// the shipped model and experts produce on the training prompts of every domain and task;
// judged on held-out prompts against the mean length of each prompt's own source (a
// baseline that is told the source, which the predictor is not).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "clone/core/table.h"
#include "clone/dvfs/mlp.h"
#include "clone/engine/model.h"
#include "clone/serve/embed.h"

namespace cln::serve {

struct LengthSample {
  std::string source;
  std::vector<int32_t> prompt;
  int64_t length = 0;  // tokens generated before EOS, or max_new if it never came
};

struct CollectOptions {
  std::string data_dir;  // written by `clone data build`
  // source (domain or task) -> the adapter that serves it (empty: the base model alone)
  std::vector<std::pair<std::string, std::string>> sources;
  std::string split = "train";
  int64_t per_source = 200;
  int64_t max_new = 256;
  double temperature = 0.8;
  uint64_t seed = 1;
  int threads = 0;
};

// Generates from each source's prompts with its expert (sampled, seeded per prompt) and
// records the lengths. Progress goes to stderr.
std::vector<LengthSample> collect_lengths(std::shared_ptr<const Model> base,
                                          const CollectOptions& o);

class OutputLengthModel {
 public:
  // Fits an MLP (dvfs/mlp_fit.h) from [log(1 + prompt length), the embedding] to
  // log(1 + length) / log(1 + cap). Deterministic for a seed.
  static OutputLengthModel train(const std::vector<LengthSample>& samples, Embedder& e, int64_t cap,
                                 int hidden = 32, uint64_t seed = 1, double weight_decay = 1.0);
  // Reads what save() wrote; the embedder is rebuilt from `base` (hidden:k).
  static OutputLengthModel load(const std::string& path, std::shared_ptr<const Model> base,
                                int threads = 1);
  void save(const std::string& path, const std::string& provenance_json = "{}") const;

  // Tokens this prompt is predicted to generate, in [1, cap].
  int64_t predict(std::span<const int32_t> prompt);
  int64_t predict(std::span<const int32_t> prompt, std::span<const float> embedding) const;
  const std::string& embedder_name() const { return embedder_name_; }
  int64_t cap() const { return cap_; }

 private:
  std::vector<float> features(std::span<const int32_t> prompt, std::span<const float> emb) const;
  dvfs::Mlp net_;
  std::string embedder_name_;
  int64_t cap_ = 256;
  std::shared_ptr<Embedder> embedder_;  // set by load()
};

// Held-out judgement: mean absolute error (tokens) and bucket accuracy (buckets 1-7, 8-31,
// 32-127, 128 and more) of the predictor and of the per-source training mean, per source
// and over all; and the standard deviation of log(predicted / true), the noise level
// `clone sim --length-noise` models.
struct LengthEval {
  struct Row {
    std::string source;
    int64_t n = 0;
    double mean_true = 0, mae_model = 0, mae_source_mean = 0, mae_global_mean = 0;
    double bucket_model = 0, bucket_source_mean = 0;  // % in the right bucket
  };
  std::vector<Row> rows;  // per source, then "all"
  double log_sigma_model = 0, log_sigma_source_mean = 0;
};
LengthEval evaluate_lengths(const OutputLengthModel& m, Embedder& e,
                            const std::vector<LengthSample>& train,
                            const std::vector<LengthSample>& test);
Table length_table(const LengthEval& r);

}  // namespace cln::serve
