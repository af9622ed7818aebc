// x86 AVX-512 VNNI versions of the quantized dot kernels (matvec.h). Highway 1.0.3 has no
// u8 x i8 dot product, which is what keeps Q4_0/Q8_0 decode at memory speed, so these
// are written with intrinsics. matvec.cpp selects them when the dispatched Highway target
// is AVX3_DL (which implies AVX512-VNNI and VBMI); machine.cpp times vpdpbusd through
// vnni_int8_chains for the integer peak the quantized prefill is judged against.
#pragma once

#include "kernels/matvec.h"
#include "kernels/packed.h"

namespace cln::kernels::detail::x86 {

// On the GGUF layout (weights not packed).
DotKernel vnni_dot_q8_0();
DotKernel vnni_dot_q4_0();
// On the packed layouts (packed.h): any number of tokens.
PackedKernel vnni_packed_q8_0();
PackedKernel vnni_packed_q4_0();

// `iters` rounds of 12 independent vpdpbusd chains (64 u8 x s8 products each); *ops gets
// two per product. Returns a value that depends on every chain.
float vnni_int8_chains(size_t iters, int32_t seed, double* ops);

}  // namespace cln::kernels::detail::x86
