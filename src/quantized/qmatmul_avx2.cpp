// qmatmul_cpu's AVX2 kernels (maddubs / madd), and their AVX-VNNI twin (vpdpbusd on ymm) for
// the CPUs that have it: the same integer sums, so the same bits. Compiled for plain x86-64;
// only these functions carry the target attributes, and they run only where the CPU has them.
#include "quantized/qmatmul_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstddef>

namespace candle::quantized::qmm {

// the tiles of both 256-bit variants (qmatmul_simd.inc)
#define QMM_PREFILL_R 1
#define QMM_PREFILL_C 8
#define QMM_PACKED_C 2
#define QMM_PACKED_C_K 2
#define QMM_PACKED_C_6K 2

namespace avx2 {
#define QMM_TARGET __attribute__((target("avx2,fma,f16c")))
#define QMM_VNNI 0
#include "quantized/qmatmul_simd.inc"
#undef QMM_TARGET
#undef QMM_VNNI
}  // namespace avx2

namespace avxvnni {
#define QMM_TARGET __attribute__((target("avx2,fma,f16c,avxvnni")))
#define QMM_VNNI 2
#include "quantized/qmatmul_simd.inc"
#undef QMM_TARGET
#undef QMM_VNNI
}  // namespace avxvnni
#undef QMM_PACKED_C
#undef QMM_PACKED_C_K
#undef QMM_PACKED_C_6K
#undef QMM_PREFILL_R
#undef QMM_PREFILL_C

namespace {
bool cpu_has_avxvnni() {
  unsigned a, b, c, d;
  return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4));
}
// CANDLE_QMATMUL_ISA=avx2 keeps the AVX-VNNI twin (the bits are the same); this only lets a
// test or a benchmark compare the two: CANDLE_QMATMUL_VNNI=0 turns it off.
bool use_avxvnni() {
  static const bool use = [] {
    const char* env = std::getenv("CANDLE_QMATMUL_VNNI");
    return cpu_has_avxvnni() && !(env && env[0] == '0');
  }();
  return use;
}
}  // namespace

KernelFn avx2_kernel(GgmlDType t) {
  return use_avxvnni() ? avxvnni::qmm_kernel_table(t) : avx2::qmm_kernel_table(t);
}
KernelFn avx2_packed_kernel(GgmlDType t) {
  return use_avxvnni() ? avxvnni::qmm_packed_kernel_table(t) : avx2::qmm_packed_kernel_table(t);
}
const char* avx2_variant_name() { return use_avxvnni() ? "avx2-vnni" : "avx2"; }

}  // namespace candle::quantized::qmm

#else
namespace candle::quantized::qmm {
KernelFn avx2_kernel(GgmlDType) { return nullptr; }
KernelFn avx2_packed_kernel(GgmlDType) { return nullptr; }
const char* avx2_variant_name() { return "none"; }
}  // namespace candle::quantized::qmm
#endif
