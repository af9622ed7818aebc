// Causal grouped-query attention against the KV cache (layout in ops.h).
//
// The queries that read one KV head are rows (t, h): every new token t times every query
// head h of that head's group. They are processed in blocks of one vector's worth of rows,
// with the row in the lane, so no dot product ever needs a horizontal sum:
//   Qt[d]  = the block's queries, transposed (dimension-major) and scaled by 1/sqrt(dk)
//   S[j]   = sum_d Qt[d] * k_j[d]             a vector of the block's scores for key j
//   P[j]   = exp(S[j] - max_j S[j])           softmax down each lane, causal mask per lane
//   Ot[d]  = sum_j P[j] * v_j[d]               then divided by the lane's sum of P
// Each key and value row is read once per block and serves all its rows: in decode the
// block is the GQA group (8 query heads of one token), in prefill several tokens of it.
// Work items are (KV head, row block), heaviest (latest tokens) first.
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
using detail::AttnArgs;

// Rows [r0, r0 + Lanes) of KV head hk; row r is token t0 + r / group, head hk * group + r % group.
template <class D>
void AttendBlock(D d, const AttnArgs& a, int64_t hk, int64_t r0) {
  const int64_t group = a.n_head / a.n_head_kv, rows = a.n * group;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t nr = rows - r0 < N ? rows - r0 : N;  // rows in this block
  const int64_t t_last = (r0 + nr - 1) / group;
  const int64_t len = a.pos0 + t_last + 1;  // keys any row of the block may see
  const int64_t kstride = a.n_head_kv * a.dk, vstride = a.n_head_kv * a.dv;
  const float* kh = a.k + hk * a.dk;
  const float* vh = a.v + hk * a.dv;

  const size_t qt_n = static_cast<size_t>(a.dk * N), s_n = static_cast<size_t>(len * N);
  float* buf = detail::scratch_as<float>(detail::ScratchSlot::kAttention,
                                         qt_n + s_n + static_cast<size_t>(4 * N));
  float* qt = buf;       // [dk][N]
  float* s = qt + qt_n;  // [len][N]
  float* tmp = s + s_n;  // [N] lane limits, [N] row scatter scratch

  // Queries, transposed and pre-scaled; the last key each lane may see.
  const float scale = 1.0f / std::sqrt(static_cast<float>(a.dk));
  for (int64_t r = 0; r < N; ++r) {
    const int64_t t = (r0 + r) / group, h = hk * group + (r0 + r) % group;
    const float* qr = a.q + (t * a.n_head + h) * a.dk;
    for (int64_t i = 0; i < a.dk; ++i) qt[i * N + r] = r < nr ? qr[i] * scale : 0.0f;
    tmp[r] = static_cast<float>(r < nr ? a.pos0 + t : len);
  }
  const auto limit = hn::Load(d, tmp);

  // Scores, eight keys at a time sharing each load of Qt[i] (eight independent FMA chains:
  // four left the FMA units half idle on their latency), then the last few one by one.
  const auto neg_inf = hn::Set(d, -INFINITY);
  auto vmax = neg_inf;
  const int64_t first_masked = a.pos0 + (r0 / group) + 1;  // below it no lane is masked
  // (A macro, not a lambda: SVE vectors are sizeless and cannot be captured.)
#define CLONE_FINISH(jj, sc)                                                               \
  do {                                                                                     \
    auto v_ = (sc);                                                                        \
    if ((jj) >= first_masked)                                                              \
      v_ = hn::IfThenElse(hn::Gt(hn::Set(d, static_cast<float>(jj)), limit), neg_inf, v_); \
    hn::Store(v_, d, s + (jj)*N);                                                          \
    vmax = hn::Max(vmax, v_);                                                              \
  } while (0)
  int64_t j = 0;
  for (; j + 8 <= len; j += 8) {
    const float* k0 = kh + j * kstride;
    auto s0 = hn::Zero(d), s1 = hn::Zero(d), s2 = hn::Zero(d), s3 = hn::Zero(d);
    auto s4 = hn::Zero(d), s5 = hn::Zero(d), s6 = hn::Zero(d), s7 = hn::Zero(d);
    for (int64_t i = 0; i < a.dk; ++i) {
      const auto qi = hn::Load(d, qt + i * N);
      s0 = hn::MulAdd(qi, hn::Set(d, k0[i]), s0);
      s1 = hn::MulAdd(qi, hn::Set(d, k0[kstride + i]), s1);
      s2 = hn::MulAdd(qi, hn::Set(d, k0[2 * kstride + i]), s2);
      s3 = hn::MulAdd(qi, hn::Set(d, k0[3 * kstride + i]), s3);
      s4 = hn::MulAdd(qi, hn::Set(d, k0[4 * kstride + i]), s4);
      s5 = hn::MulAdd(qi, hn::Set(d, k0[5 * kstride + i]), s5);
      s6 = hn::MulAdd(qi, hn::Set(d, k0[6 * kstride + i]), s6);
      s7 = hn::MulAdd(qi, hn::Set(d, k0[7 * kstride + i]), s7);
    }
    CLONE_FINISH(j, s0);
    CLONE_FINISH(j + 1, s1);
    CLONE_FINISH(j + 2, s2);
    CLONE_FINISH(j + 3, s3);
    CLONE_FINISH(j + 4, s4);
    CLONE_FINISH(j + 5, s5);
    CLONE_FINISH(j + 6, s6);
    CLONE_FINISH(j + 7, s7);
  }
  for (; j < len; ++j) {
    const float* kj = kh + j * kstride;
    auto s0 = hn::Zero(d);
    for (int64_t i = 0; i < a.dk; ++i)
      s0 = hn::MulAdd(hn::Load(d, qt + i * N), hn::Set(d, kj[i]), s0);
    CLONE_FINISH(j, s0);
  }
#undef CLONE_FINISH

  // Softmax down each lane (every lane sees key 0, so its max is finite).
  auto vsum = hn::Zero(d);
  for (j = 0; j < len; ++j) {
    const auto e = hn::Exp(d, hn::Sub(hn::Load(d, s + j * N), vmax));
    vsum = hn::Add(vsum, e);
    hn::Store(e, d, s + j * N);
  }
  hn::Store(hn::Div(hn::Set(d, 1.0f), vsum), d, tmp);  // 1 / sum per lane

  // Weighted values: Ot[i] for eight dimensions at a time, then scattered to the rows.
  float* ot = tmp + N;  // [N], one dimension's outputs at a time
  const auto write = [&](int64_t i, hn::Vec<D> acc) {
    hn::Store(hn::Mul(acc, hn::Load(d, tmp)), d, ot);
    for (int64_t r = 0; r < nr; ++r) {
      const int64_t t = (r0 + r) / group, h = hk * group + (r0 + r) % group;
      a.out[(t * a.n_head + h) * a.dv + i] = ot[r];
    }
  };
  int64_t i = 0;
  for (; i + 8 <= a.dv; i += 8) {
    auto o0 = hn::Zero(d), o1 = hn::Zero(d), o2 = hn::Zero(d), o3 = hn::Zero(d);
    auto o4 = hn::Zero(d), o5 = hn::Zero(d), o6 = hn::Zero(d), o7 = hn::Zero(d);
    for (j = 0; j < len; ++j) {
      const auto p = hn::Load(d, s + j * N);
      const float* vj = vh + j * vstride + i;
      o0 = hn::MulAdd(p, hn::Set(d, vj[0]), o0);
      o1 = hn::MulAdd(p, hn::Set(d, vj[1]), o1);
      o2 = hn::MulAdd(p, hn::Set(d, vj[2]), o2);
      o3 = hn::MulAdd(p, hn::Set(d, vj[3]), o3);
      o4 = hn::MulAdd(p, hn::Set(d, vj[4]), o4);
      o5 = hn::MulAdd(p, hn::Set(d, vj[5]), o5);
      o6 = hn::MulAdd(p, hn::Set(d, vj[6]), o6);
      o7 = hn::MulAdd(p, hn::Set(d, vj[7]), o7);
    }
    write(i, o0);
    write(i + 1, o1);
    write(i + 2, o2);
    write(i + 3, o3);
    write(i + 4, o4);
    write(i + 5, o5);
    write(i + 6, o6);
    write(i + 7, o7);
  }
  for (; i < a.dv; ++i) {
    auto o = hn::Zero(d);
    for (j = 0; j < len; ++j)
      o = hn::MulAdd(hn::Load(d, s + j * N), hn::Set(d, vh[j * vstride + i]), o);
    write(i, o);
  }
}

template <class D>
void AttendAll(D d, const AttnArgs& a, ThreadPool* pool) {
  const int64_t group = a.n_head / a.n_head_kv, rows = a.n * group;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t blocks = (rows + N - 1) / N, units = blocks * a.n_head_kv;
  const auto work = [&](int64_t u0, int64_t u1) {
    for (int64_t i = u0; i < u1; ++i) {
      const int64_t u = units - 1 - i;  // latest rows (longest causal spans) first
      AttendBlock(d, a, u % a.n_head_kv, (u / a.n_head_kv) * N);
    }
  };
  if (pool == nullptr || pool->size() == 1 || units == 1) {
    work(0, units);
  } else {
    pool->parallel_for(units, 1, work);
  }
}

#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
// For few rows per KV head (decode with small GQA groups, or none), lanes-as-rows would
// leave most lanes idle. Then each row goes alone with the head dimension in the lanes:
// a block of N keys yields N partial-sum vectors, summed across lanes all at once by a
// tree of ConcatEven/ConcatOdd adds (N - 1 pair steps, not N horizontal sums).
// (Vectors in arrays: not for SVE, whose vectors are sizeless; SVE takes the other path.)
// p[0..n) -> p[0..n/2): lane pairs of p[2i] and p[2i+1] added, p[2i]'s in the lower half.
template <size_t n, class D>
HWY_INLINE void SumLevel(D d, hn::Vec<D>* p) {
#pragma GCC unroll 16
  for (size_t i = 0; i < n / 2; ++i)
    p[i] = hn::Add(hn::ConcatEven(d, p[2 * i + 1], p[2 * i]),
                   hn::ConcatOdd(d, p[2 * i + 1], p[2 * i]));
  if constexpr (n / 2 > 1) SumLevel<n / 2>(d, p);
}

// Scores of one row against keys [j0, j0 + nk) (nk <= N), as one vector (lane k: key j0+k).
template <class D>
HWY_INLINE hn::Vec<D> ScoreBlock(D d, const float* HWY_RESTRICT q, const float* HWY_RESTRICT kb,
                                 int64_t kstride, int64_t nk, int64_t dk) {
  constexpr size_t N = hn::MaxLanes(D());
  hn::Vec<D> p[N];
#pragma GCC unroll 16
  for (size_t k = 0; k < N; ++k) p[k] = hn::Zero(d);
  if (nk == static_cast<int64_t>(N)) {
    for (int64_t c = 0; c < dk; c += static_cast<int64_t>(N)) {
      const auto qc = hn::LoadU(d, q + c);
#pragma GCC unroll 16
      for (size_t k = 0; k < N; ++k)
        p[k] = hn::MulAdd(qc, hn::LoadU(d, kb + static_cast<int64_t>(k) * kstride + c), p[k]);
    }
  } else {
    for (int64_t c = 0; c < dk; c += static_cast<int64_t>(N)) {
      const auto qc = hn::LoadU(d, q + c);
#pragma GCC unroll 16
      for (size_t k = 0; k < N; ++k)
        if (static_cast<int64_t>(k) < nk)
          p[k] = hn::MulAdd(qc, hn::LoadU(d, kb + static_cast<int64_t>(k) * kstride + c), p[k]);
    }
  }
  SumLevel<N>(d, p);
  return p[0];
}

template <class D>
void AttendRow(D d, const AttnArgs& a, int64_t t, int64_t h) {
  constexpr int64_t N = static_cast<int64_t>(hn::MaxLanes(D()));
  const int64_t group = a.n_head / a.n_head_kv, hk = h / group;
  const int64_t len = a.pos0 + t + 1, len_pad = (len + N - 1) / N * N;
  const int64_t kstride = a.n_head_kv * a.dk, vstride = a.n_head_kv * a.dv;
  const float* q = a.q + (t * a.n_head + h) * a.dk;
  const float* kh = a.k + hk * a.dk;
  const float* vh = a.v + hk * a.dv;
  float* s =
      detail::scratch_as<float>(detail::ScratchSlot::kAttention, static_cast<size_t>(len_pad));

  const auto scale = hn::Set(d, 1.0f / std::sqrt(static_cast<float>(a.dk)));
  const auto iota = hn::Iota(d, 0.0f), neg_inf = hn::Set(d, -INFINITY);
  const auto vlen = hn::Set(d, static_cast<float>(len));
  auto vmax = neg_inf;
  for (int64_t j0 = 0; j0 < len; j0 += N) {
    const int64_t nk = len - j0 < N ? len - j0 : N;
    auto sc = hn::Mul(ScoreBlock(d, q, kh + j0 * kstride, kstride, nk, a.dk), scale);
    sc = hn::IfThenElse(hn::Lt(hn::Add(iota, hn::Set(d, static_cast<float>(j0))), vlen), sc,
                        neg_inf);
    hn::Store(sc, d, s + j0);
    vmax = hn::Max(vmax, sc);
  }
  const auto mx = hn::Set(d, hn::GetLane(hn::MaxOfLanes(d, vmax)));
  auto vsum = hn::Zero(d);
  for (int64_t j = 0; j < len_pad; j += N) {
    const auto e = hn::Exp(d, hn::Sub(hn::Load(d, s + j), mx));
    vsum = hn::Add(vsum, e);
    hn::Store(e, d, s + j);
  }
  const auto inv = hn::Set(d, 1.0f / hn::GetLane(hn::SumOfLanes(d, vsum)));

  // Values, two vectors of output dimensions at a time (each weight broadcast serves both;
  // V's rows for this head stay in L2 across the passes).
  float* out = a.out + (t * a.n_head + h) * a.dv;
  int64_t c = 0;
  for (; c + 2 * N <= a.dv; c += 2 * N) {
    auto o0 = hn::Zero(d), o1 = hn::Zero(d), o2 = hn::Zero(d), o3 = hn::Zero(d);
    const float* vc = vh + c;
    int64_t j = 0;
    for (; j + 2 <= len; j += 2) {
      const auto p0 = hn::Set(d, s[j]), p1 = hn::Set(d, s[j + 1]);
      const float* v0 = vc + j * vstride;
      o0 = hn::MulAdd(p0, hn::LoadU(d, v0), o0);
      o1 = hn::MulAdd(p0, hn::LoadU(d, v0 + N), o1);
      o2 = hn::MulAdd(p1, hn::LoadU(d, v0 + vstride), o2);
      o3 = hn::MulAdd(p1, hn::LoadU(d, v0 + vstride + N), o3);
    }
    if (j < len) {
      const auto p0 = hn::Set(d, s[j]);
      o0 = hn::MulAdd(p0, hn::LoadU(d, vc + j * vstride), o0);
      o1 = hn::MulAdd(p0, hn::LoadU(d, vc + j * vstride + N), o1);
    }
    hn::StoreU(hn::Mul(hn::Add(o0, o2), inv), d, out + c);
    hn::StoreU(hn::Mul(hn::Add(o1, o3), inv), d, out + c + N);
  }
  for (; c < a.dv; c += N) {
    auto o0 = hn::Zero(d), o1 = hn::Zero(d);
    const float* vc = vh + c;
    int64_t j = 0;
    for (; j + 2 <= len; j += 2) {
      o0 = hn::MulAdd(hn::Set(d, s[j]), hn::LoadU(d, vc + j * vstride), o0);
      o1 = hn::MulAdd(hn::Set(d, s[j + 1]), hn::LoadU(d, vc + (j + 1) * vstride), o1);
    }
    if (j < len) o0 = hn::MulAdd(hn::Set(d, s[j]), hn::LoadU(d, vc + j * vstride), o0);
    hn::StoreU(hn::Mul(hn::Add(o0, o1), inv), d, out + c);
  }
}
#endif

void AttentionHere(const AttnArgs& a, ThreadPool* pool) {
  const int64_t rows = a.n * (a.n_head / a.n_head_kv);
#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
  {
    const hn::CappedTag<float, 16> d;
    const int64_t N = static_cast<int64_t>(hn::Lanes(d));
    if (rows <= 4 && N == static_cast<int64_t>(hn::MaxLanes(d)) && a.dk % N == 0 && a.dv % N == 0) {
      const int64_t units = a.n * a.n_head;  // one (token, query head) each
      const auto work = [&](int64_t u0, int64_t u1) {
        for (int64_t u = u0; u < u1; ++u) AttendRow(d, a, u / a.n_head, u % a.n_head);
      };
      if (pool == nullptr || pool->size() == 1 || units == 1) {
        work(0, units);
      } else {
        pool->parallel_for(units, 1, work);
      }
      return;
    }
  }
#endif
  // Blocks as wide as a vector, but no wider than the rows there are: one decode token of
  // an 8-head group fills 8 lanes (on AVX-512 a 256-bit vector does as much work per cycle
  // as a half-empty 512-bit one).
  if (rows <= 4) return AttendAll(hn::CappedTag<float, 4>(), a, pool);
  if (rows <= 8) return AttendAll(hn::CappedTag<float, 8>(), a, pool);
  return AttendAll(hn::CappedTag<float, 16>(), a, pool);
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
