// Dot-product kernels of the decode path (see matvec.h), portable Highway versions for
// every target; on x86 with AVX-512 VNNI the quantized ones, and the kernels of packed
// weights (packed.h), come from arch/x86/matvec_vnni.cpp. DotKernelHere, PackedLayoutHere
// and PackedKernelHere below are the only places that choose.
//
// Each kernel works on a chunk of rows at a time for all tokens, so a chunk of weights is
// fetched from memory once and re-read from L1/L2 for the other tokens.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matvec.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <type_traits>

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kernels/arch/x86/matvec_avx2.h"
#include "kernels/arch/x86/matvec_vnni.h"
#include "kernels/dispatch.h"
#include "kernels/hwy_util-inl.h"
#include "kernels/matvec.h"
#include "kernels/packed.h"

HWY_BEFORE_NAMESPACE();
namespace cln::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using detail::DotArgs;
using detail::DotKernel;

// Rows dotted per chunk before moving to the next token: small enough to stay in L1/L2.
constexpr int64_t kChunkRows = 16;

inline const uint8_t* RowPtr(const Matrix& w, int64_t r, size_t row_bytes) {
  return static_cast<const uint8_t*>(w.data) + static_cast<size_t>(r) * row_bytes;
}

// ---------------------------------------------------------------- F32 and F16 weights
// Loads Lanes(df) weights of row `w` at column c as F32.
template <class DF>
HWY_INLINE hn::Vec<DF> LoadW(DF df, const float* HWY_RESTRICT w, int64_t c) {
  return hn::LoadU(df, w + c);
}
template <class DF>
HWY_INLINE hn::Vec<DF> LoadW(DF df, const uint16_t* HWY_RESTRICT w, int64_t c) {
  return LoadHalfAsF32(df, w + c);
}
inline float ScalarW(const float* w, int64_t c) {
  return w[c];
}
inline float ScalarW(const uint16_t* w, int64_t c) {
  return HalfToF32(w[c]);
}

// Two ways to stream float rows from memory for one token, chosen per CPU in DotKernelHere:
//  - kPlain: F16 converts at most 8 halves per instruction and nothing is prefetched in
//    software. On AMD Zen 4 a 512-bit vcvtph2ps from memory streams F16 weights from DRAM
//    about 10% slower than two 256-bit ones (measured), and its prefetchers keep up alone.
//    Not on Zen 5: there the prefetched loop decodes F16 at 86-92% of the probe against
//    74-84% plain (clone bench, TinyLlama-shaped F16, 4 alternating rounds of each on a
//    2-core EPYC VM); F32, Q8_0 and Q4_0 read alike both ways there (medians 91-99%).
//  - kPrefetched: full vectors and a software prefetch kPrefetchBytes ahead. On the Intel
//    Xeon (Sapphire/Emerald Rapids VM) the F16 row loop runs ~4x the instructions per byte of
//    the F32 one, so the out-of-order window reaches only ~2 KB ahead into memory, and the
//    hardware prefetcher (which restarts at every 4 KB page) does not cover the rest: F16
//    streamed at 68-70% of the bytes/s of F32 (18-21 vs 25-27 GB/s, 2 threads, 1 GiB of
//    rows; docs/kernels.md has the measurement). Prefetching 2 KB ahead and converting 16
//    halves at a time brings it to 23-24 GB/s.
enum class Stream { kPlain, kPrefetched };
constexpr int64_t kPrefetchBytes = 2048;

template <typename WT, Stream S>
using DotTag = std::conditional_t<sizeof(WT) == 2 && S == Stream::kPlain, hn::CappedTag<float, 8>,
                                  hn::ScalableTag<float>>;

// Four rows against one token; out[0..3].
template <typename WT, Stream S>
HWY_INLINE void Dot4Float(const WT* HWY_RESTRICT w0, const WT* HWY_RESTRICT w1,
                          const WT* HWY_RESTRICT w2, const WT* HWY_RESTRICT w3,
                          const float* HWY_RESTRICT x, int64_t cols, float* out) {
  const DotTag<WT, S> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  auto a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
  auto b0 = hn::Zero(df), b1 = hn::Zero(df), b2 = hn::Zero(df), b3 = hn::Zero(df);
  int64_t c = 0;
  for (; c + 2 * N <= cols; c += 2 * N) {
    const auto x0 = hn::LoadU(df, x + c), x1 = hn::LoadU(df, x + c + N);
    a0 = hn::MulAdd(LoadW(df, w0, c), x0, a0);
    a1 = hn::MulAdd(LoadW(df, w1, c), x0, a1);
    a2 = hn::MulAdd(LoadW(df, w2, c), x0, a2);
    a3 = hn::MulAdd(LoadW(df, w3, c), x0, a3);
    b0 = hn::MulAdd(LoadW(df, w0, c + N), x1, b0);
    b1 = hn::MulAdd(LoadW(df, w1, c + N), x1, b1);
    b2 = hn::MulAdd(LoadW(df, w2, c + N), x1, b2);
    b3 = hn::MulAdd(LoadW(df, w3, c + N), x1, b3);
  }
  for (; c + N <= cols; c += N) {
    const auto x0 = hn::LoadU(df, x + c);
    a0 = hn::MulAdd(LoadW(df, w0, c), x0, a0);
    a1 = hn::MulAdd(LoadW(df, w1, c), x0, a1);
    a2 = hn::MulAdd(LoadW(df, w2, c), x0, a2);
    a3 = hn::MulAdd(LoadW(df, w3, c), x0, a3);
  }
  out[0] = hn::GetLane(hn::SumOfLanes(df, hn::Add(a0, b0)));
  out[1] = hn::GetLane(hn::SumOfLanes(df, hn::Add(a1, b1)));
  out[2] = hn::GetLane(hn::SumOfLanes(df, hn::Add(a2, b2)));
  out[3] = hn::GetLane(hn::SumOfLanes(df, hn::Add(a3, b3)));
  for (; c < cols; ++c) {
    out[0] += ScalarW(w0, c) * x[c];
    out[1] += ScalarW(w1, c) * x[c];
    out[2] += ScalarW(w2, c) * x[c];
    out[3] += ScalarW(w3, c) * x[c];
  }
}

template <typename WT, Stream S>
HWY_INLINE float Dot1Float(const WT* HWY_RESTRICT w, const float* HWY_RESTRICT x, int64_t cols) {
  const DotTag<WT, S> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  auto a = hn::Zero(df), b = hn::Zero(df), c2 = hn::Zero(df), d = hn::Zero(df);
  int64_t c = 0;
  for (; c + 4 * N <= cols; c += 4 * N) {
    if constexpr (S == Stream::kPrefetched) {
      // One prefetch per cache line consumed; past the row's end it reaches the next rows,
      // and past the matrix's end a prefetch is a hint that never faults.
      const auto* line = reinterpret_cast<const uint8_t*>(w + c) + kPrefetchBytes;
      for (int64_t k = 0; k < 4 * N * static_cast<int64_t>(sizeof(WT)); k += 64)
        hwy::Prefetch(line + k);
    }
    a = hn::MulAdd(LoadW(df, w, c), hn::LoadU(df, x + c), a);
    b = hn::MulAdd(LoadW(df, w, c + N), hn::LoadU(df, x + c + N), b);
    c2 = hn::MulAdd(LoadW(df, w, c + 2 * N), hn::LoadU(df, x + c + 2 * N), c2);
    d = hn::MulAdd(LoadW(df, w, c + 3 * N), hn::LoadU(df, x + c + 3 * N), d);
  }
  for (; c + N <= cols; c += N) a = hn::MulAdd(LoadW(df, w, c), hn::LoadU(df, x + c), a);
  float s = hn::GetLane(hn::SumOfLanes(df, hn::Add(hn::Add(a, b), hn::Add(c2, d))));
  for (; c < cols; ++c) s += ScalarW(w, c) * x[c];
  return s;
}

template <typename WT, Stream S>
void RowsFloat(const DotArgs& a, int64_t r0, int64_t r1) {
  const Matrix& w = *a.w;
  const size_t rb = dtype_row_bytes(w.type, w.cols);
  const auto row = [&](int64_t r) { return reinterpret_cast<const WT*>(RowPtr(w, r, rb)); };
  for (int64_t c0 = r0; c0 < r1; c0 += kChunkRows) {
    const int64_t c1 = c0 + kChunkRows < r1 ? c0 + kChunkRows : r1;
    for (int64_t t = 0; t < a.n; ++t) {
      const float* x = a.x + t * w.cols;
      int64_t r = c0;
      // One token: a row at a time, so the weights are one contiguous stream that the
      // hardware prefetcher follows (four rows at once are four short streams, measurably
      // slower from DRAM). More tokens: four rows share each load of x.
      for (; a.n > 1 && r + 4 <= c1; r += 4) {
        float d[4];
        Dot4Float<WT, S>(row(r), row(r + 1), row(r + 2), row(r + 3), x, w.cols, d);
        for (int i = 0; i < 4; ++i) detail::store_dot(a, t, r + i, d[i]);
      }
      for (; r < c1; ++r) detail::store_dot(a, t, r, Dot1Float<WT, S>(row(r), x, w.cols));
    }
  }
}

// ---------------------------------------------------------------- Q8_0 and Q4_0 weights
// Prepared activations (per token): int16 q[cols] (x quantized to 8 bits per 32-block,
// widened once so the inner loop multiplies 16-bit pairs), then float d[cols / 32].
using D16 = hn::CappedTag<int16_t, 16>;

size_t PreparedBytesQ16(int64_t cols) {
  return static_cast<size_t>(cols) * sizeof(int16_t) +
         static_cast<size_t>(cols / kQK) * sizeof(float);
}

void PrepareQ16(const float* HWY_RESTRICT x, int64_t cols, uint8_t* HWY_RESTRICT out) {
  auto* q = reinterpret_cast<int16_t*>(out);
  auto* d = reinterpret_cast<float*>(out + static_cast<size_t>(cols) * sizeof(int16_t));
  const hn::CappedTag<float, 16> df;
  const hn::Rebind<int16_t, decltype(df)> d16;
  const int N = static_cast<int>(hn::Lanes(df));
  for (int64_t b = 0; b < cols / kQK; ++b) {
    const float* xb = x + b * kQK;
    auto vmax = hn::Zero(df);
    for (int j = 0; j < kQK; j += N) vmax = hn::Max(vmax, hn::Abs(hn::LoadU(df, xb + j)));
    const float amax = hn::GetLane(hn::MaxOfLanes(df, vmax));
    d[b] = amax / 127.0f;
    const auto id = hn::Set(df, amax != 0.0f ? 127.0f / amax : 0.0f);
    for (int j = 0; j < kQK; j += N) {
      const auto v = hn::NearestInt(hn::Mul(hn::LoadU(df, xb + j), id));
      hn::StoreU(hn::DemoteTo(d16, v), d16, q + b * kQK + j);
    }
  }
}

// The weights of half-block slice [j, j + Lanes) as int16: lo = values j.., hi = 16 + j..
HWY_INLINE void LoadWQ(const BlockQ8_0* HWY_RESTRICT b, int j, hn::Vec<D16>& lo, hn::Vec<D16>& hi) {
  const D16 d16;
  const hn::Rebind<int8_t, D16> d8;
  lo = hn::PromoteTo(d16, hn::LoadU(d8, b->q + j));
  hi = hn::PromoteTo(d16, hn::LoadU(d8, b->q + kQK / 2 + j));
}
HWY_INLINE void LoadWQ(const BlockQ4_0* HWY_RESTRICT b, int j, hn::Vec<D16>& lo, hn::Vec<D16>& hi) {
  const D16 d16;
  const hn::Rebind<uint8_t, D16> du8;
  const auto v =
      hn::BitCast(d16, hn::PromoteTo(hn::RebindToUnsigned<D16>(), hn::LoadU(du8, b->qs + j)));
  const auto eight = hn::Set(d16, 8);
  lo = hn::Sub(hn::And(v, hn::Set(d16, 0x0F)), eight);
  hi = hn::Sub(hn::ShiftRight<4>(v), eight);
}

// One row of blocks against one prepared token.
template <typename BT>
HWY_INLINE float DotRowQ(const BT* HWY_RESTRICT w, const int16_t* HWY_RESTRICT xq,
                         const float* HWY_RESTRICT xd, int64_t nb) {
  const D16 d16;
  const hn::RepartitionToWide<D16> d32;
  const hn::Rebind<float, decltype(d32)> df;
  const int N = static_cast<int>(hn::Lanes(d16));
  auto acc = hn::Zero(df);
  for (int64_t b = 0; b < nb; ++b) {
    auto s0 = hn::Zero(d32), s1 = hn::Zero(d32);
    for (int j = 0; j < kQK / 2; j += N) {
      hn::Vec<D16> lo, hi;
      LoadWQ(w + b, j, lo, hi);
      s0 = hn::ReorderWidenMulAccumulate(d32, lo, hn::LoadU(d16, xq + b * kQK + j), s0, s1);
      s0 = hn::ReorderWidenMulAccumulate(d32, hi, hn::LoadU(d16, xq + b * kQK + kQK / 2 + j), s0,
                                         s1);
    }
    const auto sum = hn::ConvertTo(df, hn::RearrangeToOddPlusEven(s0, s1));
    acc = hn::MulAdd(sum, hn::Set(df, HalfToF32(w[b].d) * xd[b]), acc);
  }
  return hn::GetLane(hn::SumOfLanes(df, acc));
}

template <typename BT>
void RowsQ(const DotArgs& a, int64_t r0, int64_t r1) {
  const Matrix& w = *a.w;
  const size_t rb = dtype_row_bytes(w.type, w.cols);
  const int64_t nb = w.cols / kQK;
  for (int64_t c0 = r0; c0 < r1; c0 += kChunkRows) {
    const int64_t c1 = c0 + kChunkRows < r1 ? c0 + kChunkRows : r1;
    for (int64_t t = 0; t < a.n; ++t) {
      const uint8_t* px = a.px + static_cast<size_t>(t) * a.px_stride;
      const auto* xq = reinterpret_cast<const int16_t*>(px);
      const auto* xd =
          reinterpret_cast<const float*>(px + static_cast<size_t>(w.cols) * sizeof(int16_t));
      for (int64_t r = c0; r < c1; ++r)
        detail::store_dot(a, t, r,
                          DotRowQ(reinterpret_cast<const BT*>(RowPtr(w, r, rb)), xq, xd, nb));
    }
  }
}

size_t NoPrepare(int64_t) {
  return 0;
}

DotKernel DotKernelHere(DType t) {
  switch (t) {
    case DType::F32:
#if HWY_ARCH_X86
      if (!detail::plain_streams())
        return {NoPrepare, nullptr, RowsFloat<float, Stream::kPrefetched>, "f32 (prefetched)", 4};
#endif
      return {NoPrepare, nullptr, RowsFloat<float, Stream::kPlain>, "f32", 4};
    case DType::F16:
#if HWY_ARCH_X86
      if (!detail::plain_streams())
        return {NoPrepare, nullptr, RowsFloat<uint16_t, Stream::kPrefetched>, "f16 (prefetched)",
                8};
#endif
      return {NoPrepare, nullptr, RowsFloat<uint16_t, Stream::kPlain>, "f16", 8};
    case DType::Q8_0:
#if HWY_TARGET == HWY_AVX3_DL
      return detail::x86::vnni_dot_q8_0();
#elif HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
      // AVX-512 without VNNI too: its int16 kernel is compute-bound (BM_CachedDecode,
      // CLONE_SIMD=AVX3: Q8_0 55-58 GB/s, Q4_0 25-30 against 61-65 and 38-49 with these).
      return detail::x86::avx2_dot_q8_0();
#else
      return {PreparedBytesQ16, PrepareQ16, RowsQ<BlockQ8_0>, "q8_0 (i16)", 4};
#endif
    case DType::Q4_0:
#if HWY_TARGET == HWY_AVX3_DL
      return detail::x86::vnni_dot_q4_0();
#elif HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
      return detail::x86::avx2_dot_q4_0();
#else
      return {PreparedBytesQ16, PrepareQ16, RowsQ<BlockQ4_0>, "q4_0 (i16)", 4};
#endif
  }
  return {};
}

// Packed layouts exist where a kernel reads them faster than the GGUF bytes.
int PackedLayoutHere(DType t) {
#if HWY_TARGET == HWY_AVX3_DL
  if (t == DType::Q4_0) return detail::kQ4_0x16;
  if (t == DType::Q8_0) return detail::kQ8_0x16;
#endif
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  // F32 / F16 in column panels on AVX-512 (16 lanes: a panel row is 4 vectors, the GEMM's
  // register tile): prefill reads them without transposing per call. Not where the plain
  // row loops were measured best (AMD before Zen 5), whose decode stays as measured.
  if ((t == DType::F32 || t == DType::F16) && !detail::plain_streams())
    return t == DType::F32 ? detail::kF32x64 : detail::kF16x64;
#endif
  (void)t;
  return detail::kNotPacked;
}

detail::PackedKernel PackedKernelHere(int layout) {
#if HWY_TARGET == HWY_AVX3_DL
  if (layout == detail::kQ4_0x16) return detail::x86::vnni_packed_q4_0();
  if (layout == detail::kQ8_0x16) return detail::x86::vnni_packed_q8_0();
#endif
  (void)layout;
  return {};
}

}  // namespace HWY_NAMESPACE
}  // namespace cln::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace cln::kernels {
HWY_EXPORT(DotKernelHere);
HWY_EXPORT(PackedLayoutHere);
HWY_EXPORT(PackedKernelHere);
int detail::packed_layout_for(DType t) {
  return HWY_DYNAMIC_DISPATCH(PackedLayoutHere)(t);
}
detail::PackedKernel detail::packed_kernel(int layout) {
  if (detail::is_panel_layout(layout)) return detail::panel_kernel(layout);
  return HWY_DYNAMIC_DISPATCH(PackedKernelHere)(layout);
}
detail::DotKernel detail::dot_kernel(DType t) {
  return HWY_DYNAMIC_DISPATCH(DotKernelHere)(t);
}
}  // namespace cln::kernels
#endif  // HWY_ONCE
