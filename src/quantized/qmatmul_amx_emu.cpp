// qmatmul_amx.inc with the tile instructions done in C++ (amx_emulated_packed_kernel): the AMX
// kernels' data flow (tile shapes, strides, the B layout, the offsets) checked by the tests on any
// CPU with AVX-512, where the real tiles are rare. The semantics are the ISA's: TILECFG palette 1,
// TILELOADD / TILESTORED of rows x colsb bytes at a byte stride, TDPBUSD adding to each int32 of C
// the products of 4 unsigned bytes of A's row with 4 signed bytes of B's column, over A's colsb / 4
// quads.
#include "quantized/qmatmul_kernels.h"
#include "quantized/qmatmul_zmm.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

namespace candle::quantized::qmm {

namespace {

struct EmuTiles {
  uint8_t rows[8] = {};
  uint16_t colsb[8] = {};
  uint8_t data[8][16][64] = {};
};
thread_local EmuTiles emu;

void emu_config(const void* cfg) {
  const auto* p = static_cast<const uint8_t*>(cfg);
  for (int t = 0; t < 8; ++t) {
    std::memcpy(&emu.colsb[t], p + 16 + 2 * t, 2);
    emu.rows[t] = p[48 + t];
  }
}
void emu_zero(int t) { std::memset(emu.data[t], 0, sizeof emu.data[t]); }
void emu_load(int t, const void* p, size_t stride) {
  for (int r = 0; r < emu.rows[t]; ++r)
    std::memcpy(emu.data[t][r], static_cast<const uint8_t*>(p) + r * stride, emu.colsb[t]);
}
void emu_store(int t, void* p, size_t stride) {
  for (int r = 0; r < emu.rows[t]; ++r)
    std::memcpy(static_cast<uint8_t*>(p) + r * stride, emu.data[t][r], emu.colsb[t]);
}
void emu_dpbusd(int c, int a, int b) {
  for (int m = 0; m < emu.rows[c]; ++m)
    for (int n = 0; n < emu.colsb[c] / 4; ++n) {
      int32_t acc;
      std::memcpy(&acc, emu.data[c][m] + 4 * n, 4);
      for (int k = 0; k < emu.colsb[a] / 4; ++k)
        for (int i = 0; i < 4; ++i)
          acc += static_cast<int32_t>(emu.data[a][m][4 * k + i]) *
                 static_cast<int32_t>(static_cast<int8_t>(emu.data[b][k][4 * n + i]));
      std::memcpy(emu.data[c][m] + 4 * n, &acc, 4);
    }
}

}  // namespace

#define QMM_AMX_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define QMM_AMX_NS amx_emu
#define AMX_CONFIG(cfg) emu_config(cfg)
#define AMX_ZERO(t) emu_zero(t)
#define AMX_LOAD(t, p, stride) emu_load(t, p, stride)
#define AMX_DPBUSD(c, a, b) emu_dpbusd(c, a, b)
#define AMX_STORE(t, p, stride) emu_store(t, p, stride)
#define AMX_RELEASE() emu_zero(0)
#define AMX_READS(p, bytes) (void)(p)
#define AMX_WROTE(array) (void)(array)
#include "quantized/qmatmul_amx.inc"

KernelFn amx_emulated_packed_kernel(GgmlDType t) { return amx_emu::amx_kernel_table(t); }

}  // namespace candle::quantized::qmm

#else
namespace candle::quantized::qmm {
KernelFn amx_emulated_packed_kernel(GgmlDType) { return nullptr; }
}  // namespace candle::quantized::qmm
#endif
