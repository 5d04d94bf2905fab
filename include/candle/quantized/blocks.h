// The GGML block layouts, byte for byte as llama.cpp writes them in GGUF files. Plain structs
// of fixed-width integers (an f16 scale is its raw uint16_t bits), so that the CPU code and the
// CUDA / HIP kernels include the same definitions; every size is checked below.
#pragma once

#include <cstdint>

namespace candle::quantized {

inline constexpr int kQK4_0 = 32;
inline constexpr int kQK4_1 = 32;
inline constexpr int kQK5_0 = 32;
inline constexpr int kQK5_1 = 32;
inline constexpr int kQK8_0 = 32;
inline constexpr int kQK8_1 = 32;
inline constexpr int kQK4_NL = 32;
// the super-block of the K-quants and IQ4_XS
inline constexpr int kQK_K = 256;
// the 6-bit scales and mins of Q4_K / Q5_K, and Q3_K's scales, packed in 12 bytes
inline constexpr int kKScaleSize = 12;

// d: f16 bits of the scale; qs: 32 4-bit quants, element j in the low nibble of qs[j] and
// element j + 16 in its high nibble; x = d * (q - 8).
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK4_0 / 2];
};
// x = d * q + m
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK4_1 / 2];
};
// qh: the fifth bit of each element; x = d * (q - 16)
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK5_0 / 2];
};
// x = d * q + m
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK5_1 / 2];
};
// x = d * q
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK8_0];
};
// s = d * sum(qs), kept for the dot products with Q4_1 / Q5_1
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[kQK8_1];
};
// 16 sub-blocks of 16: scales holds a 4-bit scale (low nibble) and min (high nibble) each;
// x = d * scale * q - dmin * min, q in 0..3
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  uint16_t d;
  uint16_t dmin;
};
// hmask: the high bit of each 3-bit quant; scales: 16 6-bit scales packed in 12 bytes
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[kKScaleSize];
  uint16_t d;
};
// 8 sub-blocks of 32 with 6-bit scales and mins; x = d * scale * q - dmin * min
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qs[kQK_K / 2];
};
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
// 16 sub-blocks of 16 with 8-bit signed scales; x = d * scale * (q - 32)
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
// the activations' block for the K-quant dot products: an f32 scale and the sums of each 16
// quants
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
// 4-bit indices into the non-linear table kIq4nlValues
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kQK4_NL / 2];
};
// 8 sub-blocks of 32 with 6-bit scales (low 4 bits in scales_l, high 2 in scales_h)
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kQK_K / 64];
  uint8_t qs[kQK_K / 2];
};

// IQ4_NL's and IQ4_XS's 16 levels (a fact of the format)
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockIQ4_XS) == 136);

}  // namespace candle::quantized
