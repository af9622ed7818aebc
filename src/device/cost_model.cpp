#include "clone/device/cost_model.h"

#include <algorithm>
#include <cmath>

#include "clone/core/error.h"
#include "clone/engine/accounting.h"

namespace cln::device {

namespace {
// The shared accounting's options for a Jetson runtime: F16 activations and KV cache.
PassOptions pass_options(const CostOptions& o) {
  PassOptions p;
  p.kv_bytes_per_value = o.kv_bytes_per_value;
  p.act_bytes_per_value = 2;  // activations kept in F16 between kernels
  p.n_experts = o.n_experts;
  p.lora_rank = o.lora_rank;
  p.lora_bytes_per_value = 2;  // F16 adapters
  return p;
}
}  // namespace

CostModel::CostModel(DeviceProfile profile, ModelConfig model, CostOptions opt)
    : profile_(std::move(profile)), model_(std::move(model)), opt_(opt) {
  if (model_.n_layer() <= 0 || model_.n_embd <= 0 || model_.n_vocab <= 0)
    fail("cost model: model \"", model_.name, "\" has no layers, width or vocabulary");
  unit_ = &profile_.compute();
  if (!(opt_.weight_bytes_scale > 0)) fail("cost model: weight_bytes_scale must be positive");
  // A power mode caps each unit's clock and cores and sets the memory clock.
  std::vector<OperatingPoint> lv = unit_->levels;
  mem_mhz_ = profile_.memory.mhz;
  host_ = profile_.host_unit();
  double host_cap = host_ ? host_->fmax_mhz() : 0;
  if (!opt_.mode.empty()) {
    const PowerMode& m = profile_.mode(opt_.mode);
    mem_mhz_ = m.memory_mhz;
    if (const UnitCap* c = m.cap(unit_->name)) {
      std::erase_if(lv, [&](const OperatingPoint& p) { return p.mhz > c->max_mhz + 1e-9; });
      share_ = static_cast<double>(c->cores) / unit_->cores;
    }
    if (host_)
      if (const UnitCap* c = m.cap(host_->name)) {
        host_cap = c->max_mhz;
        host_share_ = static_cast<double>(c->cores) / host_->cores;
      }
  }
  if (host_) {  // the host runs at its highest level within the cap
    const OperatingPoint* hp = &host_->levels.front();
    for (const auto& p : host_->levels)
      if (p.mhz <= host_cap + 1e-9) hp = &p;
    host_mhz_ = hp->mhz;
    host_volt_ = hp->volt;
  }
  if (opt_.sfu) {
    // Near-continuous: a fine grid between the lowest and highest clock, voltage
    // interpolated along the unit's table.
    double step = profile_.sfu.step_mhz;
    for (double f = lv.front().mhz; f < lv.back().mhz + 1e-9; f += step) {
      double fc = std::min(f, lv.back().mhz);
      size_t i = 1;
      while (i < lv.size() - 1 && lv[i].mhz < fc) ++i;
      double v = lv.front().volt;
      if (lv.size() > 1) {
        double a = (fc - lv[i - 1].mhz) / (lv[i].mhz - lv[i - 1].mhz);
        v = lv[i - 1].volt + std::clamp(a, 0.0, 1.0) * (lv[i].volt - lv[i - 1].volt);
      }
      levels_.push_back({fc, v});
    }
    if (levels_.back().mhz < lv.back().mhz - 1e-9) levels_.push_back(lv.back());
  } else {
    levels_ = lv;
  }
  weight_bytes_ = model_weight_bytes(model_);
  for (int64_t il = 0; il < model_.n_layer(); ++il) statics_.push_back(layer_statics(model_, il));
  head_bytes_ = head_weight_bytes(model_);
  double kv_per_token = 0;
  for (const LayerStatics& st : statics_)
    kv_per_token += static_cast<double>(st.params.kv_dim) * opt_.kv_bytes_per_value;
  double activations = 0.25e9;
  double avail = profile_.memory.size_gb * 1e9 * profile_.memory.usable_fraction -
                 kv_per_token * static_cast<double>(opt_.max_context) - activations;
  resident_ = std::clamp(avail / weight_bytes_, 0.0, 1.0);
}

int CostModel::level_at_least(double mhz) const {
  for (size_t i = 0; i < levels_.size(); ++i)
    if (levels_[i].mhz >= mhz - 1e-9) return static_cast<int>(i);
  return max_level();
}

Work CostModel::work(int layer, Phase phase, int64_t pos, int64_t n_tokens) const {
  const PassOptions po = pass_options(opt_);
  PassCount pc;
  if (layer >= n_layer()) {  // final norm + output head; prefill computes only the last logits
    const int64_t n_out =
        phase == Phase::Prefill
            ? std::min<int64_t>(n_tokens, std::max<int64_t>(1, opt_.n_logits_prefill))
            : n_tokens;
    pc = head_pass(model_, head_bytes_, n_tokens, n_out, po);
  } else {
    pc = layer_pass(model_, layer, statics_[static_cast<size_t>(layer)], pos, n_tokens, po);
  }
  Work w;
  if (layer < n_layer()) {
    const LayerShape& s = model_.layers[static_cast<size_t>(layer)];
    w.fixed = 0.5 * (s.has_attention() ? 1 : 0) + 0.5 * (s.has_ffn() ? 1 : 0);
  }
  w.flops = pc.matmul_flops + pc.attn_flops + pc.other_flops;
  const double weights = pc.weight_bytes * opt_.weight_bytes_scale;
  w.dram_bytes = weights * resident_ + pc.kv_bytes + pc.act_bytes;
  w.stream_bytes = weights * (1 - resident_);
  if (opt_.lpu) {
    w.lpu_flops = pc.lora_flops;  // adapters resident on chip: no DRAM traffic for them
  } else {
    w.flops += pc.lora_flops;
    w.dram_bytes += pc.lora_bytes;  // adapters read every pass
  }
  return w;
}

Cost CostModel::cost(const Work& w, int level, double intensity) const {
  const auto& op = levels_.at(static_cast<size_t>(std::clamp(level, 0, max_level())));
  const Fit& fit = profile_.fit;
  double avail = 1 - fit.contention * std::clamp(intensity, 0.0, 1.0);
  double hz = op.mhz * 1e6;
  double tc = w.flops / (unit_->work_per_cycle * share_ * hz * fit.compute_efficiency * avail);
  const double bandwidth = profile_.memory.bus_bytes_per_cycle * mem_mhz_ * 1e6;
  double tm = w.dram_bytes / (bandwidth * fit.dram_efficiency * avail);
  if (fit.core_bytes_per_cycle > 0)
    tm += w.dram_bytes / (fit.core_bytes_per_cycle * share_ * hz * avail);
  double overhead = fit.layer_overhead_us * 1e-6 + fit.overhead_kcycles * 1e3 / hz;
  if (host_ && fit.host_overhead_kcycles > 0)
    overhead += fit.host_overhead_kcycles * 1e3 / (host_mhz_ * 1e6);
  double t = std::max(tc, tm) + fit.overlap * std::min(tc, tm) + overhead * w.fixed;
  double ts = w.stream_bytes / (profile_.storage_gbps * 1e9);
  t = std::max(t, ts);
  Cost c;
  c.time_s = t;
  c.util = t > 0 ? tc / t : 0;
  const UnitPower& pw = unit_->power;
  double activity = pw.idle_activity + (1 - pw.idle_activity) * c.util;
  double p_unit = share_ * (pw.static_w_per_v * op.volt + pw.dynamic_w_per_ghz_v2 * op.volt *
                                                              op.volt * (op.mhz * 1e-3) * activity);
  if (host_ && fit.host_activity > 0)
    p_unit += host_share_ * fit.host_activity * host_->power.dynamic_w_per_ghz_v2 * host_volt_ *
              host_volt_ * (host_mhz_ * 1e-3);
  const double rail_bytes_j = w.dram_bytes * pw.pj_per_byte * 1e-12;
  c.rail_j = p_unit * t + rail_bytes_j;
  double p = profile_.board_idle_w + p_unit + profile_.memory.static_w;
  c.energy_j = p * t + w.dram_bytes * profile_.memory.pj_per_byte * 1e-12 +
               w.lpu_flops * profile_.lpu.pj_per_flop * 1e-12 + rail_bytes_j;
  return c;
}

double CostModel::switch_time_s() const {
  return (opt_.sfu ? profile_.sfu.switch_latency_us : unit_->dvfs.switch_latency_us) * 1e-6;
}
double CostModel::switch_energy_j() const {
  return (opt_.sfu ? profile_.sfu.switch_energy_uj : unit_->dvfs.switch_energy_uj) * 1e-6;
}

double CostModel::expert_swap_s() const {
  if (opt_.n_experts <= 0) return 0;
  if (opt_.lpu) return profile_.lpu.swap_us * 1e-6;
  double bytes = 0;
  for (int64_t il = 0; il < model_.n_layer(); ++il)
    bytes += static_cast<double>(layer_params(model_, il).lora_per_rank);
  bytes *= static_cast<double>(opt_.lora_rank) * opt_.n_experts * 2;  // F16 adapters
  return bytes / (profile_.storage_gbps * 1e9);
}
double CostModel::expert_swap_j() const {
  // The board idles (plus DRAM writes) while adapters load; the LPU swap is nearly free.
  return expert_swap_s() * (profile_.board_idle_w + profile_.memory.static_w);
}

}  // namespace cln::device
