// Tensor element types, numbered and laid out exactly as ggml does so GGUF files
// written by llama.cpp load unchanged.
//   F32   4 bytes per value.
//   F16   IEEE half, 2 bytes per value.
//   Q8_0  blocks of 32: fp16 scale d, then 32 int8 q;          x = d * q.       34 bytes.
//   Q4_0  blocks of 32: fp16 scale d, then 16 bytes of nibbles; value j < 16 is the
//         low nibble of byte j, value j+16 its high nibble;    x = d * (q - 8). 18 bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace cln {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q8_0 = 8,
};

constexpr int kQK = 32;  // values per block in Q4_0 and Q8_0

struct BlockQ8_0 {
  uint16_t d;     // fp16 scale
  int8_t q[kQK];  // quants
};
static_assert(sizeof(BlockQ8_0) == 34);

struct BlockQ4_0 {
  uint16_t d;            // fp16 scale
  uint8_t qs[kQK / 2];   // nibbles, see above
};
static_assert(sizeof(BlockQ4_0) == 18);

// Name as ggml prints it ("f32", "q4_0"); "?" for an unknown id.
std::string_view dtype_name(DType t);
// Parses "f32", "F16", "q8_0", ...; nullopt if unknown.
std::optional<DType> dtype_from_name(std::string_view s);
// True for the ids clone can compute with.
bool dtype_supported(uint32_t ggml_type);
// Values per block (1 for F32/F16, 32 for the quantized types).
int64_t dtype_block_size(DType t);
// Bytes per block.
size_t dtype_block_bytes(DType t);
// Bytes of a row of n values; throws cln::Error if n is not a multiple of the block size.
size_t dtype_row_bytes(DType t, int64_t n);

// IEEE half <-> float, round-to-nearest-even, with inf/nan/subnormals.
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);

}  // namespace cln
