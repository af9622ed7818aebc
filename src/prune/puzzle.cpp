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
  const DeviceCost base = device_cost(c, profile, w);
  // Every distinct variant's plan first, then their perplexities in one batch.
  struct Pending {
    size_t block;
    Variant v;
  };
  std::vector<Block> lib;
  std::vector<Pending> pending;
  std::vector<PrunePlan> plans = {PrunePlan::dense(c)};
  for (int64_t il = 0; il < c.n_layer(); ++il) {
    for (const bool attn : {true, false}) {
      const LayerShape& s = c.layers[static_cast<size_t>(il)];
      if (attn ? !s.has_attention() : !s.has_ffn()) continue;
      lib.push_back(Block{il, attn, {Variant{}}});
      std::map<int64_t, bool> widths;  // kept heads or channels already listed
      for (double r : attn ? o.attn_ratios : o.ffn_ratios) {
        Ratios rs = Ratios::uniform(c.n_layer(), 0.0);
        (attn ? rs.attn : rs.ffn)[static_cast<size_t>(il)] = r;
        PrunePlan plan = plan_from_ratios(c, scores, rs);
        const ModelConfig shape = plan.shape(c);
        const LayerShape& ps = shape.layers[static_cast<size_t>(il)];
        const int64_t width = attn ? ps.n_head : ps.n_ff;
        if ((attn ? s.n_head : s.n_ff) == width || widths[width]) continue;  // dense or seen
        widths[width] = true;
        const DeviceCost cost = device_cost(shape, profile, w);
        Variant v;
        v.ratio = r;
        v.dtime_s = cost.tpot_s - base.tpot_s;
        v.denergy_j = cost.energy_j - base.energy_j;
        pending.push_back({lib.size() - 1, v});
        plans.push_back(std::move(plan));
      }
    }
  }
  std::vector<double> ppl;
  if (o.ppl) {
    ppl = o.ppl(plans);
  } else {
    for (size_t i = 0; i < plans.size(); ++i) {
      ppl.push_back(validation_ppl(dense, plans[i], val, o.tmp_dir));
      if (o.progress) o.progress(static_cast<int>(i + 1), static_cast<int>(plans.size()));
    }
  }
  if (ppl.size() != plans.size())
    fail("puzzle: ", ppl.size(), " perplexities for ", plans.size(), " plans");
  for (size_t i = 0; i < pending.size(); ++i) {
    Variant v = pending[i].v;
    v.dloss = std::log(ppl[i + 1]) - std::log(ppl[0]);
    lib[pending[i].block].choices.push_back(v);
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
