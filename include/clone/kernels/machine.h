// Measures this machine's limits, so benchmarks report throughput as a fraction of
// what the hardware can do: read bandwidth (decode is bound by it) and F32 FMA
// throughput (prefill is bound by it).
#pragma once

#include "clone/kernels/thread_pool.h"

namespace cln::kernels {

struct MachineLimits {
  double read_bandwidth_gbs = 0;  // GB/s (1e9 bytes/s) streaming a buffer far larger than cache
  double fma_gflops = 0;          // GFLOP/s of F32 fused multiply-add (2 flops each), all threads
  int threads = 0;
  const char* simd_target = "";  // the Highway target chosen at run time, e.g. "AVX3_ZEN4"
};

// The Highway target the kernels dispatch to on this CPU, e.g. "AVX3_DL", "AVX2", "NEON".
const char* simd_target_name();

// Takes about a second. Uses every thread of the pool.
MachineLimits measure_machine(ThreadPool* pool);

}  // namespace cln::kernels
