// The linux backend against a sysfs-shaped tree the test builds.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "clone/core/error.h"
#include "clone/device/linux.h"
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
  ASSERT_EQ(none.missing.size(), 4u) << none.report();
  EXPECT_NE(none.missing[0].find("no cpufreq policies"), std::string::npos) << none.missing[0];
  EXPECT_NE(none.missing[1].find("no devfreq devices"), std::string::npos) << none.missing[1];
  EXPECT_NE(none.missing[2].find("no power rails"), std::string::npos) << none.missing[2];
  EXPECT_NE(none.missing[3].find("no frequency can be set"), std::string::npos) << none.missing[3];
}
