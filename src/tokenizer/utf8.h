// Strict UTF-8: the rules SentencePiece's normalizer applies before tokenizing (shortest
// form only, no surrogates, nothing above U+10FFFF).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace cln {

// Length in bytes (1..4) of the well-formed character that s starts with, or 0 when the
// first byte does not start one (s empty, a stray continuation byte, a truncated or
// overlong sequence, a surrogate, or a code point above U+10FFFF).
inline size_t utf8_valid_char_len(std::string_view s) {
  if (s.empty()) return 0;
  const auto b = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const auto cont = [&](size_t i) { return i < s.size() && (b(i) & 0xC0) == 0x80; };
  const uint8_t c0 = b(0);
  if (c0 < 0x80) return 1;
  if ((c0 & 0xE0) == 0xC0) {
    if (!cont(1)) return 0;
    const uint32_t cp = (uint32_t{c0 & 0x1Fu} << 6) | (b(1) & 0x3Fu);
    return cp >= 0x80 ? 2 : 0;
  }
  if ((c0 & 0xF0) == 0xE0) {
    if (!cont(1) || !cont(2)) return 0;
    const uint32_t cp =
        (uint32_t{c0 & 0x0Fu} << 12) | (uint32_t{b(1) & 0x3Fu} << 6) | (b(2) & 0x3Fu);
    return cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF) ? 3 : 0;
  }
  if ((c0 & 0xF8) == 0xF0) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    const uint32_t cp = (uint32_t{c0 & 0x07u} << 18) | (uint32_t{b(1) & 0x3Fu} << 12) |
                        (uint32_t{b(2) & 0x3Fu} << 6) | (b(3) & 0x3Fu);
    return cp >= 0x10000 && cp <= 0x10FFFF ? 4 : 0;
  }
  return 0;
}

}  // namespace cln
