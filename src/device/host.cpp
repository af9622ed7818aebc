#include "clone/device/host.h"

#include <algorithm>
#include <fstream>
#include <thread>

#include "clone/kernels/machine.h"
#include "clone/kernels/thread_pool.h"

namespace cln::device {

HostFacts read_host_facts(const std::string& root) {
  HostFacts f;
  f.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  {
    std::ifstream in(root + "/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("cpu MHz", 0) == 0) {
        const auto colon = line.find(':');
        if (colon != std::string::npos) {
          try {
            f.cpu_mhz = std::stod(line.substr(colon + 1));
          } catch (const std::exception&) {
            f.cpu_mhz = 0;
          }
        }
        break;
      }
  }
  {
    std::ifstream in(root + "/proc/meminfo");
    std::string k;
    double kb = 0;
    if (in >> k >> kb) f.memory_gb = kb * 1024 / 1e9;
  }
  return f;
}

HostLimits measure_host_limits(int threads) {
  kernels::ThreadPool pool(std::max(1, threads));
  const auto lim = kernels::measure_machine(&pool);
  return {lim.fma_gflops, lim.read_bandwidth_gbs};
}

DeviceProfile host_profile(const LinuxProbe& pr, const HostFacts& facts, const HostLimits& lim) {
  DeviceProfile p;
  p.name = "host";
  p.run_on = "cpu";
  ComputeUnit u;
  u.name = "cpu";
  u.kind = "cpu";
  u.cores = std::max(1, facts.cores);
  for (const auto& k : pr.knobs)
    if (k.kind == "cpufreq" && !k.levels_mhz.empty() && u.levels.empty())
      for (double f : k.levels_mhz) u.levels.push_back({f, 0.7 + 0.5 * f / k.levels_mhz.back()});
  if (u.levels.empty()) u.levels.push_back({facts.cpu_mhz > 0 ? facts.cpu_mhz : 2000, 1.0});
  const double fmax = u.levels.back().mhz;
  u.work_per_cycle = lim.fma_gflops > 0 ? lim.fma_gflops * 1e3 / fmax : 32.0 * u.cores;
  u.power = {5.0, 4.0 * u.cores, 0.3};
  u.dvfs = {100, 10};
  p.units.push_back(u);
  p.memory.size_gb = facts.memory_gb > 0 ? facts.memory_gb : 16;
  p.memory.usable_fraction = 0.8;
  p.memory.levels_mhz = {3200};
  p.memory.mhz = 3200;
  p.memory.bus_bytes_per_cycle =
      lim.read_bandwidth_gbs > 0 ? lim.read_bandwidth_gbs * 1e9 / 3200e6 : 16;
  p.memory.pj_per_byte = 60;
  p.memory.static_w = 2;
  p.storage_gbps = 2;
  p.board_idle_w = 20;
  p.fit = {1, 1, 0, 0, 5, 0.7};
  p.description =
      "this machine, measured by `clone device probe` (peak F32 FMA rate and streaming read "
      "bandwidth measured; efficiencies 1 because the peaks are achieved rates; power "
      "coefficients are generic estimates: no power rails here)";
  return p;
}

}  // namespace cln::device
