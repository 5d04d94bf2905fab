// Device helpers of candle::nn's fused kernels (nn_rows.cu, nn_rope.cu, attention.cu, optim.cu):
// arithmetic rounded once per operation (no contraction into FMAs, as the CPU's kernels are
// compiled), warp and block reductions, and the dtype switch over the float dtypes.
#pragma once

#include <limits>

#include "common.cuh"

namespace candle::cuda_k::nn {

__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float sub_rn(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ double sub_rn(double a, double b) { return __dsub_rn(a, b); }
__device__ __forceinline__ float div_rn(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ double div_rn(double a, double b) { return __ddiv_rn(a, b); }
__device__ __forceinline__ float sqrt_rn(float a) { return __fsqrt_rn(a); }
__device__ __forceinline__ double sqrt_rn(double a) { return __dsqrt_rn(a); }
__device__ __forceinline__ float exp_c(float a) { return expf(a); }
__device__ __forceinline__ double exp_c(double a) { return exp(a); }

constexpr unsigned kFull = 0xffffffffu;

template <typename C>
__device__ __forceinline__ C warp_sum(C v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}

// The larger of the lanes' values (`a > b ? a : b`, so a NaN may or may not survive: callers
// only use it where a NaN input makes the whole result NaN anyway).
template <typename C>
__device__ __forceinline__ C warp_max(C v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const C w = __shfl_xor_sync(kFull, v, o);
    v = w > v ? w : v;
  }
  return v;
}

// Calls fn.template operator()<S>() for the float storage types.
template <typename Fn>
__host__ cudaError_t with_float(Dt dt, Fn&& fn) {
  switch (dt) {
    case Dt::BF16: return fn.template operator()<__nv_bfloat16>();
    case Dt::F16: return fn.template operator()<__half>();
    case Dt::F32: return fn.template operator()<float>();
    case Dt::F64: return fn.template operator()<double>();
    case Dt::F8E4M3: return fn.template operator()<f8>();
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace candle::cuda_k::nn
