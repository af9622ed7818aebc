// How fast the engine runs a model on this machine, as a fraction of the machine's limits
// (kernels/machine.h): prefill FLOP rate against the arithmetic peak probed right before and
// after each prefill pass, decode byte rate against the read bandwidth probed right beside
// each decode run (a shared machine's bandwidth swings by tens of percent from one second to
// the next, its arithmetic peak by about 10%). FLOPs and bytes come from the shared
// accounting (accounting.h). What `clone bench` prints.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "clone/core/table.h"
#include "clone/engine/model.h"
#include "clone/kernels/machine.h"

namespace cln {

struct SpeedOptions {
  int threads = 0;         // 0 = all cores
  int64_t n_prompt = 512;  // prefill test: one pass of this many tokens (0: none)
  int64_t n_gen = 64;      // decode test: tokens per run
  int reps = 3;            // prefill passes; the best is reported
  int decode_reps = 9;     // decode runs, each between two bandwidth probes; medians reported
  bool overhead = true;    // also decode with 1 thread: the parallel overhead
};

struct SpeedResult {
  std::string model;  // file name
  std::string type;   // layer matrix type
  double params_m = 0, weights_mb = 0;
  int threads = 0;
  // Best pass; prefill_pct_fma: against the FMA peak measured once at start-up.
  double prefill_tps = 0, prefill_gflops = 0, prefill_pct_fma = 0;
  // Prefill against the peak of the arithmetic it runs: "fma" (F32/F16 weights) or "int8"
  // (Q8_0/Q4_0, integer dot products on quantized activations), probed before and after each
  // pass: peak_beside is the median of the probes, prefill_pct_peak the median over passes of
  // each pass's rate over the mean of its two probes; peak_on names the SIMD target and
  // instruction those probes ran ("AVX2 i16 pairs", "AVX3_DL vpdpbusd", "SSE4 fma").
  std::string prefill_peak;
  double peak_beside = 0;
  std::string peak_on;
  double prefill_pct_peak = 0;
  double decode_tps = 0, decode_gbs = 0;
  double read_gbs = 0;  // median bandwidth probed beside the decode runs
  double decode_pct_bw = 0, pct_bw_min = 0, pct_bw_max = 0;  // median and range over runs
  double rss_mb = 0;    // resident memory with the context alive (weights paged in + KV + scratch)
  double state_mb = 0;  // KV cache + scratch buffers
  double overhead_pct = -1;  // decode time beyond a perfect n-way split of 1 thread; -1: not run
};

// Prefill: best of `reps` passes of n_prompt random tokens from an empty cache. Decode:
// `decode_reps` runs of n_gen tokens after that prompt, each bracketed by two read-bandwidth
// probes over a buffer far beyond the caches; decode speed and its share of the bandwidth
// are medians over the runs (each run against the mean of its own two probes).
SpeedResult measure_speed(const std::shared_ptr<const Model>& model, const std::string& name,
                          const SpeedOptions& o, const kernels::MachineLimits& limits);

// One row per result, columns as SpeedResult (the `clone bench` table).
Table speed_table(const std::vector<SpeedResult>& rows);

}  // namespace cln
