// The device cost model: per layer pass, FLOPs and bytes from the model's real shapes
// (counted by the engine's accounting, engine/accounting.h), then time at a clock (a roofline with
// a co-runner taking a share of compute and bandwidth), power, and energy. Every backend and
// controller asks this one place.
//
//   tc = flops / (work_per_cycle * s * f * compute_efficiency * a)     a = 1 - contention*s
//   tm = bytes / (bus * f_mem * dram_efficiency * a) + bytes / (core_bytes_per_cycle * s * f * a)
//   t  = max(max(tc, tm) + overlap * min(tc, tm) + fixed * overhead, streamed / storage_bw)
//   overhead = layer_overhead + overhead_kcycles / f + host_overhead_kcycles / f_host
//   P_rail = s * (static_w_per_v*V + c*V^2*f*(idle_activity + (1-idle_activity)*tc/t))
//            + unit pJ/byte * bytes / t + host_activity * c_host*V_host^2*f_host
//   P  = board_idle + P_rail + DRAM pJ/byte * bytes / t + memory static
// s is the share of the unit's cores online (nvpmodel gates TPCs), f_mem the memory clock and
// f_host the host CPU clock: the profile's top clocks, or a power mode's caps.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "clone/device/profile.h"
#include "clone/engine/accounting.h"
#include "clone/engine/hook.h"
#include "clone/engine/model_config.h"

namespace cln::device {

// What one pass over one layer (or the output head) asks of the device.
struct Work {
  double flops = 0;         // on the compute unit (adapter FLOPs included when the LPU is off)
  double dram_bytes = 0;    // DRAM traffic: resident weights, KV cache, activations, adapters
  double stream_bytes = 0;  // weights streamed from storage (model does not fit in memory)
  double lpu_flops = 0;     // adapter FLOPs run on the LPU (LPU on)
  // Share of the fixed per-layer cost (launches, sync) this pass pays: 1 for a whole layer
  // and the head, half for a layer with one of its halves pruned away, 0 for an empty one.
  double fixed = 1;
};

struct Cost {
  double time_s = 0;
  double energy_j = 0;
  double util = 0;    // compute busy fraction, tc / t (what a utilization governor sees)
  double rail_j = 0;  // of energy_j: the compute rail (run_on unit + host CPU), what a
                      // VDD_CPU_GPU_CV sensor reads
};

struct CostOptions {
  bool sfu = false;   // accelerator: fast, near-continuous DVFS
  bool lpu = false;   // accelerator: LoRA experts resident on chip
  int n_experts = 0;  // active LoRA experts per pass (soft MoE mixes all of them)
  int64_t lora_rank = 8;
  double kv_bytes_per_value = 2;  // KV cache element size (F16 on the Jetson runtimes)
  int64_t n_logits_prefill = 1;   // logits computed at the end of a prefill pass
  int64_t max_context = 4096;     // KV cache the runtime reserves (memory fit check)
  std::string mode;               // the profile's power mode (nvpmodel) to run in; "" = none
  // Bytes per weight relative to the model's weight type, for formats the engine does not
  // run (Q4_K_M measured elsewhere: the file's size over the Q4_0 size of the same shapes).
  double weight_bytes_scale = 1;
};

class CostModel {
 public:
  CostModel(DeviceProfile profile, ModelConfig model, CostOptions opt = {});

  const DeviceProfile& profile() const { return profile_; }
  const ModelConfig& model() const { return model_; }
  const CostOptions& options() const { return opt_; }
  int n_layer() const { return static_cast<int>(model_.n_layer()); }

  // The DVFS knob: the run_on unit's levels, or with SFU a near-continuous grid.
  const std::vector<OperatingPoint>& levels() const { return levels_; }
  int max_level() const { return static_cast<int>(levels_.size()) - 1; }
  int level_at_least(double mhz) const;  // lowest level with clock >= mhz (max if none)

  // layer == n_layer means the output head; pos is the first token's position.
  Work work(int layer, Phase phase, int64_t pos, int64_t n_tokens) const;
  Cost cost(const Work& w, int level, double intensity) const;
  Cost layer_cost(const LayerEvent& ev, int level, double intensity) const {
    return cost(work(ev.layer, ev.phase, ev.pos, ev.n_tokens), level, intensity);
  }

  double switch_time_s() const;
  double switch_energy_j() const;
  // What one clock change costs in energy: its own plus the board's idle draw over the
  // stall (what SimDevice charges for it).
  double switch_cost_j() const { return switch_energy_j() + switch_time_s() * board_idle_w(); }
  // Loading the request's expert set: from storage without the LPU, a swap with it.
  double expert_swap_s() const;
  double expert_swap_j() const;

  double weight_bytes() const { return weight_bytes_; }   // all weights, head included
  double resident_fraction() const { return resident_; }  // < 1: weights stream (offload)
  bool offloaded() const { return resident_ < 1; }
  double board_idle_w() const { return profile_.board_idle_w; }
  double memory_mhz() const { return mem_mhz_; }
  double host_mhz() const { return host_mhz_; }
  double core_share() const { return share_; }  // of the run_on unit's cores online

 private:
  DeviceProfile profile_;
  ModelConfig model_;
  std::vector<LayerStatics> statics_;  // per layer, for work()
  double head_bytes_ = 0;
  CostOptions opt_;
  std::vector<OperatingPoint> levels_;
  const ComputeUnit* unit_ = nullptr;
  double weight_bytes_ = 0;
  double resident_ = 1;
  double mem_mhz_ = 0, share_ = 1;
  const ComputeUnit* host_ = nullptr;
  double host_mhz_ = 0, host_volt_ = 0, host_share_ = 1;
};

}  // namespace cln::device
