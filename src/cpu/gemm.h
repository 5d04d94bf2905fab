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

// gemm, with each element of C rounded independently of n and of its column's position
// (given its row of A, its column of B and k): what makes a convolution computed on an image
// tile give the same bits as on the whole image. OpenBLAS 0.3.21 (SkylakeX/Cooperlake
// kernels) runs products with m*n*k <= 10^6 through "small matrix" kernels whose rounding
// depends on n; such calls are widened with zero columns past that size. The built-in
// GEMM already has the property.
void gemm_tile_exact(size_t m, size_t n, size_t k, MatRef<float> a, MatRef<float> b, float* c, size_t ldc,
                     bool accumulate);

}  // namespace candle::cpu
