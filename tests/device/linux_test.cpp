// The linux backend against a sysfs-shaped tree the test builds.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "clone/core/error.h"
#include "clone/device/linux.h"
#include "clone/device/profile.h"
#include "device/fake_sysfs.h"

using namespace cln;
using namespace cln::device;
using cln::testing::get;
using cln::testing::make_tree;
using cln::testing::put;
namespace fs = std::filesystem;

TEST(LinuxBackend, ProbeFindsKnobsAndRails) {
  fs::path root = make_tree("probe");
  LinuxProbe pr = probe_linux(root.string());
  ASSERT_EQ(pr.knobs.size(), 2u);
  const FreqKnob& cpu = pr.knobs[0];
  EXPECT_EQ(cpu.kind, "cpufreq");
  EXPECT_EQ(cpu.levels_mhz.size(), 4u);
  EXPECT_DOUBLE_EQ(cpu.levels_mhz.back(), 1984);
  EXPECT_TRUE(cpu.writable) << cpu.why_not;
  const FreqKnob& gpu = pr.knobs[1];
  EXPECT_EQ(gpu.name, "17000000.gpu");
  ASSERT_EQ(gpu.levels_mhz.size(), 7u);
  EXPECT_DOUBLE_EQ(gpu.levels_mhz.front(), 306);  // sorted
  EXPECT_DOUBLE_EQ(gpu.cur_mhz, 918);
  EXPECT_TRUE(gpu.writable);
  ASSERT_EQ(pr.rails.size(), 3u);
  double total = 0;
  for (const auto& r : pr.rails) {
    if (r.label == "VDD_IN") {
      EXPECT_NEAR(r.read_w(), 10.0, 1e-9);
    }
    if (r.label == "VDD_SOC") {
      EXPECT_NEAR(r.read_w(), 1.5, 1e-9);
    }
    total += r.read_w();
  }
  EXPECT_NEAR(total, 15.5, 1e-9);
  EXPECT_TRUE(pr.missing.empty()) << pr.report();
}

TEST(LinuxBackend, SetsGpuAndCpuFrequencies) {
  fs::path root = make_tree("set");
  LinuxDevice gpu(root.string(), "");  // the devfreq GPU is preferred
  EXPECT_EQ(gpu.knob().name, "17000000.gpu");
  EXPECT_EQ(gpu.level(), 6);
  gpu.set_level(2);
  fs::path g = root / "sys/class/devfreq/17000000.gpu";
  EXPECT_EQ(get(g / "min_freq"), "510000000");
  EXPECT_EQ(get(g / "max_freq"), "510000000");
  EXPECT_EQ(gpu.switches(), 1);
  gpu.set_level(5);
  EXPECT_EQ(get(g / "max_freq"), "816000000");
  EXPECT_EQ(get(g / "min_freq"), "816000000");
  EXPECT_THROW(gpu.set_level(7), Error);
  // Power comes from the input rail only (the others are parts of it).
  EXPECT_NEAR(gpu.read_power_w(), 10.0, 1e-9);
  // Energy is the trapezoid of the input rail's power over the time between layer
  // boundaries: 10 W from the start, then 15 W (the current goes from 2 A to 3 A).
  const LayerEvent ev{Phase::Decode, 0, 18, 10, 1};
  const double t_a = gpu.now_s();
  gpu.on_layer(ev);
  const double t_b = gpu.now_s(), e1 = gpu.energy_j();
  EXPECT_GE(e1, 10.0 * t_a);
  EXPECT_LE(e1, 10.0 * t_b);
  put(root / "sys/class/hwmon/hwmon1/curr1_input", "3000");
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  const double t_c = gpu.now_s();
  gpu.on_layer(ev);
  const double t_d = gpu.now_s(), e2 = gpu.energy_j();
  EXPECT_GE(e2 - e1, 0.5 * (10.0 + 15.0) * (t_c - t_b));
  EXPECT_LE(e2 - e1, 0.5 * (10.0 + 15.0) * (t_d - t_a));

  LinuxDevice cpu(root.string(), "policy0");
  cpu.set_level(1);
  fs::path c = root / "sys/devices/system/cpu/cpufreq/policy0";
  EXPECT_EQ(get(c / "scaling_governor"), "userspace");
  EXPECT_EQ(get(c / "scaling_setspeed"), "729600");
}

TEST(LinuxBackend, SaysClearlyWhatIsMissing) {
  fs::path root = make_tree("missing", /*with_setspeed=*/false);
  fs::remove_all(root / "sys/class/devfreq");
  fs::remove_all(root / "sys/class/hwmon");
  fs::remove_all(root / "sys/bus/iio");
  LinuxProbe pr = probe_linux(root.string());
  std::string rep = pr.report();
  EXPECT_NE(rep.find("no scaling_setspeed"), std::string::npos) << rep;
  EXPECT_NE(rep.find("no devfreq devices"), std::string::npos) << rep;
  EXPECT_NE(rep.find("no power rails"), std::string::npos) << rep;
  EXPECT_NE(rep.find("no frequency can be set"), std::string::npos) << rep;
  try {
    LinuxDevice d(root.string(), "");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no settable frequency knob"), std::string::npos)
        << e.what();
  }
  // An empty root (this CI machine, a container): everything is named as missing.
  fs::path empty = fs::path(CLONE_BINARY_DIR) / "fake_sysfs" / "empty";
  fs::create_directories(empty);
  LinuxProbe none = probe_linux(empty.string());
  EXPECT_TRUE(none.knobs.empty());
  ASSERT_EQ(none.missing.size(), 7u) << none.report();
  EXPECT_NE(none.missing[0].find("no cpufreq policies"), std::string::npos) << none.missing[0];
  EXPECT_NE(none.missing[1].find("no devfreq devices"), std::string::npos) << none.missing[1];
  EXPECT_NE(none.missing[2].find("no memory (EMC) clock"), std::string::npos) << none.missing[2];
  EXPECT_NE(none.missing[3].find("no CPU cores"), std::string::npos) << none.missing[3];
  EXPECT_NE(none.missing[4].find("no nvpmodel power modes"), std::string::npos) << none.missing[4];
  EXPECT_NE(none.missing[5].find("no power rails"), std::string::npos) << none.missing[5];
  EXPECT_NE(none.missing[6].find("no frequency can be set"), std::string::npos) << none.missing[6];
  EXPECT_THROW(set_memory_mhz(none.emc, 2133), Error);
}

// The other knobs a Jetson has: the memory clock (BPMP debugfs), cores online, and the
// nvpmodel modes (reported, switched by nvpmodel itself).
TEST(LinuxBackend, MemoryClockCoresAndPowerModes) {
  fs::path root = make_tree("knobs");
  LinuxProbe pr = probe_linux(root.string());
  ASSERT_FALSE(pr.emc.dir.empty()) << pr.report();
  EXPECT_DOUBLE_EQ(pr.emc.cur_mhz, 3199);
  EXPECT_TRUE(pr.emc.writable);
  set_memory_mhz(pr.emc, 2133);
  EXPECT_EQ(get(root / "sys/kernel/debug/bpmp/debug/clk/emc/mrq_rate_locked"), "1");
  EXPECT_EQ(get(root / "sys/kernel/debug/bpmp/debug/clk/emc/rate"), "2133000000");
  set_memory_mhz(pr.emc, 9000);  // clamped to max_rate
  EXPECT_EQ(get(root / "sys/kernel/debug/bpmp/debug/clk/emc/rate"), "3199000000");
  ASSERT_EQ(pr.cores.size(), 6u);
  EXPECT_FALSE(pr.cores[0].writable);  // cpu0 has no online file
  set_cores_online(pr.cores, 4, root.string());
  EXPECT_EQ(get(root / "sys/devices/system/cpu/cpu3/online"), "1");
  EXPECT_EQ(get(root / "sys/devices/system/cpu/cpu4/online"), "0");
  EXPECT_EQ(get(root / "sys/devices/system/cpu/cpu5/online"), "0");
  EXPECT_THROW(set_cores_online(pr.cores, 0, root.string()), Error);
  EXPECT_THROW(set_cores_online(pr.cores, 7, root.string()), Error);
  ASSERT_EQ(pr.nvpmodel.modes.size(), 3u);
  EXPECT_EQ(pr.nvpmodel.modes[2].second, "MAXN_SUPER");
  EXPECT_EQ(pr.nvpmodel.current, 2);
  const std::string rep = pr.report();
  EXPECT_NE(rep.find("memory clock (EMC)"), std::string::npos) << rep;
  EXPECT_NE(rep.find("2=MAXN_SUPER (current)"), std::string::npos) << rep;
  // Without mrq_rate_locked the BPMP would override the rate: not settable, and said why.
  fs::remove(root / "sys/kernel/debug/bpmp/debug/clk/emc/mrq_rate_locked");
  LinuxProbe locked = probe_linux(root.string());
  EXPECT_FALSE(locked.emc.writable);
  try {
    set_memory_mhz(locked.emc, 2133);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mrq_rate_locked"), std::string::npos) << e.what();
  }
}

// A whole power mode put on the board as nvpmodel would: the Orin Nano Super's 7W (memory at
// 2133 MHz, 4 CPU cores at up to 960 MHz, half the GPU's TPCs) on a six-core tree.
TEST(LinuxBackend, PutsAPowerModeOnTheBoardKnobByKnob) {
  fs::path root = make_tree("mode");
  put(root / "sys/kernel/debug/bpmp/debug/clk/emc/mrq_rate_locked", "0");
  const DeviceProfile p = DeviceProfile::find("orin-nano-super-8gb");
  const std::vector<std::string> done =
      apply_power_mode(probe_linux(root.string()), p, p.mode("7W"));
  EXPECT_EQ(get(root / "sys/kernel/debug/bpmp/debug/clk/emc/rate"), "2133000000");
  EXPECT_EQ(get(root / "sys/kernel/debug/bpmp/debug/clk/emc/mrq_rate_locked"), "1");
  EXPECT_EQ(get(root / "sys/devices/system/cpu/cpu3/online"), "1");
  EXPECT_EQ(get(root / "sys/devices/system/cpu/cpu4/online"), "0");
  EXPECT_EQ(get(root / "sys/devices/system/cpu/cpu5/online"), "0");
  // The highest of the policy's levels at or below the 960 MHz cap.
  EXPECT_EQ(get(root / "sys/devices/system/cpu/cpufreq/policy0/scaling_max_freq"), "729600");
  std::string all;
  for (const auto& d : done) all += d + "\n";
  EXPECT_NE(all.find("memory clock pinned at 2133 MHz"), std::string::npos) << all;
  EXPECT_NE(all.find("cpu: 4 cores online"), std::string::npos) << all;
  EXPECT_NE(all.find("512 of 1024 cores in this mode NOT set"), std::string::npos) << all;
  // Back to MAXN_SUPER: every core online, the caps lifted to the policy's top.
  apply_power_mode(probe_linux(root.string()), p, p.mode("MAXN_SUPER"));
  EXPECT_EQ(get(root / "sys/devices/system/cpu/cpu5/online"), "1");
  EXPECT_EQ(get(root / "sys/devices/system/cpu/cpufreq/policy0/scaling_max_freq"), "1420800");
  EXPECT_EQ(get(root / "sys/kernel/debug/bpmp/debug/clk/emc/rate"), "3199000000");

  // Every mode of the profile can be put on this tree; then a knob goes missing: the mode is
  // refused before anything is written, naming every knob in the way.
  for (const PowerMode& each : p.modes)
    EXPECT_TRUE(power_mode_blockers(probe_linux(root.string()), p, each).empty()) << each.name;
  const auto error_of = [&](const char* mode) {
    try {
      apply_power_mode(probe_linux(root.string()), p, p.mode(mode));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  fs::remove(root / "sys/devices/system/cpu/cpufreq/policy0/scaling_max_freq");
  std::string m = error_of("7W");
  EXPECT_NE(m.find("power mode 7W cannot be put on this board (nothing was changed)"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("cpufreq policy0 cannot be capped"), std::string::npos) << m;
  EXPECT_EQ(get(root / "sys/kernel/debug/bpmp/debug/clk/emc/rate"), "3199000000");
  EXPECT_EQ(get(root / "sys/devices/system/cpu/cpu5/online"), "1");
  fs::remove(root / "sys/kernel/debug/bpmp/debug/clk/emc/mrq_rate_locked");
  m = error_of("MAXN_SUPER");
  EXPECT_NE(m.find("memory clock (EMC) cannot be set"), std::string::npos) << m;
  EXPECT_NE(m.find("cpufreq policy0 cannot be capped"), std::string::npos) << m;
  EXPECT_EQ(power_mode_blockers(probe_linux(root.string()), p, p.mode("MAXN_SUPER")).size(), 2u);
}

// The GPU's TPC power gating has no knob of clone's own: the writes the board's nvpmodel.conf
// lists for the mode (GPU kept powered, the mask, then runtime PM again) are made in order,
// with the conf's file paths; a mode the conf does not gate is reported as not set.
TEST(LinuxBackend, GatesTheGpusTpcsAsTheBoardsNvpmodelConfSays) {
  fs::path root = make_tree("tpc");
  put(root / "sys/kernel/debug/bpmp/debug/clk/emc/mrq_rate_locked", "0");
  const fs::path gpu = root / "sys/devices/platform/gpu.0";
  put(gpu / "tpc_pg_mask", "0");
  put(gpu / "power/control", "auto");
  put(root / "etc/nvpmodel.conf",
      "< PARAM TYPE=FILE NAME=TPC_POWER_GATING >\n"
      "TPC_PG_MASK /sys/devices/platform/gpu.0/tpc_pg_mask\n\n"
      "< PARAM TYPE=FILE NAME=GPU_POWER_CONTROL_ENABLE >\n"
      "GPU_PWR_CNTL_EN /sys/devices/platform/gpu.0/power/control\n\n"
      "< PARAM TYPE=FILE NAME=GPU_POWER_CONTROL_DISABLE >\n"
      "GPU_PWR_CNTL_DIS /sys/devices/platform/gpu.0/power/control\n\n"
      "< PARAM TYPE=CLOCK NAME=GPU >\nMAX_FREQ /sys/class/devfreq/17000000.gpu/max_freq\n\n"
      "< POWER_MODEL ID=0 NAME=7W >\nCPU_ONLINE CORE_5 0\n"
      "GPU_POWER_CONTROL_ENABLE GPU_PWR_CNTL_EN on\nTPC_POWER_GATING TPC_PG_MASK 240\n"
      "GPU MAX_FREQ 408000000\nGPU_POWER_CONTROL_DISABLE GPU_PWR_CNTL_DIS auto\n\n"
      "< POWER_MODEL ID=1 NAME=MAXN_SUPER >\n"
      "GPU_POWER_CONTROL_ENABLE GPU_PWR_CNTL_EN on\nTPC_POWER_GATING TPC_PG_MASK 0\n"
      "GPU_POWER_CONTROL_DISABLE GPU_PWR_CNTL_DIS auto\n\n< PM_CONFIG DEFAULT=1 >\n");
  const LinuxProbe pr = probe_linux(root.string());
  ASSERT_EQ(pr.nvpmodel.modes.size(), 2u);
  const auto* w = pr.nvpmodel.tpc_writes_of("7W");
  ASSERT_NE(w, nullptr);
  ASSERT_EQ(w->size(), 3u);  // CPU_ONLINE and the GPU clock are clone's own knobs
  EXPECT_EQ((*w)[0].value, "on");
  EXPECT_EQ((*w)[1].path, (gpu / "tpc_pg_mask").string());
  EXPECT_EQ((*w)[2].value, "auto");

  const DeviceProfile p = DeviceProfile::find("orin-nano-super-8gb");
  std::string all;
  for (const auto& d : apply_power_mode(pr, p, p.mode("7W"))) all += d + "\n";
  EXPECT_EQ(get(gpu / "tpc_pg_mask"), "240");
  EXPECT_EQ(get(gpu / "power/control"), "auto");
  EXPECT_NE(all.find("gpu: TPC_POWER_GATING TPC_PG_MASK 240 written to"), std::string::npos) << all;
  EXPECT_EQ(all.find("NOT set"), std::string::npos) << all;
  apply_power_mode(probe_linux(root.string()), p, p.mode("MAXN_SUPER"));
  EXPECT_EQ(get(gpu / "tpc_pg_mask"), "0");
  // 15W halves no TPCs and the conf does not list it: nothing to gate, nothing said.
  all.clear();
  for (const auto& d : apply_power_mode(probe_linux(root.string()), p, p.mode("15W")))
    all += d + "\n";
  EXPECT_EQ(all.find("TPC"), std::string::npos) << all;
  // The mask's file gone: the mode is refused, naming it.
  fs::remove(gpu / "tpc_pg_mask");
  const auto why = power_mode_blockers(probe_linux(root.string()), p, p.mode("7W"));
  ASSERT_EQ(why.size(), 1u);
  EXPECT_NE(why[0].find("tpc_pg_mask does not exist"), std::string::npos) << why[0];
}
