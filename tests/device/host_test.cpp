// The host as a profile: clock levels from the probe's cpufreq knob (else /proc/cpuinfo),
// FLOPs per cycle and bandwidth from measured limits, memory from /proc/meminfo; the
// result is a valid profile the cost model accepts.
#include "clone/engine/presets.h"
#include "clone/device/host.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "clone/device/cost_model.h"

using namespace cln;
using namespace cln::device;
namespace fs = std::filesystem;

namespace {

LinuxProbe probe_with_cpufreq(std::vector<double> levels) {
  LinuxProbe p;
  FreqKnob devfreq;  // a GPU knob is not the host CPU's
  devfreq.kind = "devfreq", devfreq.levels_mhz = {300, 900};
  p.knobs.push_back(devfreq);
  FreqKnob k;
  k.kind = "cpufreq", k.name = "policy0", k.levels_mhz = std::move(levels);
  p.knobs.push_back(k);
  return p;
}

TEST(Host, LevelsFromCpufreqAndRatesFromMeasuredLimits) {
  HostFacts f;
  f.cores = 8, f.cpu_mhz = 1234, f.memory_gb = 32;
  const auto p = host_profile(probe_with_cpufreq({1000, 2000, 4000}), f, {256, 51.2});
  EXPECT_EQ(p.name, "host");
  const auto& u = p.compute();
  EXPECT_EQ(u.kind, "cpu");
  EXPECT_EQ(u.cores, 8);
  ASSERT_EQ(u.levels.size(), 3u);
  EXPECT_DOUBLE_EQ(u.levels[0].mhz, 1000);
  EXPECT_DOUBLE_EQ(u.levels[0].volt, 0.7 + 0.5 * 1000 / 4000);
  EXPECT_DOUBLE_EQ(u.levels[2].volt, 1.2);
  EXPECT_DOUBLE_EQ(u.work_per_cycle, 256e3 / 4000);  // GFLOP/s over the top clock
  EXPECT_DOUBLE_EQ(p.memory.peak_bandwidth(), 51.2e9);
  EXPECT_DOUBLE_EQ(p.memory.size_gb, 32);
  // Valid: it survives its own JSON, and the cost model takes it.
  const auto back = DeviceProfile::from_json(p.to_json(), "host");
  EXPECT_EQ(back.compute().levels.size(), 3u);
  CostModel cm(back, model_preset("tinyllama-1.1b"));
  EXPECT_EQ(cm.max_level(), 2);
}

TEST(Host, WithoutKnobsOrMeasurementsFallsBackToTheFacts) {
  HostFacts f;
  f.cores = 4, f.cpu_mhz = 2400;
  const auto p = host_profile(LinuxProbe{}, f, {});
  const auto& u = p.compute();
  ASSERT_EQ(u.levels.size(), 1u);
  EXPECT_DOUBLE_EQ(u.levels[0].mhz, 2400);
  EXPECT_DOUBLE_EQ(u.work_per_cycle, 32.0 * 4);
  EXPECT_DOUBLE_EQ(p.memory.peak_bandwidth(), 16 * 3200e6);
  EXPECT_DOUBLE_EQ(p.memory.size_gb, 16);
  f.cpu_mhz = 0;
  EXPECT_DOUBLE_EQ(host_profile(LinuxProbe{}, f, {}).compute().levels[0].mhz, 2000);
}

TEST(Host, ReadsCpuinfoAndMeminfoUnderARoot) {
  const fs::path root = fs::path(CLONE_BINARY_DIR) / "fake_host";
  fs::create_directories(root / "proc");
  std::ofstream(root / "proc/cpuinfo") << "processor\t: 0\nmodel name\t: x\ncpu MHz\t\t: 3187.5\n"
                                          "processor\t: 1\ncpu MHz\t\t: 999\n";
  std::ofstream(root / "proc/meminfo") << "MemTotal:       16000000 kB\nMemFree: 1 kB\n";
  const auto f = read_host_facts(root.string());
  EXPECT_DOUBLE_EQ(f.cpu_mhz, 3187.5);
  EXPECT_DOUBLE_EQ(f.memory_gb, 16000000.0 * 1024 / 1e9);
  EXPECT_GE(f.cores, 1);
  const auto none = read_host_facts((root / "missing").string());
  EXPECT_EQ(none.cpu_mhz, 0);
  EXPECT_EQ(none.memory_gb, 0);
}

}  // namespace
