// The compute-bound path: a blocked F32 GEMM with packing and a register-tiled
// micro-kernel, used by gemm_f32 and by matmul when there are many tokens (prefill).
// Internal to clone_kernels.
#pragma once

#include <cstdint>

#include "clone/kernels/ops.h"

namespace cln::kernels::detail {

// C [M, N] = alpha * op(A) op(B) + beta * C (beta == 0: C is not read).
//   op(A) [M, K]: A[i * lda + k], or A[k * lda + i] when trans_a.
//   op(B) [K, N]: when w is set, op(B)(k, j) = w's row j, column k, in any storage type
//   (matmul's X W^T; rows are dequantized to F32 once per panel and reused across all M);
//   otherwise B[k * ldb + j], or B[j * ldb + k] when trans_b.
struct GemmArgs {
  bool trans_a = false;
  int64_t M = 0, N = 0, K = 0;
  float alpha = 1.0f;
  const float* A = nullptr;
  int64_t lda = 0;
  const float* B = nullptr;
  int64_t ldb = 0;
  bool trans_b = false;
  const Matrix* w = nullptr;
  float beta = 0.0f;
  float* C = nullptr;
  int64_t ldc = 0;
};

void gemm(const GemmArgs& g, ThreadPool* pool);

}  // namespace cln::kernels::detail
