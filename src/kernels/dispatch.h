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

// Some kernels stream memory differently per CPU maker (measured on each; see matvec.cpp).
// cpu_is_amd() answers from CPUID on x86 (false elsewhere) unless a test forced it.
bool cpu_is_amd();
// Forces cpu_is_amd() to answer `amd` (tests run both ways); force_cpu_vendor_reset() undoes it.
void force_cpu_is_amd(bool amd);
void force_cpu_vendor_reset();

}  // namespace cln::kernels::detail
