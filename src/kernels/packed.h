// Packed weight layouts (see PackedWeights in ops.h). Internal to clone_kernels.
//
// Q4_0x16 / Q8_0x16: rows in groups of 16 (the last group padded with zero rows), each
// group stored block by block. The tile of (group g, block b) sits at
// data + (g * blocks_per_row + b) * 16 * block_bytes and holds
//   16 fp16 scales, row r's at bytes 2r..2r+1, then
//   the quant bytes in 64-byte chunks: chunk c holds bytes 4c..4c+3 of each row's quants,
//   row r's at 4r..4r+3 (Q4_0: 4 chunks of its 16 nibble bytes; Q8_0: 8 chunks of 32).
// So a vector of 16 int32 lanes holds the same four quant bytes of 16 rows, which
// vpdpbusd multiplies by four activation bytes broadcast to every lane.
#pragma once

#include <cstddef>
#include <cstdint>

#include "clone/kernels/ops.h"

namespace cln::kernels::detail {

enum PackedLayout : int { kNotPacked = 0, kQ4_0x16 = 1, kQ8_0x16 = 2 };
constexpr int kPackRows = 16;

inline size_t packed_tile_bytes(DType t) {
  return kPackRows * dtype_block_bytes(t);
}
inline int64_t packed_groups(int64_t rows) {
  return (rows + kPackRows - 1) / kPackRows;
}

// matmul on packed weights: row groups [g0, g1) against all n tokens,
//   y[t * ldy + r] = scale * dot(w_r, x_t)  (+ the old value when accumulate).
struct PackedArgs {
  const Matrix* w;    // w->packed is set
  const uint8_t* px;  // prepared activations, px_stride bytes per token
  size_t px_stride;
  int64_t n;
  float* y;
  int64_t ldy;
  bool accumulate;
  float scale;
};

struct PackedKernel {
  size_t (*prepared_bytes)(int64_t cols);  // per token
  void (*prepare)(const float* x, int64_t cols, uint8_t* out);
  void (*groups)(const PackedArgs& a, int64_t g0, int64_t g1);
  const char* name;
};

// The layout pack_weights() uses for type t on the current target (kNotPacked: none).
int packed_layout_for(DType t);
// The kernel for a layout on the current target; its functions are null where the target
// has none (then matmul falls back to the GGUF bytes).
PackedKernel packed_kernel(int layout);

}  // namespace cln::kernels::detail
