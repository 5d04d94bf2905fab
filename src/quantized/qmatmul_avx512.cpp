// qmatmul_cpu's AVX-512 kernels: the 256-bit kernels of qmatmul_simd.inc compiled for
// AVX-512 (1 weight row x 8 activation rows in the prefill tile, as AVX2) with AVX512-VNNI vpdpbusd for the
// 32-element block types, and a 512-bit one for IQ4_XS's m > 1. Selected only where the CPU has
// avx512f/bw/vl/vnni.
#include "quantized/qmatmul_kernels.h"
#include "quantized/qmatmul_zmm.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstring>

namespace candle::quantized::qmm {

namespace avx512 {
#define QMM_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define QMM_VNNI 1
#define QMM_PREFILL_R 1
#define QMM_PREFILL_C 8
#define QMM_PACKED_C 8
#define QMM_PACKED_C_K 4
#define QMM_PACKED_C_6K 4
#define QMM_PACKED_ZMM 1

// The packed kernels' tiles in 512 bits (qmatmul_packed.inc's layouts: a run of 4 bytes of 16 rows is
// one zmm, so one vpdpbusd per run and activation row, and the 16 rows' outputs one vector): the
// same integers and float chain per lane as the 256-bit tiles, so the same bits.
template <GgmlDType T, int C>
QMM_TARGET void qmm_packed_tile_zmm(const uint8_t* grp, const Acts& a, const size_t* col, float* out) {
  // Q4_K, Q5_K and IQ4_XS share the layout of the nibbles (qmatmul_pack.cpp); IQ4_XS's are table
  // indices, Q5_K's get their high bits from the qh runs
  constexpr bool kIq = T == GgmlDType::IQ4_XS, kQ5 = T == GgmlDType::Q5K;
  constexpr bool kSuper = T == GgmlDType::Q4K || kQ5 || kIq;
  static_assert(kSuper || kPackedLegacy<T>);
  constexpr size_t kGroupBlock = T == GgmlDType::Q4K ? kPackedQ4kGroupBlock
                                 : kQ5               ? kPackedQ5kGroupBlock
                                 : kIq               ? kPackedIq4xsGroupBlock
                                                     : kPackRows * BlockTraits<T>::kBytes;
  constexpr size_t kQK = kSuper ? kQK_K : 32;
  const size_t nb = a.k / kQK, n32 = a.k / 32;
  const int8_t* xq[C];
  for (int c = 0; c < C; ++c) xq[c] = a.qs + col[c] * a.k;
  __m512 facc[C];
  for (int c = 0; c < C; ++c) facc[c] = _mm512_setzero_ps();
  const __m512i m4 = _mm512_set1_epi8(0x0F), m16 = _mm512_set1_epi8(0x10);
  // IQ4_XS: the levels + 128 (unsigned for vpdpbusd; 128 x the activations' sums come off below)
  const __m512i levels = _mm512_xor_si512(
      _mm512_mask_broadcast_i32x4(_mm512_setzero_si512(), 0xFFFF,
                                  _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues))),
      _mm512_set1_epi8(static_cast<char>(0x80)));
  // decode: Q5_K prefetches in its runs (below)
  const size_t pf = C == 1 && !kQ5 ? qmm_decode_prefetch_bytes() : 0;
  for (size_t b = 0; b < nb; ++b) {
    const uint8_t* blk = grp + b * kGroupBlock;
    qmm_prefetch_block<kGroupBlock>(blk, pf);
    __m512i isum[C];
    for (int c = 0; c < C; ++c) isum[c] = _mm512_setzero_si512();
    if constexpr (T == GgmlDType::Q8_0) {
      const uint8_t* q = blk + 2 * kPackRows;
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        const __m512i v =
            _mm512_xor_si512(_mm512_loadu_si512(q + 64 * j), _mm512_set1_epi8(static_cast<char>(0x80)));
        for (int c = 0; c < C; ++c)
          isum[c] = _mm512_dpbusd_epi32(isum[c], v, qmm_zbcast32(xq[c] + 32 * b + 4 * j));
      }
    } else if constexpr (!kSuper) {
      // Q4_0 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL (qmatmul_packed.inc's PackedLegacy): quad j's nibbles, Q5's high
      // bits from their lane, IQ4_NL's levels + 128
      using L = PackedLegacy<T>;
      const uint8_t* q = blk + L::kQuads;
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m512i v = _mm512_loadu_si512(q + 64 * j);
        __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        if constexpr (L::kQ5) {
          const __m512i z = _mm512_loadu_si512(blk + L::kHigh);
          lo = _mm512_or_si512(lo, _mm512_and_si512(_mm512_sll_epi16(z, _mm_cvtsi32_si128(4 - j)), m16));
          hi = _mm512_or_si512(hi, _mm512_and_si512(_mm512_srl_epi16(z, _mm_cvtsi32_si128(j)), m16));
        } else if constexpr (T == GgmlDType::IQ4_NL) {
          lo = _mm512_shuffle_epi8(levels, lo);
          hi = _mm512_shuffle_epi8(levels, hi);
        }
        for (int c = 0; c < C; ++c) {
          isum[c] = _mm512_dpbusd_epi32(isum[c], lo, qmm_zbcast32(xq[c] + 32 * b + 4 * j));
          isum[c] = _mm512_dpbusd_epi32(isum[c], hi, qmm_zbcast32(xq[c] + 32 * b + 16 + 4 * j));
        }
      }
    } else {
      static_assert(kSuper);
      for (int p = 0; p < 4; ++p) {
        __m512i acc0[C], acc1[C];
        for (int c = 0; c < C; ++c) acc0[c] = acc1[c] = _mm512_setzero_si512();
        const uint8_t* q = blk + (kIq ? 160 : 320) + 512 * p;
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {
          if constexpr (C == 1 && kQ5) qmm_prefetch_ahead<kGroupBlock, 32>(blk, 8 * p + j);  // decode
          const __m512i v = _mm512_loadu_si512(q + 64 * j);
          __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
          if constexpr (kIq) {
            lo = _mm512_shuffle_epi8(levels, lo);
            hi = _mm512_shuffle_epi8(levels, hi);
          } else if constexpr (kQ5) {
            // the high bits 2p / 2p + 1 of the qh run to bit 4 (qmatmul_packed.inc's qmm_q5k_high)
            const __m512i hp = _mm512_srl_epi16(_mm512_loadu_si512(blk + kPackedQ4kGroupBlock + 64 * j),
                                                _mm_cvtsi32_si128(2 * p));
            lo = _mm512_or_si512(lo, _mm512_and_si512(_mm512_slli_epi16(hp, 4), m16));
            hi = _mm512_or_si512(hi, _mm512_and_si512(_mm512_slli_epi16(hp, 3), m16));
          }
          for (int c = 0; c < C; ++c) {
            const int8_t* x = xq[c] + kQK_K * b + 64 * p + 4 * j;
            acc0[c] = _mm512_dpbusd_epi32(acc0[c], lo, qmm_zbcast32(x));
            acc1[c] = _mm512_dpbusd_epi32(acc1[c], hi, qmm_zbcast32(x + 32));
          }
        }
        __m512i s0, s1;
        if constexpr (kIq) {
          const __m512i pr = qmm_zs8_16(blk + 32 + 32 * p);
          s0 = qmm_zlo16(pr);
          s1 = qmm_zhi16(pr);
        } else {
          s0 = qmm_zu8(blk + 64 + 16 * (2 * p));
          s1 = qmm_zu8(blk + 64 + 16 * (2 * p + 1));
        }
        for (int c = 0; c < C; ++c)
          isum[c] = _mm512_add_epi32(
              isum[c], _mm512_add_epi32(_mm512_mullo_epi32(acc0[c], s0), _mm512_mullo_epi32(acc1[c], s1)));
      }
    }
    const __m512 dw = qmm_zh2f16(blk);
    if constexpr (kSuper) {
      // Q4_K: the mins' sum msum; IQ4_XS: sum_s sc_s * (the activations' 32-sums), 128 times which
      // the unsigned levels added to isum
      __m512i msum[C];
      for (int c = 0; c < C; ++c) msum[c] = _mm512_setzero_si512();
      for (int p = 0; p < 4; ++p) {
        const __m512i mn = kIq ? qmm_zs8_16(blk + 32 + 32 * p) : qmm_zu8_16(blk + 192 + 32 * p);
        for (int c = 0; c < C; ++c) {
          const __m512i bs = qmm_zpair16(a.sums32 + col[c] * n32 + 8 * b + 2 * p);
          msum[c] = _mm512_add_epi32(msum[c], _mm512_madd_epi16(mn, bs));
        }
      }
      [[maybe_unused]] const __m512 mc = kIq ? dw : qmm_zneg_h2f16(blk + 32);
      for (int c = 0; c < C; ++c) {
        const __m512 dx = _mm512_set1_ps(a.d[col[c] * nb + b]);
        if constexpr (kIq) {
          const __m512i is =
              _mm512_sub_epi32(isum[c], _mm512_mask_slli_epi32(_mm512_setzero_si512(), 0xFFFF, msum[c], 7));
          facc[c] = _mm512_fmadd_ps(_mm512_mul_ps(dw, dx), qmm_zi2f(is), facc[c]);
        } else {
          facc[c] = _mm512_fmadd_ps(_mm512_mul_ps(dw, dx), qmm_zi2f(isum[c]), facc[c]);
          facc[c] = _mm512_fmadd_ps(_mm512_mul_ps(mc, dx), qmm_zi2f(msum[c]), facc[c]);
        }
      }
    } else {
      using L = PackedLegacy<T>;
      [[maybe_unused]] const __m512 mw = L::kMin ? qmm_zh2f16(blk + 32) : dw;
      for (int c = 0; c < C; ++c) {
        const size_t at = col[c] * nb + b;
        __m512i is = isum[c];
        if constexpr (L::kOffShift >= 0)
          is = _mm512_sub_epi32(is, _mm512_set1_epi32(a.sums32[at] * (1 << L::kOffShift)));
        const __m512 dx = _mm512_set1_ps(a.d[at]);
        facc[c] = _mm512_fmadd_ps(_mm512_mul_ps(dw, dx), qmm_zi2f(is), facc[c]);
        if constexpr (L::kMin)
          facc[c] = _mm512_fmadd_ps(_mm512_mul_ps(mw, dx), _mm512_set1_ps(static_cast<float>(a.sums32[at])),
                                    facc[c]);
      }
    }
  }
  for (int c = 0; c < C; ++c) _mm512_storeu_ps(out + 16 * c, facc[c]);
}
// Q6_K in 512 bits (the 256-bit tile's integers, qmatmul_packed.inc): a run of 16 rows' 6-bit quants
// rebuilt per group is one zmm, so each activation quad needs one vpdpbusd per group instead of two
// Q3_K and Q2_K too (qmatmul_packed.inc's qmm_packed_q6k_tile says how)
template <GgmlDType T, int C>
QMM_TARGET void qmm_packed_q6k_tile_zmm(const uint8_t* grp, const Acts& a, const size_t* col, float* out) {
  using L = PackedQ6Family<T>;
  constexpr bool kQ3 = L::kQ3, kQ2 = L::kQ2, kLow2 = kQ3 || kQ2;
  constexpr size_t kGroupBlock = L::kGroupBlock, kScales = L::kScales;
  const size_t nb = a.k / kQK_K, n16 = a.k / 16;
  const int8_t* xq[C];
  for (int c = 0; c < C; ++c) xq[c] = a.qs + col[c] * a.k;
  __m512 facc[C];
  for (int c = 0; c < C; ++c) facc[c] = _mm512_setzero_ps();
  const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
  for (size_t b = 0; b < nb; ++b) {
    const uint8_t* blk = grp + b * kGroupBlock;
    __m512i isum[C];
    for (int c = 0; c < C; ++c) isum[c] = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h)
      for (int half16 = 0; half16 < 2;
           ++half16) {  // elements 0..15 / 16..31 of each group: sub-blocks 2g, 2g + 1
        __m512i acc[4][C];
        for (int g = 0; g < 4; ++g)
          for (int c = 0; c < C; ++c) acc[g][c] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int jj = 0; jj < 4; ++jj) {
          const int j = 4 * half16 + jj;
          if constexpr (C == 1) qmm_prefetch_ahead<kGroupBlock, 16>(blk, 8 * h + j);  // decode
          __m512i w[4];
          if constexpr (kLow2) {
            const __m512i Q = _mm512_loadu_si512(blk + L::kRuns + 512 * h + 64 * j);
            [[maybe_unused]] const __m512i Hm = kQ3 ? _mm512_loadu_si512(blk + L::kHmask + 64 * j) : Q;
            for (int g = 0; g < 4; ++g) {
              w[g] = _mm512_and_si512(qmm_zbyte_bit_to(Q, 2 * g, 0), _mm512_set1_epi8(0x03));
              if constexpr (kQ3)  // the high bit 4h + g to bit 2
                w[g] = _mm512_or_si512(
                    w[g], _mm512_and_si512(qmm_zbyte_bit_to(Hm, 4 * h + g, 2), _mm512_set1_epi8(0x04)));
            }
          } else {
            const uint8_t* run = blk + L::kRuns + 1536 * h + 192 * j;
            const __m512i A = _mm512_loadu_si512(run), B = _mm512_loadu_si512(run + 64),
                          H = _mm512_loadu_si512(run + 128);
            w[0] = _mm512_or_si512(_mm512_and_si512(A, m4), _mm512_and_si512(_mm512_slli_epi16(H, 4), m30));
            w[1] = _mm512_or_si512(_mm512_and_si512(B, m4), _mm512_and_si512(_mm512_slli_epi16(H, 2), m30));
            w[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(A, 4), m4), _mm512_and_si512(H, m30));
            w[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(B, 4), m4),
                                   _mm512_and_si512(_mm512_srli_epi16(H, 2), m30));
          }
          for (int c = 0; c < C; ++c)
            for (int g = 0; g < 4; ++g)
              acc[g][c] = _mm512_dpbusd_epi32(acc[g][c], w[g],
                                              qmm_zbcast32(xq[c] + kQK_K * b + 32 * (4 * h + g) + 4 * j));
        }
        for (int g = 0; g < 4; ++g) {
          const int s = 2 * (4 * h + g) + half16;
          const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kScales + 16 * s));
          const __m512i sc =
              kQ2 ? _mm512_and_si512(_mm512_mask_cvtepu8_epi32(_mm512_setzero_si512(), 0xFFFF, raw),
                                     _mm512_set1_epi32(0x0F))
                  : _mm512_mask_cvtepi8_epi32(_mm512_setzero_si512(), 0xFFFF, raw);
          for (int c = 0; c < C; ++c) isum[c] = _mm512_add_epi32(isum[c], _mm512_mullo_epi32(acc[g][c], sc));
        }
      }
    // sum_s sc_s * bs16_s (Q2_K: the mins mn_s), by pairs of sub-blocks (int16 pairs per row lane)
    __m512i off[C];
    for (int c = 0; c < C; ++c) off[c] = _mm512_setzero_si512();
    for (int p = 0; p < 8; ++p) {
      __m128i s0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kScales + 16 * (2 * p)));
      __m128i s1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kScales + 16 * (2 * p + 1)));
      if constexpr (kQ2) {
        s0 = _mm_and_si128(_mm_srli_epi16(s0, 4), _mm_set1_epi8(0x0F));
        s1 = _mm_and_si128(_mm_srli_epi16(s1, 4), _mm_set1_epi8(0x0F));
      }
      // lane r: (sc_2p, sc_2p+1) of row r as int16
      const __m512i pr =
          _mm512_mask_cvtepi8_epi16(_mm512_setzero_si512(), 0xFFFFFFFFu,
                                    _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi8(s0, s1)),
                                                            _mm_unpackhi_epi8(s0, s1), 1));
      for (int c = 0; c < C; ++c) {
        const int16_t* s16 = a.sums16 + col[c] * n16 + 16 * b + 2 * p;
        const __m512i bs = _mm512_set1_epi32(static_cast<int32_t>(
            static_cast<uint16_t>(s16[0]) | (static_cast<uint32_t>(static_cast<uint16_t>(s16[1])) << 16)));
        off[c] = _mm512_add_epi32(off[c], _mm512_madd_epi16(pr, bs));
      }
    }
    const __m512 dw = qmm_zh2f16(blk);
    for (int c = 0; c < C; ++c) {
      const __m512 dx = _mm512_set1_ps(a.d[col[c] * nb + b]);
      if constexpr (kQ2) {
        facc[c] = _mm512_fmadd_ps(_mm512_mul_ps(dw, dx), qmm_zi2f(isum[c]), facc[c]);
        facc[c] = _mm512_fmadd_ps(_mm512_mul_ps(qmm_zneg_h2f16(blk + 32), dx), qmm_zi2f(off[c]), facc[c]);
      } else {
        const __m512i is =
            _mm512_sub_epi32(isum[c], _mm512_mullo_epi32(off[c], _mm512_set1_epi32(kQ3 ? 4 : 32)));
        facc[c] = _mm512_fmadd_ps(_mm512_mul_ps(dw, dx), qmm_zi2f(is), facc[c]);
      }
    }
  }
  for (int c = 0; c < C; ++c) _mm512_storeu_ps(out + 16 * c, facc[c]);
}
#include "quantized/qmatmul_simd.inc"
#undef QMM_PACKED_C
#undef QMM_PACKED_C_K
#undef QMM_PACKED_C_6K
#undef QMM_PACKED_ZMM

// IQ4_XS with m > 1 (Acts::qs_lanes set): R weight rows x 8 activation rows per tile (R = 4: each
// activation load serves 4 rows; with one, the loads from L2 bounded it at 0.6-0.9x llama.cpp). The
// super-block's 256 weights become four zmm of unsigned bytes (the table value + 128) whose 32-bit
// lane l holds 4 weights of group l % 8 (two vpermt2d of the 128 packed bytes, then the nibble
// split and the table lookup), so that four vpdpbusd per activation row, against the quants in
// the same order (lanes_by_group, offsets 0, 16, 8, 24), leave each group's dot product in lanes g and g + 8;
// the halves are added, less 128 times the activations' group sums (which takes the + 128 off), and
// multiplied by the 8 group scales: the contract's exact integers.
template <int R>
QMM_TARGET void iq4xs_tile(const uint8_t* const* wrow, const Acts& a, const size_t* col, float* out,
                           const uint8_t*) {
  const size_t nb = a.k / kQK_K, n32 = a.k / 32;
  // (the intrinsics with an explicit source: GCC 12 warns on the ones that start from an undefined vector)
  const __m512i table = _mm512_mask_broadcast_i32x4(
      _mm512_setzero_si512(), 0xFFFF,
      _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)), _mm_set1_epi8(-128)));
  // lane l of p0: the 4 bytes of group l % 8 at byte 4 * (l / 8) of the group's 16; p1: at 8 + 4 * (l / 8)
  const __m512i idx0 = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
  const __m512i idx1 = _mm512_add_epi32(idx0, _mm512_set1_epi32(2));
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  __m256 facc[R];
  for (int r = 0; r < R; ++r) facc[r] = _mm256_setzero_ps();
  for (size_t b = 0; b < nb; ++b) {
    __m512i w[R][4];
    __m256i sc[R];
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = wrow[r] + b * sizeof(BlockIQ4_XS);
      const uint8_t* qs = blk + offsetof(BlockIQ4_XS, qs);
      const __m512i q0 = _mm512_loadu_si512(qs), q1 = _mm512_loadu_si512(qs + 64);
      const __m512i p0 = _mm512_permutex2var_epi32(q0, idx0, q1),
                    p1 = _mm512_permutex2var_epi32(q0, idx1, q1);
      // lanes_by_group's runs: low nibbles of p0 (elements 4h.. of a group), high of p0 (16 + 4h..),
      // low of p1 (8 + 4h..), high of p1 (24 + 4h..)
      w[r][0] = _mm512_shuffle_epi8(table, _mm512_and_si512(p0, m4));
      w[r][1] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(p0, 4), m4));
      w[r][2] = _mm512_shuffle_epi8(table, _mm512_and_si512(p1, m4));
      w[r][3] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(p1, 4), m4));
      sc[r] = _mm256_cvtepi16_epi32(qmm_iq4xs_scales8(blk));
    }
    __m256i gsum[R][8];
    for (int c = 0; c < 8; ++c) {
      const int8_t* xp = a.qs_lanes + col[c] * a.k + kQK_K * b;
      __m512i x[4];
      for (int v = 0; v < 4; ++v) x[v] = _mm512_loadu_si512(xp + 64 * v);
      const __m256i off = _mm256_slli_epi32(qmm_load(a.sums32 + col[c] * n32 + 8 * b), 7);
      for (int r = 0; r < R; ++r) {
        __m512i acc = _mm512_setzero_si512();
        for (int v = 0; v < 4; ++v) acc = _mm512_dpbusd_epi32(acc, w[r][v], x[v]);
        const __m256i dot = _mm256_add_epi32(_mm512_maskz_extracti64x4_epi64(0xFF, acc, 0),
                                             _mm512_maskz_extracti64x4_epi64(0xFF, acc, 1));
        gsum[r][c] = _mm256_mullo_epi32(_mm256_sub_epi32(dot, off), sc[r]);
      }
    }
    const __m256 dxv = _mm256_loadu_ps(a.d8 + ((col[0] / 8) * nb + b) * 8);
    for (int r = 0; r < R; ++r) {
      const float dw = qmm_h2f(wrow[r] + b * sizeof(BlockIQ4_XS) + offsetof(BlockIQ4_XS, d));
      facc[r] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(dw), dxv),
                                _mm256_cvtepi32_ps(qmm_hsum8(gsum[r])), facc[r]);
    }
  }
  alignas(32) float res[R][8];
  for (int r = 0; r < R; ++r) _mm256_store_ps(res[r], facc[r]);
  for (int c = 0; c < 8; ++c)
    for (int r = 0; r < R; ++r) out[c * R + r] = res[r][c];
}

QMM_TARGET void iq4xs_rows(const uint8_t* w, size_t row_bytes, size_t n0, size_t n1, const Acts& a, float* y,
                           size_t ldy) {
  if (a.m == 1 || !a.qs_lanes)
    qmm_rows<GgmlDType::IQ4_XS>(w, row_bytes, n0, n1, a, y, ldy);
  else
    qmm_rows_shape<GgmlDType::IQ4_XS, 4, 8, &iq4xs_tile<4>>(w, row_bytes, n0, n1, a, y, ldy);
}
#undef QMM_TARGET
#undef QMM_VNNI
#undef QMM_PREFILL_R
#undef QMM_PREFILL_C
}  // namespace avx512

KernelFn avx512_kernel(GgmlDType t) {
  return t == GgmlDType::IQ4_XS ? avx512::iq4xs_rows : avx512::qmm_kernel_table(t);
}

KernelFn avx512_packed_kernel(GgmlDType t) { return avx512::qmm_packed_kernel_table(t); }

const int* avx512_lane_offsets(GgmlDType t, size_t m) {
  static constexpr int kIq4xs[4] = {0, 16, 8, 24};
  if (t == GgmlDType::IQ4_XS && m > 1) return kIq4xs;
  return nullptr;
}

}  // namespace candle::quantized::qmm

#else
namespace candle::quantized::qmm {
KernelFn avx512_kernel(GgmlDType) { return nullptr; }
KernelFn avx512_packed_kernel(GgmlDType) { return nullptr; }
const int* avx512_lane_offsets(GgmlDType, size_t) { return nullptr; }
}  // namespace candle::quantized::qmm
#endif
