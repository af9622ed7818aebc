// This machine as a device profile (`clone device probe --out`): CPU clock levels from the
// cpufreq knobs the Linux probe found (else the current clock from /proc/cpuinfo), peak
// FLOPs per cycle and memory bandwidth from measured limits, the memory size from
// /proc/meminfo. Power numbers are generic desktop-class estimates: a host has no rails
// to read, and the probe says so.
#pragma once

#include <string>

#include "clone/device/linux.h"
#include "clone/device/profile.h"

namespace cln::device {

// What the host offers beside the probe's knobs: read from <root>/proc (0 when unknown).
struct HostFacts {
  int cores = 1;
  double cpu_mhz = 0;    // "cpu MHz" of /proc/cpuinfo's first CPU
  double memory_gb = 0;  // MemTotal of /proc/meminfo, GB (1e9 bytes)
};
HostFacts read_host_facts(const std::string& root = "/");

// Measured limits: peak F32 FMA rate and streaming read bandwidth (0: not measured; the
// profile then assumes 32 FLOP/cycle per core and 16 bytes per memory cycle).
struct HostLimits {
  double fma_gflops = 0, read_bandwidth_gbs = 0;
};
HostLimits measure_host_limits(int threads);  // about a second, on `threads` threads

// The profile named "host" running on its "cpu" unit.
DeviceProfile host_profile(const LinuxProbe& probe, const HostFacts& facts,
                           const HostLimits& limits);

}  // namespace cln::device
