// The block codecs of every GgmlDType on the CPU: llama.cpp's values when dequantizing and its
// bytes when quantizing (the reference quantizers, and the importance-matrix forms), bit for
// bit. n is a multiple of ggml_block_size(t); bad sizes throw candle::Error.
#pragma once

#include <cstddef>
#include <cstdint>

#include "candle/quantized/ggml_dtype.h"

namespace candle::quantized {

// n elements (n / block_size blocks) of type t to f32
void dequantize_row(GgmlDType t, const void* blocks, float* dst, size_t n);
// n f32 elements to n / block_size blocks of type t; imatrix: n_per_row importance weights
// (the same for every row), or nullptr for the reference quantizer. Gives the bytes of
// ggml_quantize_chunk(t, src, dst, 0, 1, n, imatrix).
void quantize_row(GgmlDType t, const float* src, void* blocks, size_t n, const float* imatrix = nullptr);
// nrows rows of n_per_row elements, rows in parallel; the bytes do not depend on the thread count
void quantize_rows(GgmlDType t, const float* src, void* dst, size_t nrows, size_t n_per_row,
                   const float* imatrix = nullptr);
void dequantize_rows(GgmlDType t, const void* src, float* dst, size_t nrows, size_t n_per_row);
// the same values rounded to f16 (raw bits, round to nearest even): for t == F16 a copy
void dequantize_row_f16(GgmlDType t, const void* blocks, uint16_t* dst, size_t n);
void dequantize_rows_f16(GgmlDType t, const void* src, uint16_t* dst, size_t nrows, size_t n_per_row);
// whether llama.cpp's quantizer of t needs an importance matrix to give usable weights
// (none of the types here does; kept for the IQ2/IQ1 types later)
bool quantize_requires_imatrix(GgmlDType t);

}  // namespace candle::quantized
