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
//
// F32x64 / F16x64: rows in panels of 64 (the last padded with zero rows), each panel stored
// column by column: value (row r, column k) of panel p sits at element
//   (p * cols + k) * 64 + r % 64,   p = r / 64,
// in the matrix's own type. These are the GEMM's B micro-panels for the whole K, so prefill
// reads the weights in place (F32) or with one streaming convert (F16) instead of
// transposing them on every call, and decode streams them with one broadcast of x[k] per
// 64 rows (no horizontal sums).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "clone/kernels/ops.h"

namespace cln::kernels::detail {

enum PackedLayout : int { kNotPacked = 0, kQ4_0x16 = 1, kQ8_0x16 = 2, kF32x64 = 3, kF16x64 = 4 };
constexpr int kPackRows = 16;
constexpr int64_t kPanelRows = 64;

// The weight type a layout holds.
inline DType packed_layout_type(int layout) {
  switch (layout) {
    case kQ4_0x16:
      return DType::Q4_0;
    case kQ8_0x16:
      return DType::Q8_0;
    case kF16x64:
      return DType::F16;
    default:
      return DType::F32;
  }
}
inline bool is_panel_layout(int layout) {
  return layout == kF32x64 || layout == kF16x64;
}

inline size_t packed_tile_bytes(DType t) {
  return kPackRows * dtype_block_bytes(t);
}
inline int64_t packed_groups(int64_t rows, int64_t group_rows = kPackRows) {
  return (rows + group_rows - 1) / group_rows;
}

// matmul on packed weights: row groups [g0, g1) against all n tokens,
//   y[t * ldy + r] = scale * dot(w_r, x_t)  (+ the old value when accumulate).
struct PackedArgs {
  const Matrix* w;    // w->packed is set
  const float* x;     // F32 [n, w->cols]: the activations as given
  const uint8_t* px;  // prepared activations, px_stride bytes per token (null: none)
  size_t px_stride;
  int64_t n;
  float* y;
  int64_t ldy;
  bool accumulate;
  float scale;
};

struct PackedKernel {
  // Activations prepared per token (bytes, then how); both null: the kernel reads x as given.
  size_t (*prepared_bytes)(int64_t cols);
  void (*prepare)(const float* x, int64_t cols, uint8_t* out);
  void (*groups)(const PackedArgs& a, int64_t g0, int64_t g1);
  const char* name;
  int64_t group_rows = kPackRows;  // rows per group
  // groups() serves up to this many tokens (0: any number); matmul sends more to the GEMM,
  // which reads the same packed weights (panel layouts).
  int64_t max_tokens = 0;
};

// pack_weights() in a given layout, whatever this CPU would choose (tests run every layout's
// kernels on every target); null for kNotPacked.
std::unique_ptr<PackedWeights> pack_weights_as(const Matrix& w, int layout, ThreadPool* pool);

// The layout pack_weights() uses for type t on the current target (kNotPacked: none).
int packed_layout_for(DType t);
// The kernel for a layout on the current target; its functions are null where the target
// has none (then matmul falls back to the GGUF bytes).
PackedKernel packed_kernel(int layout);
// The panel layouts' kernel (panels.cpp), on the current target; packed_kernel() returns it
// for them.
PackedKernel panel_kernel(int layout);

}  // namespace cln::kernels::detail
