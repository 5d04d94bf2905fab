// The K-quants: super-blocks of 256 with quantized sub-block scales (Q2_K, Q3_K, Q6_K: 16
// sub-blocks of 16; Q4_K, Q5_K: 8 sub-blocks of 32 with mins) under f16 super-block scales,
// and Q8_K, the activations' type. Each quantizer finds the sub-block scales, quantizes them,
// then re-quantizes the elements against the scales as stored, as ggml does.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "candle/quantized/blocks.h"
#include "quantized/quant_search.h"
#include "quantized/quants.h"

namespace candle::quantized::detail {

namespace {

constexpr int kSub16 = kQK_K / 16;  // sub-blocks of 16
constexpr int kSub32 = kQK_K / 32;  // sub-blocks of 32

// the sum of squares of the super-block
float sum_squares(const float* x) {
  float s = 0;
  for (int j = 0; j < kQK_K; ++j) s += x[j] * x[j];
  return s;
}

// 2-bit levels, four per byte: element j + 32 * s of each 128 in bits 2s..2s+1 of byte j
void pack_2bit(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < kQK_K; j += 128)
    for (int l = 0; l < 32; ++l)
      qs[j / 4 + l] =
          static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
}

// ---- Q2_K ----

void q2_k_levels(const float* x, BlockQ2_K& b, uint8_t* L) {
  const float dm = f16_bits_to_f32(b.d), mm = f16_bits_to_f32(b.dmin);
  for (int j = 0; j < kSub16; ++j) {
    const float d = dm * static_cast<float>(b.scales[j] & 0xf);
    if (d == 0.0f) continue;
    const float m = mm * static_cast<float>(b.scales[j] >> 4);
    for (int i = 0; i < 16; ++i)
      L[16 * j + i] = static_cast<uint8_t>(std::clamp(nearest_int((x[16 * j + i] + m) / d), 0, 3));
  }
  pack_2bit(L, b.qs);
}

void q2_k_ref(const float* x, BlockQ2_K& b) {
  uint8_t L[kQK_K], Laux[16];
  float weights[16], mins[kSub16], scales[kSub16];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < kSub16; ++j) {
    for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
    scales[j] =
        make_qkx_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true, false);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float q4scale = 15.0f;
  if (max_scale > 0) {
    const float iscale = q4scale / max_scale;
    for (int j = 0; j < kSub16; ++j) b.scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
    b.d = f32_to_f16_bits(max_scale / q4scale);
  } else {
    std::fill(b.scales, b.scales + kSub16, uint8_t{0});
    b.d = f32_to_f16_bits(0.0f);
  }
  if (max_min > 0) {
    const float iscale = q4scale / max_min;
    for (int j = 0; j < kSub16; ++j)
      b.scales[j] = static_cast<uint8_t>(b.scales[j] | (nearest_int(iscale * mins[j]) << 4));
    b.dmin = f32_to_f16_bits(max_min / q4scale);
  } else {
    b.dmin = f32_to_f16_bits(0.0f);
  }
  q2_k_levels(x, b, L);
}

void q2_k_imatrix(const float* x, BlockQ2_K& b, const float* qw) {
  uint8_t L[kQK_K], Laux[16], Ls[kSub16], Lm[kSub16];
  float weight[16], mins[kSub16], scales[kSub16], sw[kSub16];
  const float sigma2 = sum_squares(x) / kQK_K;
  for (int j = 0; j < kSub16; ++j) {
    sw[j] = 0;
    for (int l = 0; l < 16; ++l)
      weight[l] = qw[16 * j + l] * std::sqrt(sigma2 + x[16 * j + l] * x[16 * j + l]);
    for (int l = 0; l < 16; ++l) sw[j] += weight[l];
    scales[j] =
        make_qkx_quants(16, 3, x + 16 * j, weight, L + 16 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false, true);
  }
  b.d = f32_to_f16_bits(make_qp_quants(kSub16, 15, scales, Ls, sw));
  b.dmin = f32_to_f16_bits(make_qp_quants(kSub16, 15, mins, Lm, sw));
  for (int j = 0; j < kSub16; ++j) b.scales[j] = static_cast<uint8_t>(Ls[j] | (Lm[j] << 4));
  q2_k_levels(x, b, L);
}

// ---- Q3_K ----

// the 6-bit scale j (0..63, stored biased by 32) of the 12 packed bytes
int q3_k_scale(const uint8_t* s, int j) {
  int low = j < 8 ? (s[j] & 0xf) : (s[j - 8] >> 4);
  return low | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4);
}

void q3_k_pack_scale(uint8_t* s, int j, int l) {
  if (j < 8)
    s[j] = static_cast<uint8_t>(l & 0xf);
  else
    s[j - 8] = static_cast<uint8_t>(s[j - 8] | ((l & 0xf) << 4));
  s[j % 4 + 8] = static_cast<uint8_t>(s[j % 4 + 8] | ((l >> 4) << (2 * (j / 4))));
}

void q3_k_levels(const float* x, BlockQ3_K& b, int8_t* L) {
  const float d_all = f16_bits_to_f32(b.d);
  for (int j = 0; j < kSub16; ++j) {
    const float d = d_all * static_cast<float>(q3_k_scale(b.scales, j) - 32);
    if (d == 0.0f) continue;
    for (int i = 0; i < 16; ++i)
      L[16 * j + i] = static_cast<int8_t>(std::clamp(nearest_int(x[16 * j + i] / d), -4, 3) + 4);
  }
  std::memset(b.hmask, 0, sizeof(b.hmask));
  uint8_t U[kQK_K];
  for (int j = 0; j < kQK_K; ++j) {
    int l = L[j];
    if (l > 3) {
      b.hmask[j % 32] = static_cast<uint8_t>(b.hmask[j % 32] | (1u << (j / 32)));
      l -= 4;
    }
    U[j] = static_cast<uint8_t>(l);
  }
  pack_2bit(U, b.qs);
}

void q3_k_ref(const float* x, BlockQ3_K& b) {
  int8_t L[kQK_K];
  float scales[kSub16];
  float max_scale = 0, amax = 0;
  for (int j = 0; j < kSub16; ++j) {
    scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
    float scale = std::fabs(scales[j]);
    if (scale > amax) {
      amax = scale;
      max_scale = scales[j];
    }
  }
  std::memset(b.scales, 0, sizeof(b.scales));
  if (max_scale != 0.0f) {
    const float iscale = -32.0f / max_scale;
    for (int j = 0; j < kSub16; ++j)
      q3_k_pack_scale(b.scales, j, std::clamp(nearest_int(iscale * scales[j]), -32, 31) + 32);
    b.d = f32_to_f16_bits(1 / iscale);
  } else {
    b.d = f32_to_f16_bits(0.0f);
  }
  q3_k_levels(x, b, L);
}

void q3_k_imatrix(const float* x, BlockQ3_K& b, const float* qw) {
  int8_t L[kQK_K], Ls[kSub16];
  float scales[kSub16], weight[16], sw[kSub16];
  const float sigma2 = 2 * sum_squares(x) / kQK_K;
  for (int j = 0; j < kSub16; ++j) {
    for (int l = 0; l < 16; ++l)
      weight[l] = qw[16 * j + l] * std::sqrt(sigma2 + x[16 * j + l] * x[16 * j + l]);
    float sumw = 0;
    for (int l = 0; l < 16; ++l) sumw += weight[l];
    sw[j] = sumw;
    scales[j] = make_qx_quants(16, 4, x + 16 * j, L + 16 * j, weight);
  }
  std::memset(b.scales, 0, sizeof(b.scales));
  const float d_block = make_qx_quants(kSub16, 32, scales, Ls, sw);
  for (int j = 0; j < kSub16; ++j) q3_k_pack_scale(b.scales, j, Ls[j]);
  b.d = f32_to_f16_bits(d_block);
  q3_k_levels(x, b, L);
}

// ---- Q4_K / Q5_K ----

// scale and min of sub-block j from the 12 packed bytes (6 bits each)
inline void scale_min_k4(int j, const uint8_t* q, int& sc, int& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

void pack_scale_min_k4(uint8_t* s, int j, int ls, int lm) {
  if (j < 4) {
    s[j] = static_cast<uint8_t>(ls);
    s[j + 4] = static_cast<uint8_t>(lm);
  } else {
    s[j + 4] = static_cast<uint8_t>((ls & 0xf) | ((lm & 0xf) << 4));
    s[j - 4] = static_cast<uint8_t>(s[j - 4] | ((ls >> 4) << 6));
    s[j] = static_cast<uint8_t>(s[j] | ((lm >> 4) << 6));
  }
}

// the levels 0 .. nmax of every element against the stored scales and mins
template <typename Block>
void k4_levels(const float* x, const Block& b, uint8_t* L, int nmax) {
  const float dd = f16_bits_to_f32(b.d), dmin = f16_bits_to_f32(b.dmin);
  for (int j = 0; j < kSub32; ++j) {
    int sc, m;
    scale_min_k4(j, b.scales, sc, m);
    const float d = dd * static_cast<float>(sc);
    if (d == 0.0f) continue;
    const float dm = dmin * static_cast<float>(m);
    for (int i = 0; i < 32; ++i)
      L[32 * j + i] = static_cast<uint8_t>(std::clamp(nearest_int((x[32 * j + i] + dm) / d), 0, nmax));
  }
}

void pack_q4_k(const uint8_t* L, BlockQ4_K& b) {
  uint8_t* q = b.qs;
  for (int j = 0; j < kQK_K; j += 64, q += 32)
    for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
}

void pack_q5_k(const uint8_t* L, BlockQ5_K& b) {
  std::memset(b.qh, 0, sizeof(b.qh));
  uint8_t* ql = b.qs;
  uint8_t m1 = 1, m2 = 2;
  for (int n = 0; n < kQK_K; n += 64, ql += 32) {
    for (int j = 0; j < 32; ++j) {
      int l1 = L[n + j], l2 = L[n + j + 32];
      if (l1 > 15) {
        l1 -= 16;
        b.qh[j] |= m1;
      }
      if (l2 > 15) {
        l2 -= 16;
        b.qh[j] |= m2;
      }
      ql[j] = static_cast<uint8_t>(l1 | (l2 << 4));
    }
    m1 = static_cast<uint8_t>(m1 << 2);
    m2 = static_cast<uint8_t>(m2 << 2);
  }
}

// Q4_K (nmax 15) and Q5_K (nmax 31): sub-block scales and mins, then 6-bit codes for them
template <typename Block>
void k4_quantize(const float* x, Block& b, const float* qw, int nmax) {
  uint8_t L[kQK_K], Laux[32];
  float weights[32], mins[kSub32], scales[kSub32];
  if (!qw) {
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < kSub32; ++j) {
      const float* xs = x + 32 * j;
      float sum_x2 = 0;
      for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
      const float av_x = std::sqrt(sum_x2 / 32);
      for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
      scales[j] = nmax == 15 ? make_qkx_quants(32, 15, xs, weights, L + 32 * j, &mins[j], Laux, -1.0f, 0.1f,
                                               20, false, false)
                             : make_qkx_quants(32, 31, xs, weights, L + 32 * j, &mins[j], Laux, -0.5f, 0.1f,
                                               15, false, false);
      max_scale = std::max(max_scale, scales[j]);
      max_min = std::max(max_min, mins[j]);
    }
    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    for (int j = 0; j < kSub32; ++j) {
      int ls = std::min(63, nearest_int(inv_scale * scales[j]));
      int lm = std::min(63, nearest_int(inv_min * mins[j]));
      pack_scale_min_k4(b.scales, j, ls, lm);
    }
    b.d = f32_to_f16_bits(max_scale / 63.0f);
    b.dmin = f32_to_f16_bits(max_min / 63.0f);
  } else {
    uint8_t Ls[kSub32], Lm[kSub32];
    float sw[kSub32];
    const float sigma2 = 2 * sum_squares(x) / kQK_K;
    for (int j = 0; j < kSub32; ++j) {
      const float* xs = x + 32 * j;
      for (int l = 0; l < 32; ++l) weights[l] = qw[32 * j + l] * std::sqrt(sigma2 + xs[l] * xs[l]);
      float sumw = 0;
      for (int l = 0; l < 32; ++l) sumw += weights[l];
      sw[j] = sumw;
      scales[j] =
          make_qkx_quants(32, nmax, xs, weights, L + 32 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false, true);
    }
    const float d_block = make_qp_quants(kSub32, 63, scales, Ls, sw);
    const float m_block = make_qp_quants(kSub32, 63, mins, Lm, sw);
    for (int j = 0; j < kSub32; ++j) pack_scale_min_k4(b.scales, j, Ls[j], Lm[j]);
    b.d = f32_to_f16_bits(d_block);
    b.dmin = f32_to_f16_bits(m_block);
  }
  k4_levels(x, b, L, nmax);
  if constexpr (sizeof(Block) == sizeof(BlockQ4_K))
    pack_q4_k(L, b);
  else
    pack_q5_k(L, b);
}

// ---- Q6_K ----

void q6_k_quantize(const float* x, BlockQ6_K& b, const float* qw) {
  int8_t L[kQK_K];
  float scales[kSub16];
  float max_scale = 0, max_abs_scale = 0;
  for (int ib = 0; ib < kSub16; ++ib) {
    const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, qw ? qw + 16 * ib : nullptr);
    scales[ib] = scale;
    const float abs_scale = std::fabs(scale);
    if (abs_scale > max_abs_scale) {
      max_abs_scale = abs_scale;
      max_scale = scale;
    }
  }
  if (max_abs_scale < kGroupMaxEps) {
    std::memset(&b, 0, sizeof(b));
    b.d = f32_to_f16_bits(0.0f);
    return;
  }
  const float iscale = -128.0f / max_scale;
  b.d = f32_to_f16_bits(1 / iscale);
  for (int ib = 0; ib < kSub16; ++ib)
    b.scales[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
  const float dd = f16_bits_to_f32(b.d);
  for (int j = 0; j < kSub16; ++j) {
    const float d = dd * static_cast<float>(b.scales[j]);
    if (d == 0.0f) continue;
    for (int i = 0; i < 16; ++i)
      L[16 * j + i] = static_cast<int8_t>(std::clamp(nearest_int(x[16 * j + i] / d), -32, 31) + 32);
  }
  uint8_t* ql = b.ql;
  uint8_t* qh = b.qh;
  for (int j = 0; j < kQK_K; j += 128, ql += 64, qh += 32) {
    for (int l = 0; l < 32; ++l) {
      const int q1 = L[j + l], q2 = L[j + l + 32], q3 = L[j + l + 64], q4 = L[j + l + 96];
      ql[l] = static_cast<uint8_t>((q1 & 0xf) | ((q3 & 0xf) << 4));
      ql[l + 32] = static_cast<uint8_t>((q2 & 0xf) | ((q4 & 0xf) << 4));
      qh[l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
    }
  }
}

// ---- Q8_K ----

void q8_k_quantize(const float* x, BlockQ8_K& b) {
  float max = 0, amax = 0;
  for (int j = 0; j < kQK_K; ++j) {
    const float ax = std::fabs(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  if (amax == 0.0f) {
    // ggml leaves bsums as they were here; zeros are what they sum to
    std::memset(&b, 0, sizeof(b));
    return;
  }
  const float iscale = -127.0f / max;
  for (int j = 0; j < kQK_K; ++j) b.qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
  for (int j = 0; j < kSub16; ++j) {
    int sum = 0;
    for (int i = 0; i < 16; ++i) sum += b.qs[16 * j + i];
    b.bsums[j] = static_cast<int16_t>(sum);
  }
  b.d = 1 / iscale;
}

template <typename Block, typename Fn>
void per_super_block(const float* x, void* y, size_t n, const float* imatrix, Fn&& fn) {
  Block* blocks = static_cast<Block*>(y);
  for (size_t i = 0; i < n / kQK_K; ++i)
    fn(x + i * kQK_K, blocks[i], imatrix ? imatrix + i * kQK_K : nullptr);
}

}  // namespace

void quantize_q2_k(const float* x, void* y, size_t n, const float* imatrix) {
  per_super_block<BlockQ2_K>(x, y, n, imatrix, [](const float* xb, BlockQ2_K& b, const float* qw) {
    qw ? q2_k_imatrix(xb, b, qw) : q2_k_ref(xb, b);
  });
}
void quantize_q3_k(const float* x, void* y, size_t n, const float* imatrix) {
  per_super_block<BlockQ3_K>(x, y, n, imatrix, [](const float* xb, BlockQ3_K& b, const float* qw) {
    qw ? q3_k_imatrix(xb, b, qw) : q3_k_ref(xb, b);
  });
}
void quantize_q4_k(const float* x, void* y, size_t n, const float* imatrix) {
  per_super_block<BlockQ4_K>(
      x, y, n, imatrix, [](const float* xb, BlockQ4_K& b, const float* qw) { k4_quantize(xb, b, qw, 15); });
}
void quantize_q5_k(const float* x, void* y, size_t n, const float* imatrix) {
  per_super_block<BlockQ5_K>(
      x, y, n, imatrix, [](const float* xb, BlockQ5_K& b, const float* qw) { k4_quantize(xb, b, qw, 31); });
}
void quantize_q6_k(const float* x, void* y, size_t n, const float* imatrix) {
  per_super_block<BlockQ6_K>(x, y, n, imatrix, q6_k_quantize);
}
// Q8_K takes no importance matrix (ggml's from_float_ref)
void quantize_q8_k(const float* x, void* y, size_t n, const float*) {
  per_super_block<BlockQ8_K>(x, y, n, nullptr,
                             [](const float* xb, BlockQ8_K& b, const float*) { q8_k_quantize(xb, b); });
}

// ---- dequantization ----

void dequantize_q2_k(const void* x, float* y, size_t n) {
  const BlockQ2_K* blocks = static_cast<const BlockQ2_K*>(x);
  for (size_t i = 0; i < n / kQK_K; ++i) {
    const BlockQ2_K& b = blocks[i];
    const float d = f16_bits_to_f32(b.d), dmin = f16_bits_to_f32(b.dmin);
    // element 128 * h + 32 * s + 16 * k + l: bits 2s of qs[32 h + 16 k + l], scale 8 h + 2 s + k
    for (int h = 0; h < 2; ++h)
      for (int s = 0; s < 4; ++s)
        for (int k = 0; k < 2; ++k, y += 16) {
          const uint8_t sc = b.scales[8 * h + 2 * s + k];
          const float dl = d * static_cast<float>(sc & 0xf), ml = dmin * static_cast<float>(sc >> 4);
          const uint8_t* q = b.qs + 32 * h + 16 * k;
          for (int l = 0; l < 16; ++l) y[l] = dl * static_cast<float>((q[l] >> (2 * s)) & 3) - ml;
        }
  }
}

void dequantize_q3_k(const void* x, float* y, size_t n) {
  const BlockQ3_K* blocks = static_cast<const BlockQ3_K*>(x);
  for (size_t i = 0; i < n / kQK_K; ++i) {
    const BlockQ3_K& b = blocks[i];
    const float d_all = f16_bits_to_f32(b.d);
    for (int h = 0; h < 2; ++h)
      for (int s = 0; s < 4; ++s)
        for (int k = 0; k < 2; ++k, y += 16) {
          const float dl = d_all * static_cast<float>(q3_k_scale(b.scales, 8 * h + 2 * s + k) - 32);
          const uint8_t* q = b.qs + 32 * h + 16 * k;
          const uint8_t* hm = b.hmask + 16 * k;
          const uint8_t bit = static_cast<uint8_t>(1u << (4 * h + s));
          for (int l = 0; l < 16; ++l)
            y[l] = dl * static_cast<float>(((q[l] >> (2 * s)) & 3) - ((hm[l] & bit) ? 0 : 4));
        }
  }
}

template <typename Block>
void dequantize_k4(const void* x, float* y, size_t n) {
  const Block* blocks = static_cast<const Block*>(x);
  for (size_t i = 0; i < n / kQK_K; ++i) {
    const Block& b = blocks[i];
    const float d = f16_bits_to_f32(b.d), dmin = f16_bits_to_f32(b.dmin);
    for (int g = 0; g < 4; ++g, y += 64) {
      int sc1, m1, sc2, m2;
      scale_min_k4(2 * g, b.scales, sc1, m1);
      scale_min_k4(2 * g + 1, b.scales, sc2, m2);
      const float d1 = d * static_cast<float>(sc1), mn1 = dmin * static_cast<float>(m1);
      const float d2 = d * static_cast<float>(sc2), mn2 = dmin * static_cast<float>(m2);
      const uint8_t* q = b.qs + 32 * g;
      if constexpr (sizeof(Block) == sizeof(BlockQ4_K)) {
        for (int l = 0; l < 32; ++l) y[l] = d1 * static_cast<float>(q[l] & 0xf) - mn1;
        for (int l = 0; l < 32; ++l) y[l + 32] = d2 * static_cast<float>(q[l] >> 4) - mn2;
      } else {
        const uint8_t u1 = static_cast<uint8_t>(1u << (2 * g)), u2 = static_cast<uint8_t>(2u << (2 * g));
        for (int l = 0; l < 32; ++l)
          y[l] = d1 * static_cast<float>((q[l] & 0xf) + ((b.qh[l] & u1) ? 16 : 0)) - mn1;
        for (int l = 0; l < 32; ++l)
          y[l + 32] = d2 * static_cast<float>((q[l] >> 4) + ((b.qh[l] & u2) ? 16 : 0)) - mn2;
      }
    }
  }
}

void dequantize_q4_k(const void* x, float* y, size_t n) { dequantize_k4<BlockQ4_K>(x, y, n); }
void dequantize_q5_k(const void* x, float* y, size_t n) { dequantize_k4<BlockQ5_K>(x, y, n); }

void dequantize_q6_k(const void* x, float* y, size_t n) {
  const BlockQ6_K* blocks = static_cast<const BlockQ6_K*>(x);
  for (size_t i = 0; i < n / kQK_K; ++i) {
    const BlockQ6_K& b = blocks[i];
    const float d = f16_bits_to_f32(b.d);
    // element 128 h + 32 s + 16 k + l: low nibble (s even) or high nibble (s odd) of
    // ql[64 h + 32 (s & 1) + 16 k + l], bits 2s.. of qh[32 h + 16 k + l], scale 8 h + 2 s + k
    for (int h = 0; h < 2; ++h)
      for (int s = 0; s < 4; ++s)
        for (int k = 0; k < 2; ++k, y += 16) {
          const float ds = d * static_cast<float>(b.scales[8 * h + 2 * s + k]);
          const uint8_t* ql = b.ql + 64 * h + 32 * (s & 1) + 16 * k;
          const uint8_t* qh = b.qh + 32 * h + 16 * k;
          const int shift = s < 2 ? 0 : 4;
          for (int l = 0; l < 16; ++l) {
            const int q = (((ql[l] >> shift) & 0xf) | (((qh[l] >> (2 * s)) & 3) << 4)) - 32;
            y[l] = ds * static_cast<float>(q);
          }
        }
  }
}

void dequantize_q8_k(const void* x, float* y, size_t n) {
  const BlockQ8_K* blocks = static_cast<const BlockQ8_K*>(x);
  for (size_t i = 0; i < n / kQK_K; ++i, y += kQK_K) {
    const float d = blocks[i].d;
    for (int j = 0; j < kQK_K; ++j) y[j] = d * static_cast<float>(blocks[i].qs[j]);
  }
}

}  // namespace candle::quantized::detail
