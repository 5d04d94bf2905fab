// 512-bit helpers of the AVX-512 and AMX quantized-matmul kernels (qmatmul_avx512.cpp,
// qmatmul_amx.inc), compiled for AVX-512 F/BW/VL/VNNI; a caller's target must include those.
// The conversions take an explicit source: GCC 12 warns on the forms that start from an undefined
// vector.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace candle::quantized::qmm {

#define QMM_ZINLINE \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c"), always_inline)) inline

// 4 bytes broadcast to every 32-bit lane
QMM_ZINLINE __m512i qmm_zbcast32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}
// 16 f16 to f32
QMM_ZINLINE __m512 qmm_zh2f16(const uint8_t* p) {
  return _mm512_mask_cvtph_ps(_mm512_setzero_ps(), 0xFFFF,
                              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
// 16 f16 to f32, negated (the K types' -dmin)
QMM_ZINLINE __m512 qmm_zneg_h2f16(const uint8_t* p) {
  return _mm512_castsi512_ps(
      _mm512_xor_si512(_mm512_castps_si512(qmm_zh2f16(p)), _mm512_set1_epi32(static_cast<int>(0x80000000u))));
}
// bit `from` of each byte of v to bit `to` (qmatmul_packed.inc's qmm_byte_bit_to in 512 bits)
QMM_ZINLINE __m512i qmm_zbyte_bit_to(__m512i v, int from, int to) {
  return from >= to ? _mm512_srl_epi16(v, _mm_cvtsi32_si128(from - to))
                    : _mm512_sll_epi16(v, _mm_cvtsi32_si128(to - from));
}
QMM_ZINLINE __m512 qmm_zi2f(__m512i v) { return _mm512_mask_cvtepi32_ps(_mm512_setzero_ps(), 0xFFFF, v); }
// 16 bytes to 16 int32 (zero-extended)
QMM_ZINLINE __m512i qmm_zu8(const uint8_t* p) {
  return _mm512_mask_cvtepu8_epi32(_mm512_setzero_si512(), 0xFFFF,
                                   _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
// 32 bytes to 32 int16 (zero-extended)
QMM_ZINLINE __m512i qmm_zu8_16(const uint8_t* p) {
  return _mm512_mask_cvtepu8_epi16(_mm512_setzero_si512(), 0xFFFFFFFFu,
                                   _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
// 32 bytes to 32 int16 (sign-extended)
QMM_ZINLINE __m512i qmm_zs8_16(const uint8_t* p) {
  return _mm512_mask_cvtepi8_epi16(_mm512_setzero_si512(), 0xFFFFFFFFu,
                                   _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
// the low / high int16 of each 32-bit lane, sign-extended to int32
QMM_ZINLINE __m512i qmm_zlo16(__m512i v) {
  const __m512i z = _mm512_setzero_si512();
  return _mm512_mask_srai_epi32(z, 0xFFFF, _mm512_mask_slli_epi32(z, 0xFFFF, v, 16), 16);
}
QMM_ZINLINE __m512i qmm_zhi16(__m512i v) {
  return _mm512_mask_srai_epi32(_mm512_setzero_si512(), 0xFFFF, v, 16);
}
// two activation sums of 32 (each within int16) as an int16 pair broadcast to every lane, against
// the K types' min pairs with vpmaddwd
QMM_ZINLINE __m512i qmm_zpair16(const int32_t* s) {
  return _mm512_set1_epi32(
      static_cast<int32_t>((static_cast<uint32_t>(s[0]) & 0xFFFFu) | (static_cast<uint32_t>(s[1]) << 16)));
}

#undef QMM_ZINLINE

}  // namespace candle::quantized::qmm
#endif
