#include "clone/serve/length.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "clone/core/error.h"
#include "clone/dvfs/mlp_fit.h"
#include "clone/engine/generate.h"
#include "clone/engine/lora.h"
#include "clone/serve/prompts.h"
#include "clone/tokenizer/tokenizer.h"

namespace cln::serve {

std::vector<LengthSample> collect_lengths(std::shared_ptr<const Model> base,
                                          const CollectOptions& o) {
  if (o.sources.empty()) fail("length data: no sources");
  if (o.max_new < 1) fail("length data: max_new must be at least 1");
  const Tokenizer tok = Tokenizer::from_gguf(base->gguf());
  std::vector<LengthSample> out;
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& [source, adapter] : o.sources) {
    // Domains: the first 64 tokens of a document; tasks: the item's prompt.
    const PromptSet ps =
        prompt_set(o.data_dir, source, o.split, tok, "the base model", o.per_source, 64, 0);
    Context ctx(base, {static_cast<int64_t>(64 + o.max_new + 8), o.threads, 512});
    if (!adapter.empty()) ctx.set_loras({{LoraAdapter::load(adapter, *base), 1.0f}});
    int64_t tokens = 0;
    for (size_t i = 0; i < ps.prompts.size(); ++i) {
      ctx.reset();
      GenerateParams p;
      p.max_new = o.max_new;
      p.eos = tok.eos();
      p.sampling.temperature = static_cast<float>(o.temperature);
      p.sampling.seed = o.seed * 1000003ULL + i;
      const Generation g = generate(ctx, ps.prompts[i], p);
      out.push_back({source, ps.prompts[i], static_cast<int64_t>(g.tokens.size())});
      tokens += static_cast<int64_t>(g.tokens.size());
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(
        stderr, "[length] %-12s %s: %zu prompts, mean length %.1f | elapsed %.0f s\n",
        source.c_str(), o.split.c_str(), ps.prompts.size(),
        static_cast<double>(tokens) / static_cast<double>(std::max<size_t>(1, ps.prompts.size())),
        s);
  }
  return out;
}

std::vector<float> OutputLengthModel::features(std::span<const int32_t> prompt,
                                               std::span<const float> emb) const {
  std::vector<float> x;
  x.reserve(emb.size() + 1);
  x.push_back(static_cast<float>(std::log1p(static_cast<double>(prompt.size()))));
  x.insert(x.end(), emb.begin(), emb.end());
  return x;
}

OutputLengthModel OutputLengthModel::train(const std::vector<LengthSample>& samples, Embedder& e,
                                           int64_t cap, int hidden, uint64_t seed,
                                           double weight_decay) {
  if (samples.empty()) fail("length predictor: no samples");
  if (cap < 2) fail("length predictor: the cap must be at least 2");
  OutputLengthModel m;
  m.embedder_name_ = e.name();
  m.cap_ = cap;
  const int n_in = static_cast<int>(e.dim()) + 1;
  m.net_.init(n_in, hidden, seed);
  std::vector<float> x, y;
  const double scale = std::log1p(static_cast<double>(cap));
  for (const LengthSample& s : samples) {
    const auto f = m.features(s.prompt, e.embed(s.prompt));
    x.insert(x.end(), f.begin(), f.end());
    const double len =
        std::clamp<double>(static_cast<double>(s.length), 1, static_cast<double>(cap));
    y.push_back(static_cast<float>(std::log1p(len) / scale));
  }
  // A fixed number of steps whatever the sample count (~4000), and weight decay: with an
  // embedding of hundreds of values and a few thousand prompts, the net otherwise learns
  // directions of the embedding that only happen to follow length in the training prompts.
  dvfs::FitOptions fo;
  fo.batch = 64;
  const int batches = static_cast<int>((samples.size() + 63) / 64);
  fo.epochs = std::max(30, 4000 / batches);
  fo.lr = 3e-3;
  fo.weight_decay = weight_decay;
  const double mse = dvfs::fit(m.net_, x, y, fo, seed);
  std::fprintf(stderr, "[length] fitted on %zu samples: training MSE %.5f (log-length scale)\n",
               samples.size(), mse);
  return m;
}

int64_t OutputLengthModel::predict(std::span<const int32_t> prompt,
                                   std::span<const float> embedding) const {
  const auto f = features(prompt, embedding);
  if (static_cast<int>(f.size()) != net_.n_in)
    fail("length predictor: the embedding has ", embedding.size(), " values, the model wants ",
         net_.n_in - 1);
  const double z = net_.forward(f.data()) * std::log1p(static_cast<double>(cap_));
  return std::clamp<int64_t>(std::llround(std::expm1(z)), 1, cap_);
}

int64_t OutputLengthModel::predict(std::span<const int32_t> prompt) {
  if (!embedder_) fail("length predictor: no embedder (load the model with load())");
  return predict(prompt, embedder_->embed(prompt));
}

void OutputLengthModel::save(const std::string& path, const std::string& provenance) const {
  nlohmann::json meta = {{"kind", "clone.output-length"},
                         {"embedder", embedder_name_},
                         {"cap", cap_},
                         {"features", "log1p(prompt tokens), embedding"},
                         {"target", "log1p(length) / log1p(cap)"},
                         {"provenance", nlohmann::json::parse(provenance)}};
  net_.save(path, meta.dump());
}

OutputLengthModel OutputLengthModel::load(const std::string& path,
                                          std::shared_ptr<const Model> base, int threads) {
  OutputLengthModel m;
  m.net_ = dvfs::Mlp::load(path);
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.contains("meta") ||
      j["meta"].value("kind", "") != "clone.output-length")
    fail(path, ": not an output-length predictor (meta.kind clone.output-length)");
  m.embedder_name_ = j["meta"].value("embedder", "");
  m.cap_ = j["meta"].value("cap", int64_t{0});
  if (m.cap_ < 2) fail(path, ": meta.cap must be at least 2");
  m.embedder_ = make_hidden_embedder(m.embedder_name_, std::move(base), threads);
  if (m.embedder_->dim() + 1 != m.net_.n_in)
    fail(path, ": made for embeddings of ", m.net_.n_in - 1, " values; ", m.embedder_name_,
         " of this model gives ", m.embedder_->dim());
  return m;
}

namespace {
int bucket(int64_t n) {
  return n < 8 ? 0 : n < 32 ? 1 : n < 128 ? 2 : 3;
}
}  // namespace

LengthEval evaluate_lengths(const OutputLengthModel& m, Embedder& e,
                            const std::vector<LengthSample>& train,
                            const std::vector<LengthSample>& test) {
  std::map<std::string, std::pair<double, int64_t>> src_sum;
  double all_sum = 0;
  for (const auto& s : train) {
    auto& [sum, n] = src_sum[s.source];
    sum += static_cast<double>(s.length), ++n;
    all_sum += static_cast<double>(s.length);
  }
  const double global_mean = all_sum / static_cast<double>(std::max<size_t>(1, train.size()));
  LengthEval r;
  std::map<std::string, LengthEval::Row> rows;
  LengthEval::Row all;
  all.source = "all";
  double lm = 0, lb = 0;
  auto add = [](LengthEval::Row& row, double truth, double pm, double pb, double pg) {
    ++row.n;
    row.mean_true += truth;
    row.mae_model += std::fabs(pm - truth);
    row.mae_source_mean += std::fabs(pb - truth);
    row.mae_global_mean += std::fabs(pg - truth);
    const auto t = static_cast<int64_t>(truth);
    row.bucket_model += bucket(static_cast<int64_t>(pm)) == bucket(t);
    row.bucket_source_mean += bucket(static_cast<int64_t>(std::llround(pb))) == bucket(t);
  };
  for (const auto& s : test) {
    const auto it = src_sum.find(s.source);
    if (it == src_sum.end()) fail("length evaluation: no training samples of ", s.source);
    const double pb = it->second.first / static_cast<double>(it->second.second);
    const double pm = static_cast<double>(m.predict(s.prompt, e.embed(s.prompt)));
    const double truth = static_cast<double>(std::max<int64_t>(1, s.length));
    auto& row = rows[s.source];
    row.source = s.source;
    add(row, truth, pm, pb, global_mean);
    add(all, truth, pm, pb, global_mean);
    lm += std::pow(std::log(pm / truth), 2);
    lb += std::pow(std::log(pb / truth), 2);
  }
  auto finish = [](LengthEval::Row& row) {
    const double n = static_cast<double>(std::max<int64_t>(1, row.n));
    row.mean_true /= n, row.mae_model /= n, row.mae_source_mean /= n, row.mae_global_mean /= n;
    row.bucket_model *= 100 / n, row.bucket_source_mean *= 100 / n;
  };
  for (auto& [k, row] : rows) finish(row), r.rows.push_back(row);
  finish(all);
  r.rows.push_back(all);
  const double n = static_cast<double>(std::max<size_t>(1, test.size()));
  r.log_sigma_model = std::sqrt(lm / n);
  r.log_sigma_source_mean = std::sqrt(lb / n);
  return r;
}

Table length_table(const LengthEval& r) {
  Table t({"source", "prompts", "mean length", "MAE predictor", "MAE source mean",
           "MAE global mean", "bucket % predictor", "bucket % source mean"});
  for (const auto& row : r.rows)
    t.add({row.source, static_cast<long long>(row.n), row.mean_true, row.mae_model,
           row.mae_source_mean, row.mae_global_mean, row.bucket_model, row.bucket_source_mean});
  t.set_precision(1);
  return t;
}

}  // namespace cln::serve
