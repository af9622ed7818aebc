// The one hash of the library: FNV-1a 64 over bytes. Keys data splits, derives per-tensor
// seeds from names (so adding a tensor never shifts another's random stream) and
// fingerprints vocabularies.
#pragma once

#include <cstdint>
#include <string_view>

namespace cln {

inline constexpr uint64_t kFnvOffset = 14695981039346656037ull;  // FNV-1a 64 offset basis

// FNV-1a 64 of s, continuing from h (the offset basis for a fresh hash).
constexpr uint64_t fnv1a64(std::string_view s, uint64_t h = kFnvOffset) {
  for (char ch : s) h = (h ^ static_cast<uint8_t>(ch)) * 1099511628211ull;
  return h;
}

// A seed for the random stream named `name` under a run's seed.
constexpr uint64_t name_seed(std::string_view name, uint64_t seed) {
  return fnv1a64(name, kFnvOffset ^ seed);
}

}  // namespace cln
