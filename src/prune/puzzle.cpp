#include "clone/prune/puzzle.h"

#include <cmath>
#include <limits>
#include <map>

#include "clone/core/error.h"

namespace cln::prune {

std::vector<Block> build_library(const GgufFile& dense, const Scores& scores, const Validation& val,
                                 const device::DeviceProfile& profile, const Workload& w,
                                 const LibraryOptions& o) {
  const ModelConfig c = ModelConfig::from_gguf(dense);
  const auto ppl = [&](const PrunePlan& p) {
    return o.ppl ? o.ppl(p) : validation_ppl(dense, p, val, o.tmp_dir);
  };
  const double base_nll = std::log(ppl(PrunePlan::dense(c)));
  const DeviceCost base = device_cost(c, profile, w);
  int total = 0, done = 0;
  for (int64_t il = 0; il < c.n_layer(); ++il)
    total += static_cast<int>(
        (c.layers[static_cast<size_t>(il)].has_attention() ? o.attn_ratios.size() : 0) +
        (c.layers[static_cast<size_t>(il)].has_ffn() ? o.ffn_ratios.size() : 0));
  std::vector<Block> lib;
  for (int64_t il = 0; il < c.n_layer(); ++il) {
    for (const bool attn : {true, false}) {
      const LayerShape& s = c.layers[static_cast<size_t>(il)];
      if (attn ? !s.has_attention() : !s.has_ffn()) continue;
      Block b{il, attn, {Variant{}}};
      std::map<int64_t, Variant> by_width;  // kept heads or channels -> its variant
      for (double r : attn ? o.attn_ratios : o.ffn_ratios) {
        Ratios rs = Ratios::uniform(c.n_layer(), 0.0);
        (attn ? rs.attn : rs.ffn)[static_cast<size_t>(il)] = r;
        const PrunePlan plan = plan_from_ratios(c, scores, rs);
        const LayerShape ps = plan.shape(c).layers[static_cast<size_t>(il)];
        const int64_t width = attn ? ps.n_head : ps.n_ff;
        if ((attn ? s.n_head : s.n_ff) == width) {  // rounds to the dense block
          if (o.progress) o.progress(++done, total);
          continue;
        }
        auto it = by_width.find(width);
        if (it == by_width.end()) {
          const DeviceCost cost = device_cost(plan.shape(c), profile, w);
          Variant v;
          v.ratio = r;
          v.dloss = std::log(ppl(plan)) - base_nll;
          v.dtime_s = cost.tpot_s - base.tpot_s;
          v.denergy_j = cost.energy_j - base.energy_j;
          it = by_width.emplace(width, v).first;
          b.choices.push_back(v);
        }
        if (o.progress) o.progress(++done, total);
      }
      lib.push_back(std::move(b));
    }
  }
  return lib;
}

Choice choose(const std::vector<Block>& lib, int64_t n_layer, double max_dtime_s,
              double max_denergy_j, int bins) {
  if (bins < 1) fail("puzzle: at least one bin per budget");
  // Required savings (>= 0) on two axes, each in `bins` steps; a choice's savings are
  // rounded down to whole steps and capped at the requirement, so any state reaching the
  // last bin on both axes truly meets both budgets.
  const double need_t = std::max(0.0, -max_dtime_s), need_e = std::max(0.0, -max_denergy_j);
  const int nt = need_t > 0 ? bins : 0, ne = need_e > 0 ? bins : 0;
  const auto steps = [](double saving, double need, int n) {
    if (n == 0) return 0;
    return static_cast<int>(std::min<double>(n, std::floor(saving / need * n + 1e-9)));
  };
  const double inf = std::numeric_limits<double>::infinity();
  const size_t W = static_cast<size_t>(ne + 1);
  std::vector<double> dp(static_cast<size_t>((nt + 1) * (ne + 1)), inf), next;
  dp[0] = 0;
  std::vector<std::vector<int>> pick(lib.size());
  for (size_t gi = 0; gi < lib.size(); ++gi) {
    next.assign(dp.size(), inf);
    pick[gi].assign(dp.size(), -1);
    for (int a = 0; a <= nt; ++a)
      for (int e = 0; e <= ne; ++e) {
        const double cur = dp[static_cast<size_t>(a) * W + static_cast<size_t>(e)];
        if (cur == inf) continue;
        for (size_t k = 0; k < lib[gi].choices.size(); ++k) {
          const Variant& v = lib[gi].choices[k];
          const int a2 = std::min(nt, a + steps(-v.dtime_s, need_t, nt));
          const int e2 = std::min(ne, e + steps(-v.denergy_j, need_e, ne));
          const size_t at = static_cast<size_t>(a2) * W + static_cast<size_t>(e2);
          if (cur + v.dloss < next[at]) {
            next[at] = cur + v.dloss;
            pick[gi][at] = static_cast<int>(k) * static_cast<int>(dp.size()) +
                           static_cast<int>(static_cast<size_t>(a) * W + static_cast<size_t>(e));
          }
        }
      }
    dp.swap(next);
  }
  Choice out;
  out.ratios = Ratios::uniform(n_layer, 0.0);
  size_t at = static_cast<size_t>(nt) * W + static_cast<size_t>(ne);
  std::vector<size_t> chosen(lib.size(), 0);
  if (dp[at] < inf) {
    out.feasible = true;
    for (size_t gi = lib.size(); gi-- > 0;) {
      const int p = pick[gi][at];
      chosen[gi] = static_cast<size_t>(p / static_cast<int>(dp.size()));
      at = static_cast<size_t>(p % static_cast<int>(dp.size()));
    }
  } else {
    // Nothing meets the budgets: the most saving choice of every block (the closest).
    for (size_t gi = 0; gi < lib.size(); ++gi)
      for (size_t k = 0; k < lib[gi].choices.size(); ++k)
        if (lib[gi].choices[k].dtime_s < lib[gi].choices[chosen[gi]].dtime_s) chosen[gi] = k;
  }
  for (size_t gi = 0; gi < lib.size(); ++gi) {
    const Variant& v = lib[gi].choices[chosen[gi]];
    (lib[gi].attn ? out.ratios.attn : out.ratios.ffn)[static_cast<size_t>(lib[gi].layer)] = v.ratio;
    out.dloss += v.dloss, out.dtime_s += v.dtime_s, out.denergy_j += v.denergy_j;
  }
  return out;
}

}  // namespace cln::prune
