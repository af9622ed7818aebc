// Measures this machine's limits, so benchmarks report throughput as a fraction of
// what the hardware can do: read bandwidth (decode is bound by it) and F32 FMA
// throughput (prefill is bound by it).
#pragma once

#include <string>

#include <cstddef>

#include "clone/kernels/thread_pool.h"

namespace cln::kernels {

struct MachineLimits {
  double read_bandwidth_gbs = 0;  // GB/s (1e9 bytes/s) streaming a buffer far larger than cache
  double fma_gflops = 0;          // GFLOP/s of F32 fused multiply-add (2 flops each), all threads
  // Integer dot products as the quantized kernels run them (2 ops per product), all threads,
  // and the instruction measured ("vpdpbusd", "i16 pairs"): quantized prefill's bar.
  double int8_gops = 0;
  const char* int8_kind = "";
  int threads = 0;
  const char* simd_target = "";  // the Highway target chosen at run time, e.g. "AVX3_ZEN4"
};

// The Highway target the kernels dispatch to on this CPU, e.g. "AVX3_DL", "AVX2", "NEON".
const char* simd_target_name();

// Makes every kernel run on the named target, one this CPU supports and the build has (e.g.
// "AVX2" on an AVX-512 machine, to measure what an AVX2-only machine would run); "" restores
// the best. Throws cln::Error listing the available targets for any other name.
void force_simd_target(const std::string& name);

// Reads `bytes` from p with every thread of the pool, as the bandwidth probe does; the
// result depends on every byte so the reads cannot be elided. Benchmarks time it next to a
// kernel over the same amount of cold data, for a fraction of the bandwidth at that moment.
// `prefetch` adds software prefetch 2 KB ahead (faster on some CPUs: time both, keep the best).
float read_stream(const void* p, size_t bytes, ThreadPool* pool, bool prefetch = false);

// One pass of the F32 FMA probe (about 50 ms, every thread of the pool; null: this thread):
// the peak of this moment, which benchmarks take right before and after a compute-bound run
// (a shared VM's clock and co-tenants move it by 10% between runs). int8_gops_now is the
// same for integer dot products and names the instruction measured in *kind.
double fma_gflops_now(ThreadPool* pool);
double int8_gops_now(ThreadPool* pool, const char** kind = nullptr);

// Takes about a second. Uses every thread of the pool.
MachineLimits measure_machine(ThreadPool* pool);

}  // namespace cln::kernels
