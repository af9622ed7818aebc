// A device profile: what the cost model needs to know about one board. Loaded from JSON
// (schema in profiles/SCHEMA.md), validated on load; every error names the field,
// e.g. "orin-nx.json: units[0].levels[2].mhz: levels must be sorted ascending".
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace cln::device {

struct OperatingPoint {
  double mhz = 0;   // clock frequency
  double volt = 0;  // supply voltage at that clock
};

struct UnitPower {
  double static_w_per_v = 0;        // leakage: P_static = static_w_per_v * V
  double dynamic_w_per_ghz_v2 = 0;  // switching: P_dyn = c * V^2 * f[GHz] * activity
  double idle_activity = 0;         // activity while stalled on memory (clock tree, issue)
  double pj_per_byte = 0;  // energy on this unit's rail per DRAM byte it moves (0: in memory)
};

struct UnitDvfs {
  double switch_latency_us = 0;  // the unit stalls this long when its clock changes
  double switch_energy_uj = 0;   // and spends this much energy doing it
};

struct ComputeUnit {
  std::string name;  // "gpu", "cpu"
  std::string kind;  // "gpu" | "cpu"
  int cores = 0;
  double work_per_cycle = 0;           // peak FLOPs per cycle, whole unit (FP16 dense for GPUs)
  std::vector<OperatingPoint> levels;  // ascending by mhz
  UnitPower power;
  UnitDvfs dvfs;
  std::string sysfs;  // linux backend: cpufreq policy or devfreq device name

  double fmax_mhz() const { return levels.back().mhz; }
  double fmin_mhz() const { return levels.front().mhz; }
};

struct Memory {
  double size_gb = 0;              // physical memory (GB = 1e9 bytes)
  double usable_fraction = 0;      // share the model and KV cache may take
  double bus_bytes_per_cycle = 0;  // bytes per memory clock (both edges, whole bus)
  std::vector<double> levels_mhz;  // memory (EMC) clock levels, ascending
  double mhz = 0;                  // the clock the memory runs at under load
  double pj_per_byte = 0;          // DRAM access energy
  double static_w = 0;             // extra DRAM power while active

  double peak_bandwidth() const { return bus_bytes_per_cycle * mhz * 1e6; }  // bytes/s
};

// Factors fitted to measurements (docs/device.md says how each was fitted).
struct Fit {
  double compute_efficiency = 1;    // achieved / peak FLOPs in compute-bound passes
  double dram_efficiency = 1;       // achieved / peak DRAM bandwidth
  double core_bytes_per_cycle = 0;  // bytes the unit moves per core clock (0 = not a limit)
  double overlap = 0;               // t = max(tc, tm) + overlap * min(tc, tm)
  double layer_overhead_us = 0;     // fixed cost per layer pass (launches, sync)
  double contention = 0;            // co-runner of intensity s leaves (1 - contention*s)
  // Clock-dependent parts of the fixed per-layer cost: thousands of cycles of the unit that
  // runs the model (kernel prologues, sync) and of the host CPU that launches its kernels.
  double overhead_kcycles = 0;
  double host_overhead_kcycles = 0;
  // Share of the host CPU's dynamic power drawn while it drives the model (0: the host is
  // part of board_idle_w, as the paper-fitted profiles have it).
  double host_activity = 0;
};

// A named preset of the board's knobs (an nvpmodel power mode): the highest clock each unit
// may run at, the cores it has online, the memory clock, and the budget it is sized for.
struct UnitCap {
  double max_mhz = 0;  // levels above are unavailable in this mode
  int cores = 0;       // cores online (GPU: CUDA cores of the enabled TPCs); 0 = all
};
struct PowerMode {
  std::string name;       // "15W", "MAXN_SUPER"
  double budget_w = 0;    // 0: uncapped
  double memory_mhz = 0;  // EMC clock in this mode; one of memory.levels_mhz
  std::vector<std::pair<std::string, UnitCap>> units;  // by unit name
  const UnitCap* cap(const std::string& unit) const {
    for (const auto& [n, c] : units)
      if (n == unit) return &c;
    return nullptr;
  }
};

struct Sfu {  // the paper's fast-switching DVFS unit
  double switch_latency_us = 1;
  double switch_energy_uj = 0.1;
  double step_mhz = 10;  // near-continuous frequency grid
};

struct Lpu {                 // LoRA experts resident in on-chip non-volatile memory
  double swap_us = 5;        // time to switch the active expert set
  double pj_per_flop = 0.5;  // energy of adapter compute on the LPU
};

struct DeviceProfile {
  std::string name;
  std::string description;
  std::vector<ComputeUnit> units;
  std::string run_on;  // name of the unit that runs the model (the DVFS knob)
  std::string host;    // the CPU unit that drives it (default: the first other cpu unit)
  Memory memory;
  double storage_gbps = 0;  // storage read bandwidth, GB/s (offloaded weights stream at this)
  double board_idle_w = 0;  // everything else on the board while it serves
  Fit fit;
  Sfu sfu;
  Lpu lpu;
  std::vector<PowerMode> modes;  // nvpmodel presets (optional)

  const ComputeUnit& compute() const;  // the unit named by run_on
  ComputeUnit& compute();
  const ComputeUnit* host_unit() const;                  // nullptr when the profile has no host CPU
  const PowerMode& mode(const std::string& name) const;  // error listing the modes if unknown

  // Throws cln::Error naming the field ("<origin>: memory.mhz: ...").
  static DeviceProfile from_json(const nlohmann::json& j, const std::string& origin);
  static DeviceProfile load(const std::string& path);
  // A shipped profile by name ("orin-nx-16gb") from profiles/, or a path to a JSON file.
  static DeviceProfile find(const std::string& name_or_path);
  nlohmann::json to_json() const;
  void save(const std::string& path) const;
};

// Directory holding the shipped profiles: resource_dir(Resource::Profiles) (core/resources.h:
// --profiles-dir, else $CLONE_PROFILES, else share/clone/profiles beside the executable).
std::string profile_dir();

}  // namespace cln::device
