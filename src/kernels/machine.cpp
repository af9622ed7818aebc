// measure_machine: the two limits the engine is judged against.
//   read bandwidth: every thread streams its share of a buffer far larger than the last-level
//     cache (1 GiB) with vector loads; best of several passes.
//   FMA peak: every thread runs independent F32 FMA chains held in registers.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/machine.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kernels/arch/x86/matvec_vnni.h"

HWY_BEFORE_NAMESPACE();
namespace cln::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Sums n floats (n a multiple of 8 vectors) with eight independent accumulators so the
// loop is bound by loads, not by add latency. The sum is returned so nothing is elided.
// With `prefetch`, every cache line is also prefetched 2 KB ahead in software, as the decode
// kernels do on CPUs whose hardware prefetchers fall behind (matvec.cpp): where that reads
// faster, the plain loop underestimates the machine's limit.
float ReadStream(const float* HWY_RESTRICT p, size_t n, bool prefetch) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  auto a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  auto a4 = hn::Zero(d), a5 = hn::Zero(d), a6 = hn::Zero(d), a7 = hn::Zero(d);
  for (size_t i = 0; i + 8 * N <= n; i += 8 * N) {
    if (prefetch) {
      const auto* line = reinterpret_cast<const uint8_t*>(p + i) + 2048;
      for (size_t k = 0; k < 8 * N * sizeof(float); k += 64) hwy::Prefetch(line + k);
    }
    a0 = hn::Add(a0, hn::LoadU(d, p + i + 0 * N));
    a1 = hn::Add(a1, hn::LoadU(d, p + i + 1 * N));
    a2 = hn::Add(a2, hn::LoadU(d, p + i + 2 * N));
    a3 = hn::Add(a3, hn::LoadU(d, p + i + 3 * N));
    a4 = hn::Add(a4, hn::LoadU(d, p + i + 4 * N));
    a5 = hn::Add(a5, hn::LoadU(d, p + i + 5 * N));
    a6 = hn::Add(a6, hn::LoadU(d, p + i + 6 * N));
    a7 = hn::Add(a7, hn::LoadU(d, p + i + 7 * N));
  }
  a0 =
      hn::Add(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)), hn::Add(hn::Add(a4, a5), hn::Add(a6, a7)));
  return hn::GetLane(hn::SumOfLanes(d, a0));
}

// Runs `iters` rounds of 12 independent FMA chains; returns the flops done (2 per lane per FMA)
// through *flops and a value that depends on every chain.
float FmaChains(size_t iters, float seed, double* flops) {
  const hn::ScalableTag<float> d;
  const auto m = hn::Set(d, 0.999999f), c = hn::Set(d, 1e-7f);
  auto a0 = hn::Set(d, seed), a1 = hn::Add(a0, c), a2 = hn::Add(a1, c), a3 = hn::Add(a2, c);
  auto a4 = hn::Add(a3, c), a5 = hn::Add(a4, c), a6 = hn::Add(a5, c), a7 = hn::Add(a6, c);
  auto a8 = hn::Add(a7, c), a9 = hn::Add(a8, c), a10 = hn::Add(a9, c), a11 = hn::Add(a10, c);
  for (size_t i = 0; i < iters; ++i) {
    a0 = hn::MulAdd(a0, m, c);
    a1 = hn::MulAdd(a1, m, c);
    a2 = hn::MulAdd(a2, m, c);
    a3 = hn::MulAdd(a3, m, c);
    a4 = hn::MulAdd(a4, m, c);
    a5 = hn::MulAdd(a5, m, c);
    a6 = hn::MulAdd(a6, m, c);
    a7 = hn::MulAdd(a7, m, c);
    a8 = hn::MulAdd(a8, m, c);
    a9 = hn::MulAdd(a9, m, c);
    a10 = hn::MulAdd(a10, m, c);
    a11 = hn::MulAdd(a11, m, c);
  }
  *flops = 2.0 * 12.0 * static_cast<double>(hn::Lanes(d)) * static_cast<double>(iters);
  const auto s = hn::Add(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)),
                         hn::Add(hn::Add(hn::Add(a4, a5), hn::Add(a6, a7)),
                                 hn::Add(hn::Add(a8, a9), hn::Add(a10, a11))));
  return hn::GetLane(hn::SumOfLanes(d, s));
}

// The integer dot-product peak the quantized kernels run against: `iters` rounds of 12
// independent chains of the instruction they use on this target. AVX3_DL: vpdpbusd (AVX-512
// VNNI: 64 u8 x s8 products summed into 16 int32 lanes per instruction, as
// arch/x86/matvec_vnni.cpp); elsewhere int16 pair products widened into int32 sums
// (ReorderWidenMulAccumulate, as matvec.cpp's portable Q8_0/Q4_0 rows). *ops counts two per
// product (multiply and add), like the FMA peak's flops; *kind names the instruction.
float Int8Chains(size_t iters, int32_t seed, double* ops, const char** kind) {
#if HWY_TARGET == HWY_AVX3_DL
  *kind = "vpdpbusd";
  return detail::x86::vnni_int8_chains(iters, seed, ops);
#else
  const hn::ScalableTag<int16_t> d16;
  const hn::RepartitionToWide<decltype(d16)> d32;
  const auto x = hn::Set(d16, 3), y = hn::Set(d16, -5);
  auto s0 = hn::Set(d32, seed), s1 = hn::Set(d32, seed + 1), s2 = hn::Set(d32, seed + 2);
  auto s3 = hn::Set(d32, seed + 3), s4 = hn::Set(d32, seed + 4), s5 = hn::Set(d32, seed + 5);
  auto c0 = hn::Zero(d32), c1 = hn::Zero(d32), c2 = hn::Zero(d32);
  auto c3 = hn::Zero(d32), c4 = hn::Zero(d32), c5 = hn::Zero(d32);
  for (size_t i = 0; i < iters; ++i) {
    s0 = hn::ReorderWidenMulAccumulate(d32, x, y, s0, c0);
    s1 = hn::ReorderWidenMulAccumulate(d32, x, y, s1, c1);
    s2 = hn::ReorderWidenMulAccumulate(d32, x, y, s2, c2);
    s3 = hn::ReorderWidenMulAccumulate(d32, x, y, s3, c3);
    s4 = hn::ReorderWidenMulAccumulate(d32, x, y, s4, c4);
    s5 = hn::ReorderWidenMulAccumulate(d32, x, y, s5, c5);
#if HWY_TARGET == HWY_SCALAR
    // A scalar "vector" is a plain int: without a barrier the compiler sums each chain in
    // closed form and the probe read 80-420 TOPS, a different number every run.
    asm volatile(""
                 : "+r"(s0.raw), "+r"(s1.raw), "+r"(s2.raw), "+r"(s3.raw), "+r"(s4.raw),
                   "+r"(s5.raw));
#endif
  }
  auto t = hn::Add(hn::Add(hn::Add(s0, s1), hn::Add(s2, s3)), hn::Add(s4, s5));
  t = hn::Add(t, hn::Add(hn::Add(hn::Add(c0, c1), hn::Add(c2, c3)), hn::Add(c4, c5)));
  *ops = 2.0 * static_cast<double>(hn::Lanes(d16)) * 6 * static_cast<double>(iters);
  *kind = "i16 pairs";
  return static_cast<float>(hn::GetLane(hn::SumOfLanes(d32, t)));
#endif
}

const char* TargetNameHere() {
  return hwy::TargetName(HWY_TARGET);
}

}  // namespace HWY_NAMESPACE
}  // namespace cln::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "clone/kernels/machine.h"

namespace cln::kernels {
HWY_EXPORT(ReadStream);
HWY_EXPORT(FmaChains);
HWY_EXPORT(Int8Chains);
HWY_EXPORT(TargetNameHere);

const char* simd_target_name() {
  return HWY_DYNAMIC_DISPATCH(TargetNameHere)();
}

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

float read_stream(const void* p, size_t bytes, ThreadPool* pool, bool prefetch) {
  const auto* f = static_cast<const float*>(p);
  const size_t n = bytes / sizeof(float);
  // Chunked like the kernels (parallel_for), so the comparison with them is like for like.
  std::atomic<float> sum{0.0f};
  const auto work = [&](int64_t b, int64_t e) {
    sum.fetch_add(HWY_DYNAMIC_DISPATCH(ReadStream)(f + b, static_cast<size_t>(e - b), prefetch),
                  std::memory_order_relaxed);
  };
  if (pool == nullptr) {
    work(0, static_cast<int64_t>(n));
  } else {
    pool->parallel_for(static_cast<int64_t>(n), 1024, work);
  }
  return sum.load();
}

namespace {

// Runs probe(tid, &count) on every thread of the pool (this thread when null) and returns
// the counts' total per second, in billions. probe returns a value that depends on all its
// work, so the work cannot be elided.
template <typename F>
double rate_now(ThreadPool* pool, F&& probe) {
  const int nth = pool != nullptr ? pool->size() : 1;
  std::vector<double> counts(static_cast<size_t>(nth));
  std::vector<float> sink(static_cast<size_t>(nth));
  const auto t0 = std::chrono::steady_clock::now();
  const auto work = [&](int tid, int) {
    sink[static_cast<size_t>(tid)] += probe(tid, &counts[static_cast<size_t>(tid)]);
  };
  if (pool != nullptr) {
    pool->run(work);
  } else {
    work(0, 1);
  }
  const double s = seconds_since(t0);
  double total = 0;
  for (double c : counts) total += c;
  volatile float keep = 0;
  for (float v : sink) keep = keep + v;
  return total / s / 1e9;
}

}  // namespace

double fma_gflops_now(ThreadPool* pool) {
  return rate_now(pool, [](int tid, double* flops) {
    return HWY_DYNAMIC_DISPATCH(FmaChains)(size_t{4} << 20, 1.0f + static_cast<float>(tid), flops);
  });
}

double int8_gops_now(ThreadPool* pool, const char** kind) {
  const char* first = "";  // thread 0's; every thread runs the same instruction
  const double r = rate_now(pool, [&](int tid, double* ops) {
    const char* k = "";
    const float v = HWY_DYNAMIC_DISPATCH(Int8Chains)(size_t{4} << 20, tid + 1, ops, &k);
    if (tid == 0) first = k;
    return v;
  });
  if (kind != nullptr) *kind = first;
  return r;
}

MachineLimits measure_machine(ThreadPool* pool) {
  MachineLimits m;
  m.threads = pool->size();
  m.simd_target = simd_target_name();

  // Bandwidth: 1 GiB, 32x the L3 of a large desktop part. Touch it first (page faults are
  // not bandwidth), then keep the best of several passes, plain and prefetched in turn.
  constexpr size_t kBytes = size_t{1} << 30;
  constexpr size_t kFloats = kBytes / sizeof(float);
  float* buf = static_cast<float*>(std::aligned_alloc(2 << 20, kBytes));
  if (buf == nullptr) return m;
  madvise(buf, kBytes, MADV_HUGEPAGE);  // fewer TLB misses, as a large model mapping would get
  pool->run([&](int tid, int nth) {
    long b, e;
    split_range(static_cast<long>(kFloats), tid, nth, 4096, &b, &e);
    for (long i = b; i < e; ++i) buf[i] = static_cast<float>(i & 7);
  });
  std::vector<float> sink(static_cast<size_t>(m.threads));
  double best = 0;
  for (int pass = 0; pass < 6; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    pool->run([&](int tid, int nth) {
      long b, e;
      split_range(static_cast<long>(kFloats), tid, nth, 4096, &b, &e);
      sink[static_cast<size_t>(tid)] +=
          HWY_DYNAMIC_DISPATCH(ReadStream)(buf + b, static_cast<size_t>(e - b), pass % 2 == 1);
    });
    best = std::max(best, static_cast<double>(kBytes) / seconds_since(t0) / 1e9);
  }
  std::free(buf);
  m.read_bandwidth_gbs = best;

  // FMA, then integer dot products (quantized prefill): about 50 ms per pass, best of three.
  for (int pass = 0; pass < 3; ++pass) m.fma_gflops = std::max(m.fma_gflops, fma_gflops_now(pool));
  for (int pass = 0; pass < 3; ++pass)
    m.int8_gops = std::max(m.int8_gops, int8_gops_now(pool, &m.int8_kind));
  volatile float keep = 0;
  for (float s : sink) keep = keep + s;
  return m;
}

}  // namespace cln::kernels
#endif  // HWY_ONCE
