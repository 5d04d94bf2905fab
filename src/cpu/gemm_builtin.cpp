// The built-in GEMM: BLIS-style loops (N panels, K panels, M blocks) over packed copies of
// A and B, with an MR x NR register-blocked micro-kernel written with vector extensions so
// that the compiler emits one FMA per vector; a variant per x86 ISA is picked at run time.
//
// Determinism: each element of C is produced by one micro-kernel call per K panel, K panels
// run in order, and the blocking depends only on (m, n, k) and the CPU's ISA, so the bytes of
// C do not depend on the thread count.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "candle/error.h"
#include "candle/utils.h"
#include "cpu/gemm.h"
#include "cpu/parallel.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define CANDLE_GEMM_X86 1
#endif

namespace candle::cpu {
namespace {

template <typename T>
using Ukernel = void (*)(size_t kc, const T* a, const T* b, T* c, size_t ldc, size_t mr, size_t nr,
                         bool accumulate);

// c[0..mr) x [0..nr) (=|+=) sum_p a[p*MR + i] * b[p*NR + j]; a and b are packed slivers.
// VB is the vector width in bytes; MR x NR/(VB/sizeof(T)) accumulators stay in registers.
template <typename T, size_t MR, size_t NR, size_t VB>
[[gnu::always_inline]] inline void ukernel_body(size_t kc, const T* __restrict a, const T* __restrict b,
                                                T* __restrict c, size_t ldc, size_t mr, size_t nr,
                                                bool accumulate) {
  typedef T V __attribute__((vector_size(VB)));
  constexpr size_t L = VB / sizeof(T), NV = NR / L;
  static_assert(NR % L == 0, "NR must be a multiple of the vector length");
  V acc[MR][NV];
#pragma GCC unroll 16
  for (size_t i = 0; i < MR; ++i)
#pragma GCC unroll 16
    for (size_t v = 0; v < NV; ++v) acc[i][v] = V{};
  for (size_t p = 0; p < kc; ++p) {
    V bv[NV];
#pragma GCC unroll 16
    for (size_t v = 0; v < NV; ++v) std::memcpy(&bv[v], b + p * NR + v * L, VB);
#pragma GCC unroll 16
    for (size_t i = 0; i < MR; ++i) {
      V ai = a[p * MR + i] - V{};  // broadcast (x - 0 is exact and folds away)
#pragma GCC unroll 16
      for (size_t v = 0; v < NV; ++v) acc[i][v] += ai * bv[v];
    }
  }
  if (mr == MR && nr == NR) {
#pragma GCC unroll 16
    for (size_t i = 0; i < MR; ++i)
#pragma GCC unroll 16
      for (size_t v = 0; v < NV; ++v) {
        V cv = acc[i][v];
        if (accumulate) {
          V old;
          std::memcpy(&old, c + i * ldc + v * L, VB);
          cv = old + cv;
        }
        std::memcpy(c + i * ldc + v * L, &cv, VB);
      }
    return;
  }
  alignas(64) T tile[MR * NR];
  for (size_t i = 0; i < MR; ++i)
    for (size_t v = 0; v < NV; ++v) std::memcpy(tile + i * NR + v * L, &acc[i][v], VB);
  for (size_t i = 0; i < mr; ++i) {
    T* crow = c + i * ldc;
    const T* trow = tile + i * NR;
    if (accumulate) {
      for (size_t j = 0; j < nr; ++j) crow[j] = crow[j] + trow[j];
    } else {
      for (size_t j = 0; j < nr; ++j) crow[j] = trow[j];
    }
  }
}

#ifdef CANDLE_GEMM_X86
__attribute__((target("avx512f,fma"))) void ukernel_f32_avx512(size_t kc, const float* a, const float* b,
                                                               float* c, size_t ldc, size_t mr, size_t nr,
                                                               bool acc) {
  ukernel_body<float, 8, 32, 64>(kc, a, b, c, ldc, mr, nr, acc);
}
__attribute__((target("avx2,fma"))) void ukernel_f32_avx2(size_t kc, const float* a, const float* b, float* c,
                                                          size_t ldc, size_t mr, size_t nr, bool acc) {
  ukernel_body<float, 6, 16, 32>(kc, a, b, c, ldc, mr, nr, acc);
}
__attribute__((target("avx512f,fma"))) void ukernel_f64_avx512(size_t kc, const double* a, const double* b,
                                                               double* c, size_t ldc, size_t mr, size_t nr,
                                                               bool acc) {
  ukernel_body<double, 8, 16, 64>(kc, a, b, c, ldc, mr, nr, acc);
}
__attribute__((target("avx2,fma"))) void ukernel_f64_avx2(size_t kc, const double* a, const double* b,
                                                          double* c, size_t ldc, size_t mr, size_t nr,
                                                          bool acc) {
  ukernel_body<double, 6, 8, 32>(kc, a, b, c, ldc, mr, nr, acc);
}
#endif
// 128-bit vectors: SSE2 on plain x86-64, NEON, WASM SIMD.
void ukernel_f32_generic(size_t kc, const float* a, const float* b, float* c, size_t ldc, size_t mr,
                         size_t nr, bool acc) {
  ukernel_body<float, 4, 8, 16>(kc, a, b, c, ldc, mr, nr, acc);
}
void ukernel_f64_generic(size_t kc, const double* a, const double* b, double* c, size_t ldc, size_t mr,
                         size_t nr, bool acc) {
  ukernel_body<double, 4, 4, 16>(kc, a, b, c, ldc, mr, nr, acc);
}

// A micro-kernel with its blocking: MC x KC of packed A stays in L2, KC x NR of packed B in L1.
template <typename T>
struct KernelConfig {
  Ukernel<T> fn;
  size_t mr, nr, mc, kc;
  const char* name;
};

const KernelConfig<float>& f32_config() {
  static const KernelConfig<float> cfg = []() -> KernelConfig<float> {
#ifdef CANDLE_GEMM_X86
    if (has_avx512f()) return {ukernel_f32_avx512, 8, 32, 128, 256, "avx512 8x32"};
    if (has_avx2()) return {ukernel_f32_avx2, 6, 16, 96, 256, "avx2 6x16"};
#endif
    return {ukernel_f32_generic, 4, 8, 64, 256, "simd128 4x8"};
  }();
  return cfg;
}

const KernelConfig<double>& f64_config() {
  static const KernelConfig<double> cfg = []() -> KernelConfig<double> {
#ifdef CANDLE_GEMM_X86
    if (has_avx512f()) return {ukernel_f64_avx512, 8, 16, 96, 192, "avx512 8x16"};
    if (has_avx2()) return {ukernel_f64_avx2, 6, 8, 72, 192, "avx2 6x8"};
#endif
    return {ukernel_f64_generic, 4, 4, 48, 192, "simd128 4x4"};
  }();
  return cfg;
}

template <typename T>
struct AlignedBuffer {
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> ptr;
  explicit AlignedBuffer(size_t n) {
    size_t bytes = ((n * sizeof(T) + 63) / 64) * 64;
    ptr.reset(static_cast<T*>(bytes ? std::aligned_alloc(64, bytes) : nullptr));
    if (bytes && !ptr) throw Error(ErrorKind::Device, "cpu: out of memory allocating gemm panels");
  }
  T* get() const { return ptr.get(); }
};

// Rows [i0, i0 + mr) and columns [pc, pc + kc) of A into an MR-interleaved sliver
// (dst[p * MR + r]), zero-padding rows mr..MR.
template <typename T>
void pack_a_sliver(MatRef<T> a, size_t i0, size_t mr, size_t pc, size_t kc, size_t MR, T* dst) {
  if (a.rs == 1 && mr > 1) {  // column-major A: each k step reads mr consecutive elements
    for (size_t p = 0; p < kc; ++p) {
      const T* src = a.p + (pc + p) * a.cs + i0;
      T* d = dst + p * MR;
      for (size_t r = 0; r < mr; ++r) d[r] = src[r];
      for (size_t r = mr; r < MR; ++r) d[r] = T(0);
    }
    return;
  }
  for (size_t r = 0; r < mr; ++r) {
    const T* src = a.p + (i0 + r) * a.rs + pc * a.cs;
    if (a.cs == 1) {
      for (size_t p = 0; p < kc; ++p) dst[p * MR + r] = src[p];
    } else {
      for (size_t p = 0; p < kc; ++p) dst[p * MR + r] = src[p * a.cs];
    }
  }
  for (size_t r = mr; r < MR; ++r)
    for (size_t p = 0; p < kc; ++p) dst[p * MR + r] = T(0);
}

// Rows [pc, pc + kc) and columns [j0, j0 + nr) of B into an NR-interleaved sliver
// (dst[p * NR + j]), zero-padding columns nr..NR.
template <typename T>
void pack_b_sliver(MatRef<T> b, size_t pc, size_t kc, size_t j0, size_t nr, size_t NR, T* dst) {
  if (b.cs == 1 || nr == 1) {  // row-major B: each k step copies nr consecutive elements
    for (size_t p = 0; p < kc; ++p) {
      const T* src = b.p + (pc + p) * b.rs + j0 * b.cs;
      T* d = dst + p * NR;
      if (b.cs == 1) {
        for (size_t j = 0; j < nr; ++j) d[j] = src[j];
      } else {
        d[0] = src[0];
      }
      for (size_t j = nr; j < NR; ++j) d[j] = T(0);
    }
    return;
  }
  for (size_t j = 0; j < nr; ++j) {
    const T* src = b.p + pc * b.rs + (j0 + j) * b.cs;
    for (size_t p = 0; p < kc; ++p) dst[p * NR + j] = src[p * b.rs];
  }
  for (size_t j = nr; j < NR; ++j)
    for (size_t p = 0; p < kc; ++p) dst[p * NR + j] = T(0);
}

// Columns of C per N panel; the packed B panel (KC x NC) is shared by all threads.
constexpr size_t kPanelCols = 4096;
// Multiply-adds below which a phase stays on one thread.
constexpr size_t kSerialFlops = size_t{1} << 18;

template <typename T>
void gemm_blocked(const KernelConfig<T>& cfg, size_t m, size_t n, size_t k, MatRef<T> a, MatRef<T> b, T* c,
                  size_t ldc, bool accumulate) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!accumulate)
      for (size_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, T(0));
    return;
  }
  const size_t MR = cfg.mr, NR = cfg.nr, MC = cfg.mc, KC = cfg.kc;
  const size_t tile_cols = NR * 8;  // columns of C per parallel tile
  const size_t m_slivers = (m + MR - 1) / MR;
  const size_t kc_max = std::min(KC, k);
  const size_t nc_max = std::min(kPanelCols, n);
  AlignedBuffer<T> apack(m_slivers * MR * kc_max);
  AlignedBuffer<T> bpack(((nc_max + NR - 1) / NR) * NR * kc_max);
  T* ap = apack.get();
  T* bp = bpack.get();

  for (size_t jc = 0; jc < n; jc += kPanelCols) {
    const size_t nc = std::min(kPanelCols, n - jc);
    const size_t n_slivers = (nc + NR - 1) / NR;
    for (size_t pc = 0; pc < k; pc += KC) {
      const size_t kc = std::min(KC, k - pc);
      // pack all of A's K panel and this B panel; one item per sliver
      const size_t pack_grain = std::max<size_t>(1, kParallelGrain / (kc * std::max(MR, NR)));
      parallel_for(m_slivers + n_slivers, pack_grain, [&](size_t s0, size_t s1) {
        for (size_t s = s0; s < s1; ++s) {
          if (s < m_slivers) {
            size_t i0 = s * MR;
            pack_a_sliver(a, i0, std::min(MR, m - i0), pc, kc, MR, ap + s * kc * MR);
          } else {
            size_t t = s - m_slivers, j0 = t * NR;
            pack_b_sliver(b, pc, kc, jc + j0, std::min(NR, nc - j0), NR, bp + t * kc * NR);
          }
        }
      });
      // C tiles of MC rows x tile_cols columns; within a tile an NR sliver of B stays in L1
      // while the MC x KC block of A streams from L2.
      const size_t m_blocks = (m + MC - 1) / MC;
      const size_t n_tiles = (nc + tile_cols - 1) / tile_cols;
      const size_t tile_flops = MC * tile_cols * kc;
      const size_t grain = std::max<size_t>(1, kSerialFlops / tile_flops);
      const bool acc = accumulate || pc > 0;
      parallel_for(m_blocks * n_tiles, grain, [&](size_t t0, size_t t1) {
        for (size_t t = t0; t < t1; ++t) {
          const size_t ib = t / n_tiles, jb = t - ib * n_tiles;
          const size_t i_end = std::min(m, (ib + 1) * MC);
          const size_t j_end = std::min(nc, (jb + 1) * tile_cols);
          for (size_t jr = jb * tile_cols; jr < j_end; jr += NR) {
            const T* bs = bp + (jr / NR) * kc * NR;
            const size_t nr = std::min(NR, nc - jr);
            for (size_t ir = ib * MC; ir < i_end; ir += MR) {
              cfg.fn(kc, ap + (ir / MR) * kc * MR, bs, c + ir * ldc + jc + jr, ldc, std::min(MR, m - ir), nr,
                     acc);
            }
          }
        }
      });
    }
  }
}

}  // namespace

void gemm_builtin(size_t m, size_t n, size_t k, MatRef<float> a, MatRef<float> b, float* c, size_t ldc,
                  bool accumulate) {
  gemm_blocked(f32_config(), m, n, k, a, b, c, ldc, accumulate);
}

void gemm_builtin(size_t m, size_t n, size_t k, MatRef<double> a, MatRef<double> b, double* c, size_t ldc,
                  bool accumulate) {
  gemm_blocked(f64_config(), m, n, k, a, b, c, ldc, accumulate);
}

const char* gemm_builtin_kernel_name() { return f32_config().name; }

}  // namespace candle::cpu
