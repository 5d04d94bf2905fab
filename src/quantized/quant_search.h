// The scale searches that llama.cpp's quantizers share, with its float arithmetic in the same
// order (so that the chosen scales, and so the bytes, are the same bit for bit). Internal to
// src/quantized; x86-64 and every other target evaluate these in plain f32 (the codec sources
// are compiled with -ffp-contract=off, so no multiply-add is fused).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "candle/dtype.h"

namespace candle::quantized::detail {

// below this a group's largest magnitude counts as zero
inline constexpr float kGroupMaxEps = 1e-15f;

// round to nearest, ties to even, through the f32 adder: adding 1.5 * 2^23 leaves the integer
// in the low mantissa bits (exact for |v| < 2^22; outside that, the same bits as ggml's)
inline int nearest_int(float v) {
  float biased = v + 12582912.0f;
  return static_cast<int>(std::bit_cast<uint32_t>(biased) & 0x007fffffu) - 0x00400000;
}

// (int)v for a C cast of float to a narrow integer, as x86's cvttss2si gives it: truncation
// toward zero, and INT_MIN for NaN or out-of-range values (defined here, instead of UB)
inline int32_t truncate_to_int(float v) {
  if (!(v > -2147483648.0f && v < 2147483648.0f)) return INT32_MIN;
  return static_cast<int32_t>(v);
}
// the low byte of that, as a signed / unsigned 8-bit value (what `(int8_t)v` / `(uint8_t)v` store)
inline int8_t truncate_to_i8(float v) {
  return static_cast<int8_t>(static_cast<uint8_t>(static_cast<uint32_t>(truncate_to_int(v)) & 0xffu));
}
inline uint8_t truncate_to_u8(float v) {
  return static_cast<uint8_t>(static_cast<uint32_t>(truncate_to_int(v)) & 0xffu);
}

inline uint16_t f32_to_f16_bits(float v) { return f16::from_f32(v); }
// ggml's f16 to f32 quiets a signalling NaN (the top mantissa bit is set), as a float multiply would
inline float f16_bits_to_f32(uint16_t h) {
  if ((h & 0x7c00u) == 0x7c00u && (h & 0x03ffu) != 0) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    return std::bit_cast<float>(sign | 0x7fc00000u | (static_cast<uint32_t>(h & 0x03ffu) << 13));
  }
  return f16::to_f32(h);
}

// Symmetric levels -nmax .. nmax-1 for n values: L[i] = level + nmax. Weighted least squares
// over 19 candidate scales around nmax / max (ggml's make_qx_quants, rmse type 1: weights
// qw, or x^2 without them). Returns the scale.
float make_qx_quants(int n, int nmax, const float* x, int8_t* L, const float* qw);

// Q3_K's reference search: levels -nmax .. nmax-1 refined one element at a time by weighted
// least squares (weights x^2), up to 5 passes. L[i] = level + nmax. Returns the scale.
float make_q3_quants(int n, int nmax, const float* x, int8_t* L);

// Asymmetric levels 0 .. nmax with a min (x ~ scale * L + min, min <= 0), searching
// nstep + 1 scales (rmin + rdelta * is + nmax) / (max - min). Without weights, w = x^2.
// zero_if_max_le_min: the degenerate test is max <= min (else max == min). Returns the scale;
// *neg_min = -min.
float make_qkx_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* neg_min,
                      uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad,
                      bool zero_if_max_le_min);

// Non-negative levels 0 .. nmax for non-negative x with weights (the super-block scales of the
// importance-matrix K-quants). Returns the scale.
float make_qp_quants(int n, int nmax, const float* x, uint8_t* L, const float* quant_weights);

// the index of the level of the 16 sorted `values` nearest to v (ties to the upper one only
// when strictly nearer), ggml's best_index_int8
inline int best_index_iq4(const int8_t* values, float v) {
  if (v <= values[0]) return 0;
  if (v >= values[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    int mid = (lo + hi) / 2;
    if (v < values[mid])
      hi = mid;
    else
      lo = mid;
  }
  return v - values[hi - 1] < values[hi] - v ? hi - 1 : hi;
}

}  // namespace candle::quantized::detail
