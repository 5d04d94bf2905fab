// qmatmul_cpu's AVX-512 kernels: the 256-bit kernels of qmatmul_simd.inc compiled for
// AVX-512 (1 weight row x 8 activation rows in the prefill tile, as AVX2) with AVX512-VNNI vpdpbusd for the
// 32-element block types. Selected only where the CPU has avx512f/bw/vl/vnni.
#include "quantized/qmatmul_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstddef>

namespace candle::quantized::qmm {

namespace avx512 {
#define QMM_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define QMM_VNNI 1
#define QMM_PREFILL_R 1
#define QMM_PREFILL_C 8
#include "quantized/qmatmul_simd.inc"
#undef QMM_TARGET
#undef QMM_VNNI
#undef QMM_PREFILL_R
#undef QMM_PREFILL_C
}  // namespace avx512

KernelFn avx512_kernel(GgmlDType t) { return avx512::qmm_kernel_table(t); }

}  // namespace candle::quantized::qmm

#else
namespace candle::quantized::qmm {
KernelFn avx512_kernel(GgmlDType) { return nullptr; }
}  // namespace candle::quantized::qmm
#endif
