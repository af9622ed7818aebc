// Scalar references: the oracles of the kernel tests. Plain loops, double accumulators,
// no threads, no cleverness; speed does not matter here, being obviously right does.
#include <cmath>
#include <cstring>
#include <vector>

#include "clone/core/error.h"
#include "clone/kernels/ops.h"

namespace cln::kernels::ref {

namespace {
// One weight row as F32, whatever its storage type.
void row_to_f32(const Matrix& w, int64_t r, float* out) {
  const auto* row = static_cast<const uint8_t*>(w.data) +
                    r * static_cast<int64_t>(dtype_row_bytes(w.type, w.cols));
  dequantize_row(w.type, row, out, w.cols);
}
}  // namespace

void matmul(const Matrix& w, const float* x, int64_t n, float* y, bool accumulate, float scale) {
  std::vector<float> wr(static_cast<size_t>(w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    row_to_f32(w, r, wr.data());
    for (int64_t t = 0; t < n; ++t) {
      double acc = 0;
      for (int64_t c = 0; c < w.cols; ++c) acc += static_cast<double>(wr[c]) * x[t * w.cols + c];
      float& out = y[t * w.rows + r];
      out = static_cast<float>(scale * acc + (accumulate ? out : 0.0));
    }
  }
}

void gemm_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
              const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
              int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double a = trans_a ? A[k * lda + i] : A[i * lda + k];
        const double b = trans_b ? B[j * ldb + k] : B[k * ldb + j];
        acc += a * b;
      }
      float& c = C[i * ldc + j];
      // beta == 0 overwrites, so C may start uninitialised (NaN stays out), as in BLAS.
      c = static_cast<float>(alpha * acc + (beta == 0.0f ? 0.0 : static_cast<double>(beta) * c));
    }
  }
}

void rmsnorm(const float* x, const float* w, float* y, int64_t n, int64_t dim, float eps) {
  for (int64_t t = 0; t < n; ++t) {
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(x[t * dim + i]) * x[t * dim + i];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i)
      y[t * dim + i] = static_cast<float>(x[t * dim + i] * inv * w[i]);
  }
}

void rope(float* x, int64_t n, int64_t n_heads, int64_t head_dim, const int32_t* pos, float base) {
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < n_heads; ++h) {
      float* v = x + (t * n_heads + h) * head_dim;
      for (int64_t i = 0; i < head_dim / 2; ++i) {
        const double theta =
            pos[t] * std::pow(static_cast<double>(base),
                              -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
        const double c = std::cos(theta), s = std::sin(theta);
        const double a = v[2 * i], b = v[2 * i + 1];
        v[2 * i] = static_cast<float>(a * c - b * s);
        v[2 * i + 1] = static_cast<float>(a * s + b * c);
      }
    }
  }
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

void add(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void softmax(float* x, int64_t n) {
  double mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, static_cast<double>(x[i]));
  std::vector<double> e(static_cast<size_t>(n));
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += e[i] = std::exp(x[i] - mx);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(e[i] / sum);
}

void attention(const float* q, const float* k, const float* v, float* out, int64_t n, int64_t pos0,
               const AttentionShape& s) {
  const int64_t group = s.n_head / s.n_head_kv;
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.dk));
  std::vector<double> p(static_cast<size_t>(pos0 + n));
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < s.n_head; ++h) {
      const int64_t hk = h / group, len = pos0 + t + 1;
      const float* qh = q + (t * s.n_head + h) * s.dk;
      double mx = -INFINITY;
      for (int64_t j = 0; j < len; ++j) {
        const float* kj = k + (j * s.n_head_kv + hk) * s.dk;
        double dot = 0;
        for (int64_t i = 0; i < s.dk; ++i) dot += static_cast<double>(qh[i]) * kj[i];
        p[j] = dot * scale;
        mx = std::max(mx, p[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < len; ++j) sum += p[j] = std::exp(p[j] - mx);
      float* o = out + (t * s.n_head + h) * s.dv;
      for (int64_t i = 0; i < s.dv; ++i) {
        double acc = 0;
        for (int64_t j = 0; j < len; ++j) acc += p[j] * v[(j * s.n_head_kv + hk) * s.dv + i];
        o[i] = static_cast<float>(acc / sum);
      }
    }
  }
}

// ggml's reference quantizers, step for step in float so the bytes match.
void quantize_row(DType t, const float* x, void* out, int64_t n) {
  switch (t) {
    case DType::F32:
      std::memcpy(out, x, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::F16: {
      auto* h = static_cast<uint16_t*>(out);
      for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_fp16(x[i]);
      return;
    }
    case DType::Q8_0: {
      auto* blk = static_cast<BlockQ8_0*>(out);
      for (int64_t b = 0; b < n / kQK; ++b) {
        const float* xb = x + b * kQK;
        float amax = 0;
        for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(xb[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        blk[b].d = fp32_to_fp16(d);
        for (int j = 0; j < kQK; ++j) blk[b].q[j] = static_cast<int8_t>(std::roundf(xb[j] * id));
      }
      return;
    }
    case DType::Q4_0: {
      auto* blk = static_cast<BlockQ4_0*>(out);
      for (int64_t b = 0; b < n / kQK; ++b) {
        const float* xb = x + b * kQK;
        float amax = 0, max = 0;
        for (int j = 0; j < kQK; ++j) {
          if (std::fabs(xb[j]) > amax) {
            amax = std::fabs(xb[j]);
            max = xb[j];
          }
        }
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        blk[b].d = fp32_to_fp16(d);
        for (int j = 0; j < kQK / 2; ++j) {
          const float x0 = xb[j] * id, x1 = xb[j + kQK / 2] * id;
          const auto q0 =
              std::min<uint8_t>(15, static_cast<uint8_t>(static_cast<int8_t>(x0 + 8.5f)));
          const auto q1 =
              std::min<uint8_t>(15, static_cast<uint8_t>(static_cast<int8_t>(x1 + 8.5f)));
          blk[b].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
        }
      }
      return;
    }
  }
  fail("quantize_row: unsupported type ", dtype_name(t));
}

void dequantize_row(DType t, const void* in, float* y, int64_t n) {
  switch (t) {
    case DType::F32:
      std::memcpy(y, in, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::F16: {
      const auto* h = static_cast<const uint16_t*>(in);
      for (int64_t i = 0; i < n; ++i) y[i] = fp16_to_fp32(h[i]);
      return;
    }
    case DType::Q8_0: {
      const auto* blk = static_cast<const BlockQ8_0*>(in);
      for (int64_t b = 0; b < n / kQK; ++b) {
        const float d = fp16_to_fp32(blk[b].d);
        for (int j = 0; j < kQK; ++j) y[b * kQK + j] = d * static_cast<float>(blk[b].q[j]);
      }
      return;
    }
    case DType::Q4_0: {
      const auto* blk = static_cast<const BlockQ4_0*>(in);
      for (int64_t b = 0; b < n / kQK; ++b) {
        const float d = fp16_to_fp32(blk[b].d);
        for (int j = 0; j < kQK / 2; ++j) {
          y[b * kQK + j] = d * static_cast<float>((blk[b].qs[j] & 0x0F) - 8);
          y[b * kQK + j + kQK / 2] = d * static_cast<float>((blk[b].qs[j] >> 4) - 8);
        }
      }
      return;
    }
  }
  fail("dequantize_row: unsupported type ", dtype_name(t));
}

}  // namespace cln::kernels::ref
