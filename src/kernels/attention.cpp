// Causal grouped-query attention against the KV cache (layout in ops.h).
//
// Work is split over (KV head, block of query tokens): the query heads that share a KV
// head (the GQA group) are processed together, so each key and value row is loaded once
// per group and used by all its query heads. Scores for one (token, head) go to a
// per-thread row, are soft-maxed there, then weight the value rows.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attention.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "clone/kernels/thread_pool.h"
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "kernels/scratch.h"

#ifndef CLONE_KERNELS_ATTENTION_ARGS_
#define CLONE_KERNELS_ATTENTION_ARGS_
namespace cln::kernels::detail {
struct AttnArgs {
  const float *q, *k, *v;
  float* out;
  int64_t n, pos0, n_head, n_head_kv, dk, dv;
};
}  // namespace cln::kernels::detail
#endif

HWY_BEFORE_NAMESPACE();
namespace cln::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using detail::AttnArgs;

HWY_INLINE float Dot(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b, int64_t n) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  auto s0 = hn::Zero(df), s1 = hn::Zero(df);
  int64_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    s0 = hn::MulAdd(hn::LoadU(df, a + i), hn::LoadU(df, b + i), s0);
    s1 = hn::MulAdd(hn::LoadU(df, a + i + N), hn::LoadU(df, b + i + N), s1);
  }
  for (; i + N <= n; i += N) s0 = hn::MulAdd(hn::LoadU(df, a + i), hn::LoadU(df, b + i), s0);
  float s = hn::GetLane(hn::SumOfLanes(df, hn::Add(s0, s1)));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// p[0..len) = exp(p - max), returns the sum.
HWY_INLINE float ExpInPlace(float* HWY_RESTRICT p, int64_t len, float mx) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto vm = hn::Set(df, mx);
  auto vs = hn::Zero(df);
  int64_t j = 0;
  for (; j + N <= len; j += N) {
    const auto e = hn::Exp(df, hn::Sub(hn::LoadU(df, p + j), vm));
    vs = hn::Add(vs, e);
    hn::StoreU(e, df, p + j);
  }
  float sum = hn::GetLane(hn::SumOfLanes(df, vs));
  for (; j < len; ++j) sum += p[j] = std::exp(p[j] - mx);
  return sum;
}

// out[0..dv) = sum_j p[j] * v_j / sum, v_j = v + j * v_stride.
HWY_INLINE void WeightedSum(const float* HWY_RESTRICT p, int64_t len, const float* HWY_RESTRICT v,
                            int64_t v_stride, int64_t dv, float inv_sum, float* HWY_RESTRICT out) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  // Four vectors of the output at a time stay in registers across all positions.
  for (; i + 4 * N <= dv; i += 4 * N) {
    auto o0 = hn::Zero(df), o1 = hn::Zero(df), o2 = hn::Zero(df), o3 = hn::Zero(df);
    for (int64_t j = 0; j < len; ++j) {
      const float* vj = v + j * v_stride + i;
      const auto pj = hn::Set(df, p[j]);
      o0 = hn::MulAdd(pj, hn::LoadU(df, vj), o0);
      o1 = hn::MulAdd(pj, hn::LoadU(df, vj + N), o1);
      o2 = hn::MulAdd(pj, hn::LoadU(df, vj + 2 * N), o2);
      o3 = hn::MulAdd(pj, hn::LoadU(df, vj + 3 * N), o3);
    }
    const auto s = hn::Set(df, inv_sum);
    hn::StoreU(hn::Mul(o0, s), df, out + i);
    hn::StoreU(hn::Mul(o1, s), df, out + i + N);
    hn::StoreU(hn::Mul(o2, s), df, out + i + 2 * N);
    hn::StoreU(hn::Mul(o3, s), df, out + i + 3 * N);
  }
  for (; i + N <= dv; i += N) {
    auto o = hn::Zero(df);
    for (int64_t j = 0; j < len; ++j)
      o = hn::MulAdd(hn::Set(df, p[j]), hn::LoadU(df, v + j * v_stride + i), o);
    hn::StoreU(hn::Mul(o, hn::Set(df, inv_sum)), df, out + i);
  }
  for (; i < dv; ++i) {
    float o = 0;
    for (int64_t j = 0; j < len; ++j) o += p[j] * v[j * v_stride + i];
    out[i] = o * inv_sum;
  }
}

// All query heads of KV head hk for query tokens [t0, t1).
void AttendGroup(const AttnArgs& a, int64_t hk, int64_t t0, int64_t t1) {
  const int64_t group = a.n_head / a.n_head_kv;
  const int64_t kstride = a.n_head_kv * a.dk, vstride = a.n_head_kv * a.dv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(a.dk));
  const int64_t max_len = a.pos0 + t1;
  float* p =
      detail::scratch_as<float>(detail::ScratchSlot::kAttention, static_cast<size_t>(max_len));
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t len = a.pos0 + t + 1;
    for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
      const float* qh = a.q + (t * a.n_head + h) * a.dk;
      float mx = -INFINITY;
      for (int64_t j = 0; j < len; ++j) {
        p[j] = scale * Dot(qh, a.k + j * kstride + hk * a.dk, a.dk);
        mx = std::fmax(mx, p[j]);
      }
      const float sum = ExpInPlace(p, len, mx);
      WeightedSum(p, len, a.v + hk * a.dv, vstride, a.dv, 1.0f / sum,
                  a.out + (t * a.n_head + h) * a.dv);
    }
  }
}

void AttentionHere(const AttnArgs& a, ThreadPool* pool) {
  // Units of work: (KV head, block of tokens). Causal rows grow with t, so units are handed
  // out from the last (heaviest) block down, which keeps the threads even at the end.
  const int64_t tb = a.n >= 16 ? 8 : 1;
  const int64_t blocks = (a.n + tb - 1) / tb, units = blocks * a.n_head_kv;
  const auto work = [&](int64_t u0, int64_t u1) {
    for (int64_t i = u0; i < u1; ++i) {
      const int64_t u = units - 1 - i;
      const int64_t hk = u % a.n_head_kv, b = u / a.n_head_kv;
      const int64_t t0 = b * tb, t1 = t0 + tb < a.n ? t0 + tb : a.n;
      AttendGroup(a, hk, t0, t1);
    }
  };
  if (pool == nullptr || pool->size() == 1 || units == 1) {
    work(0, units);
  } else {
    pool->parallel_for(units, 1, work);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace cln::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "clone/core/error.h"
#include "clone/kernels/ops.h"

namespace cln::kernels {
HWY_EXPORT(AttentionHere);

void attention(const float* q, const float* k, const float* v, float* out, int64_t n, int64_t pos0,
               const AttentionShape& s, ThreadPool* pool) {
  if (s.n_head <= 0 || s.n_head_kv <= 0 || s.n_head % s.n_head_kv != 0)
    fail("attention: ", s.n_head, " query heads cannot share ", s.n_head_kv, " KV heads evenly");
  if (n <= 0) return;
  HWY_DYNAMIC_DISPATCH(AttentionHere)
  ({q, k, v, out, n, pos0, s.n_head, s.n_head_kv, s.dk, s.dv}, pool);
}

}  // namespace cln::kernels
#endif  // HWY_ONCE
