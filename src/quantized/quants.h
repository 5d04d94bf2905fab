// The per-type block codecs behind codec.h (internal to src/quantized). Each quantize_* takes one
// row of n elements (n a multiple of the block size, checked by the caller) and an optional
// importance matrix of n weights; each dequantize_* writes n floats.
#pragma once

#include <cstddef>

namespace candle::quantized::detail {

using QuantizeRowFn = void (*)(const float* x, void* y, size_t n, const float* imatrix);
using DequantizeRowFn = void (*)(const void* x, float* y, size_t n);

#define CANDLE_QUANT_CODEC(name)                                                 \
  void quantize_##name(const float* x, void* y, size_t n, const float* imatrix); \
  void dequantize_##name(const void* x, float* y, size_t n);

// quants_legacy.cpp
CANDLE_QUANT_CODEC(q4_0)
CANDLE_QUANT_CODEC(q4_1)
CANDLE_QUANT_CODEC(q5_0)
CANDLE_QUANT_CODEC(q5_1)
CANDLE_QUANT_CODEC(q8_0)
CANDLE_QUANT_CODEC(q8_1)
// quants_k.cpp
CANDLE_QUANT_CODEC(q2_k)
CANDLE_QUANT_CODEC(q3_k)
CANDLE_QUANT_CODEC(q4_k)
CANDLE_QUANT_CODEC(q5_k)
CANDLE_QUANT_CODEC(q6_k)
CANDLE_QUANT_CODEC(q8_k)
// quants_iq4.cpp
CANDLE_QUANT_CODEC(iq4_nl)
CANDLE_QUANT_CODEC(iq4_xs)

#undef CANDLE_QUANT_CODEC

}  // namespace candle::quantized::detail
