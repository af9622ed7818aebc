// Micro-benchmarks of the kernels against this machine's limits (measure_machine):
//   decode  (n = 1): GB/s of weights streamed from DRAM, and the % of the measured read
//                    bandwidth. Each iteration uses the next of enough copies of the
//                    matrix to overflow the last-level cache, as in a real forward pass.
//   prefill (n = 512 ...): GFLOP/s and the % of the measured F32 FMA peak.
//   model decode: every matmul of one TinyLlama-1.1B token (22 layers + output head).
//   pool: the cost of one ThreadPool::run.
//   cached decode: the same from cache, the kernels' compute ceiling.
// Run: bench_kernels [--benchmark_filter=...]; uses every core unless CLONE_THREADS is set
// (CLONE_SIMD=<target> forces a SIMD target).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "clone/core/dtype.h"
#include "clone/kernels/machine.h"
#include "clone/kernels/ops.h"

namespace cln::kernels {
namespace {

ThreadPool& pool() {
  static ThreadPool p([] {
    const char* e = std::getenv("CLONE_THREADS");
    // CLONE_SIMD=AVX2 (for example) runs every kernel on that target, as clone bench --simd.
    if (const char* s = std::getenv("CLONE_SIMD")) force_simd_target(s);
    return e != nullptr ? std::atoi(e) : 0;
  }());
  return p;
}

const MachineLimits& limits() {
  static const MachineLimits m = [] {
    MachineLimits l = measure_machine(&pool());
    std::fprintf(stderr,
                 "machine: %d threads, read bandwidth %.1f GB/s, F32 FMA %.1f GFLOP/s, SIMD %s\n",
                 l.threads, l.read_bandwidth_gbs, l.fma_gflops, l.simd_target);
    return l;
  }();
  return m;
}

// `copies` quantized random matrices of rows x cols, back to back.
struct WeightSet {
  DType type;
  int64_t rows, cols;
  size_t bytes_each;
  std::vector<uint8_t> data;
  int copies;
  std::vector<std::unique_ptr<PackedWeights>> packed;  // one per copy when packed
  Matrix at(int i) const {
    Matrix m{type, data.data() + bytes_each * static_cast<size_t>(i % copies), rows, cols};
    if (!packed.empty()) m.packed = packed[static_cast<size_t>(i % copies)].get();
    return m;
  }
  // Packs every copy (where this CPU has a packed layout for the type).
  void pack() {
    for (int c = 0; c < copies; ++c) {
      auto p = pack_weights(at(c), &pool());
      if (p == nullptr) return;
      packed.push_back(std::move(p));
    }
  }
};

WeightSet make_set(DType t, int64_t rows, int64_t cols, size_t min_total_bytes) {
  WeightSet s{t, rows, cols, dtype_row_bytes(t, cols) * static_cast<size_t>(rows), {}, 1, {}};
  s.copies = static_cast<int>((min_total_bytes + s.bytes_each - 1) / s.bytes_each);
  if (s.copies < 1) s.copies = 1;
  s.data.resize(s.bytes_each * static_cast<size_t>(s.copies));
  std::mt19937 rng(42);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> row(static_cast<size_t>(cols));
  const size_t rb = dtype_row_bytes(t, cols);
  for (int64_t r = 0; r < rows; ++r) {  // one copy quantized, then replicated
    for (auto& v : row) v = dist(rng);
    quantize_row(t, row.data(), s.data.data() + rb * static_cast<size_t>(r), cols);
  }
  for (int c = 1; c < s.copies; ++c)
    std::copy(s.data.begin(), s.data.begin() + static_cast<long>(s.bytes_each),
              s.data.begin() + static_cast<long>(s.bytes_each * static_cast<size_t>(c)));
  return s;
}

std::vector<float> random_floats(size_t n) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

constexpr size_t kColdBytes = size_t{512} << 20;  // 16x a 32 MB L3

// Each iteration streams one cold copy of the matrix through read_stream (the bandwidth
// probe's loop, same threads) and multiplies by another cold copy: "%bw" is the matmul's
// rate as a share of the plain read rate measured alongside it, which holds still while
// other tenants of the machine make the absolute bandwidth swing.
void BM_Decode(benchmark::State& st, DType t, bool pack) {
  const int64_t rows = st.range(0), cols = st.range(1);
  WeightSet w = make_set(t, rows, cols, kColdBytes);
  if (pack) w.pack();
  const auto x = random_floats(static_cast<size_t>(cols));
  std::vector<float> y(static_cast<size_t>(rows));
  const size_t read_bytes = w.packed.empty() ? w.bytes_each : w.packed[0]->bytes();
  double t_mm = 0, t_read = 0;
  std::vector<double> ratio;
  float sink = 0;
  int i = 0;
  for (auto _ : st) {
    const auto t0 = std::chrono::steady_clock::now();
    sink += read_stream(w.at(i + w.copies / 2).packed != nullptr
                            ? static_cast<const void*>(w.at(i + w.copies / 2).packed->data())
                            : w.at(i + w.copies / 2).data,
                        read_bytes, &pool());
    const auto t1 = std::chrono::steady_clock::now();
    matmul(w.at(i++), x.data(), 1, y.data(), &pool());
    const auto t2 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(y.data());
    const double r = std::chrono::duration<double>(t1 - t0).count();
    const double m = std::chrono::duration<double>(t2 - t1).count();
    t_read += r;
    t_mm += m;
    ratio.push_back(r / m);
    st.SetIterationTime(m);
  }
  benchmark::DoNotOptimize(sink);
  const double bytes = static_cast<double>(w.bytes_each) * static_cast<double>(st.iterations());
  st.counters["GB/s"] = bytes / t_mm / 1e9;
  st.counters["read_GB/s"] = bytes / t_read / 1e9;
  // The median of per-iteration ratios: each pair ran within a millisecond, in the same
  // weather, so bandwidth swings from other tenants cancel.
  std::nth_element(ratio.begin(), ratio.begin() + static_cast<long>(ratio.size() / 2), ratio.end());
  st.counters["%bw"] = ratio.empty() ? 0.0 : 100.0 * ratio[ratio.size() / 2];
  st.SetLabel(std::string(dtype_name(t)) + (w.packed.empty() ? "" : " packed"));
}

void BM_Prefill(benchmark::State& st, DType t, bool pack) {
  const int64_t rows = st.range(0), cols = st.range(1), n = st.range(2);
  WeightSet w = make_set(t, rows, cols, 0);
  if (pack) w.pack();
  const auto x = random_floats(static_cast<size_t>(n * cols));
  std::vector<float> y(static_cast<size_t>(n * rows));
  limits();
  for (auto _ : st) {
    matmul(w.at(0), x.data(), n, y.data(), &pool());
    benchmark::DoNotOptimize(y.data());
  }
  const double flops =
      2.0 * static_cast<double>(rows * cols * n) * static_cast<double>(st.iterations());
  st.counters["GFLOP/s"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsRate);
  st.counters["%fma"] =
      benchmark::Counter(flops / (limits().fma_gflops * 1e9) * 100, benchmark::Counter::kIsRate);
  st.SetLabel(std::string(dtype_name(t)));
}

// All matmuls of one token of TinyLlama-1.1B: per layer q, k, v, o, gate, up, down; then the
// output head. Weights of each layer are separate memory, as in a real model.
void BM_ModelDecode(benchmark::State& st, DType t, bool pack) {
  struct Shape {
    int64_t rows, cols;
  };
  const std::vector<Shape> layer = {{2048, 2048}, {256, 2048},  {256, 2048}, {2048, 2048},
                                    {5632, 2048}, {5632, 2048}, {2048, 5632}};
  constexpr int kLayers = 22;
  std::vector<WeightSet> sets;
  size_t total = 0;
  for (const Shape& s : layer) {
    sets.push_back(make_set(t, s.rows, s.cols, 0));
    // one copy per layer: replicate to kLayers copies
    WeightSet& w = sets.back();
    w.copies = kLayers;
    w.data.resize(w.bytes_each * kLayers);
    for (int c = 1; c < kLayers; ++c)
      std::copy(w.data.begin(), w.data.begin() + static_cast<long>(w.bytes_each),
                w.data.begin() + static_cast<long>(w.bytes_each * static_cast<size_t>(c)));
    total += w.bytes_each * kLayers;
    if (pack) w.pack();
  }
  WeightSet head = make_set(t, 32000, 2048, 0);
  if (pack) head.pack();
  total += head.bytes_each;
  const auto x = random_floats(5632);
  std::vector<float> y(32000);
  // The bytes matmul streams for a matrix (the packed copy when there is one).
  const auto bytes_of = [](const Matrix& m) {
    return m.packed != nullptr
               ? std::make_pair(static_cast<const void*>(m.packed->data()), m.packed->bytes())
               : std::make_pair(m.data,
                                dtype_row_bytes(m.type, m.cols) * static_cast<size_t>(m.rows));
  };
  // Each iteration: one token's matmuls, then a plain read of the same bytes (same number of
  // pool calls); "%bw" is the median over iterations of read time / matmul time.
  std::vector<double> ratio;
  double t_mm = 0, t_read = 0;
  float sink = 0;
  for (auto _ : st) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int l = 0; l < kLayers; ++l)
      for (const WeightSet& w : sets) matmul(w.at(l), x.data(), 1, y.data(), &pool());
    matmul(head.at(0), x.data(), 1, y.data(), &pool());
    benchmark::DoNotOptimize(y.data());
    const auto t1 = std::chrono::steady_clock::now();
    for (int l = 0; l < kLayers; ++l)
      for (const WeightSet& w : sets) {
        const auto [p, b] = bytes_of(w.at(l));
        sink += read_stream(p, b, &pool());
      }
    const auto [p, b] = bytes_of(head.at(0));
    sink += read_stream(p, b, &pool());
    const auto t2 = std::chrono::steady_clock::now();
    const double m = std::chrono::duration<double>(t1 - t0).count();
    const double r = std::chrono::duration<double>(t2 - t1).count();
    t_mm += m;
    t_read += r;
    ratio.push_back(r / m);
    st.SetIterationTime(m);
  }
  benchmark::DoNotOptimize(sink);
  const double iters = static_cast<double>(st.iterations());
  st.counters["tok/s"] = iters / t_mm;
  st.counters["GB/s"] = static_cast<double>(total) * iters / t_mm / 1e9;
  st.counters["read_GB/s"] = static_cast<double>(total) * iters / t_read / 1e9;
  std::nth_element(ratio.begin(), ratio.begin() + static_cast<long>(ratio.size() / 2), ratio.end());
  st.counters["%bw"] = ratio.empty() ? 0.0 : 100.0 * ratio[ratio.size() / 2];
  st.SetLabel(std::string(dtype_name(t)) + (head.packed.empty() ? "" : " packed") + ", " +
              std::to_string(total >> 20) + " MiB per token");
}

void BM_GemmF32(benchmark::State& st) {
  const int64_t m = st.range(0), n = st.range(1), k = st.range(2);
  const auto a = random_floats(static_cast<size_t>(m * k)),
             b = random_floats(static_cast<size_t>(k * n));
  std::vector<float> c(static_cast<size_t>(m * n));
  limits();
  for (auto _ : st) {
    gemm_f32(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n, &pool());
    benchmark::DoNotOptimize(c.data());
  }
  const double flops = 2.0 * static_cast<double>(m * n * k) * static_cast<double>(st.iterations());
  st.counters["GFLOP/s"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsRate);
  st.counters["%fma"] =
      benchmark::Counter(flops / (limits().fma_gflops * 1e9) * 100, benchmark::Counter::kIsRate);
}

// Causal GQA: a 512-token prefill (n = 512, pos0 = 0) and one decode step late in a
// context (n = 1, pos0 = 1023 or 540).
void BM_Attention(benchmark::State& st) {
  const int64_t n = st.range(0), pos0 = st.range(1);
  const AttentionShape s{st.range(2), st.range(3), st.range(4), st.range(4)};
  const auto q = random_floats(static_cast<size_t>(n * s.n_head * s.dk));
  const auto k = random_floats(static_cast<size_t>((pos0 + n) * s.n_head_kv * s.dk));
  const auto v = random_floats(static_cast<size_t>((pos0 + n) * s.n_head_kv * s.dv));
  std::vector<float> out(static_cast<size_t>(n * s.n_head * s.dv));
  limits();
  for (auto _ : st) {
    attention(q.data(), k.data(), v.data(), out.data(), n, pos0, s, &pool());
    benchmark::DoNotOptimize(out.data());
  }
  // q.k and p.v: 2 * 2 * dk flops per (query head, visible position).
  double pairs = 0;
  for (int64_t t = 0; t < n; ++t) pairs += static_cast<double>(pos0 + t + 1);
  const double flops =
      4.0 * static_cast<double>(s.dk * s.n_head) * pairs * static_cast<double>(st.iterations());
  st.counters["GFLOP/s"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsRate);
}

void BM_PoolRun(benchmark::State& st) {
  std::vector<int> sink(64);
  for (auto _ : st) pool().run([&](int tid, int) { sink[static_cast<size_t>(tid) * 16] += 1; });
  benchmark::DoNotOptimize(sink.data());
}

void BM_PoolParallelFor(benchmark::State& st) {
  std::vector<int> sink(64);
  for (auto _ : st)
    pool().parallel_for(
        64, 1, [&](int64_t b, int64_t e) { sink[static_cast<size_t>(b)] += static_cast<int>(e); });
  benchmark::DoNotOptimize(sink.data());
}

// Decode from cache (one copy of the weights, small enough for the L2 of the threads that
// share it): the kernel's compute ceiling. Decode from DRAM is bound by memory only where
// this is well above the read bandwidth (BM_CachedDecode against the machine line).
void BM_CachedDecode(benchmark::State& st, DType t) {
  pool();  // applies CLONE_SIMD before the weights are packed
  const int64_t rows = st.range(0), cols = st.range(1);
  WeightSet w = make_set(t, rows, cols, 0);
  if (st.range(2) != 0) w.pack();
  const auto x = random_floats(static_cast<size_t>(cols));
  std::vector<float> y(static_cast<size_t>(rows));
  for (auto _ : st) {
    matmul(w.at(0), x.data(), 1, y.data(), &pool());
    benchmark::DoNotOptimize(y.data());
  }
  st.counters["GB/s"] = benchmark::Counter(
      static_cast<double>(w.bytes_each) * static_cast<double>(st.iterations()) / 1e9,
      benchmark::Counter::kIsRate);
  st.SetLabel(std::string(dtype_name(t)) + " on " + simd_target_name());
}

void DecodeShapes(benchmark::internal::Benchmark* b) {
  for (auto [r, c] : {std::pair<int64_t, int64_t>{2048, 2048},
                      {256, 2048},
                      {5632, 2048},
                      {2048, 5632},
                      {32000, 2048}})
    b->Args({r, c});
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}

void PrefillShapes(benchmark::internal::Benchmark* b) {
  for (auto [r, c] :
       {std::pair<int64_t, int64_t>{2048, 2048}, {256, 2048}, {5632, 2048}, {2048, 5632}})
    b->Args({r, c, 512});
  for (int64_t n : {2, 4, 8, 16, 64}) b->Args({2048, 2048, n});
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK_CAPTURE(BM_Decode, f32, DType::F32, false)->Apply(DecodeShapes);
BENCHMARK_CAPTURE(BM_Decode, f16, DType::F16, false)->Apply(DecodeShapes);
BENCHMARK_CAPTURE(BM_Decode, q8_0, DType::Q8_0, false)->Apply(DecodeShapes);
BENCHMARK_CAPTURE(BM_Decode, q4_0, DType::Q4_0, false)->Apply(DecodeShapes);
BENCHMARK_CAPTURE(BM_Decode, f32_packed, DType::F32, true)->Apply(DecodeShapes);
BENCHMARK_CAPTURE(BM_Decode, f16_packed, DType::F16, true)->Apply(DecodeShapes);
BENCHMARK_CAPTURE(BM_Decode, q8_0_packed, DType::Q8_0, true)->Apply(DecodeShapes);
BENCHMARK_CAPTURE(BM_Decode, q4_0_packed, DType::Q4_0, true)->Apply(DecodeShapes);
BENCHMARK_CAPTURE(BM_ModelDecode, f16, DType::F16, false)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();
BENCHMARK_CAPTURE(BM_ModelDecode, q8_0, DType::Q8_0, false)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();
BENCHMARK_CAPTURE(BM_ModelDecode, q4_0, DType::Q4_0, false)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();
BENCHMARK_CAPTURE(BM_ModelDecode, f16_packed, DType::F16, true)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();
BENCHMARK_CAPTURE(BM_ModelDecode, q8_0_packed, DType::Q8_0, true)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();
BENCHMARK_CAPTURE(BM_ModelDecode, q4_0_packed, DType::Q4_0, true)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();
BENCHMARK_CAPTURE(BM_Prefill, f32, DType::F32, false)->Apply(PrefillShapes);
BENCHMARK_CAPTURE(BM_Prefill, f16, DType::F16, false)->Apply(PrefillShapes);
BENCHMARK_CAPTURE(BM_Prefill, q8_0, DType::Q8_0, false)->Apply(PrefillShapes);
BENCHMARK_CAPTURE(BM_Prefill, q4_0, DType::Q4_0, false)->Apply(PrefillShapes);
BENCHMARK_CAPTURE(BM_Prefill, f32_packed, DType::F32, true)->Apply(PrefillShapes);
BENCHMARK_CAPTURE(BM_Prefill, f16_packed, DType::F16, true)->Apply(PrefillShapes);
BENCHMARK_CAPTURE(BM_Prefill, q8_0_packed, DType::Q8_0, true)->Apply(PrefillShapes);
BENCHMARK_CAPTURE(BM_Prefill, q4_0_packed, DType::Q4_0, true)->Apply(PrefillShapes);
BENCHMARK(BM_GemmF32)
    ->Args({512, 512, 512})
    ->Args({512, 2048, 2048})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
// Args: n, pos0, heads, KV heads, head dim. TinyLlama's shape, then the base model's.
BENCHMARK(BM_Attention)
    ->Args({512, 0, 32, 4, 64})
    ->Args({1, 1023, 32, 4, 64})
    ->Args({512, 0, 8, 4, 32})
    ->Args({1, 540, 8, 4, 32})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_PoolRun)->UseRealTime();
BENCHMARK(BM_PoolParallelFor)->UseRealTime();
// 1024 x 2048: 8 MiB of F32 (L3), 1.1 MiB of Q4_0 (L2); the last argument packs the weights.
BENCHMARK_CAPTURE(BM_CachedDecode, f32, DType::F32)
    ->Args({1024, 2048, 0})
    ->Args({1024, 2048, 1})
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_CachedDecode, f16, DType::F16)
    ->Args({1024, 2048, 0})
    ->Args({1024, 2048, 1})
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_CachedDecode, q8_0, DType::Q8_0)
    ->Args({1024, 2048, 0})
    ->Args({1024, 2048, 1})
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_CachedDecode, q4_0, DType::Q4_0)
    ->Args({1024, 2048, 0})
    ->Args({1024, 2048, 1})
    ->UseRealTime();
// A small model's matmul (width 256, F32): is it arithmetic or thread overhead?
BENCHMARK_CAPTURE(BM_CachedDecode, f32_small, DType::F32)
    ->Args({256, 256, 0})
    ->Args({768, 256, 0})
    ->Args({256, 768, 0})
    ->UseRealTime();

}  // namespace
}  // namespace cln::kernels

BENCHMARK_MAIN();
