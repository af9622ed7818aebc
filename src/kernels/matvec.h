// The dot-product path of matmul, for few tokens (decode): each weight row is read once
// from memory and dotted with every token. Internal to clone_kernels.
//
// F32 and F16 weights are dotted with the F32 activations directly. For Q8_0 and Q4_0 the
// activations are first quantized to 8-bit blocks (one scale per 32 values, as ggml's
// Q8_0) so the inner loop runs in integer SIMD, which keeps up with memory bandwidth;
// the error this adds is bounded by |w| . |x - x_q| (see the tests).
#pragma once

#include <cstddef>
#include <cstdint>

#include "clone/kernels/ops.h"

namespace cln::kernels::detail {

// What one dot kernel computes: rows [r0, r1) of w against n tokens,
//   y[t * ldy + r] = scale * dot(w_r, x_t)  (+ the old y[t * ldy + r] when accumulate).
struct DotArgs {
  const Matrix* w;
  const float* x;     // F32 [n, w.cols]
  const uint8_t* px;  // prepared activations, px_stride bytes per token (quantized types)
  size_t px_stride;
  int64_t n;
  float* y;
  int64_t ldy;
  bool accumulate;
  float scale;
};

// Writes one dot product as DotArgs asks: y[t * ldy + r] = scale * dot (+ the old value).
inline void store_dot(const DotArgs& a, int64_t t, int64_t r, float dot) {
  float& out = a.y[t * a.ldy + r];
  out = a.accumulate ? out + a.scale * dot : a.scale * dot;
}

struct DotKernel {
  // Bytes of prepared activations per token; 0 when the kernel reads x directly.
  size_t (*prepared_bytes)(int64_t cols);
  void (*prepare)(const float* x, int64_t cols, uint8_t* out);
  void (*rows)(const DotArgs& a, int64_t r0, int64_t r1);
  const char* name;
  // matmul uses this kernel up to this many tokens and the GEMM path beyond (measured
  // with bench_kernels: BM_Prefill's n sweep).
  int64_t max_tokens;
};

// The kernel for weights of type t on this CPU (the one place per-ISA versions are chosen).
DotKernel dot_kernel(DType t);

// matmul takes this path for n <= dot_max_tokens(t) tokens, the GEMM path above it.
inline int64_t dot_max_tokens(DType t) {
  return dot_kernel(t).max_tokens;
}

// Rows per unit of work handed to threads; kernels process rows in multiples of it where
// they can, so thread splits never cut a kernel's row group.
constexpr int64_t kDotRowAlign = 16;

}  // namespace cln::kernels::detail
