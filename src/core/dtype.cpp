#include "clone/core/dtype.h"

#include <bit>
#include <cctype>
#include <string>

#include "clone/core/error.h"

namespace cln {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::Q4_0: return "q4_0";
    case DType::Q8_0: return "q8_0";
  }
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view s) {
  std::string l(s);
  for (char& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (DType t : {DType::F32, DType::F16, DType::Q4_0, DType::Q8_0})
    if (dtype_name(t) == l) return t;
  return std::nullopt;
}

bool dtype_supported(uint32_t id) { return id == 0 || id == 1 || id == 2 || id == 8; }

int64_t dtype_block_size(DType t) {
  return (t == DType::Q4_0 || t == DType::Q8_0) ? kQK : 1;
}

size_t dtype_block_bytes(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::Q4_0: return sizeof(BlockQ4_0);
    case DType::Q8_0: return sizeof(BlockQ8_0);
  }
  fail("unknown tensor type id ", static_cast<uint32_t>(t));
}

size_t dtype_row_bytes(DType t, int64_t n) {
  const int64_t bs = dtype_block_size(t);
  if (n < 0 || n % bs != 0)
    fail("a row of ", n, " values is not a whole number of ", dtype_name(t), " blocks of ", bs);
  return static_cast<size_t>(n / bs) * dtype_block_bytes(t);
}

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while ((man & 0x400u) == 0);
      bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 112u) << 23) | (man << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t fp32_to_fp16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u)  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (absx < 0x38800000u) {  // subnormal or zero in half
    if (absx < 0x33000000u) return static_cast<uint16_t>(sign);  // rounds to zero
    const uint32_t e = absx >> 23;
    const uint32_t m = (absx & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - e;  // 14 + (113 - e) ... value = m * 2^(e-150), half sub unit 2^-24
    const uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    uint32_t r = q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
    return static_cast<uint16_t>(sign | r);
  }
  // normal: rebias exponent, round mantissa to 10 bits (nearest even); carry may bump exponent.
  uint32_t r = absx - 0x38000000u;  // exponent 127 -> 15
  const uint32_t rem = r & 0x1fffu;
  r >>= 13;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return static_cast<uint16_t>(sign | r);
}

}  // namespace cln
