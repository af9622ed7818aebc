// The numeric kernels the engine and the trainer are built from. Each has a scalar
// reference in cln::kernels::ref (plain loops, the oracle in tests) and an optimized
// version here (Highway SIMD with runtime dispatch, threads across the pool).
// Shapes are in the comments; activations are F32 and row-major.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "clone/core/dtype.h"
#include "clone/kernels/thread_pool.h"

namespace cln::kernels {

class PackedWeights;
struct Matrix;
namespace detail {
std::unique_ptr<PackedWeights> pack_weights_as(const Matrix& w, int layout, ThreadPool* pool);
}  // namespace detail

// A weight matrix as GGUF stores it: `rows` rows of `cols` values of `type`,
// row r at data + r * dtype_row_bytes(type, cols). (GGUF ne = [cols, rows].)
struct Matrix {
  DType type = DType::F32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  // Optional: the same weights rearranged by pack_weights() for this CPU. matmul reads them
  // instead of `data` when set; `data` stays valid as the reference and the fallback.
  const PackedWeights* packed = nullptr;
};

// Weights rearranged once, at load time, into the layout this CPU's fastest matmul kernels
// read. On x86 with AVX-512 VNNI: Q4_0 and Q8_0 rows interleaved in groups of 16 (the same
// bytes reordered, the same size), so one instruction serves 16 rows; matmul then runs
// integer dot products for any number of tokens, at memory speed for decode. With AVX-512
// (but on AMD before Zen 5): F32 and F16 rows in column panels of 64 (the same values, the
// same size), which prefill's GEMM reads as they are and decode streams with one broadcast
// per column.
class PackedWeights {
 public:
  ~PackedWeights();
  PackedWeights(const PackedWeights&) = delete;
  PackedWeights& operator=(const PackedWeights&) = delete;
  int layout() const { return layout_; }  // internal id of the arrangement
  const uint8_t* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  friend std::unique_ptr<PackedWeights> detail::pack_weights_as(const Matrix& w, int layout,
                                                                ThreadPool* pool);
  PackedWeights() = default;
  int layout_ = 0;
  uint8_t* data_ = nullptr;
  size_t bytes_ = 0;
};

// Packs w for this CPU, or returns null where no kernel gains from it (other CPUs). Use it as  auto
// p = pack_weights(w);  w.packed = p.get();  and keep p alive while w is used. The pages of w.data
// are not needed by matmul afterwards (a caller holding them in an mmap may madvise(MADV_DONTNEED)
// them to keep resident memory at one copy).
std::unique_ptr<PackedWeights> pack_weights(const Matrix& w, ThreadPool* pool = nullptr);

// Y = scale * X W^T, or Y += scale * X W^T when accumulate.
//   X F32 [n, w.cols] (row stride w.cols), Y F32 [n, w.rows] (row stride w.rows).
// n = 1 is decode (memory-bound, rows split across threads); large n is prefill.
// For Q8_0/Q4_0 weights, x is quantized to 8-bit blocks of 32 (scale amax/127, as ggml
// does for these types) whenever the integer kernels run: always for packed weights, and
// for few tokens otherwise (more tokens go through F32 GEMM on dequantized panels). Each
// output then differs from the exact product by at most sum_j |w_j| * d_x(j) / 2.
void matmul(const Matrix& w, const float* x, int64_t n, float* y, ThreadPool* pool,
            bool accumulate = false, float scale = 1.0f);

// General F32 GEMM for training: C = alpha * op(A) op(B) + beta * C,
// op(A) [M, K], op(B) [K, N], C [M, N]; lda/ldb/ldc are row strides.
void gemm_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
              const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
              int64_t ldc, ThreadPool* pool);

// y[t] = x[t] / sqrt(mean(x[t]^2) + eps) * w,   x, y [n, dim]; w [dim]. y may alias x.
void rmsnorm(const float* x, const float* w, float* y, int64_t n, int64_t dim, float eps);

// Rotary embedding in place, llama.cpp's "normal" pairing: adjacent elements
// (2i, 2i+1) of each head rotate by pos * base^(-2i/head_dim).
//   x [n, n_heads * head_dim]; pos [n].
void rope(float* x, int64_t n, int64_t n_heads, int64_t head_dim, const int32_t* pos, float base);

// out = silu(gate) * up, elementwise over n values. out may alias gate or up.
void silu_mul(const float* gate, const float* up, float* out, int64_t n);

// y += x over n values.
void add(float* y, const float* x, int64_t n);

// Softmax in place over n values (max-subtracted).
void softmax(float* x, int64_t n);

// Causal grouped-query attention of n new tokens against a KV cache that already holds
// them: token t sits at position pos0 + t and attends to cache positions [0, pos0 + t].
//   q   [n, n_head * dk]
//   k   [n_ctx, n_head_kv * dk]   (rows 0 .. pos0 + n - 1 are valid)
//   v   [n_ctx, n_head_kv * dv]
//   out [n, n_head * dv]
// Query head h reads KV head h / (n_head / n_head_kv). Scores are scaled by 1/sqrt(dk).
struct AttentionShape {
  int64_t n_head, n_head_kv, dk, dv;
};
void attention(const float* q, const float* k, const float* v, float* out, int64_t n, int64_t pos0,
               const AttentionShape& s, ThreadPool* pool);

// Row conversion between F32 and a storage type (n values, a whole number of blocks).
// Quantization follows ggml's reference rounding (Q8_0: d = amax/127, q = round(x/d);
// Q4_0: d = max/-8 with max the signed value of largest magnitude, q = min(15, trunc(x/d + 8.5))).
void quantize_row(DType t, const float* x, void* out, int64_t n);
void dequantize_row(DType t, const void* in, float* y, int64_t n);

namespace ref {
// Scalar references, one per kernel above, in plain loops (double accumulators where
// the optimized version accumulates in float, so they are the more accurate side).
void matmul(const Matrix& w, const float* x, int64_t n, float* y, bool accumulate = false,
            float scale = 1.0f);
void gemm_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
              const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
              int64_t ldc);
void rmsnorm(const float* x, const float* w, float* y, int64_t n, int64_t dim, float eps);
void rope(float* x, int64_t n, int64_t n_heads, int64_t head_dim, const int32_t* pos, float base);
void silu_mul(const float* gate, const float* up, float* out, int64_t n);
void add(float* y, const float* x, int64_t n);
void softmax(float* x, int64_t n);
void attention(const float* q, const float* k, const float* v, float* out, int64_t n, int64_t pos0,
               const AttentionShape& s);
void quantize_row(DType t, const float* x, void* out, int64_t n);
void dequantize_row(DType t, const void* in, float* y, int64_t n);
}  // namespace ref

}  // namespace cln::kernels
