// AVX-512 VNNI dot kernels for Q4_0 and Q8_0 weights against 8-bit quantized activations.
//
// The weights stay in ggml's block layout (18- or 34-byte blocks, so no vector is aligned
// to a block). One 64-byte load plus a few bytes more covers several blocks, and VBMI's
// two-source byte permute (vpermi2b) pulls the quants of each block into its own lane
// group and the fp16 scales into the lanes they multiply. vpdpbusd then does 64
// u8 x i8 products per instruction. It needs one unsigned operand, so:
//   Q4_0: the nibbles q in 0..15 are the unsigned side;  sum (q - 8) x = sum q x - 8 sum x.
//   Q8_0: w ^ 0x80 = w + 128 is the unsigned side;      sum w x = sum (w + 128) x - 128 sum x.
// The correction (-8 or -128 times the block's sum of x) is precomputed per activation
// block and seeds the accumulator, so it costs nothing per row.
#include "kernels/arch/x86/matvec_vnni.h"
#include "kernels/dispatch.h"

// GCC 12 reports its own `_mm512_undefined_*()` idiom (`__m512 __Y = __Y;`) inside
// avx512fintrin.h as maybe-uninitialized when inlined into target-attribute functions.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstring>

namespace cln::kernels::detail::x86 {
namespace {

#define CLONE_VNNI \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512vbmi,f16c,fma")))

constexpr int64_t kChunkRows = 16;
// Integer dot products stay ahead of the F32 GEMM (which must dequantize and transpose
// each weight panel) up to about this many tokens; beyond it the prepared activations of
// all tokens, re-read for every chunk of rows, no longer fit in L2.
constexpr int64_t kVnniMaxTokens = 64;
// rows per chunk before moving on to the next token

// Quantizes one 32-block of a token to 8 bits (d = amax / 127, round to nearest even):
// the block's quants, scale and the sum of its quants.
struct XBlock {
  alignas(32) int8_t q[kQK];
  float d;
  int32_t sum;
};

CLONE_VNNI inline XBlock quantize_block(const float* x) {
  XBlock b;
  const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
  b.d = amax / 127.0f;
  const __m512 id = _mm512_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
  const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, id));  // MXCSR: nearest even
  const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, id));
  _mm_store_si128(reinterpret_cast<__m128i*>(b.q), _mm512_cvtsepi32_epi8(q0));
  _mm_store_si128(reinterpret_cast<__m128i*>(b.q + 16), _mm512_cvtsepi32_epi8(q1));
  b.sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
  return b;
}

// Bytes of a weight group, as two registers: bytes 0..63 and the few past them.
struct WGroup {
  __m512i a, b;
};

// Loads a whole group of kBytes (72 for Q4_0, 68 for Q8_0).
template <int kBytes>
CLONE_VNNI inline WGroup load_full(const uint8_t* p) {
  if constexpr (kBytes == 72) {
    return {_mm512_loadu_si512(p),
            _mm512_zextsi128_si512(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 64)))};
  } else {
    int32_t tail;
    std::memcpy(&tail, p + 64, 4);
    return {_mm512_loadu_si512(p), _mm512_zextsi128_si512(_mm_cvtsi32_si128(tail))};
  }
}

// Loads the row's last, partial group: only its `valid` (< 64) bytes are read, so reading at
// the very end of the matrix cannot fault; the rest is zero.
CLONE_VNNI inline WGroup load_partial(const uint8_t* p, int64_t valid) {
  return {_mm512_maskz_loadu_epi8((1ull << valid) - 1, p), _mm512_setzero_si512()};
}

// ------------------------------------------------------------------------- Q4_0
// Groups of 4 blocks (72 bytes of weights). Prepared token, per group g:
//   xl[64]  i8: block i's values 0..15 at bytes 16i..16i+15 (they meet the low nibbles)
//   xh[64]  i8: block i's values 16..31                     (they meet the high nibbles)
//   dx[16]  f32: block i's scale in lanes 4i..4i+3
//   cr[16]  i32: -8 * sum of block i's values in lane 4i, 0 elsewhere
// Blocks past the end of the row are zero, so a partial last group adds nothing.
struct Q4 {
  static constexpr int kBlocks = 4, kGroupBytes = 72;
  static constexpr size_t kXBytes = 64 + 64 + 64 + 64;

  struct Consts {
    __m512i idx_qs, idx_d, low4;
  };
  struct X {
    __m512i xl, xh, cr;
    __m512 dx;
  };

  static int64_t groups(int64_t cols) { return (cols / kQK + 3) / 4; }

  CLONE_VNNI static Consts consts() {
    alignas(64) uint8_t qs[64], d[64];
    for (int j = 0; j < 64; ++j) {
      qs[j] = static_cast<uint8_t>(18 * (j / 16) + 2 + j % 16);        // block j/16, quant j%16
      d[j] = static_cast<uint8_t>(j < 32 ? 18 * (j / 8) + j % 2 : 0);  // half w < 16: block w/4
    }
    return {_mm512_load_si512(qs), _mm512_load_si512(d), _mm512_set1_epi8(0x0F)};
  }

  CLONE_VNNI static X load_x(const uint8_t* g) {
    return {_mm512_loadu_si512(g), _mm512_loadu_si512(g + 64), _mm512_loadu_si512(g + 192),
            _mm512_loadu_ps(g + 128)};
  }

  CLONE_VNNI static void prepare(const float* x, int64_t cols, uint8_t* out) {
    std::memset(out, 0, static_cast<size_t>(groups(cols)) * kXBytes);
    for (int64_t b = 0; b < cols / kQK; ++b) {
      const XBlock xb = quantize_block(x + b * kQK);
      uint8_t* g = out + static_cast<size_t>(b / 4) * kXBytes;
      const int i = static_cast<int>(b % 4);
      std::memcpy(g + 16 * i, xb.q, 16);
      std::memcpy(g + 64 + 16 * i, xb.q + 16, 16);
      auto* dx = reinterpret_cast<float*>(g + 128);
      auto* cr = reinterpret_cast<int32_t*>(g + 192);
      for (int l = 0; l < 4; ++l) dx[4 * i + l] = xb.d;
      cr[4 * i] = -8 * xb.sum;
    }
  }

  // acc + the 16 partial products of one group of one row.
  CLONE_VNNI static __m512 group(const Consts& k, WGroup w, const X& x, __m512 acc) {
    const __m512i qs = _mm512_permutex2var_epi8(w.a, k.idx_qs, w.b);
    const __m512i hs = _mm512_permutex2var_epi8(w.a, k.idx_d, w.b);
    const __m512 s = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(hs)), x.dx);
    const __m512i lo = _mm512_and_si512(qs, k.low4);
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(qs, 4), k.low4);
    const __m512i dot = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(x.cr, lo, x.xl), hi, x.xh);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), s, acc);
  }
};

// ------------------------------------------------------------------------- Q8_0
// Groups of 2 blocks (68 bytes of weights). Prepared token, per group g:
//   x[64]   i8: the two blocks' values in order
//   dx[16]  f32: block i's scale in lanes 8i..8i+7
//   cr[16]  i32: -128 * sum of block i's values in lane 8i, 0 elsewhere
struct Q8 {
  static constexpr int kBlocks = 2, kGroupBytes = 68;
  static constexpr size_t kXBytes = 64 + 64 + 64;

  struct Consts {
    __m512i idx_qs, idx_d, flip;
  };
  struct X {
    __m512i x, cr;
    __m512 dx;
  };

  static int64_t groups(int64_t cols) { return (cols / kQK + 1) / 2; }

  CLONE_VNNI static Consts consts() {
    alignas(64) uint8_t qs[64], d[64];
    for (int j = 0; j < 64; ++j) {
      qs[j] = static_cast<uint8_t>(34 * (j / 32) + 2 + j % 32);
      d[j] = static_cast<uint8_t>(j < 32 ? 34 * (j / 16) + j % 2 : 0);  // half w < 16: block w/8
    }
    return {_mm512_load_si512(qs), _mm512_load_si512(d), _mm512_set1_epi8(static_cast<char>(0x80))};
  }

  CLONE_VNNI static X load_x(const uint8_t* g) {
    return {_mm512_loadu_si512(g), _mm512_loadu_si512(g + 128), _mm512_loadu_ps(g + 64)};
  }

  CLONE_VNNI static void prepare(const float* x, int64_t cols, uint8_t* out) {
    std::memset(out, 0, static_cast<size_t>(groups(cols)) * kXBytes);
    for (int64_t b = 0; b < cols / kQK; ++b) {
      const XBlock xb = quantize_block(x + b * kQK);
      uint8_t* g = out + static_cast<size_t>(b / 2) * kXBytes;
      const int i = static_cast<int>(b % 2);
      std::memcpy(g + 32 * i, xb.q, 32);
      auto* dx = reinterpret_cast<float*>(g + 64);
      auto* cr = reinterpret_cast<int32_t*>(g + 128);
      for (int l = 0; l < 8; ++l) dx[8 * i + l] = xb.d;
      cr[8 * i] = -128 * xb.sum;
    }
  }

  CLONE_VNNI static __m512 group(const Consts& k, WGroup w, const X& x, __m512 acc) {
    const __m512i qs = _mm512_xor_si512(_mm512_permutex2var_epi8(w.a, k.idx_qs, w.b), k.flip);
    const __m512i hs = _mm512_permutex2var_epi8(w.a, k.idx_d, w.b);
    const __m512 s = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(hs)), x.dx);
    const __m512i dot = _mm512_dpbusd_epi32(x.cr, qs, x.x);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), s, acc);
  }
};

template <class F>
size_t prepared_bytes(int64_t cols) {
  return static_cast<size_t>(F::groups(cols)) * F::kXBytes;
}

// Rows [r0, r1) against every token: chunks of kChunkRows rows, four rows at a time sharing
// each group of activations; whole groups in the main loop, the partial one after it.
template <class F>
CLONE_VNNI void rows(const DotArgs& a, int64_t r0, int64_t r1) {
  const Matrix& w = *a.w;
  const int64_t nb = w.cols / kQK, ng = F::groups(w.cols), full = nb / F::kBlocks;
  const size_t rb = dtype_row_bytes(w.type, w.cols);
  const int64_t tail =
      static_cast<int64_t>(rb) - full * F::kGroupBytes;  // bytes in the partial group
  const auto* base = static_cast<const uint8_t*>(w.data);
  const typename F::Consts k = F::consts();
  for (int64_t c0 = r0; c0 < r1; c0 += kChunkRows) {
    const int64_t c1 = c0 + kChunkRows < r1 ? c0 + kChunkRows : r1;
    for (int64_t t = 0; t < a.n; ++t) {
      const uint8_t* px = a.px + static_cast<size_t>(t) * a.px_stride;
      int64_t r = c0;
      for (; r + 4 <= c1; r += 4) {
        const uint8_t* p = base + static_cast<size_t>(r) * rb;
        __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
        for (int64_t g = 0; g < full; ++g, p += F::kGroupBytes) {
          const typename F::X x = F::load_x(px + static_cast<size_t>(g) * F::kXBytes);
          s0 = F::group(k, load_full<F::kGroupBytes>(p), x, s0);
          s1 = F::group(k, load_full<F::kGroupBytes>(p + rb), x, s1);
          s2 = F::group(k, load_full<F::kGroupBytes>(p + 2 * rb), x, s2);
          s3 = F::group(k, load_full<F::kGroupBytes>(p + 3 * rb), x, s3);
        }
        if (full < ng) {
          const typename F::X x = F::load_x(px + static_cast<size_t>(full) * F::kXBytes);
          s0 = F::group(k, load_partial(p, tail), x, s0);
          s1 = F::group(k, load_partial(p + rb, tail), x, s1);
          s2 = F::group(k, load_partial(p + 2 * rb, tail), x, s2);
          s3 = F::group(k, load_partial(p + 3 * rb, tail), x, s3);
        }
        store_dot(a, t, r, _mm512_reduce_add_ps(s0));
        store_dot(a, t, r + 1, _mm512_reduce_add_ps(s1));
        store_dot(a, t, r + 2, _mm512_reduce_add_ps(s2));
        store_dot(a, t, r + 3, _mm512_reduce_add_ps(s3));
      }
      for (; r < c1; ++r) {
        const uint8_t* p = base + static_cast<size_t>(r) * rb;
        __m512 s0 = _mm512_setzero_ps();
        for (int64_t g = 0; g < full; ++g, p += F::kGroupBytes)
          s0 = F::group(k, load_full<F::kGroupBytes>(p),
                        F::load_x(px + static_cast<size_t>(g) * F::kXBytes), s0);
        if (full < ng)
          s0 = F::group(k, load_partial(p, tail),
                        F::load_x(px + static_cast<size_t>(full) * F::kXBytes), s0);
        store_dot(a, t, r, _mm512_reduce_add_ps(s0));
      }
    }
  }
}

// ------------------------------------------------------------------- packed layouts
// Tiles of 16 rows x 1 block (packed.h). Per tile the weights are decoded once into eight
// u8 vectors w[c] whose lane r holds four quants of row r, then for each token
//   isum = cr + sum_c vpdpbusd(w[c], 4 activation bytes broadcast)   (16 rows at once)
//   acc += float(isum) * (scales of the 16 rows) * dx
// Q4_0: w[c] = 16 * nibble (low nibbles shifted up, high nibbles masked in place), so both
//   halves share one accumulator; the factor 16 goes into dx, the -8 offset into cr.
// Q8_0: w[c] = q ^ 0x80 = q + 128 as u8; cr removes the 128 * sum(x).
// Prepared token: int8 q[blocks * 32], then f32 dx[blocks], then i32 cr[blocks].

size_t packed_prepared_bytes(int64_t cols) {
  return static_cast<size_t>(cols / kQK) * (kQK + sizeof(float) + sizeof(int32_t));
}

template <int kDxShift>
CLONE_VNNI void packed_prepare(const float* x, int64_t cols, uint8_t* out) {
  const int64_t nb = cols / kQK;
  auto* q = reinterpret_cast<int8_t*>(out);
  auto* dx = reinterpret_cast<float*>(out + nb * kQK);
  auto* cr = reinterpret_cast<int32_t*>(out + nb * (kQK + 4));
  for (int64_t b = 0; b < nb; ++b) {
    const XBlock xb = quantize_block(x + b * kQK);
    std::memcpy(q + b * kQK, xb.q, kQK);
    dx[b] = xb.d / static_cast<float>(1 << kDxShift);
    cr[b] = -128 * xb.sum;
  }
}

// Eight u8 weight vectors of one tile, in named registers (an array would be spilled).
struct W8 {
  __m512i w0, w1, w2, w3, w4, w5, w6, w7;
};

struct PackedQ4 {
  static constexpr size_t kTile = 16 * sizeof(BlockQ4_0);
  // For one token: w0..w3 = low nibbles as they are, w4..w7 = 16 * high nibbles (one AND
  // each, no shifts); dot1() scales the low half by 16 once per tile instead.
  CLONE_VNNI static W8 decode1(const uint8_t* t) {
    const __m512i lo4 = _mm512_set1_epi8(0x0F), hi4 = _mm512_set1_epi8(static_cast<char>(0xF0));
    const __m512i v0 = _mm512_loadu_si512(t + 32), v1 = _mm512_loadu_si512(t + 96);
    const __m512i v2 = _mm512_loadu_si512(t + 160), v3 = _mm512_loadu_si512(t + 224);
    return {_mm512_and_si512(v0, lo4), _mm512_and_si512(v1, lo4), _mm512_and_si512(v2, lo4),
            _mm512_and_si512(v3, lo4), _mm512_and_si512(v0, hi4), _mm512_and_si512(v1, hi4),
            _mm512_and_si512(v2, hi4), _mm512_and_si512(v3, hi4)};
  }
  CLONE_VNNI static __m512i dot1(const W8& w, const int32_t* x4, int32_t c) {
    __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_set1_epi32(c);
    s0 = _mm512_dpbusd_epi32(s0, w.w0, _mm512_set1_epi32(x4[0]));
    s1 = _mm512_dpbusd_epi32(s1, w.w4, _mm512_set1_epi32(x4[4]));
    s0 = _mm512_dpbusd_epi32(s0, w.w1, _mm512_set1_epi32(x4[1]));
    s1 = _mm512_dpbusd_epi32(s1, w.w5, _mm512_set1_epi32(x4[5]));
    s0 = _mm512_dpbusd_epi32(s0, w.w2, _mm512_set1_epi32(x4[2]));
    s1 = _mm512_dpbusd_epi32(s1, w.w6, _mm512_set1_epi32(x4[6]));
    s0 = _mm512_dpbusd_epi32(s0, w.w3, _mm512_set1_epi32(x4[3]));
    s1 = _mm512_dpbusd_epi32(s1, w.w7, _mm512_set1_epi32(x4[7]));
    return _mm512_add_epi32(_mm512_slli_epi32(s0, 4), s1);
  }
  CLONE_VNNI static W8 decode(const uint8_t* t) {
    const __m512i hi4 = _mm512_set1_epi8(static_cast<char>(0xF0));
    const __m512i v0 = _mm512_loadu_si512(t + 32), v1 = _mm512_loadu_si512(t + 96);
    const __m512i v2 = _mm512_loadu_si512(t + 160), v3 = _mm512_loadu_si512(t + 224);
    // 16 * low nibble (values 4c..4c+3), then 16 * high nibble (values 16+4c..).
    return {_mm512_and_si512(_mm512_slli_epi16(v0, 4), hi4),
            _mm512_and_si512(_mm512_slli_epi16(v1, 4), hi4),
            _mm512_and_si512(_mm512_slli_epi16(v2, 4), hi4),
            _mm512_and_si512(_mm512_slli_epi16(v3, 4), hi4),
            _mm512_and_si512(v0, hi4),
            _mm512_and_si512(v1, hi4),
            _mm512_and_si512(v2, hi4),
            _mm512_and_si512(v3, hi4)};
  }
};

struct PackedQ8 {
  static constexpr size_t kTile = 16 * sizeof(BlockQ8_0);
  CLONE_VNNI static W8 decode1(const uint8_t* t) { return decode(t); }
  CLONE_VNNI static __m512i dot1(const W8& w, const int32_t* x4, int32_t c);
  CLONE_VNNI static W8 decode(const uint8_t* t) {
    const __m512i f = _mm512_set1_epi8(static_cast<char>(0x80));
    return {_mm512_xor_si512(_mm512_loadu_si512(t + 32), f),
            _mm512_xor_si512(_mm512_loadu_si512(t + 96), f),
            _mm512_xor_si512(_mm512_loadu_si512(t + 160), f),
            _mm512_xor_si512(_mm512_loadu_si512(t + 224), f),
            _mm512_xor_si512(_mm512_loadu_si512(t + 288), f),
            _mm512_xor_si512(_mm512_loadu_si512(t + 352), f),
            _mm512_xor_si512(_mm512_loadu_si512(t + 416), f),
            _mm512_xor_si512(_mm512_loadu_si512(t + 480), f)};
  }
};

// sum over the tile's 8 weight vectors of vpdpbusd with the token's 8 activation dwords,
// starting from the correction c; two chains so a single token is not latency-bound.
CLONE_VNNI inline __m512i tile_dot(const W8& w, const int32_t* x4, int32_t c) {
  __m512i s0 = _mm512_set1_epi32(c), s1 = _mm512_setzero_si512();
  s0 = _mm512_dpbusd_epi32(s0, w.w0, _mm512_set1_epi32(x4[0]));
  s1 = _mm512_dpbusd_epi32(s1, w.w1, _mm512_set1_epi32(x4[1]));
  s0 = _mm512_dpbusd_epi32(s0, w.w2, _mm512_set1_epi32(x4[2]));
  s1 = _mm512_dpbusd_epi32(s1, w.w3, _mm512_set1_epi32(x4[3]));
  s0 = _mm512_dpbusd_epi32(s0, w.w4, _mm512_set1_epi32(x4[4]));
  s1 = _mm512_dpbusd_epi32(s1, w.w5, _mm512_set1_epi32(x4[5]));
  s0 = _mm512_dpbusd_epi32(s0, w.w6, _mm512_set1_epi32(x4[6]));
  s1 = _mm512_dpbusd_epi32(s1, w.w7, _mm512_set1_epi32(x4[7]));
  return _mm512_add_epi32(s0, s1);
}

CLONE_VNNI __m512i PackedQ8::dot1(const W8& w, const int32_t* x4, int32_t c) {
  return tile_dot(w, x4, c);
}

// Software prefetch distance of one-token decode on CPUs whose hardware prefetchers fall
// behind (see matvec.cpp's Stream: the same Intel measurement, Q4_0 at 74-77% of the probe).
constexpr size_t kPrefetchBytes = 2048;

// Row groups [g0, g1) against tokens [t0, t0 + T); kPrefetch: one token streams with
// software prefetch.
template <class L, int T, bool kPrefetch = false>
CLONE_VNNI void packed_tokens(const PackedArgs& a, int64_t g0, int64_t g1, int64_t t0) {
  const Matrix& m = *a.w;
  const int64_t nb = m.cols / kQK;
  const size_t stride = a.px_stride;
  const uint8_t* px = a.px + static_cast<size_t>(t0) * stride;
  const size_t dx_off = static_cast<size_t>(nb * kQK), cr_off = static_cast<size_t>(nb * (kQK + 4));
  for (int64_t g = g0; g < g1; ++g) {
    const uint8_t* tile = m.packed->data() + static_cast<size_t>(g * nb) * L::kTile;
    __m512 acc[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b, tile += L::kTile) {
      if constexpr (kPrefetch) {
#pragma GCC unroll 16
        for (size_t k = 0; k < L::kTile; k += 64)
          _mm_prefetch(reinterpret_cast<const char*>(tile) + kPrefetchBytes + k, _MM_HINT_T0);
      }
      const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile)));
      const W8 w = T == 1 ? L::decode1(tile) : L::decode(tile);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const uint8_t* p = px + static_cast<size_t>(t) * stride;
        const auto* x4 = reinterpret_cast<const int32_t*>(p + b * kQK);
        const int32_t c = reinterpret_cast<const int32_t*>(p + cr_off)[b];
        const __m512i isum = T == 1 ? L::dot1(w, x4, c) : tile_dot(w, x4, c);
        const __m512 s =
            _mm512_mul_ps(dw, _mm512_set1_ps(reinterpret_cast<const float*>(p + dx_off)[b]));
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), s, acc[t]);
      }
    }
    const int64_t r0 = g * kPackRows;
    const int64_t valid = m.rows - r0 < kPackRows ? m.rows - r0 : kPackRows;
    const __mmask16 k = static_cast<__mmask16>((1u << valid) - 1);
    const __m512 sc = _mm512_set1_ps(a.scale);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      float* y = a.y + (t0 + t) * a.ldy + r0;
      __m512 v = _mm512_mul_ps(acc[t], sc);
      if (a.accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, y));
      _mm512_mask_storeu_ps(y, k, v);
    }
  }
}

template <class L, bool kPrefetch = false>
CLONE_VNNI void packed_groups(const PackedArgs& a, int64_t g0, int64_t g1) {
  // Up to 8 tokens share each decoded tile; the x of 8 tokens stays in L1/L2 while the
  // thread's weights stream past.
  for (int64_t t0 = 0; t0 < a.n; t0 += 8) {
    switch (a.n - t0 < 8 ? a.n - t0 : 8) {
      case 1:
        packed_tokens<L, 1, kPrefetch>(a, g0, g1, t0);
        break;
      case 2:
        packed_tokens<L, 2>(a, g0, g1, t0);
        break;
      case 3:
        packed_tokens<L, 3>(a, g0, g1, t0);
        break;
      case 4:
        packed_tokens<L, 4>(a, g0, g1, t0);
        break;
      case 5:
        packed_tokens<L, 5>(a, g0, g1, t0);
        break;
      case 6:
        packed_tokens<L, 6>(a, g0, g1, t0);
        break;
      case 7:
        packed_tokens<L, 7>(a, g0, g1, t0);
        break;
      default:
        packed_tokens<L, 8>(a, g0, g1, t0);
        break;
    }
  }
}

}  // namespace

DotKernel vnni_dot_q8_0() {
  return {prepared_bytes<Q8>, Q8::prepare, rows<Q8>, "q8_0 (avx512 vnni)", kVnniMaxTokens};
}
DotKernel vnni_dot_q4_0() {
  return {prepared_bytes<Q4>, Q4::prepare, rows<Q4>, "q4_0 (avx512 vnni)", kVnniMaxTokens};
}
PackedKernel vnni_packed_q8_0() {
  if (!plain_streams())
    return {packed_prepared_bytes, packed_prepare<0>, packed_groups<PackedQ8, true>,
            "q8_0x16 (avx512 vnni, prefetched)"};
  return {packed_prepared_bytes, packed_prepare<0>, packed_groups<PackedQ8>,
          "q8_0x16 (avx512 vnni)"};
}
CLONE_VNNI float vnni_int8_chains(size_t iters, int32_t seed, double* ops) {
  const __m512i u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-5);
  __m512i a[12];
  for (int k = 0; k < 12; ++k) a[k] = _mm512_set1_epi32(seed + k);
  for (size_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < 12; ++k) a[k] = _mm512_dpbusd_epi32(a[k], u, s);
  }
  __m512i t = a[0];
  for (int k = 1; k < 12; ++k) t = _mm512_add_epi32(t, a[k]);
  *ops = 2.0 * 64 * 12 * static_cast<double>(iters);
  alignas(64) int32_t lanes[16];
  _mm512_store_si512(lanes, t);
  int64_t sum = 0;
  for (int32_t v : lanes) sum += v;
  return static_cast<float>(sum);
}

PackedKernel vnni_packed_q4_0() {
  if (!plain_streams())
    return {packed_prepared_bytes, packed_prepare<4>, packed_groups<PackedQ4, true>,
            "q4_0x16 (avx512 vnni, prefetched)"};
  return {packed_prepared_bytes, packed_prepare<4>, packed_groups<PackedQ4>,
          "q4_0x16 (avx512 vnni)"};
}

}  // namespace cln::kernels::detail::x86
