#include "clone/dvfs/mlp.h"

#include <cmath>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "clone/core/error.h"
#include "clone/core/rng.h"

namespace cln::dvfs {

void Mlp::init(int inputs, int hidden, uint64_t seed) {
  n_in = inputs, n_hidden = hidden;
  Rng rng(seed);
  const auto z = [&rng] { return static_cast<float>(rng.normal()); };
  float s1 = 1.0f / std::sqrt(static_cast<float>(inputs)),
        s2 = 1.0f / std::sqrt(static_cast<float>(hidden));
  w1.resize(static_cast<size_t>(hidden * inputs));
  for (auto& w : w1) w = z() * s1;
  b1.assign(static_cast<size_t>(hidden), 0);
  w2.resize(static_cast<size_t>(hidden));
  for (auto& w : w2) w = z() * s2;
  b2 = 0;
  mean.assign(static_cast<size_t>(inputs), 0);
  scale.assign(static_cast<size_t>(inputs), 1);
}

float Mlp::forward(const float* x) const {
  // The DVFS policy's few inputs stay on the stack (it decides at every layer boundary);
  // wider nets (the length predictor's embedding) use the heap.
  float small[64];
  std::vector<float> wide;
  float* xn = small;
  if (n_in > 64) {
    wide.resize(static_cast<size_t>(n_in));
    xn = wide.data();
  }
  for (int i = 0; i < n_in; ++i)
    xn[i] = (x[i] - mean[static_cast<size_t>(i)]) * scale[static_cast<size_t>(i)];
  float o = b2;
  for (int j = 0; j < n_hidden; ++j) {
    const float* w = &w1[static_cast<size_t>(j * n_in)];
    float a = b1[static_cast<size_t>(j)];
    for (int i = 0; i < n_in; ++i) a += w[i] * xn[i];
    o += w2[static_cast<size_t>(j)] * std::tanh(a);
  }
  return 1.0f / (1.0f + std::exp(-o));
}

void Mlp::save(const std::string& path, const std::string& meta_json) const {
  nlohmann::json j;
  j["format"] = "clone.dvfs-mlp/1";
  j["n_in"] = n_in;
  j["n_hidden"] = n_hidden;
  j["w1"] = w1;
  j["b1"] = b1;
  j["w2"] = w2;
  j["b2"] = b2;
  j["mean"] = mean;
  j["scale"] = scale;
  j["meta"] = nlohmann::json::parse(meta_json);
  std::ofstream out(path);
  if (!out) fail("cannot write ", path);
  out << j.dump(1) << "\n";
}

Mlp Mlp::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("cannot open DVFS policy ", path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    fail(path, ": malformed JSON: ", e.what());
  }
  auto need = [&](const char* k) -> const nlohmann::json& {
    if (!j.contains(k)) fail(path, ": ", k, ": missing field");
    return j.at(k);
  };
  if (need("format") != "clone.dvfs-mlp/1") fail(path, ": format: expected \"clone.dvfs-mlp/1\"");
  Mlp m;
  try {
    m.n_in = need("n_in").get<int>();
    m.n_hidden = need("n_hidden").get<int>();
    m.w1 = need("w1").get<std::vector<float>>();
    m.b1 = need("b1").get<std::vector<float>>();
    m.w2 = need("w2").get<std::vector<float>>();
    m.b2 = need("b2").get<float>();
    m.mean = need("mean").get<std::vector<float>>();
    m.scale = need("scale").get<std::vector<float>>();
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": wrong type: ", e.what());
  }
  auto size = [&](const std::vector<float>& v, size_t n, const char* k) {
    if (v.size() != n) fail(path, ": ", k, ": expected ", n, " values, got ", v.size());
  };
  if (m.n_in <= 0 || m.n_in > 65536 || m.n_hidden <= 0 || m.n_hidden > 65536)
    fail(path, ": n_in/n_hidden out of range");
  size(m.w1, static_cast<size_t>(m.n_in * m.n_hidden), "w1");
  size(m.b1, static_cast<size_t>(m.n_hidden), "b1");
  size(m.w2, static_cast<size_t>(m.n_hidden), "w2");
  size(m.mean, static_cast<size_t>(m.n_in), "mean");
  size(m.scale, static_cast<size_t>(m.n_in), "scale");
  return m;
}

MlpMeta load_mlp_meta(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("cannot open DVFS policy ", path);
  MlpMeta meta;
  try {
    const auto j = nlohmann::json::parse(in);
    if (!j.contains("meta") || !j.at("meta").is_object()) return meta;
    const auto& m = j.at("meta");
    meta.profile = m.value("profile", "");
    meta.mode = m.value("mode", "");
    meta.model = m.value("model", "");
    meta.model_params = m.value("model_params", int64_t{0});
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": meta: ", e.what());
  }
  return meta;
}

}  // namespace cln::dvfs
