// GEMM entry points of the CPU backend (internal: src/ and the tests use it, users do not).
#pragma once

#include <cstddef>
#include <vector>

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
// The built-in cache-blocked GEMM (packed panels, a register-blocked micro-kernel for the
// ISA cpu_isa()). Each element of C depends only on its row of A, its column of B, k and the
// ISA (not on m, n, the column's position or the thread count): the convolutions use it so
// that an image tile gives the whole image's bits. Plain matmul uses it when no BLAS is built in.
void gemm_builtin(size_t m, size_t n, size_t k, MatRef<float> a, MatRef<float> b, float* c, size_t ldc,
                  bool accumulate);
void gemm_builtin(size_t m, size_t n, size_t k, MatRef<double> a, MatRef<double> b, double* c, size_t ldc,
                  bool accumulate);
// The micro-kernels the built-in GEMM uses for f32 at cpu_isa(), e.g. "avx2 4x24+6x16".
const char* gemm_builtin_kernel_name();

// The instruction sets of the built-in GEMM's kernels, lowest first (Sse: the 128-bit kernel,
// SSE2 on x86-64, NEON or WASM SIMD elsewhere). The bits differ between ISAs (FMA or not, the
// K panel length), never within one.
enum class CpuIsa { Sse, Avx2, Avx512 };
const char* cpu_isa_name(CpuIsa isa);  // "sse", "avx2", "avx512"
bool cpu_isa_supported(CpuIsa isa);
// The ISA the built-in kernels use: CANDLE_CPU_ISA=avx512|avx2|sse (read once; a value that is
// unknown or that this CPU lacks throws candle::Error from every GEMM), else the best one.
CpuIsa cpu_isa();
// Switches the ISA for the rest of the process (tests, to cover every kernel on one machine);
// not synchronised with GEMMs running on other threads. Throws when the CPU lacks it.
void set_cpu_isa(CpuIsa isa);

// The GEMM this build uses for f32/f64: OpenBLAS when CANDLE_HAVE_OPENBLAS (run single-threaded
// on tiles that depend only on the shape, so the result does not depend on the thread
// count), else gemm_builtin. Same contract as gemm_builtin.
void gemm(size_t m, size_t n, size_t k, MatRef<float> a, MatRef<float> b, float* c, size_t ldc,
          bool accumulate);
void gemm(size_t m, size_t n, size_t k, MatRef<double> a, MatRef<double> b, double* c, size_t ldc,
          bool accumulate);

// A GEMM whose elements' bits depend only on their row of A, column of B, k and cpu_isa(): what
// makes a convolution computed on an image tile give the same bits as on the whole image. It
// is gemm_builtin: OpenBLAS picks its kernels (and their rounding, which can depend on n and
// on the column) per CPU model, so no BLAS call can promise this on every x86-64 CPU.
void gemm_tile_exact(size_t m, size_t n, size_t k, MatRef<float> a, MatRef<float> b, float* c, size_t ldc,
                     bool accumulate);
void gemm_tile_exact(size_t m, size_t n, size_t k, MatRef<double> a, MatRef<double> b, double* c, size_t ldc,
                     bool accumulate);

// An m x k A packed once for several gemm_tile_exact calls (a convolution's kernel, applied to
// every block of output positions): the packing is not repeated per call, the bits are the
// same as gemm_tile_exact(m, n, k, a, ...). Packed for the cpu_isa() of the time.
template <typename T>
struct PackedA {
  size_t m = 0, k = 0;
  CpuIsa isa = CpuIsa::Sse;
  std::vector<std::vector<T>> data;  // one layout per micro-kernel of the ISA
};
PackedA<float> pack_a(size_t m, size_t k, MatRef<float> a);
PackedA<double> pack_a(size_t m, size_t k, MatRef<double> a);
void gemm_tile_exact(const PackedA<float>& a, size_t n, MatRef<float> b, float* c, size_t ldc,
                     bool accumulate);
void gemm_tile_exact(const PackedA<double>& a, size_t n, MatRef<double> b, double* c, size_t ldc,
                     bool accumulate);

}  // namespace candle::cpu
