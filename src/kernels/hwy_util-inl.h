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
#if (HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2) || HWY_ARCH_ARM_A64
  // F16C / AArch64 convert in hardware, exactly.
  const hn::Rebind<hwy::float16_t, DF> dh;
  return hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
#else
  const hn::RebindToUnsigned<DF> du;
  const hn::Rebind<uint16_t, DF> du16;
  return HalfBitsToF32(df, hn::PromoteTo(du, hn::LoadU(du16, p)));
#endif
}

// One half -> float (block scales).
HWY_INLINE float HalfToF32(uint16_t h) {
  const hn::CappedTag<float, 1> d1;
  return hn::GetLane(LoadHalfAsF32(d1, &h));
}

}  // namespace HWY_NAMESPACE
}  // namespace cln::kernels
HWY_AFTER_NAMESPACE();

#endif  // CLONE_KERNELS_HWY_UTIL_INL_H_
