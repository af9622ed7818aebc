// The real board through sysfs. Frequency knobs: cpufreq policies
// (scaling_available_frequencies in kHz, scaling_setspeed under the userspace governor)
// and devfreq devices, the Jetson GPU among them (available_frequencies in Hz, pinned by
// writing min_freq and max_freq). Power: hwmon rails (INA3221 and others: power*_input
// in uW, or curr*_input mA x in*_input mV) and the older IIO INA3221 files
// (in_power*_input mW, in_current*_input mA, in_voltage*_input mV).
// probe() says what exists and what is writable; whatever is missing is named.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "clone/device/backend.h"
#include "clone/device/profile.h"

namespace cln::device {

struct FreqKnob {
  std::string kind;                // "cpufreq" or "devfreq"
  std::string name;                // "policy0", "17000000.gpu"
  std::string dir;                 // its sysfs directory
  std::vector<double> levels_mhz;  // ascending
  double cur_mhz = 0;              // NaN-free: 0 when unreadable
  std::string governor;
  bool writable = false;  // can set a frequency (userspace governor or min/max files)
  std::string why_not;    // when not writable: what is missing
};

struct PowerRail {
  std::string label;       // "VDD_IN", "VDD_CPU_GPU_CV", or the file stem
  std::string power;       // file giving power directly ("" if computed from current x voltage)
  double power_scale = 0;  // watts per unit of the power file
  std::string current, voltage;  // mA and mV files when power is computed
  double read_w() const;         // throws cln::Error if a file vanished
};

// The memory (EMC) clock. On a Jetson it is no devfreq device: the BPMP's debugfs clock
// (sys/kernel/debug/bpmp/debug/clk/emc: rate and max_rate in Hz; writing mrq_rate_locked = 1
// then rate pins it; root and a mounted debugfs needed).
struct MemoryKnob {
  std::string dir;
  double cur_mhz = 0, max_mhz = 0;
  bool writable = false;
  std::string why_not;
};

// A CPU core that can be taken offline (sys/devices/system/cpu/cpuN/online; cpu0 has none).
struct CoreKnob {
  int cpu = 0;
  bool online = true;
  bool writable = false;
};

// One file write of an nvpmodel mode: "PARAM ARG VALUE" in the mode's block, the file being
// the one the conf's "< PARAM TYPE=FILE NAME=PARAM >" block gives for ARG (under the root).
struct NvpFileWrite {
  std::string param, arg, path, value;
};

// nvpmodel's power modes (etc/nvpmodel.conf: "< POWER_MODEL ID=n NAME=x >") and the current
// one (var/lib/nvpmodel/status: "pmode:000n"). clone does not run nvpmodel: it sets the knobs
// of a mode itself (apply_power_mode), and for the GPU's TPC power gating, which has no knob
// of its own here, it makes the writes the conf lists for that mode.
struct PowerModeInfo {
  std::string conf;
  std::vector<std::pair<int, std::string>> modes;
  int current = -1;
  // Per mode name: its TPC_POWER_GATING and GPU_POWER_CONTROL_* writes, in the block's order
  // (nvpmodel keeps the GPU powered while the mask changes, then lets it idle again).
  std::vector<std::pair<std::string, std::vector<NvpFileWrite>>> tpc_writes;
  const std::vector<NvpFileWrite>* tpc_writes_of(const std::string& mode) const {
    for (const auto& [n, w] : tpc_writes)
      if (n == mode) return &w;
    return nullptr;
  }
};

struct LinuxProbe {
  std::string root;
  std::vector<FreqKnob> knobs;
  MemoryKnob emc;  // dir empty: not found
  std::vector<CoreKnob> cores;
  PowerModeInfo nvpmodel;
  std::vector<PowerRail> rails;
  std::vector<std::string> missing;  // plain sentences: what cannot be done and why
  std::string report() const;        // human-readable summary, one fact per line
};

// Looks under root (normally "/"; tests pass a fake tree).
LinuxProbe probe_linux(const std::string& root = "/");

// Pins the memory clock at the lowest of its rates at or above mhz (clamped to max_rate).
// Throws cln::Error saying why when the knob is missing or not writable.
void set_memory_mhz(const MemoryKnob& emc, double mhz);
// Puts the first n cores online and the others offline (cpu0 always stays); throws when a
// core that must change has no writable online file, or n is out of range.
void set_cores_online(const std::vector<CoreKnob>& cores, int n, const std::string& root);

// Caps every cpufreq policy's clock at the highest of its levels at or below mhz (its lowest
// when none is) by writing scaling_max_freq; throws naming the policy that cannot be capped.
void cap_cpu_mhz(const std::vector<FreqKnob>& knobs, double mhz);

// Puts the board in power mode `m` of profile `p`, as nvpmodel would, knob by knob through
// sysfs: the memory clock pinned at the mode's (set_memory_mhz), the host CPU's online cores
// (set_cores_online) and its clock cap on every cpufreq policy (cap_cpu_mhz). The clock cap
// of the unit that runs the model is kept by whoever drives its knob (dvfs::RealBoard pins
// every layer's clock among the mode's levels). A GPU's enabled TPCs have no sysfs file that
// clone writes (nvpmodel sets them), so they are reported and left as they are. Returns one
// line per knob saying what was set or left and why; throws cln::Error naming the knob when
// one the mode needs cannot be set, before anything is written (power_mode_blockers).
std::vector<std::string> apply_power_mode(const LinuxProbe& pr, const DeviceProfile& p,
                                          const PowerMode& m);
// Why `m` cannot be put on this board: one sentence per knob the mode needs and the probe
// found missing or not writable; empty when it can (`clone device probe --profile P`).
std::vector<std::string> power_mode_blockers(const LinuxProbe& pr, const DeviceProfile& p,
                                             const PowerMode& m);

class LinuxDevice : public DeviceBackend {
 public:
  // knob: the FreqKnob name to drive ("17000000.gpu", "policy0"); empty = first writable
  // devfreq GPU, else first writable knob. Throws cln::Error saying what is missing.
  LinuxDevice(const std::string& root, const std::string& knob);

  std::string name() const override { return "linux:" + knob_.name; }
  const std::vector<OperatingPoint>& levels() const override { return levels_; }
  int level() const override { return level_; }
  void set_level(int i) override;
  void on_layer(const LayerEvent& ev) override;
  double now_s() const override;
  double energy_j() const override;  // integrated from the rails; NaN without rails
  double corunner_intensity() const override { return 0; }
  double last_util() const override { return 1; }
  int64_t switches() const override { return switches_; }

  const FreqKnob& knob() const { return knob_; }
  double read_cur_mhz() const;
  double read_power_w() const;  // sum of the top-level rail(s); NaN without rails

 private:
  FreqKnob knob_;
  std::vector<PowerRail> rails_;
  std::vector<OperatingPoint> levels_;
  int level_ = -1;
  int64_t switches_ = 0;
  std::chrono::steady_clock::time_point t0_;
  double last_t_ = 0, last_p_ = 0, energy_ = 0;
};

}  // namespace cln::device
