// AVX2 dot kernels for Q8_0 and Q4_0 weights against 8-bit quantized activations, for x86
// machines without AVX-512 VNNI (the portable int16 kernels in matvec.cpp widen every weight
// and activation to 16 bits, which on AVX2 left Q4_0 decode at ~39% and Q8_0 at ~51% of the
// read bandwidth). Per 32-block: the weights as 32 signed bytes (Q4_0: nibbles minus 8),
// then vpmaddubsw (u8 x s8 pairs summed into int16) on |w| and sign(x, w) = x * sign(w),
// vpmaddwd with ones into 8 int32 sums, and one FMA with the two blocks' scales. The pair
// sums cannot saturate: |w| <= 128 (Q8_0's -128 taken as 128 by vpsignb's |w|) and
// |x| <= 127, so 2 * 128 * 127 = 32512 < 32767.
// Q4_0 rows run eight blocks at a time (that per-block work left Q4_0 compute-bound, at
// ~60% of the bandwidth): the unsigned nibbles u are multiplied directly (vpmaddubsw's
// unsigned side) and 8 * sum(x) subtracted per block afterwards, sum((u - 8) x) =
// sum(u x) - 8 sum(x), with the sums made once per token by prepare(): no sign
// instructions; two blocks share each vector (prepare_q4 orders the activations to match);
// a vphaddd tree leaves the eight blocks' int32 sums one per lane, so the scales are
// converted, multiplied and added once per eight blocks. 2 * 15 * 127 < 32767 again.
// Measured from cache (bench_kernels BM_CachedDecode, 2 threads, CLONE_SIMD=AVX2, on a
// Zen 5 VM): Q4_0 24-27 -> 43-45 GB/s. The same eight-block loop on Q8_0 (sign trick kept)
// measured no faster (58-81 against 60-75 GB/s), so Q8_0 keeps the per-block loop.
#include "kernels/arch/x86/matvec_avx2.h"

#include <immintrin.h>

#include "kernels/dispatch.h"

namespace cln::kernels::detail::x86 {
namespace {

#define CLONE_AVX2 __attribute__((target("avx2,fma,f16c")))

constexpr int64_t kChunkRows = 16;        // rows per chunk before moving on to the next token
constexpr int64_t kPrefetchBytes = 2048;  // one-token rows: see matvec.cpp's Stream

// Prepared token: int8 q[blocks * 32], then float d[blocks], then int32 s8[blocks] = 8 x the
// sum of the block's q (Q4_0's offset, see the file comment; written only with kSums).
size_t prepared_bytes(int64_t cols) {
  return static_cast<size_t>(cols / kQK) * (kQK + sizeof(float) + sizeof(int32_t));
}

// Each 32-block to 8 bits: d = amax / 127, q = x / d rounded to nearest even (MXCSR), as
// the AVX-512 kernels and the reference bound (matvec.h).
template <bool kSums>
CLONE_AVX2 void prepare(const float* x, int64_t cols, uint8_t* out) {
  const int64_t nb = cols / kQK;
  auto* q = reinterpret_cast<int8_t*>(out);
  auto* d = reinterpret_cast<float*>(out + nb * kQK);
  auto* s8 = reinterpret_cast<int32_t*>(out + nb * (kQK + sizeof(float)));
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * kQK;
    const __m256 v0 = _mm256_loadu_ps(xb), v1 = _mm256_loadu_ps(xb + 8);
    const __m256 v2 = _mm256_loadu_ps(xb + 16), v3 = _mm256_loadu_ps(xb + 24);
    __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                             _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    d[b] = amax / 127.0f;
    const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
    const __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, id));
    const __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, id));
    const __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, id));
    const __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, id));
    // The packs work within 128-bit lanes; the dword permute puts the 32 bytes in order.
    const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * kQK),
                        _mm256_permutevar8x32_epi32(p, order));
    if constexpr (!kSums) continue;
    // Sum of the 32 bytes: vpmaddubsw with ones (unsigned) on q (signed), then vpmaddwd.
    const __m256i s =
        _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), p), _mm256_set1_epi16(1));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
    s8[b] = 8 * _mm_cvtsi128_si32(s4);
  }
}

// Q4_0's order of the prepared token within each whole group of eight blocks (the blocks
// past the last whole group stay as prepare() wrote them). Per pair of blocks (j, j + 1):
// x_j[0..15], x_j+1[0..15], x_j[16..31], x_j+1[16..31], so one vector of the two blocks'
// 32 quant bytes (block j in the low half, j + 1 in the high) meets the low nibbles' and
// then the high nibbles' activations; d and s8 in the lane order that leaves the sums in
// (blocks 0, 2, 4, 6, 1, 3, 5, 7: see dot_row).
constexpr int kLaneBlock[8] = {0, 2, 4, 6, 1, 3, 5, 7};

CLONE_AVX2 void prepare_q4(const float* x, int64_t cols, uint8_t* out) {
  prepare<true>(x, cols, out);
  const int64_t nb = cols / kQK;
  auto* q = reinterpret_cast<int8_t*>(out);
  auto* d = reinterpret_cast<float*>(out + nb * kQK);
  auto* s8 = reinterpret_cast<int32_t*>(out + nb * (kQK + sizeof(float)));
  for (int64_t g = 0; g + 8 <= nb; g += 8) {
    int8_t qg[8 * kQK];
    float dg[8];
    int32_t sg[8];
    __builtin_memcpy(qg, q + g * kQK, sizeof qg);
    __builtin_memcpy(dg, d + g, sizeof dg);
    __builtin_memcpy(sg, s8 + g, sizeof sg);
    for (int p = 0; p < 4; ++p) {
      int8_t* o = q + (g + 2 * p) * kQK;
      __builtin_memcpy(o, qg + 2 * p * kQK, 16);
      __builtin_memcpy(o + 16, qg + (2 * p + 1) * kQK, 16);
      __builtin_memcpy(o + 32, qg + 2 * p * kQK + 16, 16);
      __builtin_memcpy(o + 48, qg + (2 * p + 1) * kQK + 16, 16);
    }
    for (int l = 0; l < 8; ++l) {
      d[g + l] = dg[kLaneBlock[l]];
      s8[g + l] = sg[kLaneBlock[l]];
    }
  }
}

// quants(): the 32 weights of a block as signed bytes (the per-block loop); Q4_0's
// pair_sums(): two blocks' sums of u x for the eight-block loop (kGroups).
struct Q8 {
  static constexpr size_t kBlockBytes = sizeof(BlockQ8_0);
  static constexpr bool kGroups = false;  // no eight-block loop (measured no faster)
  CLONE_AVX2 static __m256i quants(const uint8_t* blk) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
  }
};
struct Q4 {
  static constexpr size_t kBlockBytes = sizeof(BlockQ4_0);
  CLONE_AVX2 static __m256i quants(const uint8_t* blk) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
    const __m128i lo4 = _mm_set1_epi8(0x0F);
    const __m256i v =
        _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), lo4), _mm_and_si128(b, lo4));
    return _mm256_sub_epi8(v, _mm256_set1_epi8(8));
  }
  static constexpr bool kGroups = true;
  // Blocks j and j + 1 (at blk): 8 int32 sums of u x, four per block (j's in the low half),
  // against prepare_q4's order of the pair's activations at xq.
  CLONE_AVX2 static __m256i pair_sums(const uint8_t* blk, const int8_t* xq) {
    const __m256i v = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2))),
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kBlockBytes + 2)), 1);
    const __m256i m = _mm256_set1_epi8(0x0F);
    const __m256i lo = _mm256_and_si256(v, m), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
    // Each int16 lane <= 2 * 15 * 127, so the sum of the two products cannot overflow.
    const __m256i p = _mm256_add_epi16(
        _mm256_maddubs_epi16(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq))),
        _mm256_maddubs_epi16(hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32))));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
  }
};

CLONE_AVX2 inline float scale_of(const uint8_t* blk) {
  uint16_t h;
  __builtin_memcpy(&h, blk, 2);
  return _cvtsh_ss(h);
}

CLONE_AVX2 inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// One block's int32 pair sums as floats.
template <class B>
CLONE_AVX2 inline __m256 block_dot(const uint8_t* blk, const int8_t* xq) {
  const __m256i w = B::quants(blk);
  const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq));
  const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}

// The fp16 scales of eight consecutive blocks (the first at blk) as floats.
// Lane l holds block kLaneBlock[l]. (A vpgatherdd of the eight was slower.)
template <class B>
CLONE_AVX2 inline __m256 scales8(const uint8_t* blk) {
  constexpr size_t s = B::kBlockBytes;
  const auto at = [&](int l) {
    uint16_t h;
    __builtin_memcpy(&h, blk + static_cast<size_t>(kLaneBlock[l]) * s, 2);
    return static_cast<int>(h);
  };
  __m128i v = _mm_cvtsi32_si128(at(0));
  v = _mm_insert_epi16(v, at(1), 1);
  v = _mm_insert_epi16(v, at(2), 2);
  v = _mm_insert_epi16(v, at(3), 3);
  v = _mm_insert_epi16(v, at(4), 4);
  v = _mm_insert_epi16(v, at(5), 5);
  v = _mm_insert_epi16(v, at(6), 6);
  v = _mm_insert_epi16(v, at(7), 7);
  return _mm256_cvtph_ps(v);
}

// Four accumulators: one FMA chain would bind a block to the FMA's 4-cycle latency.
template <class B, bool kPrefetch>
CLONE_AVX2 float dot_row(const uint8_t* row, const int8_t* xq, const float* xd, const int32_t* xs8,
                         int64_t nb) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  int64_t b = 0;
  if constexpr (B::kGroups) {
    for (; b + 8 <= nb; b += 8) {
      const uint8_t* blk = row + static_cast<size_t>(b) * B::kBlockBytes;
      if constexpr (kPrefetch) {
        for (size_t k = 0; k < 8 * B::kBlockBytes; k += 64)
          _mm_prefetch(reinterpret_cast<const char*>(blk) + kPrefetchBytes + k, _MM_HINT_T0);
      }
      // Four pairs of blocks, lanes [j: 4 | j + 1: 4]; three vphaddd leave one sum per
      // block, in the order of kLaneBlock; minus 8 sum(x).
      const int8_t* xg = xq + b * kQK;
      constexpr size_t bb = B::kBlockBytes;
      const __m256i p0 = B::pair_sums(blk, xg), p1 = B::pair_sums(blk + 2 * bb, xg + 64);
      const __m256i p2 = B::pair_sums(blk + 4 * bb, xg + 128);
      const __m256i p3 = B::pair_sums(blk + 6 * bb, xg + 192);
      const __m256i sums =
          _mm256_sub_epi32(_mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3)),
                           _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xs8 + b)));
      const __m256 scale = _mm256_mul_ps(scales8<B>(blk), _mm256_loadu_ps(xd + b));
      // One chain suffices: an iteration is far longer than the FMA's latency.
      acc[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), scale, acc[0]);
    }
  }
  for (; b + 4 <= nb; b += 4) {
    const uint8_t* blk = row + static_cast<size_t>(b) * B::kBlockBytes;
    if constexpr (kPrefetch) {
      for (size_t k = 0; k < 4 * B::kBlockBytes; k += 64)
        _mm_prefetch(reinterpret_cast<const char*>(blk) + kPrefetchBytes + k, _MM_HINT_T0);
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const uint8_t* bj = blk + j * B::kBlockBytes;
      acc[j] = _mm256_fmadd_ps(block_dot<B>(bj, xq + (b + j) * kQK),
                               _mm256_set1_ps(scale_of(bj) * xd[b + j]), acc[j]);
    }
  }
  for (; b < nb; ++b) {
    const uint8_t* blk = row + static_cast<size_t>(b) * B::kBlockBytes;
    acc[0] = _mm256_fmadd_ps(block_dot<B>(blk, xq + b * kQK), _mm256_set1_ps(scale_of(blk) * xd[b]),
                             acc[0]);
  }
  return hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
}

template <class B, bool kPrefetch>
CLONE_AVX2 void rows(const DotArgs& a, int64_t r0, int64_t r1) {
  const Matrix& w = *a.w;
  const int64_t nb = w.cols / kQK;
  const size_t rb = dtype_row_bytes(w.type, w.cols);
  const auto* base = static_cast<const uint8_t*>(w.data);
  for (int64_t c0 = r0; c0 < r1; c0 += kChunkRows) {
    const int64_t c1 = c0 + kChunkRows < r1 ? c0 + kChunkRows : r1;
    for (int64_t t = 0; t < a.n; ++t) {
      const uint8_t* px = a.px + static_cast<size_t>(t) * a.px_stride;
      const auto* xq = reinterpret_cast<const int8_t*>(px);
      const auto* xd = reinterpret_cast<const float*>(px + nb * kQK);
      const auto* xs8 = reinterpret_cast<const int32_t*>(px + nb * (kQK + sizeof(float)));
      for (int64_t r = c0; r < c1; ++r) {
        const uint8_t* row = base + static_cast<size_t>(r) * rb;
        const float dot = a.n == 1 ? dot_row<B, kPrefetch>(row, xq, xd, xs8, nb)
                                   : dot_row<B, false>(row, xq, xd, xs8, nb);
        store_dot(a, t, r, dot);
      }
    }
  }
}

}  // namespace

// Up to 4 tokens, like the portable int16 kernels they replace (the GEMM beyond).
DotKernel avx2_dot_q8_0() {
  if (!plain_streams())
    return {prepared_bytes, prepare<false>, rows<Q8, true>, "q8_0 (avx2, prefetched)", 4};
  return {prepared_bytes, prepare<false>, rows<Q8, false>, "q8_0 (avx2)", 4};
}
DotKernel avx2_dot_q4_0() {
  if (!plain_streams())
    return {prepared_bytes, prepare_q4, rows<Q4, true>, "q4_0 (avx2, prefetched)", 4};
  return {prepared_bytes, prepare_q4, rows<Q4, false>, "q4_0 (avx2)", 4};
}

}  // namespace cln::kernels::detail::x86
