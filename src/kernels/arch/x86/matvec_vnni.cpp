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

constexpr int64_t kChunkRows = 16;  // rows per chunk before moving on to the next token

inline void store(const DotArgs& a, int64_t t, int64_t r, float dot) {
  float& out = a.y[t * a.ldy + r];
  out = a.accumulate ? out + a.scale * dot : a.scale * dot;
}

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
      d[j] = j < 32 ? static_cast<uint8_t>(18 * (j / 8) + j % 2) : 0;  // half w < 16: block w/4
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
      d[j] = j < 32 ? static_cast<uint8_t>(34 * (j / 16) + j % 2) : 0;  // half w < 16: block w/8
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
        store(a, t, r, _mm512_reduce_add_ps(s0));
        store(a, t, r + 1, _mm512_reduce_add_ps(s1));
        store(a, t, r + 2, _mm512_reduce_add_ps(s2));
        store(a, t, r + 3, _mm512_reduce_add_ps(s3));
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
        store(a, t, r, _mm512_reduce_add_ps(s0));
      }
    }
  }
}

}  // namespace

DotKernel vnni_dot_q8_0() {
  return {prepared_bytes<Q8>, Q8::prepare, rows<Q8>, "q8_0 (avx512 vnni)"};
}
DotKernel vnni_dot_q4_0() {
  return {prepared_bytes<Q4>, Q4::prepare, rows<Q4>, "q4_0 (avx512 vnni)"};
}

}  // namespace cln::kernels::detail::x86
