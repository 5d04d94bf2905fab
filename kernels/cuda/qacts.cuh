// The activation quantizers of the quantized matrix-vector products (launch_quant.h), as device
// functions: the standalone kernels (qmatmul.cu) and the ops that make activations for them in the
// same launch (nn_rows.cu: rms_norm and add_rms_norm; silu_mul) share one copy of the arithmetic, so
// that an activation quantized by its producer has the bytes the standalone kernel gives it. The
// operations are those of the CPU's quantizers (src/quantized/qmatmul_cpu.cpp):
//  - blocks of 32 (the Q8_0 form, for the weight types of 32): amax over the block, d = amax / 127
//    rounded to f16, q = round(x * (127 / amax)) ties to even;
//  - blocks of 256 (the Q8_K form, for the K-quants): the first element of the largest magnitude,
//    vmax, maps to -127: q = round(x * (-127 / vmax)), d = vmax / -127 written for each of its 8
//    blocks of 32;
// the quants clamped to [-127, 127] (NaN to 0), and the sums of each 16 quants beside them.
#pragma once

#include "common.cuh"
#include "launch_quant.h"

namespace candle::cuda_k::qacts {

// Block b of 32, element `lane` of it in v (one value a lane of a full warp).
__device__ __forceinline__ void block32(float v, unsigned lane, uint64_t b, int8_t* __restrict__ q,
                                        float* __restrict__ d, int32_t* __restrict__ sums) {
  float amax = fabsf(v);
  for (int o = 16; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
  const int qi = max(-127, min(127, __float2int_rn(v * id)));
  q[b * 32 + lane] = static_cast<int8_t>(qi);
  int s = qi;
  for (int o = 8; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);  // within each half-warp
  if (lane % 16 == 0) sums[b * 2 + lane / 16] = s;
  if (lane == 0) d[b] = __half2float(__float2half_rn(amax / 127.0f));
}

// A lane's 8 values (elements 8 lane.. of a unit of 256 at q) times `scale` to quants, clamped; the
// sums of each 16 (two lanes) into sums[lane / 2].
__device__ __forceinline__ void quants8(const float (&v)[8], float scale, unsigned lane,
                                        int8_t* __restrict__ q, int32_t* __restrict__ sums) {
  int s = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int qi = max(-127, min(127, __float2int_rn(v[i] * scale)));
    q[lane * 8 + i] = static_cast<int8_t>(qi);
    s += qi;
  }
  s += __shfl_xor_sync(0xffffffffu, s, 1);
  if (lane % 2 == 0) sums[lane / 2] = s;
}

// Unit u of 256 values, lane l holding elements 8l..8l+7 in v (block of 32 l / 4, half l / 2), to
// the forms `o` asks for: o.q[1] the Q8_K form (blocks of 256), o.q[0] the Q8_0 form (its 8 blocks
// of 32, each from the 4 lanes that hold it: the same maximum and operations as block32).
__device__ __forceinline__ void unit256(const float (&v)[8], unsigned lane, uint64_t u, const ActsQ8Out& o) {
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) amax = fmaxf(amax, fabsf(v[i]));
  if (o.q[0]) {
    float a32 = amax;
    for (int m = 1; m < 4; m *= 2) a32 = fmaxf(a32, __shfl_xor_sync(0xffffffffu, a32, m));
    quants8(v, a32 > 0.0f ? 127.0f / a32 : 0.0f, lane, o.q[0] + u * 256, o.sums[0] + u * 16);
    if (lane % 4 == 0) o.d[0][u * 8 + lane / 4] = __half2float(__float2half_rn(a32 / 127.0f));
  }
  if (!o.q[1]) return;
  for (int m = 16; m > 0; m /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, m));
  // the first element of magnitude amax: the smallest index among the lanes' first ones
  int first = 256;
#pragma unroll
  for (int i = 7; i >= 0; --i)
    if (fabsf(v[i]) == amax) first = static_cast<int>(lane) * 8 + i;
  for (int m = 16; m > 0; m /= 2) first = min(first, __shfl_xor_sync(0xffffffffu, first, m));
  float vmax = 0.0f;
  if (amax > 0.0f) vmax = __shfl_sync(0xffffffffu, v[first % 8], first / 8);
  quants8(v, amax > 0.0f ? -127.0f / vmax : 0.0f, lane, o.q[1] + u * 256, o.sums[1] + u * 16);
  if (lane % 4 == 0) o.d[1][u * 8 + lane / 4] = amax > 0.0f ? vmax / -127.0f : 0.0f;
}

// A warp's share of quantizing `elems` values (a multiple of 32; of 256 when o.q[1] is asked for)
// whose element i is value(i), written as elements first.. of the forms `o` asks for (first a
// multiple of the unit): by units of 256 (`units`, or o.q[1] asked for: both forms from one read, 8
// loads a lane in flight: for a fixed number of warps) or by blocks of 32 (a value a lane: for a grid
// sized to the values). `warp` / `warps`: this warp among those that share the values. value(i) may
// be called more than once for an element.
template <typename Value>
__device__ __forceinline__ void warp_share(Value value, uint64_t elems, uint64_t first, uint64_t warp,
                                           uint64_t warps, unsigned lane, const ActsQ8Out& o, bool units) {
  if ((units || o.q[1]) && elems % 256 == 0) {
    for (uint64_t u = warp; u < elems / 256; u += warps) {
      float v[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = value(u * 256 + lane * 8 + i);
      unit256(v, lane, first / 256 + u, o);
    }
  } else if (o.q[0]) {
    for (uint64_t b = warp; b < elems / 32; b += warps)
      block32(value(b * 32 + lane), lane, first / 32 + b, o.q[0], o.d[0], o.sums[0]);
  }
}

}  // namespace candle::cuda_k::qacts
