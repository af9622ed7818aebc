// Which SIMD target the kernels run on. Every optimized kernel is compiled for each Highway
// target of the build and picked at run time; tests pin each target in turn.
#pragma once

#include <cstdint>
#include <vector>

namespace cln::kernels::detail {

// The targets compiled into clone_kernels that this CPU supports, best first.
std::vector<int64_t> available_targets();
// Makes every kernel dispatch to `target` (one of available_targets()); 0 restores the best.
void force_target(int64_t target);

// Some kernels stream memory differently per CPU (measured on each; see matvec.cpp).
// plain_streams(): the decode row loops run without software prefetch (and F16 converts 8
// halves at a time): on AMD before Zen 5 (CPUID vendor AuthenticAMD, family < 0x1A), whose
// hardware prefetchers keep up alone. False elsewhere (Intel, Zen 5, non-x86) unless a
// test forced it.
bool plain_streams();
// Forces plain_streams() (tests run both ways); force_plain_streams_reset() undoes it.
void force_plain_streams(bool plain);
void force_plain_streams_reset();

}  // namespace cln::kernels::detail
