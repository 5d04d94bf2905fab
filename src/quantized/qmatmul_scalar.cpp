// The plain C++ kernels of qmatmul_cpu: the contract of qmatmul_cpu.h written out, one output at
// a time. The reference every SIMD kernel must match bit for bit, and the path of CPUs
// without AVX2.
#include <cmath>
#include <vector>

#include "quantized/qmatmul_kernels.h"

namespace candle::quantized::qmm {

namespace {

template <GgmlDType T>
void scalar_rows(const uint8_t* w, size_t row_bytes, size_t n0, size_t n1, const Acts& a, float* y,
                 size_t ldy) {
  using Tr = BlockTraits<T>;
  constexpr int kQK = Tr::kQK;
  const size_t nb = a.k / kQK, n16 = a.k / 16;
  std::vector<float> acc(a.m);
  Decoded dec;
  for (size_t j = n0; j < n1; ++j) {
    std::fill(acc.begin(), acc.end(), 0.f);
    const uint8_t* row = w + j * row_bytes;
    for (size_t b = 0; b < nb; ++b) {
      const uint8_t* blk = row + b * Tr::kBytes;
      decode_scales<T>(blk, dec.sc, dec.mn, dec.d, dec.mcoef);
      decode_quants<T>(blk, dec.q);
      for (size_t i = 0; i < a.m; ++i) {
        const int8_t* xq = a.qs + i * a.k + b * kQK;
        const int16_t* xs = a.sums16 + i * n16 + b * (kQK / 16);
        int32_t isum = 0, msum = 0;
        for (int s = 0; s < kQK / 16; ++s) {
          int32_t dot = 0;
          for (int l = 0; l < 16; ++l) dot += dec.q[16 * s + l] * xq[16 * s + l];
          isum += dec.sc[s] * dot;
          msum += dec.mn[s] * xs[s];
        }
        const float dx = a.d[i * nb + b];
        const float scale = dec.d * dx;
        acc[i] = std::fma(scale, static_cast<float>(isum), acc[i]);
        if constexpr (Tr::kHasMin) {
          const float mscale = dec.mcoef * dx;
          acc[i] = std::fma(mscale, static_cast<float>(msum), acc[i]);
        }
      }
    }
    for (size_t i = 0; i < a.m; ++i) y[i * ldy + j] = acc[i];
  }
}

}  // namespace

KernelFn scalar_kernel(GgmlDType t) {
  switch (t) {
    case GgmlDType::Q4_0: return scalar_rows<GgmlDType::Q4_0>;
    case GgmlDType::Q4_1: return scalar_rows<GgmlDType::Q4_1>;
    case GgmlDType::Q5_0: return scalar_rows<GgmlDType::Q5_0>;
    case GgmlDType::Q5_1: return scalar_rows<GgmlDType::Q5_1>;
    case GgmlDType::Q8_0: return scalar_rows<GgmlDType::Q8_0>;
    case GgmlDType::IQ4_NL: return scalar_rows<GgmlDType::IQ4_NL>;
    case GgmlDType::Q2K: return scalar_rows<GgmlDType::Q2K>;
    case GgmlDType::Q3K: return scalar_rows<GgmlDType::Q3K>;
    case GgmlDType::Q4K: return scalar_rows<GgmlDType::Q4K>;
    case GgmlDType::Q5K: return scalar_rows<GgmlDType::Q5K>;
    case GgmlDType::Q6K: return scalar_rows<GgmlDType::Q6K>;
    case GgmlDType::IQ4_XS: return scalar_rows<GgmlDType::IQ4_XS>;
    default: return nullptr;
  }
}

}  // namespace candle::quantized::qmm
