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
// T tokens (1 to 4; token u's x at x + u * K): out[u * kR + v0 * N ..] = sum over k of
// w[k][row] * x_u[k]. 4 x T accumulators, named (see hwy_util-inl.h).
template <typename WT, int T>
HWY_INLINE void Slice(const WT* HWY_RESTRICT panel, int64_t K, const float* HWY_RESTRICT x,
                      int64_t v0, float* HWY_RESTRICT out) {
  const DP d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
#define CLONE_ACC(u) \
  auto a##u##0 = hn::Zero(d), a##u##1 = hn::Zero(d), a##u##2 = hn::Zero(d), a##u##3 = hn::Zero(d);
  CLONE_ACC(0)
  CLONE_ACC(1)
  CLONE_ACC(2)
  CLONE_ACC(3)
#undef CLONE_ACC
  constexpr int64_t kLineValues = 64 / static_cast<int64_t>(sizeof(WT));
  const WT* p = panel + v0 * N;
  for (int64_t k = 0; k < K; ++k, p += kR) {
    if (v0 == 0) {  // one prefetch per line of the whole panel row, kAheadBytes ahead
      const auto* line = reinterpret_cast<const uint8_t*>(panel + k * kR) + kAheadBytes;
      for (int64_t j = 0; j < kR / kLineValues; ++j) hwy::Prefetch(line + 64 * j);
    }
    const auto w0 = LoadP(d, p), w1 = LoadP(d, p + N), w2 = LoadP(d, p + 2 * N),
               w3 = LoadP(d, p + 3 * N);
#define CLONE_TOKEN(u)                        \
  if constexpr (T > u) {                      \
    const auto xu = hn::Set(d, x[u * K + k]); \
    a##u##0 = hn::MulAdd(w0, xu, a##u##0);    \
    a##u##1 = hn::MulAdd(w1, xu, a##u##1);    \
    a##u##2 = hn::MulAdd(w2, xu, a##u##2);    \
    a##u##3 = hn::MulAdd(w3, xu, a##u##3);    \
  }
    CLONE_TOKEN(0)
    CLONE_TOKEN(1)
    CLONE_TOKEN(2)
    CLONE_TOKEN(3)
#undef CLONE_TOKEN
  }
#define CLONE_STORE(u)                 \
  if constexpr (T > u) {               \
    float* o = out + u * kR + v0 * N;  \
    hn::StoreU(a##u##0, d, o);         \
    hn::StoreU(a##u##1, d, o + N);     \
    hn::StoreU(a##u##2, d, o + 2 * N); \
    hn::StoreU(a##u##3, d, o + 3 * N); \
  }
  CLONE_STORE(0)
  CLONE_STORE(1)
  CLONE_STORE(2)
  CLONE_STORE(3)
#undef CLONE_STORE
}

// Panels [g0, g1) against all a.n tokens, up to four tokens per pass over a panel.
template <typename WT>
void PanelGroups(const PackedArgs& a, int64_t g0, int64_t g1) {
  const Matrix& w = *a.w;
  const int64_t K = w.cols;
  const DP d;
  const int64_t V = kR / static_cast<int64_t>(hn::Lanes(d));
  const auto* base = reinterpret_cast<const WT*>(w.packed->data());
  HWY_ALIGN float out[4 * kR];
  for (int64_t g = g0; g < g1; ++g) {
    const WT* panel = base + g * K * kR;
    const int64_t rows = w.rows - g * kR < kR ? w.rows - g * kR : kR;
    for (int64_t t = 0; t < a.n; t += 4) {
      const int64_t T = a.n - t < 4 ? a.n - t : 4;
      const float* x = a.x + t * K;
      for (int64_t v0 = 0; v0 < V; v0 += 4) {
        switch (T) {
          case 1:
            Slice<WT, 1>(panel, K, x, v0, out);
            break;
          case 2:
            Slice<WT, 2>(panel, K, x, v0, out);
            break;
          case 3:
            Slice<WT, 3>(panel, K, x, v0, out);
            break;
          default:
            Slice<WT, 4>(panel, K, x, v0, out);
        }
      }
      for (int64_t u = 0; u < T; ++u) {
        const float* o = out + u * kR;
        float* y = a.y + (t + u) * a.ldy + g * kR;
        for (int64_t r = 0; r < rows; ++r)
          y[r] = a.accumulate ? y[r] + a.scale * o[r] : a.scale * o[r];
      }
    }
  }
}

detail::PackedKernel PanelKernelHere(int layout) {
  // Up to this many tokens here, more through the GEMM. bench_kernels BM_Prefill (f16_packed,
  // f32_packed; 2048 x 2048, 2 threads, Zen 5 VM), GFLOP/s here / GEMM: F16 at 16 tokens
  // 411-428 / 310-334, at 64 426-438 / 387-425; F32 at 16 386-413 / 391-453, at 64 a tie.
  // A panel is re-read from L2 for every 4 tokens, so the GEMM wins once it no longer fits
  // (F32 with K = 5632, 1.4 MiB: 250-280 / 430-440 at 512 tokens).
  if (layout == detail::kF32x64)
    return {nullptr, nullptr, PanelGroups<float>, "f32x64 panels", kR, 16};
  if (layout == detail::kF16x64)
    return {nullptr, nullptr, PanelGroups<uint16_t>, "f16x64 panels", kR, 64};
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
