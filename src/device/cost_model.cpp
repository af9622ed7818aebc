#include "clone/device/cost_model.h"

#include <algorithm>
#include <cmath>

#include "clone/core/error.h"

namespace cln::device {

namespace {

double bytes_per_value(DType t) {
  return static_cast<double>(dtype_block_bytes(t)) / static_cast<double>(dtype_block_size(t));
}

struct LayerParams {
  double attn = 0, ffn = 0;  // weight counts
  double q_dim = 0, kv_dim = 0, o_in = 0;
  double lora = 0;  // adapter parameters per expert per unit rank
};

LayerParams layer_params(const ModelConfig& m, const LayerShape& s) {
  LayerParams p;
  double d = static_cast<double>(m.n_embd);
  if (s.has_attention()) {
    p.q_dim = static_cast<double>(s.n_head * m.head_dim_k);
    double kk = static_cast<double>(s.n_head_kv * m.head_dim_k);
    double kv = static_cast<double>(s.n_head_kv * m.head_dim_v);
    p.kv_dim = kk + kv;
    p.o_in = static_cast<double>(s.n_head * m.head_dim_v);
    p.attn = d * p.q_dim + d * kk + d * kv + p.o_in * d;
    p.lora += (d + p.q_dim) + (d + kk) + (d + kv) + (p.o_in + d);
  }
  if (s.has_ffn()) {
    double ff = static_cast<double>(s.n_ff);
    p.ffn = 3 * d * ff;
    p.lora += 3 * (d + ff);
  }
  return p;
}

}  // namespace

CostModel::CostModel(DeviceProfile profile, ModelConfig model, CostOptions opt)
    : profile_(std::move(profile)), model_(std::move(model)), opt_(opt) {
  if (model_.n_layer() <= 0 || model_.n_embd <= 0 || model_.n_vocab <= 0)
    fail("cost model: model \"", model_.name, "\" has no layers, width or vocabulary");
  unit_ = &profile_.compute();
  bytes_per_weight_ = bytes_per_value(model_.weight_type);
  const auto& lv = unit_->levels;
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
  double params = 0;
  for (const auto& s : model_.layers) {
    LayerParams p = layer_params(model_, s);
    params += p.attn + p.ffn;
  }
  double d = static_cast<double>(model_.n_embd), v = static_cast<double>(model_.n_vocab);
  params += d * v * (model_.tied_output ? 1 : 2);
  weight_bytes_ = params * bytes_per_weight_;
  double kv_per_token = 0;
  for (const auto& s : model_.layers)
    kv_per_token += layer_params(model_, s).kv_dim * opt_.kv_bytes_per_value;
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
  (void)phase;
  Work w;
  double n = static_cast<double>(n_tokens);
  double d = static_cast<double>(model_.n_embd);
  double act = 2;            // activations kept in F16 between kernels
  if (layer >= n_layer()) {  // final norm + output head
    double n_out = phase == Phase::Prefill
                       ? static_cast<double>(std::min<int64_t>(
                             n_tokens, std::max<int64_t>(1, opt_.n_logits_prefill)))
                       : n;
    double vocab = static_cast<double>(model_.n_vocab);
    w.flops = 2 * n_out * d * vocab + 4 * n * d;
    double wbytes = d * vocab * bytes_per_weight_;
    w.dram_bytes = wbytes * resident_ + n_out * vocab * 4 + n * d * act;
    w.stream_bytes = wbytes * (1 - resident_);
    return w;
  }
  const LayerShape& s = model_.layers[static_cast<size_t>(layer)];
  LayerParams p = layer_params(model_, s);
  double wparams = p.attn + p.ffn;
  w.flops = 2 * n * wparams + n * (10 * d + 4 * static_cast<double>(s.n_ff));
  double sum_ctx = n * static_cast<double>(pos) + n * (n + 1) / 2;
  if (s.has_attention()) {
    w.flops += 2 * static_cast<double>(s.n_head) *
               static_cast<double>(model_.head_dim_k + model_.head_dim_v) * sum_ctx;
  }
  double ctx = static_cast<double>(pos) + n;
  double kv = p.kv_dim * opt_.kv_bytes_per_value * (ctx + n);  // read the cache, write the new
  double acts = n * (4 * d + 2 * p.q_dim + 2 * p.kv_dim + 3 * static_cast<double>(s.n_ff)) * act;
  double wbytes = wparams * bytes_per_weight_;
  w.dram_bytes = wbytes * resident_ + kv + acts;
  w.stream_bytes = wbytes * (1 - resident_);
  if (opt_.n_experts > 0) {
    double r = static_cast<double>(opt_.lora_rank) * opt_.n_experts;
    double lflops = 2 * n * r * p.lora;
    if (opt_.lpu) {
      w.lpu_flops = lflops;
    } else {
      w.flops += lflops;
      w.dram_bytes += r * p.lora * 2;  // F16 adapters read every pass
    }
  }
  return w;
}

Cost CostModel::cost(const Work& w, int level, double intensity) const {
  const auto& op = levels_.at(static_cast<size_t>(std::clamp(level, 0, max_level())));
  const Fit& fit = profile_.fit;
  double avail = 1 - fit.contention * std::clamp(intensity, 0.0, 1.0);
  double hz = op.mhz * 1e6;
  double tc = w.flops / (unit_->work_per_cycle * hz * fit.compute_efficiency * avail);
  double tm = w.dram_bytes / (profile_.memory.peak_bandwidth() * fit.dram_efficiency * avail);
  if (fit.core_bytes_per_cycle > 0) tm += w.dram_bytes / (fit.core_bytes_per_cycle * hz * avail);
  double t = std::max(tc, tm) + fit.overlap * std::min(tc, tm) + fit.layer_overhead_us * 1e-6;
  double ts = w.stream_bytes / (profile_.storage_gbps * 1e9);
  t = std::max(t, ts);
  Cost c;
  c.time_s = t;
  c.util = t > 0 ? tc / t : 0;
  const UnitPower& pw = unit_->power;
  double activity = pw.idle_activity + (1 - pw.idle_activity) * c.util;
  double p_unit = pw.static_w_per_v * op.volt +
                  pw.dynamic_w_per_ghz_v2 * op.volt * op.volt * (op.mhz * 1e-3) * activity;
  double p = profile_.board_idle_w + p_unit + profile_.memory.static_w;
  c.energy_j = p * t + w.dram_bytes * profile_.memory.pj_per_byte * 1e-12 +
               w.lpu_flops * profile_.lpu.pj_per_flop * 1e-12;
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
  for (const auto& s : model_.layers) bytes += layer_params(model_, s).lora;
  bytes *= static_cast<double>(opt_.lora_rank) * opt_.n_experts * 2;
  return bytes / (profile_.storage_gbps * 1e9);
}
double CostModel::expert_swap_j() const {
  // The board idles (plus DRAM writes) while adapters load; the LPU swap is nearly free.
  return expert_swap_s() * (profile_.board_idle_w + profile_.memory.static_w);
}

ModelConfig model_preset(const std::string& name) {
  ModelConfig m;
  m.name = name;
  auto uniform = [&](int n_layer, int64_t heads, int64_t kv, int64_t ff) {
    m.layers.assign(static_cast<size_t>(n_layer), LayerShape{heads, kv, ff});
  };
  if (name == "gemma-2b") {  // the paper's measurement model (Gemma-2B, FP16)
    m.arch = "llama";
    m.n_vocab = 256000, m.n_embd = 2048, m.head_dim_k = m.head_dim_v = 256;
    m.n_ctx_train = 8192, m.tied_output = true, m.weight_type = DType::F16;
    uniform(18, 8, 1, 16384);
  } else if (name == "llama2-7b") {
    m.n_vocab = 32000, m.n_embd = 4096, m.head_dim_k = m.head_dim_v = 128;
    m.n_ctx_train = 4096, m.weight_type = DType::F16;
    uniform(32, 32, 32, 11008);
  } else if (name == "tinyllama-1.1b") {
    m.n_vocab = 32000, m.n_embd = 2048, m.head_dim_k = m.head_dim_v = 64;
    m.n_ctx_train = 2048, m.weight_type = DType::F16;
    uniform(22, 32, 4, 5632);
  } else {
    fail("unknown model preset \"", name, "\" (have: gemma-2b, llama2-7b, tinyllama-1.1b)");
  }
  return m;
}

std::vector<std::string> model_preset_names() {
  return {"gemma-2b", "llama2-7b", "tinyllama-1.1b"};
}

}  // namespace cln::device
