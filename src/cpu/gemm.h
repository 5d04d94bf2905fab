// GEMM entry points of the CPU backend (internal: src/ and the tests use it, users do not).
#pragma once

#include <cstddef>

namespace candle::cpu {

// A read-only matrix view: element (i, j) sits at p[i * rs + j * cs]. Any strides are
// allowed (0 too, for broadcast rows or columns).
template <typename T>
struct MatRef {
  const T* p;
  size_t rs, cs;
};

// C = A * B, or C += A * B when `accumulate`. A is m x k, B is k x n, C is row-major with
// leading dimension ldc (C is not read when !accumulate, so it may be uninitialised).
// k == 0 gives zeros. Multi-threaded through cpu::parallel_for (serial inside a parallel
// region); the work split depends only on the shape, so the bytes of C are the same for
// any thread count.
//
// The built-in cache-blocked GEMM (packed panels, a register-blocked micro-kernel chosen at
// run time for AVX-512 / AVX2+FMA / plain SIMD). Used when no BLAS is built in.
void gemm_builtin(size_t m, size_t n, size_t k, MatRef<float> a, MatRef<float> b, float* c, size_t ldc,
                  bool accumulate);
void gemm_builtin(size_t m, size_t n, size_t k, MatRef<double> a, MatRef<double> b, double* c, size_t ldc,
                  bool accumulate);
// The micro-kernel the built-in GEMM uses for f32 on this CPU, e.g. "avx512 8x32".
const char* gemm_builtin_kernel_name();

// The GEMM this build uses for f32/f64: OpenBLAS when CANDLE_HAVE_OPENBLAS (run single-threaded
// on tiles that depend only on the shape, so the result does not depend on the thread
// count), else gemm_builtin. Same contract as gemm_builtin.
void gemm(size_t m, size_t n, size_t k, MatRef<float> a, MatRef<float> b, float* c, size_t ldc,
          bool accumulate);
void gemm(size_t m, size_t n, size_t k, MatRef<double> a, MatRef<double> b, double* c, size_t ldc,
          bool accumulate);

}  // namespace candle::cpu
