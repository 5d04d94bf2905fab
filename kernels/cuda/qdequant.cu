// GGML blocks to f32 / f16: one kernel per block type, each thread 8 consecutive values of one
// block (of 8 blocks for the float types), with the CPU dequantizer's float operations (quant.cuh).
#include "common.cuh"
#include "launch_quant.h"
#include "quant.cuh"

namespace candle::cuda_k {
namespace {

using namespace quant;

constexpr int kPer = 8;

template <typename O>
__device__ __forceinline__ void store_group(O* out, uint64_t e0, uint64_t elems, const float* v) {
  if (e0 + kPer <= elems) {
    if constexpr (std::is_same_v<O, float>) {
      float4* o = reinterpret_cast<float4*>(out + e0);
      o[0] = make_float4(v[0], v[1], v[2], v[3]);
      o[1] = make_float4(v[4], v[5], v[6], v[7]);
    } else {
      uint32_t w[kPer / 2];
      for (int t = 0; t < kPer / 2; ++t)
        w[t] = static_cast<uint32_t>(__half_as_ushort(__float2half_rn(v[2 * t]))) |
               static_cast<uint32_t>(__half_as_ushort(__float2half_rn(v[2 * t + 1]))) << 16;
      *reinterpret_cast<uint4*>(out + e0) = make_uint4(w[0], w[1], w[2], w[3]);
    }
    return;
  }
  for (int t = 0; e0 + t < elems; ++t) {
    if constexpr (std::is_same_v<O, float>)
      out[e0 + t] = v[t];
    else
      out[e0 + t] = __float2half_rn(v[t]);
  }
}

template <uint32_t T, typename O>
__global__ void qdequant_k(const uint8_t* __restrict__ blocks, uint64_t elems, O* __restrict__ out) {
  pdl_entry();
  using Q = QT<T>;
  const uint64_t groups = (elems + kPer - 1) / kPer;
  CANDLE_GRID_LOOP(uint64_t, g, groups) {
    const uint64_t e0 = g * kPer;
    float v[kPer];
    if constexpr (Q::kQK >= kPer) {
      // a group never straddles blocks: kPer divides every block size
      const uint8_t* b = blocks + (e0 / Q::kQK) * Q::kSize;
      const int j0 = static_cast<int>(e0 % Q::kQK);
#pragma unroll
      for (int t = 0; t < kPer; ++t) v[t] = Q::deq(b, j0 + t);
    } else {
#pragma unroll
      for (int t = 0; t < kPer; ++t) v[t] = e0 + t < elems ? Q::deq(blocks + (e0 + t) * Q::kSize, 0) : 0.0f;
    }
    store_group(out, e0, elems, v);
  }
}

}  // namespace

bool qtype_layout(uint32_t ggml_type, size_t& block_elems, size_t& block_bytes) {
  return with_qtype<false>(ggml_type, [&]<uint32_t T>() {
           block_elems = QT<T>::kQK;
           block_bytes = QT<T>::kSize;
           return cudaSuccess;
         }) == cudaSuccess;
}

cudaError_t qdequantize(uint32_t ggml_type, const void* blocks, size_t elems, bool out_f16, void* out,
                        cudaStream_t s) {
  if (elems == 0) return cudaSuccess;
  const auto groups = static_cast<int64_t>((elems + kPer - 1) / kPer);
  return with_qtype<false>(ggml_type, [&]<uint32_t T>() {
    const auto* b = static_cast<const uint8_t*>(blocks);
    if (out_f16)
      qdequant_k<T><<<grid_for(groups), kBlock, 0, s>>>(b, elems, static_cast<__half*>(out));
    else
      qdequant_k<T><<<grid_for(groups), kBlock, 0, s>>>(b, elems, static_cast<float*>(out));
    return cudaGetLastError();
  });
}

}  // namespace candle::cuda_k
