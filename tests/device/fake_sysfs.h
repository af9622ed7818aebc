// A Jetson-shaped sysfs tree for the linux backend's tests: one CPU policy, the GPU's
// devfreq, an INA3221 on hwmon (VDD_IN 10 W, VDD_CPU_GPU_CV 4 W) and one rail on IIO.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

namespace cln::testing {

inline void put(const std::filesystem::path& p, const std::string& v) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << v << "\n";
}

inline std::string get(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  return s;
}

// Under the build folder, fresh each call.
inline std::filesystem::path make_tree(const std::string& name, bool with_setspeed = true) {
  namespace fs = std::filesystem;
  fs::path root = fs::path(CLONE_BINARY_DIR) / "fake_sysfs" / name;
  fs::remove_all(root);
  fs::path cpu = root / "sys/devices/system/cpu/cpufreq/policy0";
  put(cpu / "scaling_available_frequencies", "115200 729600 1420800 1984000");
  put(cpu / "scaling_available_governors", "schedutil userspace performance");
  put(cpu / "scaling_governor", "schedutil");
  put(cpu / "scaling_cur_freq", "1984000");
  put(cpu / "scaling_max_freq", "1984000");
  if (with_setspeed) put(cpu / "scaling_setspeed", "<unsupported>");
  fs::path gpu = root / "sys/class/devfreq/17000000.gpu";
  put(gpu / "available_frequencies",
      "918000000 306000000 408000000 510000000 612000000 714000000 816000000");
  put(gpu / "min_freq", "306000000");
  put(gpu / "max_freq", "918000000");
  put(gpu / "cur_freq", "918000000");
  put(gpu / "governor", "nvhost_podgov");
  fs::path hw = root / "sys/class/hwmon/hwmon1";
  put(hw / "name", "ina3221");
  put(hw / "in1_label", "VDD_IN");
  put(hw / "in1_input", "5000");    // mV
  put(hw / "curr1_input", "2000");  // mA -> 10 W
  put(hw / "in2_label", "VDD_CPU_GPU_CV");
  put(hw / "in2_input", "5000");
  put(hw / "curr2_input", "800");
  fs::path iio = root / "sys/bus/iio/devices/iio:device0";
  put(iio / "rail_name_0", "VDD_SOC");
  put(iio / "in_power0_input", "1500");  // mW
  // The memory clock on the BPMP's debugfs, six cores (cpu0 cannot go offline), nvpmodel.
  fs::path emc = root / "sys/kernel/debug/bpmp/debug/clk/emc";
  put(emc / "rate", "3199000000");
  put(emc / "max_rate", "3199000000");
  put(emc / "mrq_rate_locked", "0");
  put(root / "sys/devices/system/cpu/cpu0/topology/core_id", "0");
  for (int c = 1; c < 6; ++c)
    put(root / ("sys/devices/system/cpu/cpu" + std::to_string(c)) / "online", "1");
  put(root / "etc/nvpmodel.conf",
      "< PARAM TYPE=FILE NAME=CPU_ONLINE >\n< POWER_MODEL ID=0 NAME=15W >\nCPU_ONLINE CORE_0 1\n"
      "< POWER_MODEL ID=1 NAME=25W >\n< POWER_MODEL ID=2 NAME=MAXN_SUPER >\n"
      "< PM_CONFIG DEFAULT=1 >");
  put(root / "var/lib/nvpmodel/status", "pmode:0002");
  return root;
}

}  // namespace cln::testing
