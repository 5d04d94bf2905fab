// IQ4_NL (blocks of 32, one f16 scale) and IQ4_XS (super-blocks of 256: 8 sub-blocks of 32 with
// 6-bit scales): 4-bit indices into the non-linear levels kIq4nlValues. The quantizer tries 15
// scales around max / -127 per sub-block by weighted least squares (weights x^2, or the
// importance matrix times sqrt(sigma^2 + x^2)); IQ4_XS then quantizes the sub-block scales and
// re-picks every index against the scale as stored.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "candle/quantized/blocks.h"
#include "quantized/quant_search.h"
#include "quantized/quants.h"

namespace candle::quantized::detail {

namespace {

constexpr int kSub = 32;
constexpr int kTries = 7;

// the weighted least-squares scale of the sub-block xb for the indices that 1/id gives
void iq4_fit(const float* xb, const float* weight, float id, uint8_t* Lb, float& sumqx, float& sumq2) {
  sumqx = 0;
  sumq2 = 0;
  for (int j = 0; j < kSub; ++j) {
    const int l = best_index_iq4(kIq4nlValues, id * xb[j]);
    if (Lb) Lb[j] = static_cast<uint8_t>(l);
    const float q = kIq4nlValues[l];
    const float w = weight[j];
    sumqx += w * q * xb[j];
    sumq2 += w * q * q;
  }
}

// One super-block of `size` elements (32 for IQ4_NL, 256 for IQ4_XS); qw: its importance
// weights or nullptr. Writes *dh, the packed indices q4 and, for IQ4_XS, the sub-block scales.
void iq4_quantize(int size, const float* x, uint16_t* dh, uint8_t* q4, uint16_t* scales_h, uint8_t* scales_l,
                  const float* qw) {
  uint8_t L[kQK_K];
  float weight[kSub], scales[kQK_K / kSub];
  const int nsub = size / kSub;
  float sigma2 = 0;
  for (int j = 0; j < size; ++j) sigma2 += x[j] * x[j];
  sigma2 *= 2.0f / static_cast<float>(size);
  std::memset(q4, 0, static_cast<size_t>(size / 2));
  *dh = f32_to_f16_bits(0.0f);
  float max_scale = 0, amax_scale = 0;
  for (int ib = 0; ib < nsub; ++ib) {
    const float* xb = x + ib * kSub;
    uint8_t* Lb = L + ib * kSub;
    if (qw) {
      for (int j = 0; j < kSub; ++j) weight[j] = qw[ib * kSub + j] * std::sqrt(sigma2 + xb[j] * xb[j]);
    } else {
      for (int j = 0; j < kSub; ++j) weight[j] = xb[j] * xb[j];
    }
    float amax = 0, max = 0;
    for (int j = 0; j < kSub; ++j) {
      const float ax = std::fabs(xb[j]);
      if (ax > amax) {
        amax = ax;
        max = xb[j];
      }
    }
    if (amax < kGroupMaxEps) {
      scales[ib] = 0;
      continue;
    }
    float d = -max / kIq4nlValues[0];
    float sumqx, sumq2;
    iq4_fit(xb, weight, 1 / d, Lb, sumqx, sumq2);
    d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
    float best = d * sumqx;
    for (int itry = -kTries; itry <= kTries; ++itry) {
      const float id = static_cast<float>(itry + kIq4nlValues[0]) / max;
      iq4_fit(xb, weight, id, nullptr, sumqx, sumq2);
      if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
        d = sumqx / sumq2;
        best = d * sumqx;
      }
    }
    scales[ib] = d;
    const float abs_d = std::fabs(d);
    if (abs_d > amax_scale) {
      amax_scale = abs_d;
      max_scale = d;
    }
  }
  if (nsub > 1) {
    *scales_h = 0;
    const float d = -max_scale / 32;
    *dh = f32_to_f16_bits(d);
    const float id = d != 0.0f ? 1 / d : 0.0f;
    for (int ib = 0; ib < nsub; ++ib) {
      int l = std::clamp(nearest_int(id * scales[ib]), -32, 31);
      const float dl = d * static_cast<float>(l);
      const float idl = dl != 0.0f ? 1 / dl : 0.0f;
      const float* xb = x + ib * kSub;
      for (int j = 0; j < kSub; ++j)
        L[ib * kSub + j] = static_cast<uint8_t>(best_index_iq4(kIq4nlValues, idl * xb[j]));
      l += 32;
      const int l_l = l & 0xf, l_h = l >> 4;
      if (ib % 2 == 0)
        scales_l[ib / 2] = static_cast<uint8_t>(l_l);
      else
        scales_l[ib / 2] = static_cast<uint8_t>(scales_l[ib / 2] | (l_l << 4));
      *scales_h = static_cast<uint16_t>(*scales_h | (l_h << (2 * ib)));
    }
  } else {
    *dh = f32_to_f16_bits(scales[0]);
    const float id = scales[0] != 0.0f ? 1 / scales[0] : 0.0f;
    for (int j = 0; j < size; ++j) L[j] = static_cast<uint8_t>(best_index_iq4(kIq4nlValues, id * x[j]));
  }
  for (int i = 0; i < size / kSub; ++i)
    for (int j = 0; j < 16; ++j)
      q4[16 * i + j] = static_cast<uint8_t>(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
}

}  // namespace

void quantize_iq4_nl(const float* x, void* y, size_t n, const float* imatrix) {
  BlockIQ4_NL* blocks = static_cast<BlockIQ4_NL*>(y);
  for (size_t i = 0; i < n / kQK4_NL; ++i)
    iq4_quantize(kQK4_NL, x + i * kQK4_NL, &blocks[i].d, blocks[i].qs, nullptr, nullptr,
                 imatrix ? imatrix + i * kQK4_NL : nullptr);
}

void quantize_iq4_xs(const float* x, void* y, size_t n, const float* imatrix) {
  BlockIQ4_XS* blocks = static_cast<BlockIQ4_XS*>(y);
  for (size_t i = 0; i < n / kQK_K; ++i)
    iq4_quantize(kQK_K, x + i * kQK_K, &blocks[i].d, blocks[i].qs, &blocks[i].scales_h, blocks[i].scales_l,
                 imatrix ? imatrix + i * kQK_K : nullptr);
}

void dequantize_iq4_nl(const void* x, float* y, size_t n) {
  const BlockIQ4_NL* blocks = static_cast<const BlockIQ4_NL*>(x);
  for (size_t i = 0; i < n / kQK4_NL; ++i, y += kQK4_NL) {
    const float d = f16_bits_to_f32(blocks[i].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * static_cast<float>(kIq4nlValues[blocks[i].qs[j] & 0xf]);
      y[j + 16] = d * static_cast<float>(kIq4nlValues[blocks[i].qs[j] >> 4]);
    }
  }
}

void dequantize_iq4_xs(const void* x, float* y, size_t n) {
  const BlockIQ4_XS* blocks = static_cast<const BlockIQ4_XS*>(x);
  for (size_t i = 0; i < n / kQK_K; ++i) {
    const BlockIQ4_XS& b = blocks[i];
    const float d = f16_bits_to_f32(b.d);
    for (int ib = 0; ib < kQK_K / kSub; ++ib, y += kSub) {
      const int ls = ((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) | (((b.scales_h >> (2 * ib)) & 3) << 4);
      const float dl = d * static_cast<float>(ls - 32);
      const uint8_t* qs = b.qs + 16 * ib;
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * static_cast<float>(kIq4nlValues[qs[j] & 0xf]);
        y[j + 16] = dl * static_cast<float>(kIq4nlValues[qs[j] >> 4]);
      }
    }
  }
}

}  // namespace candle::quantized::detail
