// x86 AVX2 versions of the quantized dot kernels (matvec.h), for machines without
// AVX-512 VNNI: u8 x s8 pair products (vpmaddubsw) instead of the portable kernels' int16
// widening. matvec.cpp selects them when the dispatched Highway target is AVX2, or AVX3
// (AVX-512 without VNNI).
#pragma once

#include "kernels/matvec.h"

namespace cln::kernels::detail::x86 {

DotKernel avx2_dot_q8_0();
DotKernel avx2_dot_q4_0();

}  // namespace cln::kernels::detail::x86
