// matmul and gemm_f32: checks, then the choice between the two paths.
//   few tokens  -> matvec (dot products; memory-bound; rows split across threads)
//   many tokens -> gemm   (packed panels and register tiles; compute-bound)
#include <algorithm>

#include "clone/core/error.h"
#include "clone/kernels/ops.h"
#include "kernels/gemm.h"
#include "kernels/matvec.h"
#include "kernels/packed.h"
#include "kernels/scratch.h"

namespace cln::kernels {
namespace {

// Below this many weight bytes a matmul runs on the calling thread alone: waking the
// pool would cost more than it saves.
constexpr size_t kMinParallelBytes = 32 << 10;

// Packed weights (pack_weights) through their own kernel: integer dot products for any
// number of tokens (Q8_0 / Q4_0 tiles), or few tokens against F32 / F16 column panels.
void matmul_packed(const detail::PackedKernel& k, const Matrix& w, const float* x, int64_t n,
                   float* y, ThreadPool* pool, bool accumulate, float scale) {
  const bool threaded = pool != nullptr && pool->size() > 1;
  const size_t stride = k.prepare != nullptr ? (k.prepared_bytes(w.cols) + 63) / 64 * 64 : 0;
  uint8_t* px = nullptr;
  if (k.prepare != nullptr) {
    px = detail::scratch_as<uint8_t>(detail::ScratchSlot::kActivations,
                                     stride * static_cast<size_t>(n));
    const auto prepare = [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t)
        k.prepare(x + t * w.cols, w.cols, px + stride * static_cast<size_t>(t));
    };
    if (threaded && n >= 8) {
      pool->parallel_for(n, 1, [&](int64_t b, int64_t e) { prepare(b, e); });
    } else {
      prepare(0, n);
    }
  }
  const detail::PackedArgs a{&w, x, px, stride, n, y, w.rows, accumulate, scale};
  const int64_t groups = detail::packed_groups(w.rows, k.group_rows);
  if (!threaded || (n == 1 && w.packed->bytes() < kMinParallelBytes)) {
    k.groups(a, 0, groups);
    return;
  }
  pool->parallel_for(groups, 1, [&](int64_t b, int64_t e) { k.groups(a, b, e); });
}

void gemm_weights(const Matrix& w, const float* x, int64_t n, float* y, ThreadPool* pool,
                  bool accumulate, float scale) {
  detail::GemmArgs g;
  g.M = n;
  g.N = w.rows;
  g.K = w.cols;
  g.alpha = scale;
  g.A = x;
  g.lda = w.cols;
  g.w = &w;
  g.beta = accumulate ? 1.0f : 0.0f;
  g.C = y;
  g.ldc = w.rows;
  detail::gemm(g, pool);
}

void check_matrix(const Matrix& w) {
  if (!dtype_supported(static_cast<uint32_t>(w.type)))
    fail("matmul: unsupported weight type id ", static_cast<uint32_t>(w.type));
  if (w.rows < 0 || w.cols < 0 || w.cols % dtype_block_size(w.type) != 0)
    fail("matmul: a ", w.rows, " x ", w.cols, " ", dtype_name(w.type),
         " matrix needs whole blocks per row");
  if (w.data == nullptr && w.rows > 0 && w.cols > 0) fail("matmul: weight data is null");
}

}  // namespace

void matmul(const Matrix& w, const float* x, int64_t n, float* y, ThreadPool* pool, bool accumulate,
            float scale) {
  check_matrix(w);
  if (n <= 0 || w.rows == 0) return;
  if (w.cols == 0) {
    if (!accumulate) std::fill(y, y + n * w.rows, 0.0f);
    return;
  }
  if (w.packed != nullptr) {
    if (w.packed->layout() == detail::kNotPacked ||
        detail::packed_layout_type(w.packed->layout()) != w.type)
      fail("matmul: packed weights do not match the matrix type ", dtype_name(w.type));
    const detail::PackedKernel k = detail::packed_kernel(w.packed->layout());
    if (k.groups != nullptr && (k.max_tokens == 0 || n <= k.max_tokens))
      return matmul_packed(k, w, x, n, y, pool, accumulate, scale);
    // Panels: the GEMM reads them in place for many tokens.
    if (detail::is_panel_layout(w.packed->layout()))
      return gemm_weights(w, x, n, y, pool, accumulate, scale);
    // No kernel for this layout on the current target: the GGUF bytes serve.
  }
  const detail::DotKernel k = detail::dot_kernel(w.type);
  if (n > k.max_tokens) return gemm_weights(w, x, n, y, pool, accumulate, scale);

  detail::DotArgs a{&w, x, nullptr, 0, n, y, w.rows, accumulate, scale};
  const size_t pb = k.prepared_bytes(w.cols);
  if (pb > 0) {
    a.px_stride = (pb + 63) / 64 * 64;
    auto* px = detail::scratch_as<uint8_t>(detail::ScratchSlot::kActivations,
                                           a.px_stride * static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t)
      k.prepare(x + t * w.cols, w.cols, px + a.px_stride * static_cast<size_t>(t));
    a.px = px;
  }
  const size_t bytes = dtype_row_bytes(w.type, w.cols) * static_cast<size_t>(w.rows);
  if (pool == nullptr || pool->size() == 1 || bytes < kMinParallelBytes) {
    k.rows(a, 0, w.rows);
    return;
  }
  pool->parallel_for(w.rows, detail::kDotRowAlign, [&](int64_t b, int64_t e) { k.rows(a, b, e); });
}

void gemm_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
              const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
              int64_t ldc, ThreadPool* pool) {
  if (M < 0 || N < 0 || K < 0) fail("gemm_f32: negative size ", M, " x ", N, " x ", K);
  detail::GemmArgs g;
  g.trans_a = trans_a;
  g.M = M;
  g.N = N;
  g.K = K;
  g.alpha = alpha;
  g.A = A;
  g.lda = lda;
  g.B = B;
  g.ldb = ldb;
  g.trans_b = trans_b;
  g.beta = beta;
  g.C = C;
  g.ldc = ldc;
  detail::gemm(g, pool);
}

}  // namespace cln::kernels
