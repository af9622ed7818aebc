#include "clone/prune/select.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "clone/core/error.h"

namespace cln::prune {

Ratios Ratios::uniform(int64_t n_layer, double r) {
  return {std::vector<double>(static_cast<size_t>(n_layer), r),
          std::vector<double>(static_cast<size_t>(n_layer), r)};
}

void Ratios::validate(const ModelConfig& c) const {
  if (static_cast<int64_t>(attn.size()) != c.n_layer() ||
      static_cast<int64_t>(ffn.size()) != c.n_layer())
    fail("pruning ratios: ", attn.size(), " attention and ", ffn.size(),
         " FFN ratios for a model of ", c.n_layer(), " layers");
  for (size_t il = 0; il < attn.size(); ++il)
    for (const auto& [name, v] : {std::pair{"attention", attn[il]}, std::pair{"FFN", ffn[il]}})
      if (!(v >= 0.0 && v <= 1.0))
        fail("pruning ratios: layer ", il, ": the ", name, " ratio ", v, " is outside [0, 1]");
}

namespace {

// Indices of the n highest scores, ascending (ties: the lower index).
std::vector<int64_t> top(const std::vector<double>& score, int64_t n,
                         const std::vector<int64_t>& among) {
  std::vector<int64_t> idx = among;
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
    return score[static_cast<size_t>(a)] > score[static_cast<size_t>(b)];
  });
  idx.resize(static_cast<size_t>(std::min<int64_t>(n, static_cast<int64_t>(idx.size()))));
  std::sort(idx.begin(), idx.end());
  return idx;
}

std::vector<int64_t> range(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

}  // namespace

PrunePlan plan_from_ratios(const ModelConfig& c, const Scores& s, const Ratios& r) {
  r.validate(c);
  const bool halves_only = s.method == Method::Block;
  PrunePlan p = PrunePlan::dense(c);
  for (size_t il = 0; il < p.layers.size(); ++il) {
    const LayerShape& sh = c.layers[il];
    LayerPlan& l = p.layers[il];
    if (halves_only) {
      for (double v : {r.attn[il], r.ffn[il]})
        if (v != 0.0 && v != 1.0)
          fail("pruning: block influence scores whole halves only; layer ", il, " asks for ratio ",
               v);
    }
    // FFN channels.
    const auto keep_ff =
        static_cast<int64_t>(std::llround((1.0 - r.ffn[il]) * static_cast<double>(sh.n_ff)));
    if (keep_ff == 0) {
      l.ff.clear();
    } else if (!halves_only) {
      l.ff = top(s.ff[il], keep_ff, range(sh.n_ff));
    }
    // Attention: g groups of k heads, g k closest to (1 - r) n_head (ties: fewer heads,
    // then more groups).
    const double target = (1.0 - r.attn[il]) * static_cast<double>(sh.n_head);
    if (target < 0.5 || !sh.has_attention()) {
      if (target < 0.5) l.kv.clear(), l.q.clear();
      continue;
    }
    if (halves_only) continue;
    const int64_t per = sh.n_head / sh.n_head_kv;
    int64_t best_g = sh.n_head_kv, best_k = per;
    for (int64_t g = 1; g <= sh.n_head_kv; ++g)
      for (int64_t k = 1; k <= per; ++k) {
        const double d = std::fabs(static_cast<double>(g * k) - target),
                     bd = std::fabs(static_cast<double>(best_g * best_k) - target);
        const bool better = d < bd - 1e-9 ||
                            (d < bd + 1e-9 &&
                             (g * k < best_g * best_k || (g * k == best_g * best_k && g > best_g)));
        if (better) best_g = g, best_k = k;
      }
    l.kv = top(s.kv[il], best_g, range(sh.n_head_kv));
    l.q.clear();
    for (int64_t g : l.kv)
      l.q.push_back(top(s.head[il], best_k, query_group(c, static_cast<int64_t>(il), g)));
  }
  p.validate(c);
  return p;
}

Ratios remove_halves(const ModelConfig& c, const Scores& block, int n) {
  if (block.method != Method::Block) fail("pruning: removing halves needs block influence scores");
  struct Half {
    double score;
    size_t layer;
    bool attn;
  };
  std::vector<Half> halves;
  for (size_t il = 0; il < static_cast<size_t>(c.n_layer()); ++il) {
    if (c.layers[il].has_attention()) halves.push_back({block.attn[il], il, true});
    if (c.layers[il].has_ffn()) halves.push_back({block.ffn[il], il, false});
  }
  if (n < 0 || n > static_cast<int>(halves.size()))
    fail("pruning: cannot remove ", n, " of ", halves.size(), " layer halves");
  std::stable_sort(halves.begin(), halves.end(),
                   [](const Half& a, const Half& b) { return a.score < b.score; });
  Ratios r = Ratios::uniform(c.n_layer(), 0.0);
  for (int i = 0; i < n; ++i)
    (halves[static_cast<size_t>(i)].attn ? r.attn : r.ffn)[halves[static_cast<size_t>(i)].layer] =
        1.0;
  return r;
}

Ratios global_ratios(const ModelConfig& c, const Scores& s, double fraction) {
  if (!(fraction >= 0 && fraction <= 1)) fail("pruning: fraction ", fraction, " is outside [0, 1]");
  if (s.method == Method::Block) fail("pruning: global ranking needs unit scores, not block");
  struct Unit {
    double z;
    size_t layer;
    bool attn;
    double params;
  };
  std::vector<Unit> units;
  double total = 0;
  const auto d = static_cast<double>(c.n_embd);
  for (size_t il = 0; il < static_cast<size_t>(c.n_layer()); ++il)
    for (const bool attn : {true, false}) {
      const std::vector<double>& v = attn ? s.head[il] : s.ff[il];
      if (v.empty()) continue;
      double mean = 0, var = 0;
      for (double x : v) mean += x;
      mean /= static_cast<double>(v.size());
      for (double x : v) var += (x - mean) * (x - mean);
      const double sd = std::sqrt(var / static_cast<double>(v.size()));
      const double w = attn ? d * static_cast<double>(c.head_dim_k + c.head_dim_v) : 3 * d;
      for (double x : v) {
        units.push_back({sd > 0 ? (x - mean) / sd : 0.0, il, attn, w});
        total += w;
      }
    }
  std::stable_sort(units.begin(), units.end(),
                   [](const Unit& a, const Unit& b) { return a.z < b.z; });
  Ratios r = Ratios::uniform(c.n_layer(), 0.0);
  double removed = 0;
  for (const Unit& u : units) {
    if (removed >= fraction * total) break;
    removed += u.params;
    const LayerShape& sh = c.layers[u.layer];
    (u.attn ? r.attn : r.ffn)[u.layer] += 1.0 / static_cast<double>(u.attn ? sh.n_head : sh.n_ff);
  }
  for (size_t il = 0; il < r.attn.size(); ++il)
    r.attn[il] = std::min(1.0, r.attn[il]), r.ffn[il] = std::min(1.0, r.ffn[il]);
  return r;
}

}  // namespace cln::prune
