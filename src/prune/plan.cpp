#include "clone/prune/plan.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

#include "clone/core/error.h"

namespace cln::prune {

int64_t LayerPlan::n_head() const {
  int64_t n = 0;
  for (const auto& g : q) n += static_cast<int64_t>(g.size());
  return n;
}

std::vector<int64_t> query_group(const ModelConfig& c, int64_t layer, int64_t g) {
  const LayerShape& s = c.layers.at(static_cast<size_t>(layer));
  const int64_t per = s.n_head / s.n_head_kv;
  std::vector<int64_t> out;
  for (int64_t h = g * per; h < (g + 1) * per; ++h) out.push_back(h);
  return out;
}

PrunePlan PrunePlan::dense(const ModelConfig& c) {
  PrunePlan p;
  for (int64_t il = 0; il < c.n_layer(); ++il) {
    const LayerShape& s = c.layers[static_cast<size_t>(il)];
    LayerPlan l;
    for (int64_t g = 0; g < s.n_head_kv; ++g) {
      l.kv.push_back(g);
      l.q.push_back(query_group(c, il, g));
    }
    for (int64_t f = 0; f < s.n_ff; ++f) l.ff.push_back(f);
    p.layers.push_back(std::move(l));
  }
  return p;
}

namespace {

// Ascending, distinct and within [0, n).
void check_indices(const std::vector<int64_t>& v, int64_t n, size_t layer, const char* what) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] < 0 || v[i] >= n)
      fail("pruning plan: layer ", layer, ": ", what, " ", v[i], " is out of range [0, ", n, ")");
    if (i > 0 && v[i] <= v[i - 1])
      fail("pruning plan: layer ", layer, ": ", what, "s must be ascending and distinct (",
           v[i - 1], " then ", v[i], ")");
  }
}

}  // namespace

void PrunePlan::validate(const ModelConfig& dense) const {
  if (static_cast<int64_t>(layers.size()) != dense.n_layer())
    fail("pruning plan: ", layers.size(), " layers for a model of ", dense.n_layer());
  for (size_t il = 0; il < layers.size(); ++il) {
    const LayerPlan& l = layers[il];
    const LayerShape& s = dense.layers[il];
    if (l.kv.size() != l.q.size())
      fail("pruning plan: layer ", il, ": ", l.kv.size(), " KV heads but ", l.q.size(),
           " query groups");
    check_indices(l.kv, s.n_head_kv, il, "KV head");
    check_indices(l.ff, s.n_ff, il, "FFN channel");
    for (size_t g = 0; g < l.kv.size(); ++g) {
      const std::vector<int64_t> allowed = query_group(dense, static_cast<int64_t>(il), l.kv[g]);
      if (l.q[g].empty())
        fail("pruning plan: layer ", il, ": KV head ", l.kv[g],
             " is kept with no query head (drop the KV head with its group)");
      if (l.q[g].size() != l.q[0].size())
        fail("pruning plan: layer ", il, ": query groups of unequal size (", l.q[0].size(), " and ",
             l.q[g].size(), "); every kept KV head needs as many query heads");
      check_indices(l.q[g], s.n_head, il, "query head");
      for (int64_t h : l.q[g])
        if (std::find(allowed.begin(), allowed.end(), h) == allowed.end())
          fail("pruning plan: layer ", il, ": query head ", h, " does not read KV head ", l.kv[g],
               " (it reads ", h / (s.n_head / s.n_head_kv), ")");
    }
  }
}

ModelConfig PrunePlan::shape(const ModelConfig& dense) const {
  validate(dense);
  ModelConfig c = dense;
  for (size_t il = 0; il < layers.size(); ++il) {
    const LayerPlan& l = layers[il];
    c.layers[il] = {l.n_head(), static_cast<int64_t>(l.kv.size()),
                    static_cast<int64_t>(l.ff.size())};
  }
  c.arch = c.uniform() ? "llama" : "deci";
  c.validate();
  return c;
}

std::string PrunePlan::summary(const ModelConfig& dense) const {
  std::string out;
  for (size_t il = 0; il < layers.size(); ++il) {
    const LayerShape& s = dense.layers[il];
    char b[160];
    std::snprintf(b, sizeof b, "layer %zu: %lld/%lld heads (%zu/%lld KV), %zu/%lld FFN\n", il,
                  static_cast<long long>(layers[il].n_head()), static_cast<long long>(s.n_head),
                  layers[il].kv.size(), static_cast<long long>(s.n_head_kv), layers[il].ff.size(),
                  static_cast<long long>(s.n_ff));
    out += b;
  }
  return out;
}

std::string PrunePlan::to_json() const {
  nlohmann::json j = nlohmann::json::array();
  for (const LayerPlan& l : layers) j.push_back({{"kv", l.kv}, {"q", l.q}, {"ff", l.ff}});
  return j.dump();
}

PrunePlan PrunePlan::from_json(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("pruning plan: not JSON: ", e.what());
  }
  if (!j.is_array()) fail("pruning plan: expected a list of layers");
  PrunePlan p;
  for (size_t il = 0; il < j.size(); ++il) {
    const nlohmann::json& x = j[il];
    try {
      p.layers.push_back({x.at("kv").get<std::vector<int64_t>>(),
                          x.at("q").get<std::vector<std::vector<int64_t>>>(),
                          x.at("ff").get<std::vector<int64_t>>()});
    } catch (const nlohmann::json::exception& e) {
      fail("pruning plan: layer ", il, ": ", e.what());
    }
  }
  return p;
}

}  // namespace cln::prune
