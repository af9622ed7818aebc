// quantize_row / dequantize_row: the public row conversions, SIMD per target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/quant.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "kernels/quant-inl.h"

HWY_BEFORE_NAMESPACE();
namespace cln::kernels {
namespace HWY_NAMESPACE {

void QuantizeRowHere(DType t, const float* x, void* out, int64_t n) {
  switch (t) {
    case DType::Q8_0:
      return QuantizeQ8_0(x, static_cast<BlockQ8_0*>(out), n);
    case DType::Q4_0:
      return QuantizeQ4_0(x, static_cast<BlockQ4_0*>(out), n);
    default:
      break;
  }
}

void DequantizeRowHere(DType t, const void* in, float* y, int64_t n) {
  switch (t) {
    case DType::F16:
      return DequantizeF16(static_cast<const uint16_t*>(in), y, n);
    case DType::Q8_0:
      return DequantizeQ8_0(static_cast<const BlockQ8_0*>(in), y, n);
    case DType::Q4_0:
      return DequantizeQ4_0(static_cast<const BlockQ4_0*>(in), y, n);
    default:
      break;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace cln::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <cstring>

#include "clone/core/error.h"
#include "clone/kernels/ops.h"

namespace cln::kernels {
HWY_EXPORT(QuantizeRowHere);
HWY_EXPORT(DequantizeRowHere);

namespace {
void check_row(const char* what, DType t, int64_t n) {
  if (!dtype_supported(static_cast<uint32_t>(t)))
    fail(what, ": unsupported type id ", static_cast<uint32_t>(t));
  if (n < 0 || n % dtype_block_size(t) != 0)
    fail(what, ": ", n, " values are not a whole number of ", dtype_name(t), " blocks");
}
}  // namespace

void quantize_row(DType t, const float* x, void* out, int64_t n) {
  check_row("quantize_row", t, n);
  switch (t) {
    case DType::F32:
      std::memcpy(out, x, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::F16: {
      // Not a hot path (model conversion); the scalar rounding is exact on every target.
      auto* h = static_cast<uint16_t*>(out);
      for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_fp16(x[i]);
      return;
    }
    default:
      return HWY_DYNAMIC_DISPATCH(QuantizeRowHere)(t, x, out, n);
  }
}

void dequantize_row(DType t, const void* in, float* y, int64_t n) {
  check_row("dequantize_row", t, n);
  if (t == DType::F32) {
    std::memcpy(y, in, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  HWY_DYNAMIC_DISPATCH(DequantizeRowHere)(t, in, y, n);
}

}  // namespace cln::kernels
#endif  // HWY_ONCE
