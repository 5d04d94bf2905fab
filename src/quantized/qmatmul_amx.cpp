// qmatmul_cpu's AMX kernels (qmatmul_amx.inc: Q4_0 / Q8_0 packed weights, m >= kAmxMinRows) with the
// tile instructions, and the check that this CPU and kernel let the process use them.
#include "quantized/qmatmul_kernels.h"
#include "quantized/qmatmul_zmm.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace candle::quantized::qmm {

bool amx_usable() {
  static const bool usable = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const bool tile = (d >> 24) & 1, int8 = (d >> 25) & 1;
    if (!tile || !int8) return false;
    // Linux hands out the 8 KiB tile state only to a process that asks (ARCH_REQ_XCOMP_PERM for
    // XFEATURE_XTILEDATA); a kernel without AMX support refuses
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return usable;
}

#define QMM_AMX_TARGET \
  __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define QMM_AMX_NS amx_hw
// (GCC's tile intrinsics are asm statements that name no memory: these empty asm statements tell the
// compiler which bytes a tile load reads and a tile store wrote, so that the B scratch is stored
// before its load and C is read after its store, without a full memory barrier, which would keep
// the accumulators in memory)
#define AMX_READS(p, bytes) __asm__ __volatile__("" ::"m"(*reinterpret_cast<const uint8_t(*)[bytes]>(p)))
#define AMX_WROTE(array) __asm__ __volatile__("" : "+m"(array))
#define AMX_CONFIG(cfg) _tile_loadconfig(cfg)
#define AMX_ZERO(t) _tile_zero(t)
#define AMX_LOAD(t, p, stride) _tile_loadd(t, p, stride)
#define AMX_DPBUSD(c, a, b) _tile_dpbusd(c, a, b)
#define AMX_STORE(t, p, stride) _tile_stored(t, p, stride)
#define AMX_RELEASE() _tile_release()
#include "quantized/qmatmul_amx.inc"

KernelFn amx_packed_kernel(GgmlDType t) { return amx_usable() ? amx_hw::amx_kernel_table(t) : nullptr; }

}  // namespace candle::quantized::qmm

#else
namespace candle::quantized::qmm {
bool amx_usable() { return false; }
KernelFn amx_packed_kernel(GgmlDType) { return nullptr; }
}  // namespace candle::quantized::qmm
#endif
