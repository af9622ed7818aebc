// The row-wise kernels: rmsnorm, rope, silu_mul, add, softmax. Memory-light and cheap next
// to the matmuls; vectorized so they stay that way at prefill sizes.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/elementwise.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "kernels/scratch.h"

HWY_BEFORE_NAMESPACE();
namespace cln::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;

HWY_INLINE float SumSquares(const float* HWY_RESTRICT x, int64_t n) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  auto a = hn::Zero(df), b = hn::Zero(df);
  int64_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    const auto v0 = hn::LoadU(df, x + i), v1 = hn::LoadU(df, x + i + N);
    a = hn::MulAdd(v0, v0, a);
    b = hn::MulAdd(v1, v1, b);
  }
  for (; i + N <= n; i += N) {
    const auto v = hn::LoadU(df, x + i);
    a = hn::MulAdd(v, v, a);
  }
  float s = hn::GetLane(hn::SumOfLanes(df, hn::Add(a, b)));
  for (; i < n; ++i) s += x[i] * x[i];
  return s;
}

void RmsNormHere(const float* x, const float* w, float* y, int64_t n, int64_t dim, float eps) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  for (int64_t t = 0; t < n; ++t) {
    const float* xt = x + t * dim;
    float* yt = y + t * dim;
    const float inv = 1.0f / std::sqrt(SumSquares(xt, dim) / static_cast<float>(dim) + eps);
    const auto vi = hn::Set(df, inv);
    int64_t i = 0;
    for (; i + N <= dim; i += N)
      hn::StoreU(hn::Mul(hn::Mul(hn::LoadU(df, xt + i), vi), hn::LoadU(df, w + i)), df, yt + i);
    for (; i < dim; ++i) yt[i] = xt[i] * inv * w[i];
  }
}

// Rotates adjacent pairs (2i, 2i+1) of every head of each token. The angles of a token are
// computed once (in double: pos * base^(-2i/d) loses nothing at long positions) into
// interleaved tables c = [cos0, cos0, cos1, cos1, ..] and s = [-sin0, sin0, -sin1, sin1, ..],
// so that out = x * c + swap_pairs(x) * s over whole vectors.
void RopeHere(float* x, int64_t n, int64_t n_heads, int64_t head_dim, const int32_t* pos,
              float base) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  // cs and sn, then the pair frequencies base^(-2i/d) (doubles, 8-byte aligned after the
  // 2 * head_dim floats), which depend on i alone: computed once, not once per token.
  float* cs =
      detail::scratch_as<float>(detail::ScratchSlot::kRowTemp, static_cast<size_t>(3 * head_dim));
  float* sn = cs + head_dim;
  auto* freq = reinterpret_cast<double*>(cs + 2 * head_dim);
  for (int64_t i = 0; i < head_dim / 2; ++i)
    freq[i] = std::pow(static_cast<double>(base),
                       -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < head_dim / 2; ++i) {
      const double theta = pos[t] * freq[i];
      const auto c = static_cast<float>(std::cos(theta)), s = static_cast<float>(std::sin(theta));
      cs[2 * i] = cs[2 * i + 1] = c;
      sn[2 * i] = -s;
      sn[2 * i + 1] = s;
    }
    for (int64_t h = 0; h < n_heads; ++h) {
      float* v = x + (t * n_heads + h) * head_dim;
      int64_t i = 0;
      if (N % 2 == 0) {
        for (; i + N <= head_dim; i += N) {
          const auto xv = hn::LoadU(df, v + i);
          const auto r = hn::MulAdd(hn::Reverse2(df, xv), hn::LoadU(df, sn + i),
                                    hn::Mul(xv, hn::LoadU(df, cs + i)));
          hn::StoreU(r, df, v + i);
        }
      }
      for (; i + 1 < head_dim; i += 2) {
        const float a = v[i], b = v[i + 1];
        v[i] = a * cs[i] + b * sn[i];
        v[i + 1] = b * cs[i + 1] + a * sn[i + 1];
      }
    }
  }
}

// silu(g) * u = g * u / (1 + exp(-g)); exp's argument is clamped where the quotient is 0
// to float precision anyway.
void SiluMulHere(const float* gate, const float* up, float* out, int64_t n) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto one = hn::Set(df, 1.0f), hi = hn::Set(df, 88.0f);
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    const auto g = hn::LoadU(df, gate + i);
    const auto e = hn::Exp(df, hn::Min(hn::Neg(g), hi));
    hn::StoreU(hn::Div(hn::Mul(g, hn::LoadU(df, up + i)), hn::Add(one, e)), df, out + i);
  }
  for (; i < n; ++i) out[i] = gate[i] * up[i] / (1.0f + std::exp(std::fmin(-gate[i], 88.0f)));
}

void AddHere(float* y, const float* x, int64_t n) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + N <= n; i += N)
    hn::StoreU(hn::Add(hn::LoadU(df, y + i), hn::LoadU(df, x + i)), df, y + i);
  for (; i < n; ++i) y[i] += x[i];
}

void SoftmaxHere(float* x, int64_t n) {
  if (n <= 0) return;
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  auto vmax = hn::Set(df, -INFINITY);
  int64_t i = 0;
  for (; i + N <= n; i += N) vmax = hn::Max(vmax, hn::LoadU(df, x + i));
  float mx = hn::GetLane(hn::MaxOfLanes(df, vmax));
  for (; i < n; ++i) mx = std::fmax(mx, x[i]);
  const auto vm = hn::Set(df, mx);
  auto vsum = hn::Zero(df);
  for (i = 0; i + N <= n; i += N) {
    const auto e = hn::Exp(df, hn::Sub(hn::LoadU(df, x + i), vm));
    vsum = hn::Add(vsum, e);
    hn::StoreU(e, df, x + i);
  }
  float sum = hn::GetLane(hn::SumOfLanes(df, vsum));
  for (; i < n; ++i) sum += x[i] = std::exp(x[i] - mx);
  const auto inv = hn::Set(df, 1.0f / sum);
  for (i = 0; i + N <= n; i += N) hn::StoreU(hn::Mul(hn::LoadU(df, x + i), inv), df, x + i);
  for (; i < n; ++i) x[i] *= 1.0f / sum;
}

}  // namespace HWY_NAMESPACE
}  // namespace cln::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "clone/kernels/ops.h"

namespace cln::kernels {
HWY_EXPORT(RmsNormHere);
HWY_EXPORT(RopeHere);
HWY_EXPORT(SiluMulHere);
HWY_EXPORT(AddHere);
HWY_EXPORT(SoftmaxHere);

void rmsnorm(const float* x, const float* w, float* y, int64_t n, int64_t dim, float eps) {
  HWY_DYNAMIC_DISPATCH(RmsNormHere)(x, w, y, n, dim, eps);
}
void rope(float* x, int64_t n, int64_t n_heads, int64_t head_dim, const int32_t* pos, float base) {
  HWY_DYNAMIC_DISPATCH(RopeHere)(x, n, n_heads, head_dim, pos, base);
}
void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  HWY_DYNAMIC_DISPATCH(SiluMulHere)(gate, up, out, n);
}
void add(float* y, const float* x, int64_t n) {
  HWY_DYNAMIC_DISPATCH(AddHere)(y, x, n);
}
void softmax(float* x, int64_t n) {
  HWY_DYNAMIC_DISPATCH(SoftmaxHere)(x, n);
}

}  // namespace cln::kernels
#endif  // HWY_ONCE
