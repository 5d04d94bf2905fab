// Internals of qmatmul_cpu: the quantized activations, the kernel entry type, and the plain C++
// decoding of one weight block into the integers of the contract in qmatmul_cpu.h (shared by the
// scalar reference and the SIMD kernels' scale handling).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "candle/dtype.h"
#include "candle/quantized/blocks.h"
#include "candle/quantized/ggml_dtype.h"

namespace candle::quantized::qmm {

// m rows of k activations quantized to 8 bits in blocks of qk (32: the Q8_0 / Q8_1 form, one
// scale per 32; 256: the Q8_K form, one scale per 256). Every quant is in [-127, 127].
struct Acts {
  size_t m = 0, k = 0, qk = 0;
  const int8_t* qs = nullptr;       // m * k
  const float* d = nullptr;         // m * (k / qk)
  const int16_t* sums16 = nullptr;  // m * (k / 16): the sum of each 16 quants
  const int32_t* sums32 = nullptr;  // m * (k / 32): the sum of each 32 quants
  // d and sums32 again, for the tiles of 8 rows: [(i / 8) * (k / qk) + b] * 8 + i % 8, the rows
  // past m repeating row m - 1 (sums8 only in the 32 form)
  const float* d8 = nullptr;
  const int32_t* sums8 = nullptr;
  // the quants of every row again in the lane order of lanes_by_group (m * k), where an AVX-512
  // kernel that reads them runs (avx512_lane_offsets); else nullptr
  const int8_t* qs_lanes = nullptr;
  // the quants + 128 as unsigned bytes (m rows of k, then zero rows up to a multiple of 16), where
  // an AMX kernel reads them (its tiles multiply unsigned by signed bytes); else nullptr
  const uint8_t* qs_u8 = nullptr;
};

// One row of k activation quants (k a multiple of 256) in the order of the AVX-512 kernels that
// keep a 32-element group per 32-bit lane: per 256-block four runs of 64 bytes, run v holding in
// its 4-byte lane l (group g = l % 8, half h = l / 8) the quants 32g + o[v] + 4h .. +3: the
// elements whose weights the kernel puts in lane l of its v-th vector.
inline void lanes_by_group(const int8_t* q, size_t k, const int* o, int8_t* out) {
  for (size_t b = 0; b < k; b += 256)
    for (int v = 0; v < 4; ++v)
      for (int l = 0; l < 16; ++l)
        std::memcpy(out + b + 64 * v + 4 * l, q + b + 32 * (l % 8) + o[v] + 4 * (l / 8), 4);
}

// Rows [n0, n1) of W (row_bytes each) times every activation row: y[i * ldy + j].
using KernelFn = void (*)(const uint8_t* w, size_t row_bytes, size_t n0, size_t n1, const Acts& a, float* y,
                          size_t ldy);

inline float h2f(const uint8_t* p) {
  uint16_t b;
  std::memcpy(&b, p, 2);
  return static_cast<float>(candle::f16::from_bits(b));
}

// One weight super-block as the contract's integers: W_i = d * sc[i / 16] * q[i] + mcoef * mn[i / 16].
struct Decoded {
  int8_t q[kQK_K];
  int16_t sc[kQK_K / 16];
  int16_t mn[kQK_K / 16];
  float d;
  float mcoef;
};

template <GgmlDType T>
struct BlockTraits;

#define CANDLE_QMM_TRAITS(T, B, QK, MIN)        \
  template <>                                   \
  struct BlockTraits<GgmlDType::T> {            \
    using Block = B;                            \
    static constexpr int kQK = QK;              \
    static constexpr bool kHasMin = MIN;        \
    static constexpr size_t kBytes = sizeof(B); \
  };
CANDLE_QMM_TRAITS(Q4_0, BlockQ4_0, 32, false)
CANDLE_QMM_TRAITS(Q4_1, BlockQ4_1, 32, true)
CANDLE_QMM_TRAITS(Q5_0, BlockQ5_0, 32, false)
CANDLE_QMM_TRAITS(Q5_1, BlockQ5_1, 32, true)
CANDLE_QMM_TRAITS(Q8_0, BlockQ8_0, 32, false)
CANDLE_QMM_TRAITS(IQ4_NL, BlockIQ4_NL, 32, false)
CANDLE_QMM_TRAITS(Q2K, BlockQ2_K, 256, true)
CANDLE_QMM_TRAITS(Q3K, BlockQ3_K, 256, false)
CANDLE_QMM_TRAITS(Q4K, BlockQ4_K, 256, true)
CANDLE_QMM_TRAITS(Q5K, BlockQ5_K, 256, true)
CANDLE_QMM_TRAITS(Q6K, BlockQ6_K, 256, false)
CANDLE_QMM_TRAITS(IQ4_XS, BlockIQ4_XS, 256, false)
#undef CANDLE_QMM_TRAITS

// Q4_K / Q5_K: the 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes
inline void k4_scale_min(const uint8_t* s, int j, int& sc, int& mn) {
  if (j < 4) {
    sc = s[j] & 63;
    mn = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}
// Q3_K: the 6-bit scale (0..63, used as scale - 32) of sub-block j (0..15)
inline int q3k_scale(const uint8_t* s, int j) {
  int lo = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
  int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return lo | (hi << 4);
}
// IQ4_XS: the 6-bit scale (used as scale - 32) of sub-block j (0..7)
inline int iq4xs_scale(const BlockIQ4_XS& b, int j) {
  return ((b.scales_l[j / 2] >> (4 * (j % 2))) & 0xF) | (((b.scales_h >> (2 * j)) & 3) << 4);
}

// The scales / mins of a super-block expanded per 16 elements (the SIMD kernels use these too).
template <GgmlDType T>
inline void decode_scales(const uint8_t* p, int16_t sc[16], int16_t mn[16], float& d, float& mcoef) {
  using Tr = BlockTraits<T>;
  typename Tr::Block b;
  std::memcpy(&b, p, sizeof b);
  if constexpr (Tr::kQK == 32) {
    sc[0] = sc[1] = 1;
    mn[0] = mn[1] = 1;
    d = h2f(p);
    if constexpr (Tr::kHasMin)
      mcoef = h2f(p + 2);
    else
      mcoef = 0.f;
  } else if constexpr (T == GgmlDType::Q2K) {
    for (int s = 0; s < 16; ++s) {
      sc[s] = static_cast<int16_t>(b.scales[s] & 0xF);
      mn[s] = static_cast<int16_t>(b.scales[s] >> 4);
    }
    d = static_cast<float>(candle::f16::from_bits(b.d));
    mcoef = -static_cast<float>(candle::f16::from_bits(b.dmin));
  } else if constexpr (T == GgmlDType::Q3K) {
    for (int s = 0; s < 16; ++s) {
      sc[s] = static_cast<int16_t>(q3k_scale(b.scales, s) - 32);
      mn[s] = 0;
    }
    d = static_cast<float>(candle::f16::from_bits(b.d));
    mcoef = 0.f;
  } else if constexpr (T == GgmlDType::Q4K || T == GgmlDType::Q5K) {
    for (int j = 0; j < 8; ++j) {
      int s, m;
      k4_scale_min(b.scales, j, s, m);
      sc[2 * j] = sc[2 * j + 1] = static_cast<int16_t>(s);
      mn[2 * j] = mn[2 * j + 1] = static_cast<int16_t>(m);
    }
    d = static_cast<float>(candle::f16::from_bits(b.d));
    mcoef = -static_cast<float>(candle::f16::from_bits(b.dmin));
  } else if constexpr (T == GgmlDType::Q6K) {
    for (int s = 0; s < 16; ++s) {
      sc[s] = b.scales[s];
      mn[s] = 0;
    }
    d = static_cast<float>(candle::f16::from_bits(b.d));
    mcoef = 0.f;
  } else {
    static_assert(T == GgmlDType::IQ4_XS);
    for (int j = 0; j < 8; ++j) {
      sc[2 * j] = sc[2 * j + 1] = static_cast<int16_t>(iq4xs_scale(b, j) - 32);
      mn[2 * j] = mn[2 * j + 1] = 0;
    }
    d = static_cast<float>(candle::f16::from_bits(b.d));
    mcoef = 0.f;
  }
}

// The quants q of a super-block (kQK of them), in element order.
template <GgmlDType T>
inline void decode_quants(const uint8_t* p, int8_t* q) {
  typename BlockTraits<T>::Block b;
  std::memcpy(&b, p, sizeof b);
  auto i8 = [](int v) { return static_cast<int8_t>(v); };
  if constexpr (T == GgmlDType::Q4_0 || T == GgmlDType::Q4_1 || T == GgmlDType::IQ4_NL) {
    const int off = T == GgmlDType::Q4_0 ? 8 : 0;
    for (int j = 0; j < 16; ++j) {
      int lo = b.qs[j] & 0xF, hi = b.qs[j] >> 4;
      if constexpr (T == GgmlDType::IQ4_NL) {
        q[j] = kIq4nlValues[lo];
        q[j + 16] = kIq4nlValues[hi];
      } else {
        q[j] = i8(lo - off);
        q[j + 16] = i8(hi - off);
      }
    }
  } else if constexpr (T == GgmlDType::Q5_0 || T == GgmlDType::Q5_1) {
    const int off = T == GgmlDType::Q5_0 ? 16 : 0;
    uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    for (int j = 0; j < 16; ++j) {
      int lo = (b.qs[j] & 0xF) | (((qh >> j) & 1) << 4);
      int hi = (b.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
      q[j] = i8(lo - off);
      q[j + 16] = i8(hi - off);
    }
  } else if constexpr (T == GgmlDType::Q8_0) {
    std::memcpy(q, b.qs, 32);
  } else if constexpr (T == GgmlDType::Q2K) {
    for (int g = 0; g < 8; ++g)
      for (int l = 0; l < 32; ++l) q[32 * g + l] = i8((b.qs[32 * (g / 4) + l] >> (2 * (g % 4))) & 3);
  } else if constexpr (T == GgmlDType::Q3K) {
    for (int g = 0; g < 8; ++g)
      for (int l = 0; l < 32; ++l) {
        int u = ((b.qs[32 * (g / 4) + l] >> (2 * (g % 4))) & 3) | (((b.hmask[l] >> g) & 1) << 2);
        q[32 * g + l] = i8(u - 4);
      }
  } else if constexpr (T == GgmlDType::Q4K || T == GgmlDType::Q5K) {
    for (int g = 0; g < 8; ++g)
      for (int l = 0; l < 32; ++l) {
        int v = (b.qs[32 * (g / 2) + l] >> (4 * (g % 2))) & 0xF;
        if constexpr (T == GgmlDType::Q5K) v |= ((b.qh[l] >> g) & 1) << 4;
        q[32 * g + l] = i8(v);
      }
  } else if constexpr (T == GgmlDType::Q6K) {
    for (int g = 0; g < 8; ++g) {
      int h = g / 4, j = g % 4;
      for (int l = 0; l < 32; ++l) {
        int lo = (b.ql[64 * h + 32 * (j & 1) + l] >> (4 * (j / 2))) & 0xF;
        int hi = (b.qh[32 * h + l] >> (2 * j)) & 3;
        q[32 * g + l] = i8((lo | (hi << 4)) - 32);
      }
    }
  } else {
    static_assert(T == GgmlDType::IQ4_XS);
    for (int g = 0; g < 8; ++g)
      for (int j = 0; j < 16; ++j) {
        q[32 * g + j] = kIq4nlValues[b.qs[16 * g + j] & 0xF];
        q[32 * g + j + 16] = kIq4nlValues[b.qs[16 * g + j] >> 4];
      }
  }
}

// The kernels of each ISA, for the quantized types (nullptr: none for this type)
KernelFn scalar_kernel(GgmlDType t);
KernelFn avx2_kernel(GgmlDType t);
KernelFn avx512_kernel(GgmlDType t);
// the offsets o of lanes_by_group that avx512_kernel(t) reads for m activation rows, or nullptr
// where it reads none
const int* avx512_lane_offsets(GgmlDType t, size_t m);
// The kernels over weights in qmm_pack's layout (qmatmul_cpu.h): kPackRows rows side by side
constexpr size_t kPackRows = 16;
// Q5_0 / Q5_1's 32 high bits (qh) in the packed lane of a row: byte i holds, in bit j, element
// 4j + i's (the low nibble of quad run j) and in bit 4 + j element 16 + 4j + i's (the high nibble), so
// that quad j's bits reach bit 4 of each byte by one 16-bit shift (left 4 - j, right j) and a mask
constexpr uint32_t qh5_lane(uint32_t qh) {
  uint32_t z = 0;
  for (uint32_t i = 0; i < 4; ++i)
    for (uint32_t j = 0; j < 4; ++j) {
      z |= ((qh >> (4 * j + i)) & 1u) << (8 * i + j);
      z |= ((qh >> (16 + 4 * j + i)) & 1u) << (8 * i + 4 + j);
    }
  return z;
}
// The 32-element block types (qmatmul_pack.cpp's layouts), what differs between them: the f16
// fields (d, and the min m of Q4_1 / Q5_1), the high bits' lane (Q5_0 / Q5_1), where the quad runs
// begin, and the integer offset a block's dot products carry, in multiples of the activations' block
// sum (a shift; -1: none): Q4_0's 8, Q5_0's 16, and 128 where the VNNI kernels take signed weights
// (Q8_0's quants, IQ4_NL's levels) + 128 as unsigned
template <GgmlDType T>
struct PackedLegacy {
  static constexpr bool kMin = T == GgmlDType::Q4_1 || T == GgmlDType::Q5_1;
  static constexpr bool kQ5 = T == GgmlDType::Q5_0 || T == GgmlDType::Q5_1;
  static constexpr bool kSigned = T == GgmlDType::Q8_0 || T == GgmlDType::IQ4_NL;  // else unsigned nibbles
  static constexpr size_t kHigh = kMin ? 64 : 32, kQuads = kHigh + (kQ5 ? 64 : 0);
  static constexpr int kOffShift = T == GgmlDType::Q4_0 ? 3 : T == GgmlDType::Q5_0 ? 4 : kSigned ? 7 : -1;
};
template <GgmlDType T>
constexpr bool kPackedLegacy = T == GgmlDType::Q4_0 || T == GgmlDType::Q4_1 || T == GgmlDType::Q5_0 ||
                               T == GgmlDType::Q5_1 || T == GgmlDType::Q8_0 || T == GgmlDType::IQ4_NL;

// the bytes of one packed group-block (16 rows x one super-block) of the 256-element types
// (qmatmul_pack.cpp gives their layouts; Q5_K's is Q4_K's, then its high bits)
constexpr size_t kPackedQ4kGroupBlock = 2368, kPackedQ5kGroupBlock = 2880, kPackedQ6kGroupBlock = 3360,
                 kPackedIq4xsGroupBlock = 2208, kPackedQ3kGroupBlock = 1824, kPackedQ2kGroupBlock = 1344;
// The Q6_K family's packed layouts (qmatmul_pack.cpp), shared by the packer and the tiles: the group-
// block's bytes, the per-sub-block scale bytes (16 rows a sub-block), the quant runs (Q6_K's three runs
// per j, Q3_K / Q2_K's 2-bit runs per half and j) and Q3_K's hmask runs
template <GgmlDType T>
struct PackedQ6Family {
  static_assert(T == GgmlDType::Q6K || T == GgmlDType::Q3K || T == GgmlDType::Q2K);
  static constexpr bool kQ2 = T == GgmlDType::Q2K, kQ3 = T == GgmlDType::Q3K;
  static constexpr size_t kGroupBlock = kQ2   ? kPackedQ2kGroupBlock
                                        : kQ3 ? kPackedQ3kGroupBlock
                                              : kPackedQ6kGroupBlock;
  static constexpr size_t kScales = kQ2 ? 64 : 32, kRuns = kQ2 ? 320 : 288, kHmask = 1312;
};
// Packed decode of the types with much work per byte (Q5_K, Q6_K, Q3_K, Q2_K): step s (of kSteps) of
// the group-block at blk (kGroupBlock bytes) brings its share of the group-block after next into L1 (from
// DRAM the hardware prefetchers got too little lead: packed Q5_K 0.73-0.95x ggml on DRAM-bound shapes,
// Q3_K 0.65x; TinyLlama decode with it: Q3_K 36 -> 57-60 tok/s, Q2_K 45-47 -> 70-71, Q4_K_M (its Q6_K
// tensors) +8-14%, 2 threads Zen 4; Q4_K / IQ4_XS / Q4_0 gained nothing)
template <size_t kGroupBlock, int kSteps>
inline void qmm_prefetch_ahead(const uint8_t* blk, int step) {
  constexpr size_t kLines = (kGroupBlock + 64 * kSteps - 1) / (64 * kSteps);  // per step
  const uint8_t* ahead = blk + 2 * kGroupBlock + 64 * kLines * static_cast<size_t>(step);
  for (size_t l = 0; l < kLines; ++l) __builtin_prefetch(ahead + 64 * l, 0, 3);
}
// How far ahead (bytes) the packed decode tiles of the types without their own prefetch (the
// 32-element types, Q4_K, IQ4_XS) prefetch each group-block, read once: CANDLE_QMM_DECODE_PREFETCH=BYTES
// (0: none), else 4096 on Intel CPUs and none elsewhere. On the GPU machine's Xeon (Sapphire Rapids,
// 16 cores) the hardware prefetchers left TinyLlama's decode from DRAM at 0.8x llama.cpp: 4096 bytes
// ahead took tg128 at 4 threads from 64 to 84 tok/s (Q4_0), 62 -> 77 (Q4_K_M), 45 -> 52 (Q8_0), at 16
// threads 141 -> 171, 150 -> 160, 104 -> 114 (2048 and 8192 between or alike); on the dev machine's Zen 4
// it cost 2-6% (tools/decode_scaling_device_run.sh)
size_t qmm_decode_prefetch_bytes();
// the group-block `ahead` bytes past blk, into L1 (a decode tile's start of each group-block)
template <size_t kGroupBlock>
inline void qmm_prefetch_block(const uint8_t* blk, size_t ahead) {
  if (ahead)
    for (size_t l = 0; l < kGroupBlock; l += 64) __builtin_prefetch(blk + ahead + l, 0, 3);
}
KernelFn avx2_packed_kernel(GgmlDType t);
KernelFn avx512_packed_kernel(GgmlDType t);
// AMX (qmatmul_amx.cpp): tiles of 16 activation rows x 16 packed weight rows for Q4_0 and Q8_0
// where m >= kAmxMinRows and Acts::qs_u8 is set (else the AVX-512 packed kernel runs).
// amx_usable: the CPU has AMX-TILE and AMX-INT8 and the kernel gave this process the tile state;
// amx_packed_kernel: nullptr for the other types or where AMX is not usable;
// amx_emulated_packed_kernel: the same kernels with the tile instructions done in C++ (the tests'
// check of their data flow on CPUs without AMX; needs AVX-512)
constexpr size_t kAmxMinRows = 8;
bool amx_usable();
KernelFn amx_packed_kernel(GgmlDType t);
KernelFn amx_emulated_packed_kernel(GgmlDType t);
// "avx2", or "avx2-vnni" where the CPU has AVX-VNNI (the same bits: the integer sums are exact)
const char* avx2_variant_name();

}  // namespace candle::quantized::qmm
