// Per-target row conversions between F32 and the storage types (F16, Q8_0, Q4_0).
// Included by quant.cpp (the public quantize_row/dequantize_row) and by gemm.cpp, which
// dequantizes weight panels with the same code.
#if defined(CLONE_KERNELS_QUANT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef CLONE_KERNELS_QUANT_INL_H_
#undef CLONE_KERNELS_QUANT_INL_H_
#else
#define CLONE_KERNELS_QUANT_INL_H_
#endif

#include <cmath>
#include <cstdint>
#include <cstring>

#include "clone/core/dtype.h"
#include "hwy/highway.h"
#include "kernels/hwy_util-inl.h"

HWY_BEFORE_NAMESPACE();
namespace cln::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Blocks are 32 values; vectors of at most 16 floats keep every loop a whole number of
// vectors per block on every target (SVE may be wider).
using DQ = hn::CappedTag<float, 16>;

HWY_INLINE void DequantizeF16(const uint16_t* HWY_RESTRICT in, float* HWY_RESTRICT y, int64_t n) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(LoadHalfAsF32(df, in + i), df, y + i);
  for (; i < n; ++i) y[i] = HalfToF32(in[i]);
}

HWY_INLINE void DequantizeQ8_0(const BlockQ8_0* HWY_RESTRICT blk, float* HWY_RESTRICT y,
                               int64_t n) {
  const DQ df;
  const hn::RebindToSigned<DQ> di;
  const hn::Rebind<int8_t, DQ> d8;
  const int N = static_cast<int>(hn::Lanes(df));
  for (int64_t b = 0; b < n / kQK; ++b) {
    const auto d = hn::Set(df, HalfToF32(blk[b].d));
    for (int j = 0; j < kQK; j += N) {
      const auto q = hn::PromoteTo(di, hn::LoadU(d8, blk[b].q + j));
      hn::StoreU(hn::Mul(d, hn::ConvertTo(df, q)), df, y + b * kQK + j);
    }
  }
}

HWY_INLINE void DequantizeQ4_0(const BlockQ4_0* HWY_RESTRICT blk, float* HWY_RESTRICT y,
                               int64_t n) {
  const DQ df;
  const hn::RebindToSigned<DQ> di;
  const hn::Rebind<uint8_t, DQ> d8;
  const int N = static_cast<int>(hn::Lanes(df));
  const auto eight = hn::Set(di, 8), mask = hn::Set(di, 0x0F);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const auto d = hn::Set(df, HalfToF32(blk[b].d));
    for (int j = 0; j < kQK / 2; j += N) {
      const auto v =
          hn::BitCast(di, hn::PromoteTo(hn::RebindToUnsigned<DQ>(), hn::LoadU(d8, blk[b].qs + j)));
      const auto lo = hn::Sub(hn::And(v, mask), eight);
      const auto hi = hn::Sub(hn::ShiftRight<4>(v), eight);
      hn::StoreU(hn::Mul(d, hn::ConvertTo(df, lo)), df, y + b * kQK + j);
      hn::StoreU(hn::Mul(d, hn::ConvertTo(df, hi)), df, y + b * kQK + kQK / 2 + j);
    }
  }
}

// roundf(): to nearest, ties away from zero (Highway's Round ties to even).
template <class DF, class V>
HWY_INLINE V RoundHalfAway(DF df, V v) {
  const auto t = hn::Trunc(v);
  const auto frac = hn::Abs(hn::Sub(v, t));  // exact
  const auto step = hn::CopySign(hn::Set(df, 1.0f), v);
  return hn::Add(t, hn::IfThenElseZero(hn::Ge(frac, hn::Set(df, 0.5f)), step));
}

// ggml's quantize_row_q8_0_ref: d = amax/127, q = roundf(x / d), done in the same float
// operations so the bytes are identical.
HWY_INLINE void QuantizeQ8_0(const float* HWY_RESTRICT x, BlockQ8_0* HWY_RESTRICT blk, int64_t n) {
  const DQ df;
  const hn::RebindToSigned<DQ> di;
  const hn::Rebind<int8_t, DQ> d8;
  const int N = static_cast<int>(hn::Lanes(df));
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float* xb = x + b * kQK;
    auto vmax = hn::Zero(df);
    for (int j = 0; j < kQK; j += N) vmax = hn::Max(vmax, hn::Abs(hn::LoadU(df, xb + j)));
    const float amax = hn::GetLane(hn::MaxOfLanes(df, vmax));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    blk[b].d = fp32_to_fp16(d);
    const auto vid = hn::Set(df, id);
    for (int j = 0; j < kQK; j += N) {
      const auto q = hn::ConvertTo(di, RoundHalfAway(df, hn::Mul(hn::LoadU(df, xb + j), vid)));
      hn::StoreU(hn::DemoteTo(d8, q), d8, blk[b].q + j);
    }
  }
}

// ggml's quantize_row_q4_0_ref: d = max / -8 where max is the first value of largest
// magnitude, q = min(15, trunc(x/d + 8.5)).
HWY_INLINE void QuantizeQ4_0(const float* HWY_RESTRICT x, BlockQ4_0* HWY_RESTRICT blk, int64_t n) {
  const DQ df;
  const hn::RebindToSigned<DQ> di;
  const hn::Rebind<uint8_t, DQ> d8;
  const int N = static_cast<int>(hn::Lanes(df));
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float* xb = x + b * kQK;
    auto vmax = hn::Zero(df);
    for (int j = 0; j < kQK; j += N) vmax = hn::Max(vmax, hn::Abs(hn::LoadU(df, xb + j)));
    const float amax = hn::GetLane(hn::MaxOfLanes(df, vmax));
    float max = 0;
    for (int j = 0; j < kQK; ++j) {
      if (std::fabs(xb[j]) == amax) {
        max = xb[j];
        break;
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    blk[b].d = fp32_to_fp16(d);
    const auto vid = hn::Set(df, id), bias = hn::Set(df, 8.5f);
    const auto fifteen = hn::Set(di, 15);
    for (int j = 0; j < kQK / 2; j += N) {
      // Multiply, then add: two roundings, as ggml does (a fused multiply-add differs).
      const auto x0 = hn::Mul(hn::LoadU(df, xb + j), vid);
      const auto x1 = hn::Mul(hn::LoadU(df, xb + kQK / 2 + j), vid);
      const auto lo = hn::Min(hn::ConvertTo(di, hn::Add(x0, bias)), fifteen);
      const auto hi = hn::Min(hn::ConvertTo(di, hn::Add(x1, bias)), fifteen);
      const auto packed = hn::Or(lo, hn::ShiftLeft<4>(hi));
      hn::StoreU(hn::DemoteTo(d8, packed), d8, blk[b].qs + j);
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace cln::kernels
HWY_AFTER_NAMESPACE();

#endif  // CLONE_KERNELS_QUANT_INL_H_
