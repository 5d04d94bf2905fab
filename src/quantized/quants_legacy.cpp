// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q8_1: blocks of 32 with one f16 scale (and a min for the _1
// types). The reference quantizers take the block's extreme value; the importance-matrix forms
// search the scale by weighted least squares, with weights w_i * sqrt(sigma^2 + x_i^2) where
// sigma^2 is the row's mean square (ggml's choices, kept so that the bytes are llama.cpp's).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "candle/quantized/blocks.h"
#include "quantized/quant_search.h"
#include "quantized/quants.h"

namespace candle::quantized::detail {

namespace {

constexpr int kBlock = 32;
constexpr int kHalf = kBlock / 2;

// the value of largest magnitude (the first one on ties)
float signed_absmax(const float* x, int n) {
  float amax = 0, max = 0;
  for (int j = 0; j < n; ++j) {
    float ax = std::fabs(x[j]);
    if (amax < ax) {
      amax = ax;
      max = x[j];
    }
  }
  return max;
}

void min_max(const float* x, int n, float& mn, float& mx) {
  mn = 3.402823466e+38f;
  mx = -3.402823466e+38f;
  for (int j = 0; j < n; ++j) {
    if (x[j] < mn) mn = x[j];
    if (x[j] > mx) mx = x[j];
  }
}

// the row's mean square, the sigma^2 of the importance weights
float row_mean_square(const float* x, size_t n) {
  float sum = 0;
  for (size_t j = 0; j < n; ++j) sum += x[j] * x[j];
  return sum / static_cast<float>(n);
}

void importance_weights(const float* xb, const float* qw, float sigma2, float* weight) {
  for (int j = 0; j < kBlock; ++j) weight[j] = qw[j] * std::sqrt(sigma2 + xb[j] * xb[j]);
}

// the fifth bits of 32 5-bit levels, element j in bit j
uint32_t high_bits(const uint8_t* L) {
  uint32_t qh = 0;
  for (int j = 0; j < kBlock; ++j) qh |= static_cast<uint32_t>((L[j] & 0x10u) >> 4) << j;
  return qh;
}

void pack_nibbles(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < kHalf; ++j) qs[j] = static_cast<uint8_t>((L[j] & 0x0f) | ((L[j + kHalf] & 0x0f) << 4));
}

template <typename Block>
void pack_q5(const uint8_t* L, Block& b) {
  pack_nibbles(L, b.qs);
  uint32_t qh = high_bits(L);
  std::memcpy(b.qh, &qh, sizeof(qh));
}

// ---- reference quantizers (one block each) ----

void q4_0_ref(const float* x, BlockQ4_0& b) {
  const float d = signed_absmax(x, kBlock) / -8;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = f32_to_f16_bits(d);
  uint8_t L[kBlock];
  for (int j = 0; j < kBlock; ++j)
    L[j] = static_cast<uint8_t>(std::min<int>(15, truncate_to_i8(x[j] * id + 8.5f)));
  pack_nibbles(L, b.qs);
}

void q4_1_ref(const float* x, BlockQ4_1& b) {
  float mn, mx;
  min_max(x, kBlock, mn, mx);
  const float d = (mx - mn) / 15;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = f32_to_f16_bits(d);
  b.m = f32_to_f16_bits(mn);
  uint8_t L[kBlock];
  for (int j = 0; j < kBlock; ++j)
    L[j] = static_cast<uint8_t>(std::min<int>(15, truncate_to_i8((x[j] - mn) * id + 0.5f)));
  pack_nibbles(L, b.qs);
}

void q5_0_ref(const float* x, BlockQ5_0& b) {
  const float d = signed_absmax(x, kBlock) / -16;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = f32_to_f16_bits(d);
  uint8_t L[kBlock];
  for (int j = 0; j < kBlock; ++j)
    L[j] = static_cast<uint8_t>(std::min<int>(31, truncate_to_i8(x[j] * id + 16.5f)));
  pack_q5(L, b);
}

void q5_1_ref(const float* x, BlockQ5_1& b) {
  float mn, mx;
  min_max(x, kBlock, mn, mx);
  const float d = (mx - mn) / 31;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = f32_to_f16_bits(d);
  b.m = f32_to_f16_bits(mn);
  uint8_t L[kBlock];
  for (int j = 0; j < kBlock; ++j) L[j] = truncate_to_u8((x[j] - mn) * id + 0.5f);
  pack_q5(L, b);
}

// the scale amax / 127 and the rounded quants of an 8-bit block
template <typename Block>
float q8_block(const float* x, Block& b) {
  float amax = 0;
  for (int j = 0; j < kBlock; ++j) {
    const float ax = std::fabs(x[j]);
    amax = amax > ax ? amax : ax;  // a NaN propagates, as in ggml
  }
  const float d = amax / 127;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = f32_to_f16_bits(d);
  for (int j = 0; j < kBlock; ++j) b.qs[j] = truncate_to_i8(std::round(x[j] * id));
  return d;
}

// ---- importance-matrix quantizers (one row each) ----

void q4_0_imatrix(const float* x, BlockQ4_0* y, size_t n, const float* imatrix) {
  const float sigma2 = row_mean_square(x, n);
  float weight[kBlock];
  int8_t L[kBlock];
  for (size_t ib = 0; ib < n / kBlock; ++ib) {
    const float* xb = x + ib * kBlock;
    importance_weights(xb, imatrix + ib * kBlock, sigma2, weight);
    y[ib].d = f32_to_f16_bits(make_qx_quants(kBlock, 8, xb, L, weight));
    pack_nibbles(reinterpret_cast<const uint8_t*>(L), y[ib].qs);
  }
}

void q5_0_imatrix(const float* x, BlockQ5_0* y, size_t n, const float* imatrix) {
  const float sigma2 = row_mean_square(x, n);
  float weight[kBlock];
  int8_t L[kBlock];
  for (size_t ib = 0; ib < n / kBlock; ++ib) {
    const float* xb = x + ib * kBlock;
    importance_weights(xb, imatrix + ib * kBlock, sigma2, weight);
    y[ib].d = f32_to_f16_bits(make_qx_quants(kBlock, 16, xb, L, weight));
    pack_q5(reinterpret_cast<const uint8_t*>(L), y[ib]);
  }
}

// Q4_1 / Q5_1: levels 0 .. nmax with a min, 37 candidate scales
template <typename Block>
void q_1_imatrix(const float* x, Block* y, size_t n, const float* imatrix, int nmax) {
  const float sigma2 = row_mean_square(x, n);
  float weight[kBlock];
  uint8_t L[kBlock], Laux[kBlock];
  for (size_t ib = 0; ib < n / kBlock; ++ib) {
    const float* xb = x + ib * kBlock;
    importance_weights(xb, imatrix + ib * kBlock, sigma2, weight);
    float neg_min;
    float d = make_qkx_quants(kBlock, nmax, xb, weight, L, &neg_min, Laux, -0.9f, 0.05f, 36, false, true);
    y[ib].d = f32_to_f16_bits(d);
    y[ib].m = f32_to_f16_bits(-neg_min);
    if constexpr (sizeof(Block) == sizeof(BlockQ4_1))
      pack_nibbles(L, y[ib].qs);
    else
      pack_q5(L, y[ib]);
  }
}

template <typename Block, typename Fn>
void per_block(const float* x, void* y, size_t n, Fn&& fn) {
  Block* blocks = static_cast<Block*>(y);
  for (size_t i = 0; i < n / kBlock; ++i) fn(x + i * kBlock, blocks[i]);
}

// the 5-bit levels of a block: low nibbles from qs, fifth bits from qh (element j in bit j)
inline void q5_levels(const uint8_t* qs, const uint8_t* qh_bytes, int* level) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, sizeof(qh));
  for (int j = 0; j < kHalf; ++j) {
    level[j] = (qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
    level[j + kHalf] = (qs[j] >> 4) | static_cast<int>(((qh >> (j + kHalf)) & 1u) << 4);
  }
}

}  // namespace

void quantize_q4_0(const float* x, void* y, size_t n, const float* imatrix) {
  if (imatrix) return q4_0_imatrix(x, static_cast<BlockQ4_0*>(y), n, imatrix);
  per_block<BlockQ4_0>(x, y, n, q4_0_ref);
}
void quantize_q4_1(const float* x, void* y, size_t n, const float* imatrix) {
  if (imatrix) return q_1_imatrix(x, static_cast<BlockQ4_1*>(y), n, imatrix, 15);
  per_block<BlockQ4_1>(x, y, n, q4_1_ref);
}
void quantize_q5_0(const float* x, void* y, size_t n, const float* imatrix) {
  if (imatrix) return q5_0_imatrix(x, static_cast<BlockQ5_0*>(y), n, imatrix);
  per_block<BlockQ5_0>(x, y, n, q5_0_ref);
}
void quantize_q5_1(const float* x, void* y, size_t n, const float* imatrix) {
  if (imatrix) return q_1_imatrix(x, static_cast<BlockQ5_1*>(y), n, imatrix, 31);
  per_block<BlockQ5_1>(x, y, n, q5_1_ref);
}
// ggml's Q8_0 quantizer ignores the importance matrix
void quantize_q8_0(const float* x, void* y, size_t n, const float*) {
  per_block<BlockQ8_0>(x, y, n, [](const float* xb, BlockQ8_0& b) { q8_block(xb, b); });
}
void quantize_q8_1(const float* x, void* y, size_t n, const float*) {
  per_block<BlockQ8_1>(x, y, n, [](const float* xb, BlockQ8_1& b) {
    float d = q8_block(xb, b);
    int sum = 0;
    for (int j = 0; j < kHalf; ++j) sum += b.qs[j] + b.qs[j + kHalf];
    b.s = f32_to_f16_bits(static_cast<float>(sum) * d);
  });
}

void dequantize_q4_0(const void* x, float* y, size_t n) {
  const BlockQ4_0* b = static_cast<const BlockQ4_0*>(x);
  for (size_t i = 0; i < n / kBlock; ++i, y += kBlock) {
    const float d = f16_bits_to_f32(b[i].d);
    for (int j = 0; j < kHalf; ++j) y[j] = static_cast<float>((b[i].qs[j] & 0x0f) - 8) * d;
    for (int j = 0; j < kHalf; ++j) y[j + kHalf] = static_cast<float>((b[i].qs[j] >> 4) - 8) * d;
  }
}
void dequantize_q4_1(const void* x, float* y, size_t n) {
  const BlockQ4_1* b = static_cast<const BlockQ4_1*>(x);
  for (size_t i = 0; i < n / kBlock; ++i, y += kBlock) {
    const float d = f16_bits_to_f32(b[i].d), m = f16_bits_to_f32(b[i].m);
    for (int j = 0; j < kHalf; ++j) y[j] = static_cast<float>(b[i].qs[j] & 0x0f) * d + m;
    for (int j = 0; j < kHalf; ++j) y[j + kHalf] = static_cast<float>(b[i].qs[j] >> 4) * d + m;
  }
}
void dequantize_q5_0(const void* x, float* y, size_t n) {
  const BlockQ5_0* b = static_cast<const BlockQ5_0*>(x);
  for (size_t i = 0; i < n / kBlock; ++i, y += kBlock) {
    const float d = f16_bits_to_f32(b[i].d);
    int level[kBlock];
    q5_levels(b[i].qs, b[i].qh, level);
    for (int j = 0; j < kBlock; ++j) y[j] = static_cast<float>(level[j] - 16) * d;
  }
}
void dequantize_q5_1(const void* x, float* y, size_t n) {
  const BlockQ5_1* b = static_cast<const BlockQ5_1*>(x);
  for (size_t i = 0; i < n / kBlock; ++i, y += kBlock) {
    const float d = f16_bits_to_f32(b[i].d), m = f16_bits_to_f32(b[i].m);
    int level[kBlock];
    q5_levels(b[i].qs, b[i].qh, level);
    for (int j = 0; j < kBlock; ++j) y[j] = static_cast<float>(level[j]) * d + m;
  }
}
void dequantize_q8_0(const void* x, float* y, size_t n) {
  const BlockQ8_0* b = static_cast<const BlockQ8_0*>(x);
  for (size_t i = 0; i < n / kBlock; ++i, y += kBlock) {
    const float d = f16_bits_to_f32(b[i].d);
    for (int j = 0; j < kBlock; ++j) y[j] = static_cast<float>(b[i].qs[j]) * d;
  }
}
// ggml has no to_float for Q8_1 (an activation type): x = d * q, the value the dot products use
void dequantize_q8_1(const void* x, float* y, size_t n) {
  const BlockQ8_1* b = static_cast<const BlockQ8_1*>(x);
  for (size_t i = 0; i < n / kBlock; ++i, y += kBlock) {
    const float d = f16_bits_to_f32(b[i].d);
    for (int j = 0; j < kBlock; ++j) y[j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

}  // namespace candle::quantized::detail
