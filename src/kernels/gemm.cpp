// Blocked F32 GEMM (see gemm.h), the classic three-level scheme:
//   for each block of NC columns of op(B)  (per thread: threads split the columns)
//     for each block of KC of the inner dimension
//       pack op(B)[KC, NC] into micro-panels [KC][NR]    (dequantizing weights here, once)
//       for each micro-panel of MR rows of op(A)            (packed once up front: [KC][MR])
//         for each micro-panel of op(B): an MR x NR register tile accumulates over KC.
// op(A) is packed once per call into a buffer all threads share; for matmul that is the
// activations, so each thread dequantizes only its own weight rows and reuses them across
// every token.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/gemm.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "kernels/gemm.h"
#include "kernels/hwy_util-inl.h"
#include "kernels/quant-inl.h"
#include "kernels/scratch.h"

HWY_BEFORE_NAMESPACE();
namespace cln::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using detail::GemmArgs;
using detail::ScratchSlot;

// Register tile: MR rows of op(A) (broadcast) x NV vectors of op(B) columns. 16-register
// x86 targets hold 4 x 3 accumulators; targets with 32 registers hold 6 x 4.
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3
constexpr int kMR = 4, kNV = 3;
#else
constexpr int kMR = 6, kNV = 4;
#endif
constexpr int64_t kKC = 256;  // inner-dimension block; a multiple of the 32-value quant block
constexpr int64_t kNC = 512;  // op(B) columns packed at a time: KC x NC floats = 512 KiB

using DF = hn::ScalableTag<float>;

// Writes one accumulator vector to C[0 .. count) (count <= Lanes): the first K block
// combines with beta * C (C unread when beta == 0), later blocks add.
HWY_INLINE void Update(DF df, hn::Vec<DF> acc, float* HWY_RESTRICT c, int64_t count, bool first,
                       float alpha, float beta) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  if (count <= 0) return;
  const auto va = hn::Set(df, alpha);
  if (count >= N) {
    hn::Vec<DF> r;
    if (!first) {
      r = hn::MulAdd(va, acc, hn::LoadU(df, c));
    } else if (beta == 0.0f) {
      r = hn::Mul(va, acc);
    } else {
      r = hn::MulAdd(va, acc, hn::Mul(hn::Set(df, beta), hn::LoadU(df, c)));
    }
    hn::StoreU(r, df, c);
    return;
  }
  // A partial vector at the right edge of C: scalar, so nothing past the edge is touched
  // (masked loads/stores are emulated with whole-vector accesses on some targets).
  HWY_ALIGN float lanes[hn::MaxLanes(df)];
  hn::Store(acc, df, lanes);
  for (int64_t j = 0; j < count; ++j) {
    const float v = alpha * lanes[j];
    c[j] = !first ? c[j] + v : (beta == 0.0f ? v : v + beta * c[j]);
  }
}

// The micro-kernel: C[MR, nvalid] (+)= alpha * Ap[kc][kMR]^T . Bp[kc][nr_stride], using the
// first NV vectors of each packed B row. Accumulators are named locals (see hwy_util-inl.h).
template <int MR, int NV>
HWY_NOINLINE void Tile(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b, int64_t kc,
                       int64_t nr_stride, float* HWY_RESTRICT c, int64_t ldc, int64_t nvalid,
                       bool first, float alpha, float beta) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
#define CLONE_ACC(i)                                                           \
  auto c##i##0 = hn::Zero(df), c##i##1 = hn::Zero(df), c##i##2 = hn::Zero(df), \
       c##i##3 = hn::Zero(df);
  CLONE_ACC(0)
  CLONE_ACC(1)
  CLONE_ACC(2)
  CLONE_ACC(3)
  CLONE_ACC(4)
  CLONE_ACC(5)
#undef CLONE_ACC
  for (int64_t k = 0; k < kc; ++k, a += kMR, b += nr_stride) {
    const auto b0 = hn::Load(df, b);
    const auto b1 = NV > 1 ? hn::Load(df, b + N) : b0;
    const auto b2 = NV > 2 ? hn::Load(df, b + 2 * N) : b0;
    const auto b3 = NV > 3 ? hn::Load(df, b + 3 * N) : b0;
#define CLONE_ROW(i)                                             \
  if constexpr (MR > i) {                                        \
    const auto av = hn::Set(df, a[i]);                           \
    c##i##0 = hn::MulAdd(av, b0, c##i##0);                       \
    if constexpr (NV > 1) c##i##1 = hn::MulAdd(av, b1, c##i##1); \
    if constexpr (NV > 2) c##i##2 = hn::MulAdd(av, b2, c##i##2); \
    if constexpr (NV > 3) c##i##3 = hn::MulAdd(av, b3, c##i##3); \
  }
    CLONE_ROW(0)
    CLONE_ROW(1)
    CLONE_ROW(2)
    CLONE_ROW(3)
    CLONE_ROW(4)
    CLONE_ROW(5)
#undef CLONE_ROW
  }
#define CLONE_STORE(i)                                                                         \
  if constexpr (MR > i) {                                                                      \
    float* ci = c + i * ldc;                                                                   \
    Update(df, c##i##0, ci, nvalid, first, alpha, beta);                                       \
    if constexpr (NV > 1) Update(df, c##i##1, ci + N, nvalid - N, first, alpha, beta);         \
    if constexpr (NV > 2) Update(df, c##i##2, ci + 2 * N, nvalid - 2 * N, first, alpha, beta); \
    if constexpr (NV > 3) Update(df, c##i##3, ci + 3 * N, nvalid - 3 * N, first, alpha, beta); \
  }
  CLONE_STORE(0)
  CLONE_STORE(1)
  CLONE_STORE(2)
  CLONE_STORE(3)
  CLONE_STORE(4)
  CLONE_STORE(5)
#undef CLONE_STORE
}

using TileFn = void (*)(const float*, const float*, int64_t, int64_t, float*, int64_t, int64_t,
                        bool, float, float);

template <int MR>
constexpr TileFn TileFor(int nv) {
  return nv >= 4 ? Tile < MR, kNV >= 4 ? 4 : kNV > : nv == 3 ? Tile < MR,
         kNV >= 3 ? 3 : kNV >
     : nv == 2 ? Tile<MR, 2>
               : Tile<MR, 1>;
}

HWY_INLINE TileFn PickTile(int mr, int nv) {
  switch (mr) {
    case 1:
      return TileFor<1>(nv);
    case 2:
      return TileFor<2>(nv);
    case 3:
      return TileFor<3>(nv);
    case 4:
      return TileFor<4>(nv);
    case 5:
      return TileFor < kMR >= 5 ? 5 : kMR > (nv);
    default:
      return TileFor<kMR>(nv);
  }
}

// Packs op(A) rows of micro-panels [p0, p1) for every K block: block starting at pc holds,
// for micro-panel p, kc x kMR floats at ap + pc * m_pad + p * kc * kMR. Rows past M are 0.
void PackA(const GemmArgs& g, float* HWY_RESTRICT ap, int64_t m_pad, int64_t p0, int64_t p1) {
  for (int64_t pc = 0; pc < g.K; pc += kKC) {
    const int64_t kc = g.K - pc < kKC ? g.K - pc : kKC;
    for (int64_t p = p0; p < p1; ++p) {
      float* dst = ap + pc * m_pad + p * kc * kMR;
      for (int i = 0; i < kMR; ++i) {
        const int64_t row = p * kMR + i;
        if (row >= g.M) {
          for (int64_t k = 0; k < kc; ++k) dst[k * kMR + i] = 0.0f;
        } else if (!g.trans_a) {
          const float* src = g.A + row * g.lda + pc;
          for (int64_t k = 0; k < kc; ++k) dst[k * kMR + i] = src[k];
        } else {
          const float* src = g.A + pc * g.lda + row;
          for (int64_t k = 0; k < kc; ++k) dst[k * kMR + i] = src[k * g.lda];
        }
      }
    }
  }
}

// One row of the weights, columns [pc, pc + kc), as F32 (pc and kc are whole blocks).
HWY_INLINE const float* WeightRow(const Matrix& w, int64_t row, int64_t pc, int64_t kc,
                                  float* tmp) {
  const size_t rb = dtype_row_bytes(w.type, w.cols);
  const uint8_t* p = static_cast<const uint8_t*>(w.data) + static_cast<size_t>(row) * rb;
  switch (w.type) {
    case DType::F32:
      return reinterpret_cast<const float*>(p) + pc;
    case DType::F16:
      DequantizeF16(reinterpret_cast<const uint16_t*>(p) + pc, tmp, kc);
      break;
    case DType::Q8_0:
      DequantizeQ8_0(reinterpret_cast<const BlockQ8_0*>(p) + pc / kQK, tmp, kc);
      break;
    case DType::Q4_0:
      DequantizeQ4_0(reinterpret_cast<const BlockQ4_0*>(p) + pc / kQK, tmp, kc);
      break;
  }
  return tmp;
}

// Packs op(B)[pc .. pc + kc, j0 .. j0 + nc) into micro-panels of nr columns: panel q holds
// kc x nr floats at bp + q * kc * nr. Columns past N are 0.
void PackB(const GemmArgs& g, int64_t pc, int64_t kc, int64_t j0, int64_t nc, int64_t nr,
           float* HWY_RESTRICT bp, float* HWY_RESTRICT tmp) {
  for (int64_t jr = 0; jr < nc; jr += nr) {
    float* dst = bp + (jr / nr) * kc * nr;
    if (g.w == nullptr && !g.trans_b) {
      for (int64_t k = 0; k < kc; ++k) {
        const float* src = g.B + (pc + k) * g.ldb + j0 + jr;
        for (int64_t j = 0; j < nr; ++j) dst[k * nr + j] = (j0 + jr + j < g.N) ? src[j] : 0.0f;
      }
      continue;
    }
    // Columns of op(B) are rows of B (or of the weights): transpose them eight at a time
    // in 8x8 blocks (the rows of a group sit at one stride: B's, the weights', or the
    // dequantized copies' in tmp).
    for (int64_t jb = 0; jb < nr; jb += 8) {
      const int64_t col0 = j0 + jr + jb;
      const int64_t width = nr - jb < 8 ? nr - jb : 8;  // columns of the panel in this group
      const int64_t cols = g.N - col0 < width ? (g.N - col0 > 0 ? g.N - col0 : 0) : width;
      const float* src = nullptr;
      int64_t ss = 0;
      if (cols > 0 && g.w == nullptr) {
        src = g.B + col0 * g.ldb + pc;
        ss = g.ldb;
      } else if (cols > 0 && g.w->type == DType::F32) {
        src = WeightRow(*g.w, col0, pc, kc, tmp);
        ss = g.w->cols;
      } else if (cols > 0) {
        for (int64_t j = 0; j < cols; ++j) WeightRow(*g.w, col0 + j, pc, kc, tmp + j * kKC);
        src = tmp;
        ss = kKC;
      }
      int64_t k = 0;
      if (cols == 8)
        for (; k + 8 <= kc; k += 8) Transpose8x8(src + k, ss, dst + k * nr + jb, nr);
      for (; k < kc; ++k)
        for (int64_t j = 0; j < width; ++j)
          dst[k * nr + jb + j] = j < cols ? src[j * ss + k] : 0.0f;
    }
  }
}

// C rows [i0, i1) (multiples of kMR but the last), columns [j0, j1), all of K.
void Compute(const GemmArgs& g, const float* ap, int64_t m_pad, int64_t i0, int64_t i1, int64_t j0,
             int64_t j1) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df)), nr = kNV * N;
  const int64_t nc_max = (kNC + nr - 1) / nr * nr;
  float* bp = detail::scratch_as<float>(ScratchSlot::kPackedB, static_cast<size_t>(kKC * nc_max));
  float* tmp = detail::scratch_as<float>(ScratchSlot::kRowTemp, static_cast<size_t>(8 * kKC));
  for (int64_t jc = j0; jc < j1; jc += nc_max) {
    const int64_t nc = j1 - jc < nc_max ? j1 - jc : nc_max;
    for (int64_t pc = 0; pc < g.K; pc += kKC) {
      const int64_t kc = g.K - pc < kKC ? g.K - pc : kKC;
      PackB(g, pc, kc, jc, nc, nr, bp, tmp);
      for (int64_t i = i0; i < i1; i += kMR) {
        const int mr = static_cast<int>(i1 - i < kMR ? i1 - i : kMR);
        const float* a = ap + pc * m_pad + (i / kMR) * kc * kMR;
        for (int64_t jr = 0; jr < nc; jr += nr) {
          const int64_t nvalid = nc - jr < nr ? nc - jr : nr;
          const int nv = static_cast<int>((nvalid + N - 1) / N);
          PickTile(mr, nv)(a, bp + (jr / nr) * kc * nr, kc, nr, g.C + i * g.ldc + jc + jr, g.ldc,
                           nvalid, pc == 0, g.alpha, g.beta);
        }
      }
    }
  }
}

void GemmHere(const GemmArgs& g, ThreadPool* pool) {
  const DF df;
  const int64_t nr = kNV * static_cast<int64_t>(hn::Lanes(df));
  const int64_t panels = (g.M + kMR - 1) / kMR, m_pad = panels * kMR;
  float* ap = detail::scratch_as<float>(ScratchSlot::kPackedA, static_cast<size_t>(m_pad * g.K));
  const int nth = pool != nullptr ? pool->size() : 1;
  // Chunks of the columns of op(B) (each packs only its own columns) unless there are too
  // few; then chunks of the rows of op(A), each packing all of op(B).
  const bool split_n = g.N >= 2 * nr * nth || panels < nth;
  if (nth == 1) {
    PackA(g, ap, m_pad, 0, panels);
    Compute(g, ap, m_pad, 0, g.M, 0, g.N);
    return;
  }
  pool->parallel_for(panels, 1, [&](int64_t b, int64_t e) { PackA(g, ap, m_pad, b, e); });
  if (split_n) {
    pool->parallel_for(g.N, nr, [&](int64_t b, int64_t e) { Compute(g, ap, m_pad, 0, g.M, b, e); });
  } else {
    pool->parallel_for(panels, 1, [&](int64_t b, int64_t e) {
      Compute(g, ap, m_pad, b * kMR, e * kMR < g.M ? e * kMR : g.M, 0, g.N);
    });
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace cln::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace cln::kernels {
HWY_EXPORT(GemmHere);

void detail::gemm(const GemmArgs& g, ThreadPool* pool) {
  if (g.M <= 0 || g.N <= 0) return;
  if (g.K <= 0) {  // nothing to multiply: C = beta * C
    for (int64_t i = 0; i < g.M; ++i)
      for (int64_t j = 0; j < g.N; ++j) {
        float& c = g.C[i * g.ldc + j];
        c = g.beta == 0.0f ? 0.0f : g.beta * c;
      }
    return;
  }
  HWY_DYNAMIC_DISPATCH(GemmHere)(g, pool);
}

}  // namespace cln::kernels
#endif  // HWY_ONCE
