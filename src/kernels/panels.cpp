// The few-token kernel of the F32 / F16 column panels (packed.h: 64 rows stored column by
// column). Each step of k broadcasts x[k] once and multiplies it into 64 rows' weights, so
// the outputs build up lane by lane with no horizontal sums, and a panel is one contiguous
// stream (prefetched a fixed distance ahead, as the row loops of matvec.cpp on CPUs whose
// hardware prefetcher alone falls short). Many tokens go to the GEMM (gemm.cpp), which
// reads the same panels as its B micro-panels.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/panels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kernels/hwy_util-inl.h"
#include "kernels/packed.h"

HWY_BEFORE_NAMESPACE();
namespace cln::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using detail::PackedArgs;

// At most 16 lanes, so a panel row (64 values) is a whole number of vectors, 4 or more.
using DP = hn::CappedTag<float, 16>;
constexpr int64_t kR = detail::kPanelRows;
constexpr int64_t kAheadBytes = 2048;  // as matvec.cpp's kPrefetchBytes (measured there)

HWY_INLINE hn::Vec<DP> LoadP(DP d, const float* HWY_RESTRICT p) {
  return hn::LoadU(d, p);
}
HWY_INLINE hn::Vec<DP> LoadP(DP d, const uint16_t* HWY_RESTRICT p) {
  return LoadHalfAsF32(d, p);
}

// Vectors [v0, v0 + 4) of each panel row (rows v0 * N .. (v0 + 4) * N of the panel) against
// T tokens (1 or 2): out_t[v0 * N ..] = sum over k of w[k][row] * x_t[k].
template <typename WT, int T>
HWY_INLINE void Slice(const WT* HWY_RESTRICT panel, int64_t K, const float* HWY_RESTRICT x0,
                      const float* HWY_RESTRICT x1, int64_t v0, float* HWY_RESTRICT out0,
                      float* HWY_RESTRICT out1) {
  const DP d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  auto a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  auto b0 = hn::Zero(d), b1 = hn::Zero(d), b2 = hn::Zero(d), b3 = hn::Zero(d);
  constexpr int64_t kLineValues = 64 / static_cast<int64_t>(sizeof(WT));
  const WT* p = panel + v0 * N;
  for (int64_t k = 0; k < K; ++k, p += kR) {
    if (v0 == 0) {  // one prefetch per line of the whole panel row, kAheadBytes ahead
      const auto* line = reinterpret_cast<const uint8_t*>(panel + k * kR) + kAheadBytes;
      for (int64_t j = 0; j < kR / kLineValues; ++j) hwy::Prefetch(line + 64 * j);
    }
    const auto w0 = LoadP(d, p), w1 = LoadP(d, p + N), w2 = LoadP(d, p + 2 * N),
               w3 = LoadP(d, p + 3 * N);
    const auto xa = hn::Set(d, x0[k]);
    a0 = hn::MulAdd(w0, xa, a0);
    a1 = hn::MulAdd(w1, xa, a1);
    a2 = hn::MulAdd(w2, xa, a2);
    a3 = hn::MulAdd(w3, xa, a3);
    if constexpr (T == 2) {
      const auto xb = hn::Set(d, x1[k]);
      b0 = hn::MulAdd(w0, xb, b0);
      b1 = hn::MulAdd(w1, xb, b1);
      b2 = hn::MulAdd(w2, xb, b2);
      b3 = hn::MulAdd(w3, xb, b3);
    }
  }
  float* o = out0 + v0 * N;
  hn::StoreU(a0, d, o);
  hn::StoreU(a1, d, o + N);
  hn::StoreU(a2, d, o + 2 * N);
  hn::StoreU(a3, d, o + 3 * N);
  if constexpr (T == 2) {
    o = out1 + v0 * N;
    hn::StoreU(b0, d, o);
    hn::StoreU(b1, d, o + N);
    hn::StoreU(b2, d, o + 2 * N);
    hn::StoreU(b3, d, o + 3 * N);
  }
}

// Panels [g0, g1) against all a.n tokens, two tokens per pass over a panel.
template <typename WT>
void PanelGroups(const PackedArgs& a, int64_t g0, int64_t g1) {
  const Matrix& w = *a.w;
  const int64_t K = w.cols;
  const DP d;
  const int64_t V = kR / static_cast<int64_t>(hn::Lanes(d));
  const auto* base = reinterpret_cast<const WT*>(w.packed->data());
  HWY_ALIGN float o0[kR], o1[kR];
  for (int64_t g = g0; g < g1; ++g) {
    const WT* panel = base + g * K * kR;
    const int64_t rows = w.rows - g * kR < kR ? w.rows - g * kR : kR;
    for (int64_t t = 0; t < a.n; t += 2) {
      const bool two = t + 1 < a.n;
      const float* x0 = a.x + t * K;
      for (int64_t v0 = 0; v0 < V; v0 += 4) {
        if (two) {
          Slice<WT, 2>(panel, K, x0, x0 + K, v0, o0, o1);
        } else {
          Slice<WT, 1>(panel, K, x0, x0, v0, o0, o1);
        }
      }
      for (int u = 0; u < (two ? 2 : 1); ++u) {
        const float* o = u == 0 ? o0 : o1;
        float* y = a.y + (t + u) * a.ldy + g * kR;
        for (int64_t r = 0; r < rows; ++r)
          y[r] = a.accumulate ? y[r] + a.scale * o[r] : a.scale * o[r];
      }
    }
  }
}

size_t PanelsNoPrepare(int64_t) {
  return 0;
}

detail::PackedKernel PanelKernelHere(int layout) {
  // Up to this many tokens here, more through the GEMM (bench_kernels BM_Prefill's n sweep
  // on packed weights).
  if (layout == detail::kF32x64)
    return {PanelsNoPrepare, nullptr, PanelGroups<float>, "f32x64 panels", kR, 4};
  if (layout == detail::kF16x64)
    return {PanelsNoPrepare, nullptr, PanelGroups<uint16_t>, "f16x64 panels", kR, 8};
  return {};
}

}  // namespace HWY_NAMESPACE
}  // namespace cln::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace cln::kernels {
HWY_EXPORT(PanelKernelHere);
detail::PackedKernel detail::panel_kernel(int layout) {
  return HWY_DYNAMIC_DISPATCH(PanelKernelHere)(layout);
}
}  // namespace cln::kernels
#endif  // HWY_ONCE
