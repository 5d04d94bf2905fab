// The codec's dispatch: size checks, the float types, and the row-parallel loops over the block
// codecs of quants_legacy.cpp, quants_k.cpp and quants_iq4.cpp.
#include "quantized/codec.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "candle/dtype.h"
#include "candle/error.h"
#include "cpu/gemm.h"
#include "cpu/parallel.h"
#include "quantized/quant_search.h"
#include "quantized/quants.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace candle::quantized {

namespace {

struct Codec {
  detail::QuantizeRowFn quantize;
  detail::DequantizeRowFn dequantize;
};

void quantize_f32(const float* x, void* y, size_t n, const float*) { std::memcpy(y, x, n * sizeof(float)); }
void dequantize_f32(const void* x, float* y, size_t n) { std::memcpy(y, x, n * sizeof(float)); }
// a tensor's bytes in a GGUF or GGML file need not be 2-byte aligned: halves are loaded and stored
// through memcpy, never through a uint16_t pointer
uint16_t load_half(const unsigned char* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
void store_half(unsigned char* p, uint16_t v) { std::memcpy(p, &v, sizeof v); }
void quantize_f16(const float* x, void* y, size_t n, const float*) {
  unsigned char* h = static_cast<unsigned char*>(y);
  for (size_t i = 0; i < n; ++i) store_half(h + 2 * i, detail::f32_to_f16_bits(x[i]));
}
void dequantize_f16_scalar(const unsigned char* h, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = detail::f16_bits_to_f32(load_half(h + 2 * i));
}
#if defined(__x86_64__) || defined(__i386__)
// F16C's conversion is exact and quiets a signalling NaN, as ggml's does
__attribute__((target("avx,f16c"))) void dequantize_f16_f16c(const unsigned char* h, float* y, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + 2 * i))));
  dequantize_f16_scalar(h + 2 * i, y + i, n - i);
}
#endif
void dequantize_f16(const void* x, float* y, size_t n) {
  const unsigned char* h = static_cast<const unsigned char*>(x);
#if defined(__x86_64__) || defined(__i386__)
  // every AVX2 CPU has F16C; CANDLE_CPU_ISA=sse (or set_cpu_isa) keeps the plain C++ path
  if (cpu::cpu_isa() != cpu::CpuIsa::Sse) return dequantize_f16_f16c(h, y, n);
#endif
  dequantize_f16_scalar(h, y, n);
}
void quantize_bf16(const float* x, void* y, size_t n, const float*) {
  unsigned char* h = static_cast<unsigned char*>(y);
  for (size_t i = 0; i < n; ++i) store_half(h + 2 * i, bf16::from_f32(x[i]));
}
void dequantize_bf16(const void* x, float* y, size_t n) {
  const unsigned char* h = static_cast<const unsigned char*>(x);
  for (size_t i = 0; i < n; ++i) y[i] = bf16::to_f32(load_half(h + 2 * i));
}

Codec codec_of(GgmlDType t) {
  using namespace detail;
  switch (t) {
    case GgmlDType::F32: return {quantize_f32, dequantize_f32};
    case GgmlDType::F16: return {quantize_f16, dequantize_f16};
    case GgmlDType::BF16: return {quantize_bf16, dequantize_bf16};
    case GgmlDType::Q4_0: return {quantize_q4_0, dequantize_q4_0};
    case GgmlDType::Q4_1: return {quantize_q4_1, dequantize_q4_1};
    case GgmlDType::Q5_0: return {quantize_q5_0, dequantize_q5_0};
    case GgmlDType::Q5_1: return {quantize_q5_1, dequantize_q5_1};
    case GgmlDType::Q8_0: return {quantize_q8_0, dequantize_q8_0};
    case GgmlDType::Q8_1: return {quantize_q8_1, dequantize_q8_1};
    case GgmlDType::Q2K: return {quantize_q2_k, dequantize_q2_k};
    case GgmlDType::Q3K: return {quantize_q3_k, dequantize_q3_k};
    case GgmlDType::Q4K: return {quantize_q4_k, dequantize_q4_k};
    case GgmlDType::Q5K: return {quantize_q5_k, dequantize_q5_k};
    case GgmlDType::Q6K: return {quantize_q6_k, dequantize_q6_k};
    case GgmlDType::Q8K: return {quantize_q8_k, dequantize_q8_k};
    case GgmlDType::IQ4_NL: return {quantize_iq4_nl, dequantize_iq4_nl};
    case GgmlDType::IQ4_XS: return {quantize_iq4_xs, dequantize_iq4_xs};
  }
  throw Error(ErrorKind::InvalidArgument,
              "quantized codec: unknown GgmlDType id " + std::to_string(static_cast<uint32_t>(t)));
}

// the codec of t, after checking that n elements are whole blocks (the bytes of one row)
Codec checked_codec(GgmlDType t, size_t n, const char* what) {
  Codec c = codec_of(t);
  size_t block = ggml_block_size(t);
  if (n % block != 0)
    throw Error(ErrorKind::InvalidArgument,
                std::string(what) + ": " + std::to_string(n) + " elements are not a whole number of " +
                    std::string(ggml_dtype_name(t)) + " blocks of " + std::to_string(block));
  return c;
}

void check_total(size_t nrows, size_t n_per_row, const char* what) {
  if (n_per_row != 0 && nrows > std::numeric_limits<size_t>::max() / 4 / n_per_row)
    throw Error(ErrorKind::InvalidArgument, std::string(what) + ": " + std::to_string(nrows) + " rows of " +
                                                std::to_string(n_per_row) + " elements overflow");
}

// rows per parallel chunk: about `elements` elements each
size_t row_grain(size_t n_per_row, size_t elements) {
  return std::max<size_t>(1, elements / std::max<size_t>(1, n_per_row));
}

}  // namespace

void dequantize_row(GgmlDType t, const void* blocks, float* dst, size_t n) {
  checked_codec(t, n, "dequantize_row").dequantize(blocks, dst, n);
}

void quantize_row(GgmlDType t, const float* src, void* blocks, size_t n, const float* imatrix) {
  checked_codec(t, n, "quantize_row").quantize(src, blocks, n, imatrix);
}

void quantize_rows(GgmlDType t, const float* src, void* dst, size_t nrows, size_t n_per_row,
                   const float* imatrix) {
  Codec c = checked_codec(t, n_per_row, "quantize_rows");
  check_total(nrows, n_per_row, "quantize_rows");
  const size_t row_bytes = n_per_row / ggml_block_size(t) * ggml_type_size(t);
  uint8_t* out = static_cast<uint8_t*>(dst);
  cpu::parallel_for(nrows, row_grain(n_per_row, 4096), [&](size_t b, size_t e) {
    for (size_t r = b; r < e; ++r) c.quantize(src + r * n_per_row, out + r * row_bytes, n_per_row, imatrix);
  });
}

void dequantize_rows(GgmlDType t, const void* src, float* dst, size_t nrows, size_t n_per_row) {
  Codec c = checked_codec(t, n_per_row, "dequantize_rows");
  check_total(nrows, n_per_row, "dequantize_rows");
  const size_t row_bytes = n_per_row / ggml_block_size(t) * ggml_type_size(t);
  const uint8_t* in = static_cast<const uint8_t*>(src);
  cpu::parallel_for(nrows, row_grain(n_per_row, cpu::kParallelGrain), [&](size_t b, size_t e) {
    for (size_t r = b; r < e; ++r) c.dequantize(in + r * row_bytes, dst + r * n_per_row, n_per_row);
  });
}

void dequantize_row_f16(GgmlDType t, const void* blocks, uint16_t* dst, size_t n) {
  Codec c = checked_codec(t, n, "dequantize_row_f16");
  if (t == GgmlDType::F16) {
    std::memcpy(dst, blocks, n * sizeof(uint16_t));
    return;
  }
  // whole blocks through an f32 buffer of one super-block (256 is a multiple of every block size)
  constexpr size_t kChunk = 256;
  const size_t chunk_bytes = kChunk / ggml_block_size(t) * ggml_type_size(t);
  const uint8_t* in = static_cast<const uint8_t*>(blocks);
  float buf[kChunk];
  for (size_t i = 0; i < n; i += kChunk, in += chunk_bytes) {
    const size_t m = std::min(kChunk, n - i);
    c.dequantize(in, buf, m);
    for (size_t j = 0; j < m; ++j) dst[i + j] = detail::f32_to_f16_bits(buf[j]);
  }
}

void dequantize_rows_f16(GgmlDType t, const void* src, uint16_t* dst, size_t nrows, size_t n_per_row) {
  checked_codec(t, n_per_row, "dequantize_rows_f16");
  check_total(nrows, n_per_row, "dequantize_rows_f16");
  const size_t row_bytes = n_per_row / ggml_block_size(t) * ggml_type_size(t);
  const uint8_t* in = static_cast<const uint8_t*>(src);
  cpu::parallel_for(nrows, row_grain(n_per_row, cpu::kParallelGrain), [&](size_t b, size_t e) {
    for (size_t r = b; r < e; ++r) dequantize_row_f16(t, in + r * row_bytes, dst + r * n_per_row, n_per_row);
  });
}

bool quantize_requires_imatrix(GgmlDType t) {
  codec_of(t);
  return false;
}

}  // namespace candle::quantized
