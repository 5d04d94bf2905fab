// Device helpers of the GGML block kernels (qdequant.cu, qmatmul.cu): one traits struct per block
// type (include/candle/quantized/blocks.h gives the layouts) with
//  - deq(b, j): element j of block b as the CPU's dequantizer computes it (src/quantized/
//    quants_*.cpp: the same float operations in the same order, no contraction into FMAs), and
//  - decode(b, item, out): the integer quants of one item of kUnits units of 32 elements (a whole
//    block, or the part of a super-block whose quant bytes the units share) with their
//    sub-block scales, for the dp4a dot products of qmatmul.cu.
// Loads use the widest width every block of the type is aligned to (blocks follow each other at
// multiples of their size from a 16-byte-aligned start).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "candle/quantized/blocks.h"

namespace candle::cuda_k::quant {

using namespace candle::quantized;

// ggml's type ids (quantized::GgmlDType's values)
enum : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2K = 10,
  kQ3K = 11,
  kQ4K = 12,
  kQ5K = 13,
  kQ6K = 14,
  kQ8K = 15,
  kIQ4_NL = 20,
  kIQ4_XS = 23,
  kBF16 = 30,
};

// the CPU's f16 -> f32 (detail::f16_bits_to_f32): exact, a signalling NaN quieted
__device__ __forceinline__ float f16_to_f32(uint32_t h) {
  if ((h & 0x7c00u) == 0x7c00u && (h & 0x03ffu) != 0)
    return __uint_as_float(((h & 0x8000u) << 16) | 0x7fc00000u | ((h & 0x03ffu) << 13));
  return __half2float(__ushort_as_half(static_cast<unsigned short>(h)));
}

__device__ __forceinline__ uint32_t ld8(const uint8_t* p) { return __ldg(p); }
__device__ __forceinline__ uint32_t ld16(const uint8_t* p) {
  return __ldg(reinterpret_cast<const unsigned short*>(p));
}
__device__ __forceinline__ uint32_t ld32(const uint8_t* p) {
  return __ldg(reinterpret_cast<const unsigned*>(p));
}
// 4 bytes at an address that is only 2-byte aligned
__device__ __forceinline__ uint32_t ld32_a2(const uint8_t* p) { return ld16(p) | (ld16(p + 2) << 16); }
__device__ __forceinline__ uint4 ld128(const uint8_t* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }
__device__ __forceinline__ float f16_at(const uint8_t* p) { return f16_to_f32(ld16(p)); }

// The N bytes of a block at a 2-byte-aligned address p, read with the aligned 8-byte loads that
// cover them (the ceil((o + N) / 8) words that hold one of its bytes, o = p % 8; every one lies in
// the allocation, whose size is a multiple of 512). A warp whose lanes take consecutive blocks of
// 18 or 34 bytes then reads each L1 sector about 3 or 5 times per block instead of once per 2-byte
// load (9 or 17 times): on the H200 the 7B matvecs' L1 throughput fell from 83-89% to 63-66%.
// word(B): the 4 bytes at p + B (B even, B + 4 <= N, a constant once the caller's loop is unrolled).
template <int N>
struct Span {
  static constexpr int kLoads = (N + 6 + 7) / 8;
  uint32_t w[2 * kLoads + 2];
  uint32_t o;
  __device__ __forceinline__ explicit Span(const uint8_t* p) {
    const auto a = reinterpret_cast<uintptr_t>(p);
    o = static_cast<uint32_t>(a & 7u);
    const auto* q = reinterpret_cast<const uint2*>(a - o);
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      uint2 v = make_uint2(0u, 0u);
      if (8u * i < o + N) v = __ldg(q + i);
      w[2 * i] = v.x;
      w[2 * i + 1] = v.y;
    }
    w[2 * kLoads] = w[2 * kLoads + 1] = 0u;
  }
  __device__ __forceinline__ uint32_t word(int b) const {
    const uint32_t c = (o + static_cast<uint32_t>(b & 3)) >> 2;  // 0, 1 or 2 words past b / 4
    const int base = b / 4;
    const uint32_t lo = c == 0 ? w[base] : (c == 1 ? w[base + 1] : w[base + 2]);
    const uint32_t hi = c == 0 ? w[base + 1] : (c == 1 ? w[base + 2] : w[base + 3]);
    return __funnelshift_r(lo, hi, ((o + static_cast<uint32_t>(b)) & 2u) * 8u);
  }
};

// IQ4_NL's 16 levels as 4 words of 4 signed bytes
constexpr uint32_t iq4_word(int i) {
  return static_cast<uint32_t>(static_cast<uint8_t>(kIq4nlValues[4 * i])) |
         static_cast<uint32_t>(static_cast<uint8_t>(kIq4nlValues[4 * i + 1])) << 8 |
         static_cast<uint32_t>(static_cast<uint8_t>(kIq4nlValues[4 * i + 2])) << 16 |
         static_cast<uint32_t>(static_cast<uint8_t>(kIq4nlValues[4 * i + 3])) << 24;
}
constexpr uint32_t kIq4W0 = iq4_word(0), kIq4W1 = iq4_word(1), kIq4W2 = iq4_word(2), kIq4W3 = iq4_word(3);

// the levels of 4 indices (0..15, one a byte) as 4 signed bytes
__device__ __forceinline__ uint32_t iq4_levels(uint32_t idx) {
  const uint32_t x = idx & 0x07070707u;
  const uint32_t sel = (x & 0x7u) | ((x >> 4) & 0x70u) | ((x >> 8) & 0x700u) | ((x >> 12) & 0x7000u);
  const uint32_t lo = __byte_perm(kIq4W0, kIq4W1, sel), hi = __byte_perm(kIq4W2, kIq4W3, sel);
  const uint32_t high = ((idx >> 3) & 0x01010101u) * 0xffu;
  return (lo & ~high) | (hi & high);
}
__device__ __forceinline__ float iq4_level(uint32_t i) {
  return static_cast<float>(static_cast<int8_t>(iq4_levels(i) & 0xffu));
}

// bits 0..3 of `bits` to bit 4 of bytes 0..3 (the fifth bits of Q5 quants)
__device__ __forceinline__ uint32_t spread_bit4(uint32_t bits) {
  return ((bits & 1u) << 4) | ((bits & 2u) << 11) | ((bits & 4u) << 18) | ((bits & 8u) << 25);
}

// byte i of the words w (selected, not indexed, so that w stays in registers for a run-time i)
template <int N>
__device__ __forceinline__ uint32_t byte_of(const uint32_t (&w)[N], int i) {
  uint32_t v = w[0];
#pragma unroll
  for (int t = 1; t < N; ++t)
    if (i / 4 == t) v = w[t];
  return (v >> (8 * (i % 4))) & 0xffu;
}

// Q4_K / Q5_K's 6-bit scale and min of sub-block j from the 12 packed bytes (as 3 words)
__device__ __forceinline__ void scale_min_k4(const uint32_t (&s)[3], int j, int& sc, int& m) {
  if (j < 4) {
    sc = static_cast<int>(byte_of(s, j) & 63);
    m = static_cast<int>(byte_of(s, j + 4) & 63);
  } else {
    sc = static_cast<int>((byte_of(s, j + 4) & 0xf) | ((byte_of(s, j - 4) >> 6) << 4));
    m = static_cast<int>((byte_of(s, j + 4) >> 4) | ((byte_of(s, j) >> 6) << 4));
  }
}
// Q3_K's 6-bit scale j (biased by 32) from the 12 packed bytes (as 3 words)
__device__ __forceinline__ int q3k_scale(const uint32_t (&s)[3], int j) {
  const uint32_t low = j < 8 ? (byte_of(s, j) & 0xf) : (byte_of(s, j - 8) >> 4);
  return static_cast<int>(low | (((byte_of(s, 8 + j % 4) >> (2 * (j / 4))) & 3) << 4));
}

// One item's decoded units: unit u holds 32 quants as signed bytes in element order (q[u][i] is
// elements 4i..4i+3), the integer scales of its two halves of 16 and, where the type has a min,
// the integer mins; the element is d * sc * q - dm * mn.
template <int U>
struct Item {
  int q[U][8];
  int sc[U][2];
  int mn[U][2];
  float d, dm;
};

template <uint32_t T>
struct QT;

// ---- blocks of 32 ----

template <>
struct QT<kQ4_0> {
  static constexpr int kQK = 32, kSize = 18, kUnits = 1;
  static constexpr bool kHasMin = false;
  __device__ static float deq(const uint8_t* b, int j) {
    const uint32_t q = ld8(b + 2 + (j & 15));
    const int l = static_cast<int>(j < 16 ? q & 0xf : q >> 4);
    return __fmul_rn(static_cast<float>(l - 8), f16_at(b));
  }
  __device__ static void decode(const uint8_t* b, int, Item<1>& it) {
    const Span<kSize> sp(b);
    it.d = f16_to_f32(sp.word(0) & 0xffffu);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t w = sp.word(2 + 4 * i);
      it.q[0][i] = static_cast<int>(__vsub4(w & 0x0f0f0f0fu, 0x08080808u));
      it.q[0][i + 4] = static_cast<int>(__vsub4((w >> 4) & 0x0f0f0f0fu, 0x08080808u));
    }
    it.sc[0][0] = it.sc[0][1] = 1;
  }
};

template <>
struct QT<kQ4_1> {
  static constexpr int kQK = 32, kSize = 20, kUnits = 1;
  static constexpr bool kHasMin = true;
  __device__ static float deq(const uint8_t* b, int j) {
    const uint32_t q = ld8(b + 4 + (j & 15));
    const uint32_t l = j < 16 ? q & 0xf : q >> 4;
    return __fadd_rn(__fmul_rn(static_cast<float>(l), f16_at(b)), f16_at(b + 2));
  }
  __device__ static void decode(const uint8_t* b, int, Item<1>& it) {
    const uint32_t dm = ld32(b);
    it.d = f16_to_f32(dm & 0xffffu);
    it.dm = -f16_to_f32(dm >> 16);  // x = d q + m
    for (int i = 0; i < 4; ++i) {
      const uint32_t w = ld32(b + 4 + 4 * i);
      it.q[0][i] = static_cast<int>(w & 0x0f0f0f0fu);
      it.q[0][i + 4] = static_cast<int>((w >> 4) & 0x0f0f0f0fu);
    }
    it.sc[0][0] = it.sc[0][1] = 1;
    it.mn[0][0] = it.mn[0][1] = 1;
  }
};

template <>
struct QT<kQ5_0> {
  static constexpr int kQK = 32, kSize = 22, kUnits = 1;
  static constexpr bool kHasMin = false;
  __device__ static float deq(const uint8_t* b, int j) {
    const uint32_t qh = ld32_a2(b + 2), q = ld8(b + 6 + (j & 15));
    const int l = static_cast<int>((j < 16 ? q & 0xf : q >> 4) | (((qh >> j) & 1u) << 4));
    return __fmul_rn(static_cast<float>(l - 16), f16_at(b));
  }
  __device__ static void decode(const uint8_t* b, int, Item<1>& it) {
    const Span<kSize> sp(b);
    it.d = f16_to_f32(sp.word(0) & 0xffffu);
    const uint32_t qh = sp.word(2);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t w = sp.word(6 + 4 * i);
      it.q[0][i] = static_cast<int>(__vsub4((w & 0x0f0f0f0fu) | spread_bit4(qh >> (4 * i)), 0x10101010u));
      it.q[0][i + 4] =
          static_cast<int>(__vsub4(((w >> 4) & 0x0f0f0f0fu) | spread_bit4(qh >> (16 + 4 * i)), 0x10101010u));
    }
    it.sc[0][0] = it.sc[0][1] = 1;
  }
};

template <>
struct QT<kQ5_1> {
  static constexpr int kQK = 32, kSize = 24, kUnits = 1;
  static constexpr bool kHasMin = true;
  __device__ static float deq(const uint8_t* b, int j) {
    const uint32_t qh = ld32(b + 4), q = ld8(b + 8 + (j & 15));
    const uint32_t l = (j < 16 ? q & 0xf : q >> 4) | (((qh >> j) & 1u) << 4);
    return __fadd_rn(__fmul_rn(static_cast<float>(l), f16_at(b)), f16_at(b + 2));
  }
  __device__ static void decode(const uint8_t* b, int, Item<1>& it) {
    const uint32_t dm = ld32(b), qh = ld32(b + 4);
    it.d = f16_to_f32(dm & 0xffffu);
    it.dm = -f16_to_f32(dm >> 16);
    for (int i = 0; i < 4; ++i) {
      const uint32_t w = ld32(b + 8 + 4 * i);
      it.q[0][i] = static_cast<int>((w & 0x0f0f0f0fu) | spread_bit4(qh >> (4 * i)));
      it.q[0][i + 4] = static_cast<int>(((w >> 4) & 0x0f0f0f0fu) | spread_bit4(qh >> (16 + 4 * i)));
    }
    it.sc[0][0] = it.sc[0][1] = 1;
    it.mn[0][0] = it.mn[0][1] = 1;
  }
};

// Q8_0 and Q8_1: an f16 scale, then (after Q8_1's sum field) 32 int8 quants; x = d * q. kOff: the
// quants' offset in the block (Q8_1's blocks are 4-byte aligned, Q8_0's only 2-byte).
template <int kOff, int kBytes>
struct Q8Blocks {
  static constexpr int kQK = 32, kSize = kBytes, kUnits = 1;
  static constexpr bool kHasMin = false;
  __device__ static float deq(const uint8_t* b, int j) {
    return __fmul_rn(static_cast<float>(static_cast<int8_t>(ld8(b + kOff + j))), f16_at(b));
  }
  __device__ static void decode(const uint8_t* b, int, Item<1>& it) {
    if constexpr (kOff % 4 == 0) {
      it.d = f16_at(b);
      for (int i = 0; i < 8; ++i) it.q[0][i] = static_cast<int>(ld32(b + kOff + 4 * i));
    } else {
      const Span<kSize> sp(b);
      it.d = f16_to_f32(sp.word(0) & 0xffffu);
#pragma unroll
      for (int i = 0; i < 8; ++i) it.q[0][i] = static_cast<int>(sp.word(kOff + 4 * i));
    }
    it.sc[0][0] = it.sc[0][1] = 1;
  }
};
template <>
struct QT<kQ8_0> : Q8Blocks<2, 34> {};
// (the s field of Q8_1 is not part of the value)
template <>
struct QT<kQ8_1> : Q8Blocks<4, 36> {};

template <>
struct QT<kIQ4_NL> {
  static constexpr int kQK = 32, kSize = 18, kUnits = 1;
  static constexpr bool kHasMin = false;
  __device__ static float deq(const uint8_t* b, int j) {
    const uint32_t q = ld8(b + 2 + (j & 15));
    return __fmul_rn(f16_at(b), iq4_level(j < 16 ? q & 0xf : q >> 4));
  }
  __device__ static void decode(const uint8_t* b, int, Item<1>& it) {
    const Span<kSize> sp(b);
    it.d = f16_to_f32(sp.word(0) & 0xffffu);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t w = sp.word(2 + 4 * i);
      it.q[0][i] = static_cast<int>(iq4_levels(w & 0x0f0f0f0fu));
      it.q[0][i + 4] = static_cast<int>(iq4_levels((w >> 4) & 0x0f0f0f0fu));
    }
    it.sc[0][0] = it.sc[0][1] = 1;
  }
};

// ---- super-blocks of 256 ----

// element 128 h + 32 s + l: bits 2s of qs[32 h + l], scale and min in scales[j / 16]
template <>
struct QT<kQ2K> {
  static constexpr int kQK = 256, kSize = 84, kUnits = 4;
  static constexpr bool kHasMin = true;
  __device__ static float deq(const uint8_t* b, int j) {
    const uint32_t sc = ld8(b + j / 16);
    const float dl = __fmul_rn(f16_at(b + 80), static_cast<float>(sc & 0xf));
    const float ml = __fmul_rn(f16_at(b + 82), static_cast<float>(sc >> 4));
    const uint32_t q = (ld8(b + 16 + 32 * (j / 128) + j % 32) >> (2 * ((j / 32) % 4))) & 3u;
    return __fsub_rn(__fmul_rn(dl, static_cast<float>(q)), ml);
  }
  // item h: the 4 units 4h + s
  __device__ static void decode(const uint8_t* b, int h, Item<4>& it) {
    const uint32_t dd = ld32(b + 80);
    it.d = f16_to_f32(dd & 0xffffu);
    it.dm = f16_to_f32(dd >> 16);
    const uint32_t s[2] = {ld32(b + 8 * h), ld32(b + 8 * h + 4)};
    for (int i = 0; i < 8; ++i) {
      const uint32_t w = ld32(b + 16 + 32 * h + 4 * i);
      for (int u = 0; u < 4; ++u) it.q[u][i] = static_cast<int>((w >> (2 * u)) & 0x03030303u);
    }
    for (int u = 0; u < 4; ++u)
      for (int k = 0; k < 2; ++k) {
        const uint32_t v = byte_of(s, 2 * u + k);
        it.sc[u][k] = static_cast<int>(v & 0xf);
        it.mn[u][k] = static_cast<int>(v >> 4);
      }
  }
};

// element 128 h + 32 s + l: bits 2s of qs[32 h + l], high bit (j / 32) of hmask[l]
template <>
struct QT<kQ3K> {
  static constexpr int kQK = 256, kSize = 110, kUnits = 4;
  static constexpr bool kHasMin = false;
  __device__ static float deq(const uint8_t* b, int j) {
    const uint32_t s[3] = {ld32_a2(b + 96), ld32_a2(b + 100), ld32_a2(b + 104)};
    const float dl = __fmul_rn(f16_at(b + 108), static_cast<float>(q3k_scale(s, j / 16) - 32));
    const int q = static_cast<int>((ld8(b + 32 + 32 * (j / 128) + j % 32) >> (2 * ((j / 32) % 4))) & 3u);
    const bool hi = (ld8(b + j % 32) >> (j / 32)) & 1u;
    return __fmul_rn(dl, static_cast<float>(q - (hi ? 0 : 4)));
  }
  __device__ static void decode(const uint8_t* b, int h, Item<4>& it) {
    it.d = f16_at(b + 108);
    const uint32_t s[3] = {ld32_a2(b + 96), ld32_a2(b + 100), ld32_a2(b + 104)};
    for (int i = 0; i < 8; ++i) {
      const uint32_t w = ld32_a2(b + 32 + 32 * h + 4 * i), hm = ld32_a2(b + 4 * i);
      for (int u = 0; u < 4; ++u) {
        const uint32_t lo = (w >> (2 * u)) & 0x03030303u, hb = (hm >> (4 * h + u)) & 0x01010101u;
        it.q[u][i] = static_cast<int>(__vsub4(lo | (hb << 2), 0x04040404u));
      }
    }
    // scale 8 h + jj: low bits in nibble h of byte jj, high bits at 2 (jj / 4) + 4 h of byte 8 + jj % 4
    for (int u = 0; u < 4; ++u)
      for (int k = 0; k < 2; ++k) {
        const int jj = 2 * u + k;
        const uint32_t low = (byte_of(s, jj) >> (4 * h)) & 0xfu;
        const uint32_t high = (byte_of(s, 8 + jj % 4) >> (2 * (jj / 4) + 4 * h)) & 3u;
        it.sc[u][k] = static_cast<int>(low | (high << 4)) - 32;
      }
  }
};

// Q4_K / Q5_K: element 64 g + 32 t + l in nibble t of qs[32 g + l] (Q5_K: fifth bit (j / 32) of
// qh[l]); scale and min of sub-block j / 32
template <bool kFive>
struct QK4 {
  static constexpr int kQK = 256, kSize = kFive ? 176 : 144, kUnits = 2;
  static constexpr int kQs = kFive ? 48 : 16;
  static constexpr bool kHasMin = true;
  __device__ static float deq(const uint8_t* b, int j) {
    const uint32_t s[3] = {ld32(b + 4), ld32(b + 8), ld32(b + 12)};
    int sc, m;
    scale_min_k4(s, j / 32, sc, m);
    const float d1 = __fmul_rn(f16_at(b), static_cast<float>(sc));
    const float m1 = __fmul_rn(f16_at(b + 2), static_cast<float>(m));
    uint32_t q = (ld8(b + kQs + 32 * (j / 64) + j % 32) >> (4 * ((j / 32) % 2))) & 0xfu;
    if constexpr (kFive) q += ((ld8(b + 16 + j % 32) >> (j / 32)) & 1u) ? 16 : 0;
    return __fsub_rn(__fmul_rn(d1, static_cast<float>(q)), m1);
  }
  // item g: units 2g and 2g + 1 (16-byte loads: every block is 16-byte aligned)
  __device__ static void decode(const uint8_t* b, int g, Item<2>& it) {
    const uint32_t dd = ld32(b);
    it.d = f16_to_f32(dd & 0xffffu);
    it.dm = f16_to_f32(dd >> 16);
    const uint32_t s[3] = {ld32(b + 4), ld32(b + 8), ld32(b + 12)};
    const uint4 q0 = ld128(b + kQs + 32 * g), q1 = ld128(b + kQs + 32 * g + 16);
    const uint32_t w[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
    uint32_t hw[8] = {};
    if constexpr (kFive) {
      const uint4 h0 = ld128(b + 16), h1 = ld128(b + 32);
      const uint32_t hv[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
      for (int i = 0; i < 8; ++i) hw[i] = hv[i];
    }
    for (int t = 0; t < 2; ++t) {
      const int j = 2 * g + t;
      for (int i = 0; i < 8; ++i) {
        uint32_t v = (w[i] >> (4 * t)) & 0x0f0f0f0fu;
        if constexpr (kFive) v |= ((hw[i] >> j) & 0x01010101u) << 4;
        it.q[t][i] = static_cast<int>(v);
      }
      int sc, m;
      scale_min_k4(s, j, sc, m);
      it.sc[t][0] = it.sc[t][1] = sc;
      it.mn[t][0] = it.mn[t][1] = m;
    }
  }
};
template <>
struct QT<kQ4K> : QK4<false> {};
template <>
struct QT<kQ5K> : QK4<true> {};

// element 128 h + 32 s + l: nibble (s / 2) of ql[64 h + 32 (s % 2) + l], bits 2s of qh[32 h + l],
// signed scale j / 16; x = d * scale * (q - 32)
// decode() takes one unit of 32 (item 4 h + s): the units of a half share their ql / qh bytes,
// but a row of 2048 has only 16 halves, which left half of a warp idle with four units each;
// lanes of neighbouring units read the shared bytes again (from L1).
template <>
struct QT<kQ6K> {
  static constexpr int kQK = 256, kSize = 210, kUnits = 1;
  static constexpr bool kHasMin = false;
  __device__ static float deq(const uint8_t* b, int j) {
    const int h = j / 128, s = (j / 32) % 4, l = j % 32;
    const float ds =
        __fmul_rn(f16_at(b + 208), static_cast<float>(static_cast<int8_t>(ld8(b + 192 + j / 16))));
    const uint32_t ql = (ld8(b + 64 * h + 32 * (s % 2) + l) >> (4 * (s / 2))) & 0xfu;
    const uint32_t qh = (ld8(b + 128 + 32 * h + l) >> (2 * s)) & 3u;
    return __fmul_rn(ds, static_cast<float>(static_cast<int>(ql | (qh << 4)) - 32));
  }
  __device__ static void decode(const uint8_t* b, int item, Item<1>& it) {
    const int h = item / 4, s = item % 4;
    it.d = f16_at(b + 208);
    const uint32_t sc = ld16(b + 192 + 8 * h + 2 * s);
    const Span<32> ql(b + 64 * h + 32 * (s % 2)), qh(b + 128 + 32 * h);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t lo = (ql.word(4 * i) >> (4 * (s / 2))) & 0x0f0f0f0fu;
      const uint32_t hi = ((qh.word(4 * i) >> (2 * s)) & 0x03030303u) << 4;
      it.q[0][i] = static_cast<int>(__vsub4(lo | hi, 0x20202020u));
    }
    it.sc[0][0] = static_cast<int8_t>(sc & 0xffu);
    it.sc[0][1] = static_cast<int8_t>(sc >> 8);
  }
};

// f32 scale, 256 signed quants (the bsums are not part of the value)
template <>
struct QT<kQ8K> {
  static constexpr int kQK = 256, kSize = 292, kUnits = 1;
  static constexpr bool kHasMin = false;
  __device__ static float deq(const uint8_t* b, int j) {
    return __fmul_rn(__uint_as_float(ld32(b)), static_cast<float>(static_cast<int8_t>(ld8(b + 4 + j))));
  }
  __device__ static void decode(const uint8_t* b, int u, Item<1>& it) {
    it.d = __uint_as_float(ld32(b));
    for (int i = 0; i < 8; ++i) it.q[0][i] = static_cast<int>(ld32(b + 4 + 32 * u + 4 * i));
    it.sc[0][0] = it.sc[0][1] = 1;
  }
};

// sub-block ib: 6-bit scale (low 4 bits in scales_l, high 2 in scales_h) biased by 32; element
// j < 16 in the low nibble of qs[16 ib + j], j >= 16 in the high nibble of qs[16 ib + j - 16]
template <>
struct QT<kIQ4_XS> {
  static constexpr int kQK = 256, kSize = 136, kUnits = 1;
  static constexpr bool kHasMin = false;
  __device__ static int scale(const uint8_t* b, int ib) {
    const uint32_t ls =
        ((ld8(b + 4 + ib / 2) >> (4 * (ib % 2))) & 0xfu) | (((ld16(b + 2) >> (2 * ib)) & 3u) << 4);
    return static_cast<int>(ls) - 32;
  }
  __device__ static float deq(const uint8_t* b, int j) {
    const int ib = j / 32, l = j % 32;
    const float dl = __fmul_rn(f16_at(b), static_cast<float>(scale(b, ib)));
    const uint32_t q = ld8(b + 8 + 16 * ib + (l & 15));
    return __fmul_rn(dl, iq4_level(l < 16 ? q & 0xf : q >> 4));
  }
  __device__ static void decode(const uint8_t* b, int ib, Item<1>& it) {
    it.d = f16_at(b);
    for (int i = 0; i < 4; ++i) {
      const uint32_t w = ld32(b + 8 + 16 * ib + 4 * i);
      it.q[0][i] = static_cast<int>(iq4_levels(w & 0x0f0f0f0fu));
      it.q[0][i + 4] = static_cast<int>(iq4_levels((w >> 4) & 0x0f0f0f0fu));
    }
    it.sc[0][0] = it.sc[0][1] = scale(b, ib);
  }
};

// ---- the float types (blocks of one element; dequantization only) ----

template <>
struct QT<kF32> {
  static constexpr int kQK = 1, kSize = 4;
  __device__ static float deq(const uint8_t* b, int) { return __uint_as_float(ld32(b)); }
};
template <>
struct QT<kF16> {
  static constexpr int kQK = 1, kSize = 2;
  __device__ static float deq(const uint8_t* b, int) { return f16_at(b); }
};
template <>
struct QT<kBF16> {
  static constexpr int kQK = 1, kSize = 2;
  __device__ static float deq(const uint8_t* b, int) { return __uint_as_float(ld16(b) << 16); }
};

static_assert(QT<kQ4_0>::kSize == sizeof(BlockQ4_0) && QT<kQ4_1>::kSize == sizeof(BlockQ4_1) &&
              QT<kQ5_0>::kSize == sizeof(BlockQ5_0) && QT<kQ5_1>::kSize == sizeof(BlockQ5_1) &&
              QT<kQ8_0>::kSize == sizeof(BlockQ8_0) && QT<kQ8_1>::kSize == sizeof(BlockQ8_1) &&
              QT<kQ2K>::kSize == sizeof(BlockQ2_K) && QT<kQ3K>::kSize == sizeof(BlockQ3_K) &&
              QT<kQ4K>::kSize == sizeof(BlockQ4_K) && QT<kQ5K>::kSize == sizeof(BlockQ5_K) &&
              QT<kQ6K>::kSize == sizeof(BlockQ6_K) && QT<kQ8K>::kSize == sizeof(BlockQ8_K) &&
              QT<kIQ4_NL>::kSize == sizeof(BlockIQ4_NL) && QT<kIQ4_XS>::kSize == sizeof(BlockIQ4_XS));

// Calls fn.template operator()<T>() with the type id t; cudaErrorNotSupported for an id with no
// traits here. kQuantizedOnly: the block types only (the matmul's weights).
template <bool kQuantizedOnly, typename Fn>
__host__ cudaError_t with_qtype(uint32_t t, Fn&& fn) {
  switch (t) {
    case kQ4_0: return fn.template operator()<kQ4_0>();
    case kQ4_1: return fn.template operator()<kQ4_1>();
    case kQ5_0: return fn.template operator()<kQ5_0>();
    case kQ5_1: return fn.template operator()<kQ5_1>();
    case kQ8_0: return fn.template operator()<kQ8_0>();
    case kQ8_1: return fn.template operator()<kQ8_1>();
    case kQ2K: return fn.template operator()<kQ2K>();
    case kQ3K: return fn.template operator()<kQ3K>();
    case kQ4K: return fn.template operator()<kQ4K>();
    case kQ5K: return fn.template operator()<kQ5K>();
    case kQ6K: return fn.template operator()<kQ6K>();
    case kQ8K: return fn.template operator()<kQ8K>();
    case kIQ4_NL: return fn.template operator()<kIQ4_NL>();
    case kIQ4_XS: return fn.template operator()<kIQ4_XS>();
    default: break;
  }
  if constexpr (!kQuantizedOnly) {
    switch (t) {
      case kF32: return fn.template operator()<kF32>();
      case kF16: return fn.template operator()<kF16>();
      case kBF16: return fn.template operator()<kBF16>();
      default: break;
    }
  }
  return cudaErrorNotSupported;
}

}  // namespace candle::cuda_k::quant
