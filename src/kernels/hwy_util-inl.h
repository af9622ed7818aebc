// Small Highway helpers shared by the kernel files; included once per target from each
// file's foreach_target pass (hence the toggling include guard, Highway's convention).
//
// SVE note for every kernel file: Highway vectors there are sizeless, so they may not be
// array elements, class members or lambda captures by value. Kernels keep accumulators in
// named locals for that reason.
#if defined(CLONE_KERNELS_HWY_UTIL_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef CLONE_KERNELS_HWY_UTIL_INL_H_
#undef CLONE_KERNELS_HWY_UTIL_INL_H_
#else
#define CLONE_KERNELS_HWY_UTIL_INL_H_
#endif

#include <cstdint>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace cln::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// IEEE half bits -> float for a vector of uint32 lanes holding the bits. Exact for every
// input (subnormals, inf, NaN keep their meaning), unlike Highway 1.0.3's emulated
// PromoteTo, which is used only where the CPU converts in hardware.
template <class DF, class VU = hn::Vec<hn::RebindToUnsigned<DF>>>
HWY_INLINE hn::Vec<DF> HalfBitsToF32(DF df, VU h) {
  const hn::RebindToUnsigned<DF> du;
  const auto sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(du, 0x8000u)));
  const auto em = hn::And(h, hn::Set(du, 0x7fffu));
  // Normal numbers: rebias the exponent (15 -> 127) and widen the mantissa.
  const auto normal = hn::Add(hn::ShiftLeft<13>(em), hn::Set(du, 112u << 23));
  // Inf and NaN: exponent all ones, mantissa kept.
  const auto special = hn::Or(hn::ShiftLeft<13>(em), hn::Set(du, 0x7f800000u));
  // Zero and subnormals: the integer mantissa times 2^-24, exact in float.
  const auto sub =
      hn::BitCast(du, hn::Mul(hn::ConvertTo(df, hn::BitCast(hn::RebindToSigned<DF>(), em)),
                              hn::Set(df, 5.9604644775390625e-8f)));
  auto bits = hn::IfThenElse(hn::Lt(em, hn::Set(du, 0x0400u)), sub, normal);
  bits = hn::IfThenElse(hn::Gt(em, hn::Set(du, 0x7bffu)), special, bits);
  return hn::BitCast(df, hn::Or(bits, sign));
}

// Loads Lanes(df) halves and widens them to float.
template <class DF>
HWY_INLINE hn::Vec<DF> LoadHalfAsF32(DF df, const uint16_t* HWY_RESTRICT p) {
  const hn::Rebind<uint16_t, DF> du16;
#if (HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2) || HWY_ARCH_ARM_A64
  // F16C / AArch64 convert in hardware, exactly. The halves are loaded as the uint16_t they
  // are stored as, then reinterpreted: on AArch64 hwy::float16_t is __fp16, and GCC 12 moves
  // an SVE load through a __fp16 pointer above the uint16_t store it should read (strict
  // aliasing), which made HalfToF32 return the previous call's value.
  const hn::Rebind<hwy::float16_t, DF> dh;
  return hn::PromoteTo(df, hn::BitCast(dh, hn::LoadU(du16, p)));
#else
  const hn::RebindToUnsigned<DF> du;
  return HalfBitsToF32(df, hn::PromoteTo(du, hn::LoadU(du16, p)));
#endif
}

// One half -> float (block scales).
HWY_INLINE float HalfToF32(uint16_t h) {
  const hn::CappedTag<float, 1> d1;
  return hn::GetLane(LoadHalfAsF32(d1, &h));
}

// Transposes an 8x8 block of floats: dst[c * ds + r] = src[r * ss + c]. On x86 targets
// with 256-bit vectors it is 8 loads, 24 in-register shuffles and 8 stores; elsewhere plain
// loops.
HWY_INLINE void Transpose8x8(const float* HWY_RESTRICT src, int64_t ss, float* HWY_RESTRICT dst,
                             int64_t ds) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  const hn::CappedTag<float, 8> d;
  const hn::Repartition<double, decltype(d)> dd;
  const auto lo64 = [&](hn::Vec<decltype(d)> a, hn::Vec<decltype(d)> b) {
    return hn::BitCast(d, hn::InterleaveLower(dd, hn::BitCast(dd, a), hn::BitCast(dd, b)));
  };
  const auto hi64 = [&](hn::Vec<decltype(d)> a, hn::Vec<decltype(d)> b) {
    return hn::BitCast(d, hn::InterleaveUpper(dd, hn::BitCast(dd, a), hn::BitCast(dd, b)));
  };
  const auto r0 = hn::LoadU(d, src), r1 = hn::LoadU(d, src + ss);
  const auto r2 = hn::LoadU(d, src + 2 * ss), r3 = hn::LoadU(d, src + 3 * ss);
  const auto r4 = hn::LoadU(d, src + 4 * ss), r5 = hn::LoadU(d, src + 5 * ss);
  const auto r6 = hn::LoadU(d, src + 6 * ss), r7 = hn::LoadU(d, src + 7 * ss);
  // Within each 128-bit half: 32-bit, then 64-bit interleaves give 4x4 transposes.
  const auto t0 = hn::InterleaveLower(d, r0, r1), t1 = hn::InterleaveUpper(d, r0, r1);
  const auto t2 = hn::InterleaveLower(d, r2, r3), t3 = hn::InterleaveUpper(d, r2, r3);
  const auto t4 = hn::InterleaveLower(d, r4, r5), t5 = hn::InterleaveUpper(d, r4, r5);
  const auto t6 = hn::InterleaveLower(d, r6, r7), t7 = hn::InterleaveUpper(d, r6, r7);
  const auto u0 = lo64(t0, t2), u1 = hi64(t0, t2), u2 = lo64(t1, t3), u3 = hi64(t1, t3);
  const auto u4 = lo64(t4, t6), u5 = hi64(t4, t6), u6 = lo64(t5, t7), u7 = hi64(t5, t7);
  // Then the 128-bit halves swap places.
  hn::StoreU(hn::ConcatLowerLower(d, u4, u0), d, dst);
  hn::StoreU(hn::ConcatLowerLower(d, u5, u1), d, dst + ds);
  hn::StoreU(hn::ConcatLowerLower(d, u6, u2), d, dst + 2 * ds);
  hn::StoreU(hn::ConcatLowerLower(d, u7, u3), d, dst + 3 * ds);
  hn::StoreU(hn::ConcatUpperUpper(d, u4, u0), d, dst + 4 * ds);
  hn::StoreU(hn::ConcatUpperUpper(d, u5, u1), d, dst + 5 * ds);
  hn::StoreU(hn::ConcatUpperUpper(d, u6, u2), d, dst + 6 * ds);
  hn::StoreU(hn::ConcatUpperUpper(d, u7, u3), d, dst + 7 * ds);
#else
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 8; ++c) dst[c * ds + r] = src[r * ss + c];
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace cln::kernels
HWY_AFTER_NAMESPACE();

#endif  // CLONE_KERNELS_HWY_UTIL_INL_H_
