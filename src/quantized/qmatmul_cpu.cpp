// Placeholder until the integer-dot kernels land: dequantize each weight row and dot in f32.
#include "qmatmul_cpu.h"

#include <vector>

#include "codec.h"
#include "cpu/parallel.h"

namespace candle::quantized {

void qmatmul_cpu(GgmlDType t, const void* w, size_t n, size_t k, const float* x, size_t m, float* y) {
  const size_t row_bytes = ggml_row_bytes(t, k);
  cpu::parallel_for(n, 16, [&](size_t j0, size_t j1) {
    std::vector<float> row(k);
    for (size_t j = j0; j < j1; ++j) {
      dequantize_row(t, static_cast<const uint8_t*>(w) + j * row_bytes, row.data(), k);
      for (size_t i = 0; i < m; ++i) {
        float s = 0.f;
        for (size_t p = 0; p < k; ++p) s += x[i * k + p] * row[p];
        y[i * n + j] = s;
      }
    }
  });
}

const char* qmatmul_cpu_kernel_name(GgmlDType) { return "dequantize"; }

}  // namespace candle::quantized
