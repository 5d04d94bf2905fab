// The CPU's quantized matrix multiplication: y[i][j] = sum_k x[i][k] * W[j][k], with W given as
// n rows of k elements of GgmlDType t (k a multiple of its block size). The activations are
// quantized once to the 8-bit block type that t's dot product takes (Q8_0, Q8_1 or Q8_K), then
// integer dot products run; m == 1 is the decode path, m > 1 the batched (prefill) path. The
// kernels are chosen at run time (AVX-512 / VNNI, AVX2, plain C++) and the result does not
// depend on the thread count.
#pragma once

#include <cstddef>

#include "candle/quantized/ggml_dtype.h"

namespace candle::quantized {

// x: m rows of k f32 (row stride k); y: m rows of n f32 (row stride n)
void qmatmul_cpu(GgmlDType t, const void* w, size_t n, size_t k, const float* x, size_t m, float* y);
// the kernel family qmatmul_cpu uses for t at this CPU's ISA, e.g. "avx2" (benchmarks print it)
const char* qmatmul_cpu_kernel_name(GgmlDType t);

}  // namespace candle::quantized
