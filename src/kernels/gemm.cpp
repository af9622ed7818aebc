// Blocked F32 GEMM (see gemm.h), the classic three-level scheme:
//   for each block of NC columns of op(B)  (per thread: threads split the columns)
//     for each block of KC of the inner dimension
//       pack op(B)[KC, NC] into micro-panels [KC][NR]    (dequantizing weights here, once)
//       for each micro-panel of MR rows of op(A)            (transposed A: packed up front)
//         for each micro-panel of op(B): an MR x NR register tile accumulates over KC.
// For matmul, op(A) is the activations, read in place from their rows (a row-major A needs
// no packing: the tile broadcasts one value per row); a transposed A (training) is packed
// once per call into a buffer all threads share. Each thread converts only its own weight
// rows and reuses them across every token. Weights packed at load in column panels
// (packed.h) already are B micro-panels over the whole K: F32 ones are read in place, F16
// ones converted in one streaming pass per block, with no transposing.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/gemm.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <cstring>

#include "hwy/highway.h"
#include "kernels/gemm.h"
#include "kernels/hwy_util-inl.h"
#include "kernels/packed.h"
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

// The micro-kernel: C[MR, nvalid] (+)= alpha * A[MR, kc] . Bp[kc][nr_stride], using the
// first NV vectors of each B row. A is a packed micro-panel (a[k * kMR + i]) or, when kRowsA,
// MR rows of lda floats (a[i * lda + k]). Accumulators are named locals (see hwy_util-inl.h).
template <int MR, int NV, bool kRowsA>
HWY_NOINLINE void Tile(const float* HWY_RESTRICT a, int64_t lda, const float* HWY_RESTRICT b,
                       int64_t kc, int64_t nr_stride, float* HWY_RESTRICT c, int64_t ldc,
                       int64_t nvalid, bool first, float alpha, float beta) {
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
  const float* HWY_RESTRICT ar[6];
  for (int i = 0; i < 6; ++i) ar[i] = a + (kRowsA && i < MR ? i * lda : 0);
  for (int64_t k = 0; k < kc; ++k, b += nr_stride) {
    const auto b0 = hn::Load(df, b);
    const auto b1 = NV > 1 ? hn::Load(df, b + N) : b0;
    const auto b2 = NV > 2 ? hn::Load(df, b + 2 * N) : b0;
    const auto b3 = NV > 3 ? hn::Load(df, b + 3 * N) : b0;
#define CLONE_ROW(i)                                                 \
  if constexpr (MR > i) {                                            \
    const auto av = hn::Set(df, kRowsA ? ar[i][k] : a[k * kMR + i]); \
    c##i##0 = hn::MulAdd(av, b0, c##i##0);                           \
    if constexpr (NV > 1) c##i##1 = hn::MulAdd(av, b1, c##i##1);     \
    if constexpr (NV > 2) c##i##2 = hn::MulAdd(av, b2, c##i##2);     \
    if constexpr (NV > 3) c##i##3 = hn::MulAdd(av, b3, c##i##3);     \
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

using TileFn = void (*)(const float*, int64_t, const float*, int64_t, int64_t, float*, int64_t,
                        int64_t, bool, float, float);

template <int MR, bool kRowsA>
constexpr TileFn TileFor(int nv) {
  constexpr int kNV4 = kNV >= 4 ? 4 : kNV, kNV3 = kNV >= 3 ? 3 : kNV;
  return nv >= 4   ? Tile<MR, kNV4, kRowsA>
         : nv == 3 ? Tile<MR, kNV3, kRowsA>
         : nv == 2 ? Tile<MR, 2, kRowsA>
                   : Tile<MR, 1, kRowsA>;
}

template <bool kRowsA>
HWY_INLINE TileFn PickTile(int mr, int nv) {
  constexpr int kMR5 = kMR >= 5 ? 5 : kMR;
  switch (mr) {
    case 1:
      return TileFor<1, kRowsA>(nv);
    case 2:
      return TileFor<2, kRowsA>(nv);
    case 3:
      return TileFor<3, kRowsA>(nv);
    case 4:
      return TileFor<4, kRowsA>(nv);
    case 5:
      return TileFor<kMR5, kRowsA>(nv);
    default:
      return TileFor<kMR, kRowsA>(nv);
  }
}

// Packs op(A) rows of micro-panels [p0, p1) for every K block: block starting at pc holds,
// for micro-panel p, kc x kMR floats at ap + pc * m_pad + p * kc * kMR. Rows past M are 0.
void PackA(const GemmArgs& g, float* HWY_RESTRICT ap, int64_t m_pad, int64_t p0, int64_t p1) {
  for (int64_t pc = 0; pc < g.K; pc += kKC) {
    const int64_t kc = g.K - pc < kKC ? g.K - pc : kKC;
    for (int64_t p = p0; p < p1; ++p) {
      float* dst = ap + pc * m_pad + p * kc * kMR;
      const int64_t row0 = p * kMR;
      const int rows = static_cast<int>(g.M - row0 < kMR ? g.M - row0 : kMR);
      if (g.trans_a) {
        // op(A)'s rows are A's columns: a panel's kMR values at one k are adjacent in A's
        // row pc + k, so each k is one short contiguous copy (the zeros past M after it).
        const float* src = g.A + pc * g.lda + row0;
        if (rows == kMR) {  // a fixed-size copy the compiler inlines
          for (int64_t k = 0; k < kc; ++k, src += g.lda, dst += kMR)
            std::memcpy(dst, src, kMR * sizeof(float));
          continue;
        }
        for (int64_t k = 0; k < kc; ++k, src += g.lda, dst += kMR)
          for (int i = 0; i < kMR; ++i) dst[i] = i < rows ? src[i] : 0.0f;
        continue;
      }
      for (int i = 0; i < kMR; ++i) {
        if (i >= rows) {
          for (int64_t k = 0; k < kc; ++k) dst[k * kMR + i] = 0.0f;
        } else {
          const float* src = g.A + (row0 + i) * g.lda + pc;
          for (int64_t k = 0; k < kc; ++k) dst[k * kMR + i] = src[k];
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
      // A panel's nr columns at one k are adjacent in B's row pc + k: one row copy per k
      // (whole vectors unless the panel runs past N, whose columns are zeros).
      const int64_t left = g.N - (j0 + jr);
      const int64_t valid = left < nr ? (left > 0 ? left : 0) : nr;
      const float* src = g.B + pc * g.ldb + j0 + jr;
      const DF df;
      const int64_t N = static_cast<int64_t>(hn::Lanes(df));
      for (int64_t k = 0; k < kc; ++k, src += g.ldb) {
        float* row = dst + k * nr;
        if (valid == nr) {  // nr is whole vectors; B's row need not be aligned
          for (int64_t j = 0; j < nr; j += N) hn::StoreU(hn::LoadU(df, src + j), df, row + j);
          continue;
        }
        for (int64_t j = 0; j < nr; ++j) row[j] = j < valid ? src[j] : 0.0f;
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

// The weights' column panels (packed.h) when the GEMM reads them, else null.
HWY_INLINE const PackedWeights* Panels(const GemmArgs& g) {
  return g.w != nullptr && g.w->packed != nullptr && detail::is_panel_layout(g.w->packed->layout())
             ? g.w->packed
             : nullptr;
}

// One K block of op(B) columns [jc, jc + nc) as the tile reads it: micro-panel columns
// [j, j + w) of panel j / panel_w start at p + (j / panel_w) * panel_step + j % panel_w,
// one row of panel_w floats per k.
struct BBlock {
  const float* p;
  int64_t panel_w, panel_step;
};

// F32 panels are read in place; F16 ones are converted (one contiguous run per panel);
// anything else is packed by PackB. jc is a multiple of 64 for panels.
BBlock LoadB(const GemmArgs& g, const PackedWeights* panels, int64_t pc, int64_t kc, int64_t jc,
             int64_t nc, int64_t nr, float* HWY_RESTRICT bp, float* HWY_RESTRICT tmp) {
  constexpr int64_t R = detail::kPanelRows;
  if (panels == nullptr) {
    PackB(g, pc, kc, jc, nc, nr, bp, tmp);
    return {bp, nr, kc * nr};
  }
  const int64_t p0 = jc / R, step = g.K * R;
  if (g.w->type == DType::F32)
    return {reinterpret_cast<const float*>(panels->data()) + p0 * step + pc * R, R, step};
  const auto* h = reinterpret_cast<const uint16_t*>(panels->data());
  for (int64_t p = 0; p * R < nc; ++p)
    DequantizeF16(h + (p0 + p) * step + pc * R, bp + p * kc * R, kc * R);
  return {bp, R, kc * R};
}

// C rows [i0, i1) (multiples of kMR but the last), columns [j0, j1), all of K. op(A) comes
// from ap (packed by PackA) or, when ap is null, from A's rows.
void Compute(const GemmArgs& g, const float* ap, int64_t m_pad, int64_t i0, int64_t i1, int64_t j0,
             int64_t j1) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df)), nr = kNV * N;
  const PackedWeights* panels = Panels(g);
  const int64_t nc_max = panels != nullptr ? kNC : (kNC + nr - 1) / nr * nr;
  float* bp = detail::scratch_as<float>(ScratchSlot::kPackedB, static_cast<size_t>(kKC * nc_max));
  float* tmp = detail::scratch_as<float>(ScratchSlot::kRowTemp, static_cast<size_t>(8 * kKC));
  for (int64_t jc = j0; jc < j1; jc += nc_max) {
    const int64_t nc = j1 - jc < nc_max ? j1 - jc : nc_max;
    for (int64_t pc = 0; pc < g.K; pc += kKC) {
      const int64_t kc = g.K - pc < kKC ? g.K - pc : kKC;
      const BBlock b = LoadB(g, panels, pc, kc, jc, nc, nr, bp, tmp);
      for (int64_t i = i0; i < i1; i += kMR) {
        const int mr = static_cast<int>(i1 - i < kMR ? i1 - i : kMR);
        const float* a =
            ap != nullptr ? ap + pc * m_pad + (i / kMR) * kc * kMR : g.A + i * g.lda + pc;
        for (int64_t jp = 0; jp < nc; jp += b.panel_w) {
          const float* panel = b.p + (jp / b.panel_w) * b.panel_step;
          for (int64_t jr = 0; jr < b.panel_w && jp + jr < nc; jr += nr) {
            int64_t nvalid = nc - jp - jr < nr ? nc - jp - jr : nr;
            if (nvalid > b.panel_w - jr) nvalid = b.panel_w - jr;
            const int nv = static_cast<int>((nvalid + N - 1) / N);
            const TileFn tile = ap != nullptr ? PickTile<false>(mr, nv) : PickTile<true>(mr, nv);
            tile(a, g.lda, panel + jr, kc, b.panel_w, g.C + i * g.ldc + jc + jp + jr, g.ldc, nvalid,
                 pc == 0, g.alpha, g.beta);
          }
        }
      }
    }
  }
}

void GemmHere(const GemmArgs& g, ThreadPool* pool) {
  const DF df;
  const int64_t nr = kNV * static_cast<int64_t>(hn::Lanes(df));
  const int64_t panels = (g.M + kMR - 1) / kMR, m_pad = panels * kMR;
  // Column chunks start on panel boundaries: the packed ones' (64) or the tile's (nr).
  const int64_t col_align = Panels(g) != nullptr ? detail::kPanelRows : nr;
  // Only a transposed A is packed (its columns would be strided loads in the tile).
  float* ap =
      g.trans_a ? detail::scratch_as<float>(ScratchSlot::kPackedA, static_cast<size_t>(m_pad * g.K))
                : nullptr;
  const int nth = pool != nullptr ? pool->size() : 1;
  // Chunks of the columns of op(B) (each packs only its own columns) unless there are too
  // few; then chunks of the rows of op(A), each packing all of op(B).
  const bool split_n = g.N >= 2 * col_align * nth || panels < nth;
  if (nth == 1) {
    if (ap != nullptr) PackA(g, ap, m_pad, 0, panels);
    Compute(g, ap, m_pad, 0, g.M, 0, g.N);
    return;
  }
  if (ap != nullptr)
    pool->parallel_for(panels, 1, [&](int64_t b, int64_t e) { PackA(g, ap, m_pad, b, e); });
  if (split_n) {
    pool->parallel_for(g.N, col_align,
                       [&](int64_t b, int64_t e) { Compute(g, ap, m_pad, 0, g.M, b, e); });
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
