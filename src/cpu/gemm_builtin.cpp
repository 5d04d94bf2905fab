// The built-in GEMM: BLIS-style loops (N panels, K panels, M blocks) over packed copies of
// A and B, with an MR x NR register-blocked micro-kernel written with vector extensions so
// that the compiler emits one FMA per vector; a variant per x86 ISA is picked at run time
// (CANDLE_CPU_ISA can force a lower one).
//
// Bits: element (i, j) of C is, for each K panel in order, an accumulator started at zero
// and updated by one multiply-add per k (fused on AVX2/AVX-512, mul + add on SSE) in
// increasing k, then stored (first panel) or added to C. The K panels are [0, KC),
// [KC, 2 KC), ... with KC fixed per ISA and element type, and zero-padded rows/columns of a
// partial tile only feed padded outputs. So the bits of (i, j) depend only on row i of A,
// column j of B, k and the ISA: not on m, n, the tile shape (MR x NR may follow the shape),
// the column's position or the thread count. Convolutions rely on this (tiled == untiled).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "candle/error.h"
#include "candle/utils.h"
#include "cpu/gemm.h"
#include "cpu/parallel.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define CANDLE_GEMM_X86 1
#endif

namespace candle::cpu {

// ---- the ISA the kernels use ---------------------------------------------------------------

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Avx512: return "avx512";
    case CpuIsa::Avx2: return "avx2";
    case CpuIsa::Sse: break;
  }
  return "sse";
}

bool cpu_isa_supported(CpuIsa isa) {
#ifdef CANDLE_GEMM_X86
  if (isa == CpuIsa::Avx512) return has_avx512f();
  if (isa == CpuIsa::Avx2) return has_avx2();
  return true;
#else
  return isa == CpuIsa::Sse;  // the 128-bit kernel (NEON, WASM SIMD)
#endif
}

namespace {

CpuIsa best_isa() {
  if (cpu_isa_supported(CpuIsa::Avx512)) return CpuIsa::Avx512;
  if (cpu_isa_supported(CpuIsa::Avx2)) return CpuIsa::Avx2;
  return CpuIsa::Sse;
}

// CANDLE_CPU_ISA, read once; a value this CPU cannot run (or a typo) is an error, not a silent
// fallback: a CI run that asked for AVX2 must not test AVX-512 instead.
CpuIsa isa_from_env() {
  static const CpuIsa isa = [] {
    const char* env = std::getenv("CANDLE_CPU_ISA");
    if (!env || !*env) return best_isa();
    const std::string_view v(env);
    CpuIsa want;
    if (v == "avx512")
      want = CpuIsa::Avx512;
    else if (v == "avx2")
      want = CpuIsa::Avx2;
    else if (v == "sse")
      want = CpuIsa::Sse;
    else
      throw Error(ErrorKind::InvalidArgument,
                  "CANDLE_CPU_ISA=" + std::string(v) + ": expected avx512, avx2 or sse");
    if (!cpu_isa_supported(want))
      throw Error(ErrorKind::InvalidArgument,
                  "CANDLE_CPU_ISA=" + std::string(v) + ": this CPU does not support " + std::string(v));
    return want;
  }();
  return isa;
}

// -1 until the first use (then CANDLE_CPU_ISA or the best), or what set_cpu_isa chose.
std::atomic<int> g_isa{-1};

}  // namespace

CpuIsa cpu_isa() {
  int v = g_isa.load(std::memory_order_relaxed);
  if (v < 0) {
    v = static_cast<int>(isa_from_env());
    g_isa.store(v, std::memory_order_relaxed);
  }
  return static_cast<CpuIsa>(v);
}

void set_cpu_isa(CpuIsa isa) {
  if (!cpu_isa_supported(isa))
    throw Error(ErrorKind::InvalidArgument,
                std::string("set_cpu_isa: this CPU does not support ") + cpu_isa_name(isa));
  g_isa.store(static_cast<int>(isa), std::memory_order_relaxed);
}

// ---- micro-kernels -------------------------------------------------------------------------

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
  // a partial tile: the same sums, of which only the real rows and columns are stored
  // (unrolled: with variable indices acc would live on the stack, costing every call a spill)
  alignas(64) T tile[MR * NR];
#pragma GCC unroll 16
  for (size_t i = 0; i < MR; ++i)
#pragma GCC unroll 16
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
// T is a type and attr an attribute list: neither can stand in parentheses
// NOLINTBEGIN(bugprone-macro-parentheses)
#define CANDLE_UKERNEL(name, attr, T, MR, NR, VB)                                                       \
  attr void name(size_t kc, const T* a, const T* b, T* c, size_t ldc, size_t mr, size_t nr, bool acc) { \
    ukernel_body<T, MR, NR, VB>(kc, a, b, c, ldc, mr, nr, acc);                                         \
  }
// NOLINTEND(bugprone-macro-parentheses)
#define CANDLE_AVX512 __attribute__((target("avx512f,fma")))
#define CANDLE_AVX2 __attribute__((target("avx2,fma")))
CANDLE_UKERNEL(uk_f32_avx512_8x32, CANDLE_AVX512, float, 8, 32, 64)
CANDLE_UKERNEL(uk_f32_avx512_4x48, CANDLE_AVX512, float, 4, 48, 64)
CANDLE_UKERNEL(uk_f32_avx2_6x16, CANDLE_AVX2, float, 6, 16, 32)
CANDLE_UKERNEL(uk_f32_avx2_4x24, CANDLE_AVX2, float, 4, 24, 32)
CANDLE_UKERNEL(uk_f64_avx512_8x16, CANDLE_AVX512, double, 8, 16, 64)
CANDLE_UKERNEL(uk_f64_avx2_6x8, CANDLE_AVX2, double, 6, 8, 32)
#endif
// 128-bit vectors: SSE2 on plain x86-64, NEON, WASM SIMD.
void uk_f32_sse_4x8(size_t kc, const float* a, const float* b, float* c, size_t ldc, size_t mr, size_t nr,
                    bool acc) {
  ukernel_body<float, 4, 8, 16>(kc, a, b, c, ldc, mr, nr, acc);
}
void uk_f64_sse_4x4(size_t kc, const double* a, const double* b, double* c, size_t ldc, size_t mr, size_t nr,
                    bool acc) {
  ukernel_body<double, 4, 4, 16>(kc, a, b, c, ldc, mr, nr, acc);
}

// ---- packing -------------------------------------------------------------------------------

// Rows [i0, i0 + mr) and columns [pc, pc + kc) of A into an MR-interleaved sliver
// (dst[p * MR + r]), zero-padding rows mr..MR.
template <typename T, size_t MR>
void pack_a_sliver(MatRef<T> a, size_t i0, size_t mr, size_t pc, size_t kc, T* dst) {
  if (a.rs == 1 && mr > 1) {  // column-major A: each k step reads mr consecutive elements
    for (size_t p = 0; p < kc; ++p) {
      const T* src = a.p + (pc + p) * a.cs + i0;
      T* d = dst + p * MR;
      for (size_t r = 0; r < mr; ++r) d[r] = src[r];
      for (size_t r = mr; r < MR; ++r) d[r] = T(0);
    }
    return;
  }
  if (mr == MR) {  // full sliver: MR row streams, one contiguous MR-run written per k step
    const T* rows[MR];
    for (size_t r = 0; r < MR; ++r) rows[r] = a.p + (i0 + r) * a.rs + pc * a.cs;
    if (a.cs == 1) {
      for (size_t p = 0; p < kc; ++p)
#pragma GCC unroll 16
        for (size_t r = 0; r < MR; ++r) dst[p * MR + r] = rows[r][p];
    } else {
      for (size_t p = 0; p < kc; ++p)
#pragma GCC unroll 16
        for (size_t r = 0; r < MR; ++r) dst[p * MR + r] = rows[r][p * a.cs];
    }
    return;
  }
  for (size_t r = 0; r < mr; ++r) {
    const T* src = a.p + (i0 + r) * a.rs + pc * a.cs;
    for (size_t p = 0; p < kc; ++p) dst[p * MR + r] = src[p * a.cs];
  }
  for (size_t r = mr; r < MR; ++r)
    for (size_t p = 0; p < kc; ++p) dst[p * MR + r] = T(0);
}

// d[q * ld + r] = src[r][p + q] for an L x L block (L = 16 / sizeof(T)): 16-byte loads, shuffles
// and stores instead of L * L scalar ones. A copy: no arithmetic, so no effect on the bits.
template <typename T>
[[gnu::always_inline]] inline void transpose_block(const T* const* src, size_t p, T* d, size_t ld) {
#if defined(__clang__)
#define CANDLE_SHUFFLE(x, y, ...) __builtin_shufflevector(x, y, __VA_ARGS__)
#else
#define CANDLE_SHUFFLE(x, y, ...) __builtin_shuffle(x, y, I{__VA_ARGS__})
#endif
  if constexpr (sizeof(T) == 4) {
    typedef T V __attribute__((vector_size(16)));
    [[maybe_unused]] typedef int32_t I __attribute__((vector_size(16)));
    V r0, r1, r2, r3;
    std::memcpy(&r0, src[0] + p, 16);
    std::memcpy(&r1, src[1] + p, 16);
    std::memcpy(&r2, src[2] + p, 16);
    std::memcpy(&r3, src[3] + p, 16);
    const V t0 = CANDLE_SHUFFLE(r0, r1, 0, 4, 1, 5), t1 = CANDLE_SHUFFLE(r0, r1, 2, 6, 3, 7);
    const V t2 = CANDLE_SHUFFLE(r2, r3, 0, 4, 1, 5), t3 = CANDLE_SHUFFLE(r2, r3, 2, 6, 3, 7);
    const V o0 = CANDLE_SHUFFLE(t0, t2, 0, 1, 4, 5), o1 = CANDLE_SHUFFLE(t0, t2, 2, 3, 6, 7);
    const V o2 = CANDLE_SHUFFLE(t1, t3, 0, 1, 4, 5), o3 = CANDLE_SHUFFLE(t1, t3, 2, 3, 6, 7);
    std::memcpy(d, &o0, 16);
    std::memcpy(d + ld, &o1, 16);
    std::memcpy(d + 2 * ld, &o2, 16);
    std::memcpy(d + 3 * ld, &o3, 16);
  } else {
    typedef T V __attribute__((vector_size(16)));
    [[maybe_unused]] typedef int64_t I __attribute__((vector_size(16)));
    V r0, r1;
    std::memcpy(&r0, src[0] + p, 16);
    std::memcpy(&r1, src[1] + p, 16);
    const V o0 = CANDLE_SHUFFLE(r0, r1, 0, 2), o1 = CANDLE_SHUFFLE(r0, r1, 1, 3);
    std::memcpy(d, &o0, 16);
    std::memcpy(d + ld, &o1, 16);
  }
#undef CANDLE_SHUFFLE
}

// Rows [pc, pc + kc) and columns [j0, j0 + ncols) of B into NR-interleaved slivers of kc x NR
// (sliver t at dst + t * kc * NR, element (p, j) at p * NR + j), zero-padding the last one.
template <typename T, size_t NR>
void pack_b_slivers(MatRef<T> b, size_t pc, size_t kc, size_t j0, size_t ncols, T* dst) {
  const size_t full = ncols / NR, rem = ncols % NR;
  if (b.cs == 1) {
    // row by row: B is read sequentially (a sliver at a time would jump a row per k step,
    // a page apart for a 1x1 conv's input planes)
    for (size_t p = 0; p < kc; ++p) {
      const T* src = b.p + (pc + p) * b.rs + j0;
      T* d = dst + p * NR;
      for (size_t t = 0; t < full; ++t) std::memcpy(d + t * kc * NR, src + t * NR, NR * sizeof(T));
      if (rem) {
        T* dr = d + full * kc * NR;
        std::memset(dr, 0, NR * sizeof(T));  // fixed size: vector stores, not a rep stos per row
        for (size_t j = 0; j < rem; ++j) dr[j] = src[full * NR + j];
      }
    }
    return;
  }
  // strided or column-major B: column by column (sequential when B is column-major), a
  // 16-byte transpose at a time for column-major f32/f64 (scalar stores NR apart cost 20% of a
  // kernel gradient's GEMM)
  for (size_t t = 0; t * NR < ncols; ++t) {
    const size_t nr = std::min(NR, ncols - t * NR);
    T* d = dst + t * kc * NR;
    size_t j = 0;
    if (b.rs == 1) {
      constexpr size_t L = 16 / sizeof(T);
      const size_t kc_v = kc / L * L;
      for (; j + L <= nr; j += L) {
        const T* src[L];
        for (size_t q = 0; q < L; ++q) src[q] = b.p + pc + (j0 + t * NR + j + q) * b.cs;
        for (size_t p = 0; p < kc_v; p += L) transpose_block<T>(src, p, d + p * NR + j, NR);
        for (size_t p = kc_v; p < kc; ++p)
          for (size_t q = 0; q < L; ++q) d[p * NR + j + q] = src[q][p];
      }
    }
    for (; j < nr; ++j) {
      const T* src = b.p + pc * b.rs + (j0 + t * NR + j) * b.cs;
      for (size_t p = 0; p < kc; ++p) d[p * NR + j] = src[p * b.rs];
    }
    for (j = nr; j < NR; ++j)
      for (size_t p = 0; p < kc; ++p) d[p * NR + j] = T(0);
  }
}

// ---- the blocked driver --------------------------------------------------------------------

// Packing space, 64-byte aligned. Each thread keeps its two panels (A's, B's) between calls, up
// to kKeepBytes each: the convolutions run one serial GEMM per block on every worker, and when each
// call allocated and freed its panels, glibc's per-thread arenas gave the pages back and faulted
// them in again (100 MNIST CNN training steps at 16 threads: 92.2k -> 86.6k page faults). Larger
// panels are allocated for the call and freed after it.
constexpr size_t kKeepBytes = size_t{5} << 20;

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
using AlignedPtr = std::unique_ptr<void, AlignedFree>;

AlignedPtr aligned_bytes(size_t bytes) {
  bytes = (bytes + 63) / 64 * 64;
  AlignedPtr p(bytes ? std::aligned_alloc(64, bytes) : nullptr);
  if (bytes && !p) throw Error(ErrorKind::Device, "cpu: out of memory allocating gemm panels");
  return p;
}

template <typename T>
struct PackBuffer {
  T* ptr = nullptr;
  AlignedPtr owned;  // a panel larger than the kept space, freed with the buffer

  PackBuffer(int slot, size_t n) {
    struct Kept {
      AlignedPtr p;
      size_t bytes = 0;
    };
    thread_local Kept kept[2];
    const size_t bytes = n * sizeof(T);
    if (bytes == 0) return;
    if (bytes > kKeepBytes) {
      owned = aligned_bytes(bytes);
      ptr = static_cast<T*>(owned.get());
      return;
    }
    Kept& k = kept[slot];
    if (k.bytes < bytes) {
      k.p.reset();  // the old panel first: both need not fit at once
      k.bytes = 0;
      k.p = aligned_bytes(bytes);
      k.bytes = bytes;
    }
    ptr = static_cast<T*>(k.p.get());
  }
  T* get() const { return ptr; }
};

// Columns of C per N panel; the packed B panel (KC x NC) is shared by all threads.
constexpr size_t kPanelCols = 4096;
// B slivers packed by one parallel item (row by row across the group).
constexpr size_t kPackGroup = 16;
// Multiply-adds below which a phase stays on one thread.
constexpr size_t kSerialFlops = size_t{1} << 18;

// All of A packed: for each K panel in order, its MR slivers (kc x MR each), so the panel that
// starts at pc sits at pc * m_slivers * MR.
template <typename T, size_t MR>
void pack_a_all(size_t KC, size_t m, size_t k, MatRef<T> a, T* dst) {
  const size_t m_slivers = (m + MR - 1) / MR, panels = (k + KC - 1) / KC;
  const size_t grain = std::max<size_t>(1, kParallelGrain / (std::min(KC, k) * MR));
  parallel_for(panels * m_slivers, grain, [&](size_t s0, size_t s1) {
    for (size_t s = s0; s < s1; ++s) {
      const size_t pi = s / m_slivers, si = s % m_slivers, pc = pi * KC, kc = std::min(KC, k - pc);
      pack_a_sliver<T, MR>(a, si * MR, std::min(MR, m - si * MR), pc, kc,
                           dst + pc * m_slivers * MR + si * kc * MR);
    }
  });
}

// MC x KC of packed A stays in L2 and KC x NR of packed B in L1; KC is the ISA's (the bits
// depend on it), MR, NR and MC are the kernel's. `a_packed`: A packed by pack_a_all, or null.
template <typename T, size_t MR, size_t NR, size_t MC>
void gemm_blocked(Ukernel<T> fn, size_t KC, size_t m, size_t n, size_t k, MatRef<T> a, const T* a_packed,
                  MatRef<T> b, T* c, size_t ldc, bool accumulate) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!accumulate)
      for (size_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, T(0));
    return;
  }
  const size_t tile_cols = NR * 8;  // columns of C per parallel tile
  const size_t m_slivers = (m + MR - 1) / MR;
  const size_t kc_max = std::min(KC, k);
  const size_t nc_max = std::min(kPanelCols, n);
  const PackBuffer<T> apack(0, a_packed ? 0 : m_slivers * MR * kc_max);
  const PackBuffer<T> bpack(1, ((nc_max + NR - 1) / NR) * NR * kc_max);
  T* bp = bpack.get();

  for (size_t jc = 0; jc < n; jc += kPanelCols) {
    const size_t nc = std::min(kPanelCols, n - jc);
    const size_t n_slivers = (nc + NR - 1) / NR;
    for (size_t pc = 0; pc < k; pc += KC) {
      const size_t kc = std::min(KC, k - pc);
      const T* ap = a_packed ? a_packed + pc * m_slivers * MR : apack.get();
      // pack A's K panel (unless given) and this B panel; items: A slivers, groups of B slivers
      const size_t a_items = a_packed ? 0 : m_slivers;
      const size_t n_groups = (n_slivers + kPackGroup - 1) / kPackGroup;
      const size_t pack_grain = std::max<size_t>(1, kParallelGrain / (kc * std::max(MR, NR)));
      parallel_for(a_items + n_groups, pack_grain, [&](size_t s0, size_t s1) {
        for (size_t s = s0; s < s1; ++s) {
          if (s < a_items) {
            size_t i0 = s * MR;
            pack_a_sliver<T, MR>(a, i0, std::min(MR, m - i0), pc, kc, apack.get() + s * kc * MR);
          } else {
            size_t t0 = (s - a_items) * kPackGroup, j0 = t0 * NR;
            pack_b_slivers<T, NR>(b, pc, kc, jc + j0, std::min(kPackGroup * NR, nc - j0), bp + t0 * kc * NR);
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
              fn(kc, ap + (ir / MR) * kc * MR, bs, c + ir * ldc + jc + jr, ldc, std::min(MR, m - ir), nr,
                 acc);
            }
          }
        }
      });
    }
  }
}

// A micro-kernel with the driver and A packer instantiated for its MR x NR (and MC).
template <typename T>
struct Kernel {
  Ukernel<T> fn;
  void (*run)(Ukernel<T> fn, size_t KC, size_t m, size_t n, size_t k, MatRef<T> a, const T* a_packed,
              MatRef<T> b, T* c, size_t ldc, bool accumulate);
  void (*pack_a)(size_t KC, size_t m, size_t k, MatRef<T> a, T* dst);
  size_t mr, nr;
  const char* name;
};

template <typename T, size_t MR, size_t NR, size_t MC>
constexpr Kernel<T> make_kernel(Ukernel<T> fn, const char* name) {
  return {fn, gemm_blocked<T, MR, NR, MC>, pack_a_all<T, MR>, MR, NR, name};
}

// The kernels of one ISA and its K panel length. Which kernel runs follows the shape (the
// fewest padded products, the first on ties); it changes no bits, only the speed.
template <typename T>
struct IsaKernels {
  size_t kc;
  Kernel<T> kernels[2];
  size_t count;
  const char* name;

  size_t for_shape(size_t m, size_t n) const {
    auto padded = [&](const Kernel<T>& kn) {
      return (m + kn.mr - 1) / kn.mr * kn.mr * ((n + kn.nr - 1) / kn.nr * kn.nr);
    };
    size_t best = 0;
    for (size_t i = 1; i < count; ++i)
      if (padded(kernels[i]) < padded(kernels[best])) best = i;
    return best;
  }
};

const IsaKernels<float>& f32_kernels(CpuIsa isa) {
#ifdef CANDLE_GEMM_X86
  // 12-16 accumulators each; a second shape cuts the padding of edge tiles (m = 4, n = 128 ...)
  static const IsaKernels<float> avx512{256,
                                        {make_kernel<float, 8, 32, 128>(uk_f32_avx512_8x32, "avx512 8x32"),
                                         make_kernel<float, 4, 48, 128>(uk_f32_avx512_4x48, "avx512 4x48")},
                                        2,
                                        "avx512 8x32+4x48"};
  // AVX2: 4x24 first (7 loads per 12 FMAs against 8: 7% more products per second on Zen 3)
  static const IsaKernels<float> avx2{256,
                                      {make_kernel<float, 4, 24, 96>(uk_f32_avx2_4x24, "avx2 4x24"),
                                       make_kernel<float, 6, 16, 96>(uk_f32_avx2_6x16, "avx2 6x16")},
                                      2,
                                      "avx2 4x24+6x16"};
  if (isa == CpuIsa::Avx512) return avx512;
  if (isa == CpuIsa::Avx2) return avx2;
#endif
  (void)isa;
  static const IsaKernels<float> sse{
      256, {make_kernel<float, 4, 8, 64>(uk_f32_sse_4x8, "sse 4x8")}, 1, "sse 4x8"};
  return sse;
}

const IsaKernels<double>& f64_kernels(CpuIsa isa) {
#ifdef CANDLE_GEMM_X86
  static const IsaKernels<double> avx512{
      192, {make_kernel<double, 8, 16, 96>(uk_f64_avx512_8x16, "avx512 8x16")}, 1, "avx512 8x16"};
  static const IsaKernels<double> avx2{
      192, {make_kernel<double, 6, 8, 72>(uk_f64_avx2_6x8, "avx2 6x8")}, 1, "avx2 6x8"};
  if (isa == CpuIsa::Avx512) return avx512;
  if (isa == CpuIsa::Avx2) return avx2;
#endif
  (void)isa;
  static const IsaKernels<double> sse{
      192, {make_kernel<double, 4, 4, 48>(uk_f64_sse_4x4, "sse 4x4")}, 1, "sse 4x4"};
  return sse;
}

// CANDLE_GEMM_KC_TUNE=N (tuning experiments only; it changes the bits): the K panel length.
template <typename T>
size_t kc_of(const IsaKernels<T>& ks) {
  static const size_t tune = [] {
    const char* v = std::getenv("CANDLE_GEMM_KC_TUNE");
    return v ? size_t(std::strtoull(v, nullptr, 10)) : size_t{0};
  }();
  return tune ? tune : ks.kc;
}

const IsaKernels<float>& kernels_of(CpuIsa isa, float*) { return f32_kernels(isa); }
const IsaKernels<double>& kernels_of(CpuIsa isa, double*) { return f64_kernels(isa); }

template <typename T>
void gemm_with(CpuIsa isa, size_t m, size_t n, size_t k, MatRef<T> a, MatRef<T> b, T* c, size_t ldc,
               bool accumulate) {
  const IsaKernels<T>& ks = kernels_of(isa, static_cast<T*>(nullptr));
  const Kernel<T>& kn = ks.kernels[ks.for_shape(m, n)];
  kn.run(kn.fn, kc_of(ks), m, n, k, a, nullptr, b, c, ldc, accumulate);
}

// Packed for every kernel of the ISA (n, which picks one, is not known yet; A is small).
template <typename T>
PackedA<T> pack_with(size_t m, size_t k, MatRef<T> a) {
  PackedA<T> p;
  p.m = m;
  p.k = k;
  p.isa = cpu_isa();
  const IsaKernels<T>& ks = kernels_of(p.isa, static_cast<T*>(nullptr));
  p.data.resize(ks.count);
  for (size_t i = 0; i < ks.count; ++i) {
    const Kernel<T>& kn = ks.kernels[i];
    p.data[i].resize((m + kn.mr - 1) / kn.mr * kn.mr * k);
    if (m > 0 && k > 0) kn.pack_a(kc_of(ks), m, k, a, p.data[i].data());
  }
  return p;
}

template <typename T>
void gemm_packed_with(const PackedA<T>& a, size_t n, MatRef<T> b, T* c, size_t ldc, bool accumulate) {
  // the ISA it was packed for (its kernels' layouts), even if set_cpu_isa changed it since
  const IsaKernels<T>& ks = kernels_of(a.isa, static_cast<T*>(nullptr));
  const size_t i = ks.for_shape(a.m, n);
  const Kernel<T>& kn = ks.kernels[i];
  kn.run(kn.fn, kc_of(ks), a.m, n, a.k, MatRef<T>{nullptr, 0, 0}, a.data[i].data(), b, c, ldc, accumulate);
}

}  // namespace

void gemm_builtin(size_t m, size_t n, size_t k, MatRef<float> a, MatRef<float> b, float* c, size_t ldc,
                  bool accumulate) {
  gemm_with(cpu_isa(), m, n, k, a, b, c, ldc, accumulate);
}

void gemm_builtin(size_t m, size_t n, size_t k, MatRef<double> a, MatRef<double> b, double* c, size_t ldc,
                  bool accumulate) {
  gemm_with(cpu_isa(), m, n, k, a, b, c, ldc, accumulate);
}

// OpenBLAS's kernels (and whether their rounding depends on n or on the column) change with
// the CPU model: widening its small calls kept the bits on a SkylakeX kernel, not on Zen.
void gemm_tile_exact(size_t m, size_t n, size_t k, MatRef<float> a, MatRef<float> b, float* c, size_t ldc,
                     bool accumulate) {
  gemm_builtin(m, n, k, a, b, c, ldc, accumulate);
}

void gemm_tile_exact(size_t m, size_t n, size_t k, MatRef<double> a, MatRef<double> b, double* c, size_t ldc,
                     bool accumulate) {
  gemm_builtin(m, n, k, a, b, c, ldc, accumulate);
}

PackedA<float> pack_a(size_t m, size_t k, MatRef<float> a) { return pack_with(m, k, a); }
PackedA<double> pack_a(size_t m, size_t k, MatRef<double> a) { return pack_with(m, k, a); }

void gemm_tile_exact(const PackedA<float>& a, size_t n, MatRef<float> b, float* c, size_t ldc,
                     bool accumulate) {
  gemm_packed_with(a, n, b, c, ldc, accumulate);
}
void gemm_tile_exact(const PackedA<double>& a, size_t n, MatRef<double> b, double* c, size_t ldc,
                     bool accumulate) {
  gemm_packed_with(a, n, b, c, ldc, accumulate);
}

const char* gemm_builtin_kernel_name() { return f32_kernels(cpu_isa()).name; }

}  // namespace candle::cpu
