// Every optimized kernel against its scalar reference, on random inputs and awkward shapes,
// on every SIMD target this CPU supports (each test pins each target in turn).
//
// Tolerances are derived, not tuned: an F32 sum of K products, accumulated in any order,
// is within K * eps * sum|a_i b_i| of the exact one (eps = FLT_EPSILON); the reference
// accumulates in double, so that bound covers the difference. Where activations are
// quantized to 8 bits (the decode path of Q8_0/Q4_0 weights) each x_j moves by at most
// half its block's step d_x, so the result moves by at most sum_j |w_j| d_x / 2 more.
// Any NaN fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "clone/core/dtype.h"
#include "clone/core/error.h"
#include "clone/kernels/machine.h"
#include "clone/kernels/ops.h"
#include "hwy/targets.h"
#include "kernels/dispatch.h"
#include "kernels/matvec.h"
#include "kernels/packed.h"

namespace cln::kernels {
namespace {

constexpr double kEps = FLT_EPSILON;

std::vector<float> random_vec(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// The SIMD targets to test: every one this CPU supports, or those named in CLONE_TEST_TARGETS
// (Highway names, comma-separated). The aarch64 build's runner under qemu names the ones its
// emulated CPU must offer (cmake/toolchains/qemu-aarch64.sh); a named target this CPU lacks,
// or this build left out, fails the test rather than going untested.
std::vector<int64_t> test_targets() {
  const std::vector<int64_t> all = detail::available_targets();
  const char* only = std::getenv("CLONE_TEST_TARGETS");
  if (only == nullptr || *only == '\0') return all;
  std::vector<int64_t> picked;
  std::istringstream names(only);
  for (std::string name; std::getline(names, name, ',');) {
    const auto it =
        std::find_if(all.begin(), all.end(), [&](int64_t t) { return name == hwy::TargetName(t); });
    if (it == all.end()) {
      ADD_FAILURE() << "CLONE_TEST_TARGETS names " << name << ", which is not available here";
      continue;
    }
    picked.push_back(*it);
  }
  return picked;
}

// Runs f once per SIMD target, each time with every kernel dispatched to that target.
template <typename F>
void for_each_target(F&& f) {
  for (int64_t t : test_targets()) {
    detail::force_target(t);
    SCOPED_TRACE(std::string("target ") + hwy::TargetName(t));
    f();
  }
  detail::force_target(0);
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                  const std::vector<double>& tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i) {
    if (std::isnan(got[i]) || std::fabs(static_cast<double>(got[i]) - want[i]) > tol[i]) {
      ADD_FAILURE() << what << " [" << i << "]: got " << got[i] << ", want " << want[i] << " +- "
                    << tol[i];
      ++bad;
    }
  }
}

// ------------------------------------------------------------------------------ fp16
// An independent half -> float: the value formula, not bit shuffling.
double half_value(uint16_t h) {
  const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v;
  if (e == 0)
    v = std::ldexp(m, -24);
  else if (e == 31)
    v = m ? NAN : INFINITY;
  else
    v = std::ldexp(1024 + m, e - 25);
  return s ? -v : v;
}

TEST(Fp16, EveryHalfConvertsExactly) {
  std::vector<uint16_t> all(65536);
  for (uint32_t h = 0; h < 65536; ++h) all[h] = static_cast<uint16_t>(h);
  std::vector<float> core(65536);
  for (uint32_t h = 0; h < 65536; ++h) core[h] = fp16_to_fp32(all[h]);
  for (uint32_t h = 0; h < 65536; ++h) {
    const double want = half_value(all[h]);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(core[h])) << "half " << h;
    } else {
      ASSERT_EQ(static_cast<double>(core[h]), want) << "half " << h;
      ASSERT_EQ(std::signbit(core[h]), std::signbit(want)) << "half " << h;
    }
  }
  for_each_target([&] {
    std::vector<float> simd(65536);
    dequantize_row(DType::F16, all.data(), simd.data(), 65536);
    for (uint32_t h = 0; h < 65536; ++h) {
      if (std::isnan(core[h])) {
        ASSERT_TRUE(std::isnan(simd[h])) << "half " << h;
      } else {
        ASSERT_EQ(std::memcmp(&simd[h], &core[h], 4), 0)
            << "half " << h << ": " << simd[h] << " vs " << core[h];
      }
    }
  });
}

TEST(Fp16, FloatToHalfRoundsToNearestEven) {
  for (uint32_t h = 0; h < 0x7bff; ++h) {  // every finite non-negative half and the next one up
    const auto a = static_cast<uint16_t>(h), b = static_cast<uint16_t>(h + 1);
    const double va = half_value(a), vb = half_value(b);
    ASSERT_EQ(fp32_to_fp16(static_cast<float>(va)), a);
    ASSERT_EQ(fp32_to_fp16(-static_cast<float>(va)), a | 0x8000);
    const auto mid = static_cast<float>((va + vb) / 2);  // exact in float
    const uint16_t even = (a & 1) ? b : a;
    ASSERT_EQ(fp32_to_fp16(mid), even) << "midpoint above half " << h;
    ASSERT_EQ(fp32_to_fp16(std::nextafter(mid, 0.0f)), a) << "just below midpoint above half " << h;
    ASSERT_EQ(fp32_to_fp16(std::nextafter(mid, INFINITY)), b)
        << "just above midpoint above half " << h;
  }
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);  // the tie above the largest half rounds to inf
  EXPECT_EQ(fp32_to_fp16(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(INFINITY), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(NAN) & 0x7c00, 0x7c00);
  EXPECT_NE(fp32_to_fp16(NAN) & 0x3ff, 0);
}

// ------------------------------------------------------------------------- quantization
std::vector<uint8_t> quantized(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(dtype_row_bytes(t, static_cast<int64_t>(x.size())));
  quantize_row(t, x.data(), q.data(), static_cast<int64_t>(x.size()));
  return q;
}

TEST(Quantize, BitExactWithReferenceAndBounded) {
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::F16}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    // Random blocks, a zero block, ties (x/d exactly k + 0.5) and a block with +-max twice.
    std::vector<float> x = random_vec(32 * 67, 7, 3.0f);
    for (int j = 0; j < 32; ++j) x[32 + j] = 0.0f;
    for (int j = 0; j < 32; ++j) x[64 + j] = (static_cast<float>(j) - 15.5f) * 0.5f;
    for (int j = 0; j < 32; ++j)
      x[96 + j] = (j % 2 ? 1.0f : -1.0f) * (j % 5 == 0 ? 4.0f : 0.25f * static_cast<float>(j));
    const int64_t n = static_cast<int64_t>(x.size());
    std::vector<uint8_t> want(dtype_row_bytes(t, n));
    ref::quantize_row(t, x.data(), want.data(), n);
    for_each_target([&] {
      const auto got = quantized(t, x);
      ASSERT_EQ(got, want) << "bytes differ from ggml's reference rounding";
      std::vector<float> back(x.size()), back_ref(x.size());
      dequantize_row(t, got.data(), back.data(), n);
      ref::dequantize_row(t, got.data(), back_ref.data(), n);
      ASSERT_EQ(0, std::memcmp(back.data(), back_ref.data(), back.size() * 4));
      // Round trip: within half a step (a full step where Q4_0 clips at +7), plus the
      // fp16 rounding of the scale (2^-11 relative) times the largest quant.
      for (int64_t b = 0; b < n / 32; ++b) {
        double amax = 0;
        for (int j = 0; j < 32; ++j)
          amax = std::max(amax, std::fabs(static_cast<double>(x[b * 32 + j])));
        for (int j = 0; j < 32; ++j) {
          const double xv = x[b * 32 + j], err = std::fabs(xv - back[b * 32 + j]);
          double bound;
          if (t == DType::Q8_0)
            bound = amax / 127 * (0.5 + 127 * std::ldexp(1.0, -11)) + 4 * kEps * amax;
          else if (t == DType::Q4_0)
            bound = amax / 8 * (1.0 + 8 * std::ldexp(1.0, -11)) + 4 * kEps * amax;
          else
            bound = std::max(std::fabs(xv) * std::ldexp(1.0, -11), std::ldexp(1.0, -25));
          ASSERT_LE(err, bound) << "block " << b << " value " << j << " = " << xv;
        }
      }
    });
  }
}

TEST(Quantize, RejectsPartialBlocks) {
  std::vector<float> x(40);
  std::vector<uint8_t> q(64);
  EXPECT_THROW(quantize_row(DType::Q8_0, x.data(), q.data(), 40), Error);
  EXPECT_THROW(dequantize_row(DType::Q4_0, q.data(), x.data(), 33), Error);
}

// ----------------------------------------------------------------------------- matmul
struct Weights {
  DType type;
  int64_t rows, cols;
  std::vector<uint8_t> bytes;
  std::vector<float> deq;  // what the weights are, as F32
  Matrix m() const { return {type, bytes.data(), rows, cols}; }
};

Weights make_weights(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  Weights w{t, rows, cols, {}, {}};
  const auto f = random_vec(static_cast<size_t>(rows * cols), seed, 0.5f);
  const size_t rb = dtype_row_bytes(t, cols);
  w.bytes.resize(rb * rows);
  w.deq.resize(f.size());
  for (int64_t r = 0; r < rows; ++r) {
    ref::quantize_row(t, f.data() + r * cols, w.bytes.data() + r * rb, cols);
    ref::dequantize_row(t, w.bytes.data() + r * rb, w.deq.data() + r * cols, cols);
  }
  return w;
}

// The bound on |matmul - ref::matmul| for one output, derived as in the file comment.
double matmul_tol(const Weights& w, const float* x, int64_t r, bool quantized_x, float scale,
                  double old) {
  double prod = 0, qerr = 0;
  for (int64_t b = 0; b * 32 < w.cols; ++b) {
    const int64_t c0 = b * 32, c1 = std::min(w.cols, c0 + 32);
    double amax = 0, wsum = 0;
    for (int64_t c = c0; c < c1; ++c) {
      amax = std::max(amax, std::fabs(static_cast<double>(x[c])));
      wsum += std::fabs(static_cast<double>(w.deq[r * w.cols + c]));
      prod += std::fabs(static_cast<double>(w.deq[r * w.cols + c]) * x[c]);
    }
    // x_q = round(x / d) with d = amax / 127: |x - d x_q| <= d / 2, plus float rounding.
    if (quantized_x) qerr += wsum * (amax / 127 / 2 + 4 * kEps * amax);
  }
  const double k = static_cast<double>(w.cols) + 4;
  return std::fabs(scale) * (qerr + k * kEps * (prod + qerr)) + 2 * kEps * std::fabs(old) + 1e-30;
}

// pack: packed as this CPU (and the pinned target) would, or, with a layout, in that one.
void check_matmul(DType t, int64_t n, int64_t rows, int64_t cols, ThreadPool* pool, bool accumulate,
                  float scale, uint32_t seed, bool pack = false, int layout = -1) {
  SCOPED_TRACE(std::string(dtype_name(t)) + " n=" + std::to_string(n) +
               " rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) +
               (accumulate ? " accumulate" : "") +
               " threads=" + std::to_string(pool ? pool->size() : 0));
  const Weights w = make_weights(t, rows, cols, seed);
  Matrix m = w.m();
  const auto packed = !pack        ? nullptr
                      : layout < 0 ? pack_weights(m, pool)
                                   : detail::pack_weights_as(m, layout, pool);
  if (layout > 0) {
    EXPECT_NE(packed, nullptr);
  }
  m.packed = packed.get();
  const bool packed_path =
      packed != nullptr && detail::packed_kernel(packed->layout()).groups != nullptr;
  const auto x = random_vec(static_cast<size_t>(n * cols), seed + 1);
  const auto y0 = random_vec(static_cast<size_t>(n * rows), seed + 2);
  std::vector<float> want = y0;
  ref::matmul(w.m(), x.data(), n, want.data(), accumulate, scale);
  const bool qx =
      (t == DType::Q8_0 || t == DType::Q4_0) && (n <= detail::dot_max_tokens(t) || packed_path);
  std::vector<double> tol(want.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t r = 0; r < rows; ++r)
      tol[i * rows + r] =
          matmul_tol(w, x.data() + i * cols, r, qx, scale, accumulate ? y0[i * rows + r] : 0);
  std::vector<float> got = y0;
  if (!accumulate) std::fill(got.begin(), got.end(), NAN);  // must be overwritten, not read
  matmul(m, x.data(), n, got.data(), pool, accumulate, scale);
  expect_close(got, want, tol, packed_path ? "y (packed)" : "y");
}

TEST(Matmul, AllTypesAwkwardShapes) {
  ThreadPool pool3(3);  // more threads than cores: uneven splits and preemption
  ThreadPool pool1(1);
  for_each_target([&] {
    for (DType t : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0}) {
      const bool q = t == DType::Q8_0 || t == DType::Q4_0;
      // Quantized rows are whole 32-blocks; 96 and 160 leave partial groups of blocks.
      const std::vector<int64_t> cols =
          q ? std::vector<int64_t>{32, 96, 160, 288} : std::vector<int64_t>{1, 7, 17, 32, 100};
      uint32_t seed = 100;
      for (int64_t n : {1, 2, 3, 4, 5, 7, 33})
        for (int64_t rows : {1, 3, 17, 70})
          for (int64_t c : cols) check_matmul(t, n, rows, c, &pool3, false, 1.0f, seed++);
      // Long rows cross the GEMM's K blocks; many rows cross its column panels.
      check_matmul(t, 1, 37, 544, &pool3, false, 1.0f, 7);
      check_matmul(t, 9, 37, 544, &pool3, false, 1.0f, 8);
      check_matmul(t, 3, 600, 64, &pool3, false, 1.0f, 9);
      check_matmul(t, 13, 600, 64, &pool3, false, 1.0f, 10);
      check_matmul(t, 257, 19, 96, &pool3, false, 1.0f, 11);
      // accumulate / scale, single-threaded pool, no pool.
      check_matmul(t, 1, 70, 96, &pool3, true, 0.25f, 12);
      check_matmul(t, 6, 70, 96, &pool3, true, -2.0f, 13);
      check_matmul(t, 1, 70, 96, &pool1, false, 1.0f, 14);
      check_matmul(t, 40, 21, 64, nullptr, true, 0.5f, 15);
      // Packed weights where the target has a kernel for them (else the call packs nothing).
      if (q) {
        for (int64_t n : {1, 2, 7, 8, 9, 33})
          for (int64_t rows : {1, 16, 17, 70})
            for (int64_t c : {32, 96, 288})
              check_matmul(t, n, rows, c, &pool3, false, 1.0f, seed++, true);
        check_matmul(t, 3, 70, 96, &pool3, true, -0.5f, 16, true);
        check_matmul(t, 1, 33, 64, nullptr, true, 2.0f, 17, true);
      }
    }
  });
}

TEST(Matmul, RowsStreamAlikeOnEveryCpu) {
  // Decode rows are read with software prefetch (and F16 with full-width conversion) except
  // on AMD before Zen 5 (dispatch.h: plain_streams()); both ways must agree with the reference
  // on every target, whichever CPU runs the test. One token (the prefetched loops) and a few;
  // rows long enough for the unrolled loops, with tails of every length; packed tiles too.
  ThreadPool pool(2);
  for (bool plain : {false, true}) {
    detail::force_plain_streams(plain);
    SCOPED_TRACE(plain ? "plain streams" : "prefetched streams");
    for_each_target([&] {
      uint32_t seed = 500;
      for (DType t : {DType::F16, DType::F32})
        for (int64_t n : {1, 3})
          for (int64_t cols : {63, 64, 65, 127, 544, 1000, 2053})
            check_matmul(t, n, 19, cols, &pool, false, 1.0f, seed++);
      for (DType t : {DType::Q4_0, DType::Q8_0})
        for (int64_t n : {1, 2})
          for (int64_t cols : {32, 96, 544, 2080})
            for (bool packed : {false, true})
              check_matmul(t, n, 37, cols, &pool, false, 1.0f, seed++, packed);
    });
  }
  detail::force_plain_streams_reset();
}

TEST(Matmul, PackedWeightsServeEveryTarget) {
  // Packed on the best target (where packing exists at all), then used on every target:
  // those without a kernel for the layout must fall back to the GGUF bytes.
  ThreadPool pool(2);
  for (DType t : {DType::Q4_0, DType::Q8_0}) {
    const Weights w = make_weights(t, 35, 160, 77);
    Matrix m = w.m();
    const auto packed = pack_weights(m, &pool);
    if (std::string(simd_target_name()) == "AVX3_DL") {
      ASSERT_NE(packed, nullptr);
    }
    if (packed == nullptr) continue;
    EXPECT_EQ(packed->bytes(), dtype_row_bytes(t, 160) * 48);  // 3 groups of 16 rows
    m.packed = packed.get();
    const auto x = random_vec(160 * 5, 78);
    for (int64_t n : {1, 5}) {
      std::vector<float> want(static_cast<size_t>(n * 35));
      ref::matmul(m, x.data(), n, want.data());
      std::vector<double> tol(want.size());
      for (int64_t i = 0; i < n; ++i)
        for (int64_t r = 0; r < 35; ++r)
          tol[i * 35 + r] = matmul_tol(w, x.data() + i * 160, r, true, 1.0f, 0);
      for_each_target([&] {
        std::vector<float> got(want.size(), NAN);
        matmul(m, x.data(), n, got.data(), &pool);
        expect_close(got, want, tol, "y");
      });
    }
  }
  Matrix f32{DType::F32, nullptr, 4, 4};
  EXPECT_THROW(detail::pack_weights_as(f32, detail::kF32x64, nullptr), Error);
  std::vector<float> v(16);
  f32.data = v.data();
  EXPECT_THROW(detail::pack_weights_as(f32, detail::kF16x64, nullptr), Error);  // wrong type
}

// One test per weight type, so that the two halves of the longest kernel test (about two
// minutes under qemu at 256-bit SVE) run side by side under ctest -j.
class Panels : public testing::TestWithParam<DType> {};

TEST_P(Panels, OnEveryTarget) {
  // F32 / F16 weights in column panels of 64 rows (packed.h), whichever CPU runs the test:
  // few tokens through the panel kernel (1-2 tokens per pass, 4 vectors per slice), more
  // through the GEMM reading the panels as its B micro-panels (in place or converted). Rows
  // around the panel edges, K across the GEMM's K blocks (256), columns across its column
  // blocks (512) and the thread split (aligned to panels), accumulate and scale.
  ThreadPool pool3(3), pool1(1);
  const DType t = GetParam();
  for_each_target([&] {
    const int layout = t == DType::F32 ? detail::kF32x64 : detail::kF16x64;
    uint32_t seed = 900;
    for (int64_t n : {1, 2, 3, 4, 5, 8, 9, 33})
      for (int64_t rows : {1, 63, 64, 65, 130})
        for (int64_t cols : {1, 7, 100, 300})
          check_matmul(t, n, rows, cols, &pool3, false, 1.0f, seed++, true, layout);
    check_matmul(t, 70, 600, 544, &pool3, false, 1.0f, 20, true, layout);
    check_matmul(t, 13, 1100, 96, &pool3, false, 1.0f, 21, true, layout);
    check_matmul(t, 40, 129, 257, &pool1, true, -0.5f, 22, true, layout);
    check_matmul(t, 2, 129, 257, &pool3, true, 2.0f, 23, true, layout);
    check_matmul(t, 12, 70, 64, nullptr, true, 0.25f, 24, true, layout);
    check_matmul(t, 1, 200, 2053, nullptr, false, 1.0f, 25, true, layout);
    // Scale without accumulate, through the panel kernel and through the GEMM.
    check_matmul(t, 3, 65, 100, &pool3, false, -1.5f, 26, true, layout);
    check_matmul(t, 70, 65, 100, &pool3, false, 0.5f, 27, true, layout);
  });
}
INSTANTIATE_TEST_SUITE_P(Matmul, Panels, testing::Values(DType::F32, DType::F16),
                         [](const testing::TestParamInfo<DType>& p) {
                           return p.param == DType::F32 ? std::string("F32") : std::string("F16");
                         });

TEST(Matmul, QuantizedDecodeUsesIntegerKernelWhereAvailable) {
  // On AVX-512 VNNI machines the Q4_0 / Q8_0 decode kernels are the intrinsics versions;
  // make sure the tests above really ran them there.
  for_each_target([&] {
    const auto name = std::string(detail::dot_kernel(DType::Q4_0).name);
    const std::string target = simd_target_name();
    if (target == "AVX3_DL")
      EXPECT_NE(name.find("vnni"), std::string::npos) << name;
    else
      EXPECT_EQ(name.find("vnni"), std::string::npos) << name;
  });
}

TEST(Matmul, RejectsBadShapes) {
  std::vector<uint8_t> b(1024);
  std::vector<float> x(64), y(64);
  EXPECT_THROW(matmul({DType::Q4_0, b.data(), 2, 48}, x.data(), 1, y.data(), nullptr), Error);
  EXPECT_THROW(matmul({static_cast<DType>(3), b.data(), 2, 32}, x.data(), 1, y.data(), nullptr),
               Error);
}

// ---------------------------------------------------------------------------- gemm_f32
TEST(Gemm, TransposesStridesAndBeta) {
  ThreadPool pool(2);
  for_each_target([&] {
    uint32_t seed = 500;
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1},
                               {7, 33, 5},
                               {13, 3, 300},
                               {33, 70, 17},
                               {2, 130, 64},
                               {70, 2, 9},
                               {5, 600, 3}})
          for (float beta : {0.0f, 1.0f, 0.5f}) {
            SCOPED_TRACE("ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) +
                         " M=" + std::to_string(M) + " N=" + std::to_string(N) +
                         " K=" + std::to_string(K) + " beta=" + std::to_string(beta));
            const int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
            const auto A = random_vec(static_cast<size_t>((ta ? K : M) * lda), seed++);
            const auto B = random_vec(static_cast<size_t>((tb ? N : K) * ldb), seed++);
            const auto C0 = random_vec(static_cast<size_t>(M * ldc), seed++);
            const float alpha = 0.75f;
            std::vector<float> want = C0, got = C0;
            if (beta == 0.0f) std::fill(got.begin(), got.end(), NAN);
            ref::gemm_f32(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, want.data(),
                          ldc);
            gemm_f32(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, got.data(), ldc,
                     &pool);
            std::vector<double> tol(want.size(), 0.0);
            for (int64_t i = 0; i < M; ++i)
              for (int64_t j = 0; j < N; ++j) {
                double s = 0;
                for (int64_t k = 0; k < K; ++k)
                  s += std::fabs(static_cast<double>(ta ? A[k * lda + i] : A[i * lda + k]) *
                                 (tb ? B[j * ldb + k] : B[k * ldb + j]));
                tol[i * ldc + j] = static_cast<double>(K + 3) * kEps *
                                       (alpha * s + std::fabs(beta * C0[i * ldc + j])) +
                                   1e-30;
              }
            // Padding between rows of C must be left alone (NaN stays NaN when beta == 0).
            for (int64_t i = 0; i < M; ++i)
              for (int64_t j = N; j < ldc; ++j) {
                const float before = beta == 0.0f ? NAN : C0[i * ldc + j];
                ASSERT_EQ(std::isnan(before), std::isnan(got[i * ldc + j]));
                if (!std::isnan(before)) {
                  ASSERT_EQ(before, got[i * ldc + j]);
                }
                want[i * ldc + j] = got[i * ldc + j] = 0;
              }
            expect_close(got, want, tol, "C");
          }
  });
}

// ------------------------------------------------------------------------- elementwise
TEST(Elementwise, RmsNorm) {
  for_each_target([&] {
    for (int64_t dim : {1, 7, 16, 33, 257, 2048}) {
      const int64_t n = 3;
      const auto x = random_vec(static_cast<size_t>(n * dim), 1, 2.0f),
                 w = random_vec(static_cast<size_t>(dim), 2);
      std::vector<float> want(x.size()), got = x;
      ref::rmsnorm(x.data(), w.data(), want.data(), n, dim, 1e-5f);
      rmsnorm(got.data(), w.data(), got.data(), n, dim, 1e-5f);  // in place
      std::vector<double> tol(want.size());
      for (size_t i = 0; i < tol.size(); ++i)
        tol[i] = (static_cast<double>(dim) / 2 + 6) * kEps * std::fabs(want[i]) + 1e-30;
      expect_close(got, want, tol, "rmsnorm dim=" + std::to_string(dim));
    }
  });
}

TEST(Elementwise, Rope) {
  for_each_target([&] {
    for (int64_t hd : {2, 6, 32, 64, 128}) {
      const int64_t n = 5, heads = 3;
      const std::vector<int32_t> pos = {0, 1, 17, 1000, 32767};
      const auto x = random_vec(static_cast<size_t>(n * heads * hd), 3);
      std::vector<float> want = x, got = x;
      ref::rope(want.data(), n, heads, hd, pos.data(), 10000.0f);
      rope(got.data(), n, heads, hd, pos.data(), 10000.0f);
      std::vector<double> tol(want.size());
      for (size_t i = 0; i < tol.size(); ++i) {
        const size_t p = i & ~size_t{1};  // the pair (a, b): 4 roundings of |a| + |b|
        tol[i] = 4 * kEps * (std::fabs(x[p]) + std::fabs(x[p + 1])) + 1e-30;
      }
      expect_close(got, want, tol, "rope head_dim=" + std::to_string(hd));
    }
  });
}

TEST(Elementwise, SiluMulAddSoftmax) {
  for_each_target([&] {
    for (int64_t n : {1, 5, 16, 17, 100, 1000}) {
      auto g = random_vec(static_cast<size_t>(n), 4, 4.0f);
      const auto u = random_vec(static_cast<size_t>(n), 5);
      if (n >= 5) {  // far tails: exp overflow and underflow regions
        g[0] = 100.0f;
        g[1] = -100.0f;
        g[2] = -87.0f;
      }
      std::vector<float> want(g.size()), got = g;
      ref::silu_mul(g.data(), u.data(), want.data(), n);
      silu_mul(got.data(), u.data(), got.data(), n);  // out aliases gate
      std::vector<double> tol(want.size());
      for (size_t i = 0; i < tol.size(); ++i)
        tol[i] = 6 * kEps * std::fabs(want[i]) +
                 std::fabs(static_cast<double>(g[i]) * u[i]) * std::exp(-88.0) + 1e-37;
      expect_close(got, want, tol, "silu_mul n=" + std::to_string(n));

      std::vector<float> ya = g, yb = g;
      ref::add(ya.data(), u.data(), n);
      add(yb.data(), u.data(), n);
      ASSERT_EQ(0, std::memcmp(ya.data(), yb.data(), ya.size() * 4));

      auto s = random_vec(static_cast<size_t>(n), 6, 5.0f);
      if (n >= 5) s[3] = -INFINITY;  // masked entry
      std::vector<float> sw = s, sg = s;
      ref::softmax(sw.data(), n);
      softmax(sg.data(), n);
      const float mx = *std::max_element(s.begin(), s.end());
      std::vector<double> stol(sw.size());
      for (size_t i = 0; i < stol.size(); ++i)
        stol[i] = sw[i] * kEps *
                      ((std::isinf(s[i]) ? 0.0 : std::fabs(s[i] - mx)) +
                       2.0 * static_cast<double>(n) + 6) +
                  1e-37;
      expect_close(sg, sw, stol, "softmax n=" + std::to_string(n));
    }
  });
}

// --------------------------------------------------------------------------- attention
TEST(Attention, CausalGqaAgainstCache) {
  ThreadPool pool(3);
  for_each_target([&] {
    struct Case {
      int64_t n, pos0, n_head, n_head_kv, dk, dv;
    };
    for (const Case c :
         {Case{1, 0, 1, 1, 4, 4}, Case{1, 37, 4, 2, 64, 64}, Case{7, 0, 6, 3, 16, 8},
          Case{33, 5, 8, 1, 32, 32}, Case{20, 100, 4, 4, 3, 5}, Case{2, 300, 32, 4, 64, 64},
          // few rows per KV head (MHA decode, small groups): the head dimension in the lanes
          Case{3, 40, 4, 4, 32, 32}, Case{2, 77, 8, 4, 48, 16}, Case{1, 600, 8, 4, 32, 32}}) {
      SCOPED_TRACE("n=" + std::to_string(c.n) + " pos0=" + std::to_string(c.pos0) +
                   " heads=" + std::to_string(c.n_head) + "/" + std::to_string(c.n_head_kv));
      const AttentionShape s{c.n_head, c.n_head_kv, c.dk, c.dv};
      const int64_t ctx = c.pos0 + c.n;
      const auto q = random_vec(static_cast<size_t>(c.n * c.n_head * c.dk), 7);
      const auto k = random_vec(static_cast<size_t>(ctx * c.n_head_kv * c.dk), 8);
      const auto v = random_vec(static_cast<size_t>(ctx * c.n_head_kv * c.dv), 9);
      std::vector<float> want(static_cast<size_t>(c.n * c.n_head * c.dv)), got(want.size(), NAN);
      ref::attention(q.data(), k.data(), v.data(), want.data(), c.n, c.pos0, s);
      attention(q.data(), k.data(), v.data(), got.data(), c.n, c.pos0, s, &pool);
      // Score errors (a dk-term dot) move the softmax weights; then a len-term weighted sum.
      std::vector<double> tol(want.size());
      const int64_t group = c.n_head / c.n_head_kv;
      for (int64_t t = 0; t < c.n; ++t)
        for (int64_t h = 0; h < c.n_head; ++h) {
          const int64_t len = c.pos0 + t + 1, hk = h / group;
          std::vector<double> sc(static_cast<size_t>(len));
          double ds = 0, mx = -INFINITY;
          for (int64_t j = 0; j < len; ++j) {
            double d = 0, a = 0;
            for (int64_t i = 0; i < c.dk; ++i) {
              const double p = static_cast<double>(q[(t * c.n_head + h) * c.dk + i]) *
                               k[(j * c.n_head_kv + hk) * c.dk + i];
              d += p;
              a += std::fabs(p);
            }
            sc[j] = d / std::sqrt(static_cast<double>(c.dk));
            ds = std::max(ds, static_cast<double>(c.dk + 3) * kEps * a /
                                  std::sqrt(static_cast<double>(c.dk)));
            mx = std::max(mx, sc[j]);
          }
          double z = 0;
          for (double x : sc) z += std::exp(x - mx);
          for (int64_t i = 0; i < c.dv; ++i) {
            double e = 0;
            for (int64_t j = 0; j < len; ++j) {
              const double p = std::exp(sc[j] - mx) / z;
              e += p * std::fabs(v[(j * c.n_head_kv + hk) * c.dv + i]) *
                   (2 * ds + kEps * (std::fabs(sc[j] - mx) + 2.0 * static_cast<double>(len) + 8));
            }
            tol[(t * c.n_head + h) * c.dv + i] = e + 1e-30;
          }
        }
      expect_close(got, want, tol, "out");
    }
  });
}

// ------------------------------------------------------------------- hand-computed values
// The references above are the oracles of every kernel test, so they are pinned here to
// values worked out by hand (and every target's kernel with them).
TEST(Reference, HandComputedValues) {
  for_each_target([&] {
    for (bool use_ref : {true, false}) {
      SCOPED_TRACE(use_ref ? "ref" : "kernel");
      // rmsnorm: [3, 4] has mean square 12.5; weights 1 and 2.
      const float x[2] = {3, 4}, w[2] = {1, 2};
      float y[2];
      (use_ref ? ref::rmsnorm : rmsnorm)(x, w, y, 1, 2, 1e-5f);
      EXPECT_NEAR(y[0], 3 / std::sqrt(12.5 + 1e-5), 1e-6);
      EXPECT_NEAR(y[1], 8 / std::sqrt(12.5 + 1e-5), 1e-6);

      // rope, head_dim 4 at position 1: the pair (x0, x1) turns by 1 rad, the pair (x2, x3)
      // by 10000^(-2/4) = 0.01 rad (adjacent pairs, llama.cpp's "normal" RoPE); position 0
      // does nothing.
      float r[8] = {1, 0, 0, 1, 0.5f, -2, 3, 7};
      const int32_t pos[2] = {1, 0};
      (use_ref ? ref::rope : rope)(r, 2, 1, 4, pos, 10000.0f);
      const double want_r[8] = {
          std::cos(1.0), std::sin(1.0), -std::sin(0.01), std::cos(0.01), 0.5, -2, 3, 7};
      for (int i = 0; i < 8; ++i) EXPECT_NEAR(r[i], want_r[i], 1e-6) << "rope " << i;

      // silu(g) * u = g / (1 + e^-g) * u
      const float g[3] = {0, 1, -2}, u[3] = {5, 2, 3};
      float sm[3];
      (use_ref ? ref::silu_mul : silu_mul)(g, u, sm, 3);
      EXPECT_EQ(sm[0], 0.0f);
      EXPECT_NEAR(sm[1], 2 / (1 + std::exp(-1.0)), 1e-6);
      EXPECT_NEAR(sm[2], -6 / (1 + std::exp(2.0)), 1e-6);

      // softmax of [ln 1, ln 2, ln 5, -inf] = [1, 2, 5, 0] / 8
      float p[4] = {0, static_cast<float>(std::log(2.0)), static_cast<float>(std::log(5.0)),
                    -INFINITY};
      (use_ref ? ref::softmax : softmax)(p, 4);
      EXPECT_NEAR(p[0], 0.125, 1e-7);
      EXPECT_NEAR(p[1], 0.25, 1e-7);
      EXPECT_NEAR(p[2], 0.625, 1e-7);
      EXPECT_EQ(p[3], 0.0f);

      // Attention, 2 tokens, 4 query heads on 2 KV heads (heads 0, 1 read KV head 0; heads
      // 2, 3 read KV head 1), dk = dv = 1; k = 0 then 1 in both KV heads, v = (4, 8) in KV
      // head 0 and (40, 80) in KV head 1. Token 0 sees only itself: 4, 4, 40, 40. Token 1:
      // q = ln 3 gives scores (0, ln 3) and weights (1/4, 3/4); q = 0 even weights; q = -ln 3
      // weights (3/4, 1/4). So 0.25 * 4 + 0.75 * 8 = 7, 6, 70 and 0.75 * 40 + 0.25 * 80 = 50.
      const float l3 = static_cast<float>(std::log(3.0));
      const float q[8] = {5, -1, 2, 0.3f, l3, 0, l3, -l3}, k[4] = {0, 0, 1, 1},
                  v[4] = {4, 40, 8, 80};
      float o[8];
      const AttentionShape s{4, 2, 1, 1};
      if (use_ref)
        ref::attention(q, k, v, o, 2, 0, s);
      else
        attention(q, k, v, o, 2, 0, s, nullptr);
      const double want_o[8] = {4, 4, 40, 40, 7, 6, 70, 50};
      for (int i = 0; i < 8; ++i) EXPECT_NEAR(o[i], want_o[i], 2e-5) << "attention " << i;
    }
  });
}

// -------------------------------------------------------------------------- thread pool
TEST(ThreadPool, EveryThreadRunsEveryTaskOnce) {
  for (int size = 1; size <= 6; ++size) {
    ThreadPool pool(size);
    ASSERT_EQ(pool.size(), size);
    std::vector<int> count(static_cast<size_t>(size), 0);
    for (int run = 0; run < 1000; ++run) {
      pool.run([&](int tid, int nth) {
        ASSERT_EQ(nth, size);
        count[static_cast<size_t>(tid)] += 1;  // each slot is written by one thread only
      });
      // run() returned, so every thread has finished: the counts are exact.
      for (int t = 0; t < size; ++t)
        ASSERT_EQ(count[static_cast<size_t>(t)], run + 1) << "thread " << t;
    }
  }
}

TEST(ThreadPool, WakesSleepingWorkers) {
  ThreadPool pool(3);
  std::vector<long> sum(3, 0);
  for (int i = 0; i < 20; ++i) {
    pool.run([&](int tid, int) { sum[static_cast<size_t>(tid)] += tid + i; });
    // Past the spin window, so workers go to sleep on the futex and must be woken.
    if (i % 4 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (int t = 0; t < 3; ++t) EXPECT_EQ(sum[static_cast<size_t>(t)], 20 * t + 190);
}

TEST(ThreadPool, ParallelForCoversEveryIndexOnce) {
  for (int size : {1, 2, 3, 5}) {
    ThreadPool pool(size);
    std::vector<std::atomic<int>> hits(1000);
    for (int round = 0; round < 300; ++round) {
      const int64_t n = 1 + (round * 37) % 1000, grain = 1 + round % 7;
      for (auto& h : hits) h.store(0, std::memory_order_relaxed);
      pool.parallel_for(n, grain, [&](int64_t b, int64_t e) {
        ASSERT_TRUE(b % grain == 0 && (e == n || (e - b) % grain == 0)) << b << ".." << e;
        for (int64_t i = b; i < e; ++i)
          hits[static_cast<size_t>(i)].fetch_add(1, std::memory_order_relaxed);
      });
      for (int64_t i = 0; i < 1000; ++i)
        ASSERT_EQ(hits[static_cast<size_t>(i)].load(), i < n ? 1 : 0) << "index " << i;
      if (round % 10 == 0) {  // run() and parallel_for() interleave on the same workers
        std::vector<int> seen(static_cast<size_t>(size), 0);
        pool.run([&](int tid, int) { seen[static_cast<size_t>(tid)] = 1; });
        for (int v : seen) ASSERT_EQ(v, 1);
      }
      if (round % 50 == 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));  // workers asleep
    }
  }
}

TEST(ThreadPool, SplitRangeCoversEverythingOnce) {
  for (long n : {0L, 1L, 5L, 16L, 17L, 1000L})
    for (int nth = 1; nth <= 5; ++nth)
      for (long align : {1L, 4L, 16L}) {
        long next = 0;
        for (int t = 0; t < nth; ++t) {
          long b, e;
          split_range(n, t, nth, align, &b, &e);
          ASSERT_EQ(b, next);
          ASSERT_LE(b, e);
          if (e < n) {
            ASSERT_EQ(e % align, 0);
          }
          next = e;
        }
        ASSERT_EQ(next, n);
      }
}

TEST(Machine, ReportsTheTargetTheKernelsRunOn) {
  // The forced one while a test pins a target; otherwise one of the available targets,
  // Highway's choice. Not always the first listed, nor the same before a pin and after it
  // is lifted: on 128-bit SVE under qemu Highway lists SVE2_128 first, dispatches to SVE2 at
  // start and to SVE2_128 after the reset.
  const auto targets = detail::available_targets();
  ASSERT_FALSE(targets.empty());
  auto listed = [&](const std::string& name) {
    for (int64_t t : targets)
      if (name == hwy::TargetName(t)) return true;
    return false;
  };
  EXPECT_TRUE(listed(simd_target_name())) << simd_target_name();
  for (int64_t t : targets) {
    detail::force_target(t);
    EXPECT_STREQ(simd_target_name(), hwy::TargetName(t));
  }
  detail::force_target(0);
  EXPECT_TRUE(listed(simd_target_name())) << simd_target_name();
}

TEST(Machine, TestsTheTargetsAskedFor) {
  // The other tests pin each of these in turn (test_targets fails on a name it cannot honour).
  std::string names;
  for (int64_t t : test_targets())
    names += std::string(names.empty() ? "" : " ") + hwy::TargetName(t);
  std::printf("kernel tests run on: %s\n", names.c_str());
  EXPECT_FALSE(names.empty());
}

}  // namespace
}  // namespace cln::kernels
