// The GGML block kernels (kernels/cuda/qdequant.cu, qmatmul.cu, hmatvec.cu): dequantization and the
// quantized and half-precision matrix-vector products. Blocks are given as their bytes (a U8 storage), types
// as ggml's ids (candle::quantized::GgmlDType's values).
#pragma once

#include "launch.h"

namespace candle::cuda_k {

// Elements and bytes of a block of ggml type `ggml_type`; false for a type without kernels here.
bool qtype_layout(uint32_t ggml_type, size_t& block_elems, size_t& block_bytes);

// The first `elems` values of `blocks` (16-byte aligned; elems a multiple of the block size) as
// f32 (out_f16: f16, rounded to nearest even), the CPU dequantizer's values.
cudaError_t qdequantize(uint32_t ggml_type, const void* blocks, size_t elems, bool out_f16, void* out,
                        cudaStream_t s);

// The most activation rows qmatvec takes in one launch.
constexpr size_t kQmvMaxRows = 8;

// Where an op that makes activations also writes them quantized as quantize_acts_q8 would (rms_norm,
// add_rms_norm, silu_mul and decode attention on a few rows: launch_nn.h): [0] the form for blocks
// of 32, [1] the form for blocks of 256, each q / d / sums as quantize_acts_q8 lays them out; null
// pointers: not asked.
struct ActsQ8Out {
  int8_t* q[2] = {nullptr, nullptr};
  float* d[2] = {nullptr, nullptr};
  int32_t* sums[2] = {nullptr, nullptr};
  bool any() const { return q[0] != nullptr || q[1] != nullptr; }
};

// x (m rows of k, dense, f32 / f16 / bf16; k a multiple of `group`) to 8-bit quants as the CPU's
// quantized matmul makes them for weights of blocks of `group` (32: the Q8_0 form; 256: the Q8_K
// form): q (m k int8), d (m k / 32 f32 scales, one per 32 quants: x ~ d q; with group 256 each of
// 8 equal), sums (m k / 16: the sum of each 16 quants).
cudaError_t quantize_acts_q8(Dt dt, const void* x, size_t m, size_t k, size_t group, int8_t* q, float* d,
                             int32_t* sums, cudaStream_t s);

// y (m, n) f32 = x @ w^T with x as quantize_acts_q8 gives it (m <= kQmvMaxRows) and w n rows of
// `row_bytes` bytes of blocks of a quantized type (16-byte aligned; k a multiple of its block size).
cudaError_t qmatvec(uint32_t ggml_type, const void* w, size_t row_bytes, size_t n, size_t k, size_t m,
                    const int8_t* q, const float* d, const int32_t* sums, float* y, cudaStream_t s);

// y (m, n) f32 = x @ w^T for an f16 (bf16: bf16) weight w of n rows of k (16-byte aligned, k a
// multiple of 8) and x m <= kQmvMaxRows dense f32 rows (16-byte aligned), in f32 (kernels/cuda/hmatvec.cu).
cudaError_t half_matvec(bool bf16, const void* w, size_t n, size_t k, size_t m, const float* x, float* y,
                        cudaStream_t s);

}  // namespace candle::cuda_k
