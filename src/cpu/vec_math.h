// Branch-free f32 approximations of exp, expm1, tanh, sigmoid, silu, gelu and erf that GCC
// auto-vectorizes (std::exp and friends stay scalar library calls without -ffast-math).
//
// Every function uses only +, -, *, /, comparisons used as selects and integer bit tricks, so
// a vector lane and the scalar epilogue give the same bits. Accuracy (checked against double
// precision in tests/core/elementwise_test.cpp): exp, expm1, sigmoid, silu, tanh within 2 ulp;
// erf within 2 ulp or 1e-7 absolute.
#pragma once

#include <bit>
#include <cstdint>

#define CANDLE_VM_INLINE inline __attribute__((always_inline))

namespace candle::cpu::vm {

namespace detail {

// Rounds x (|x| < 2^22) to the nearest integer: the integer as bits and as a float.
CANDLE_VM_INLINE float round_magic(float x, uint32_t& n) {
  constexpr float magic = 12582912.0f;  // 1.5 * 2^23
  float k = x + magic;
  n = std::bit_cast<uint32_t>(k) - std::bit_cast<uint32_t>(magic);  // two's complement integer
  return k - magic;
}

// 2^n for n in [-126, 127] (n as two's complement bits).
CANDLE_VM_INLINE float pow2(uint32_t n) { return std::bit_cast<float>((n + 127u) << 23); }

// Cody-Waite split of ln 2: k * kLn2Hi is exact for |k| < 2^15.
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f;
constexpr float kLn2Lo = -2.12194440e-4f;

// expm1(r) for |r| <= ln(2)/2: Taylor series to degree 8 (truncation error < 6e-10 relative).
CANDLE_VM_INLINE float expm1_reduced(float r) {
  float p = 2.48015873e-5f;    // 1/8!
  p = p * r + 1.98412698e-4f;  // 1/7!
  p = p * r + 1.38888889e-3f;  // 1/6!
  p = p * r + 8.33333333e-3f;  // 1/5!
  p = p * r + 4.16666667e-2f;  // 1/4!
  p = p * r + 1.66666667e-1f;  // 1/3!
  p = p * r + 0.5f;
  return r + (r * r) * p;
}

CANDLE_VM_INLINE float select(bool c, float a, float b) { return c ? a : b; }

CANDLE_VM_INLINE float copy_sign(float mag, float sgn) {
  return std::bit_cast<float>((std::bit_cast<uint32_t>(mag) & 0x7fffffffu) |
                              (std::bit_cast<uint32_t>(sgn) & 0x80000000u));
}

CANDLE_VM_INLINE float abs(float x) { return std::bit_cast<float>(std::bit_cast<uint32_t>(x) & 0x7fffffffu); }

}  // namespace detail

// e^x for every float: overflows to +inf above ~88.72, rounds subnormal results once, NaN in
// gives NaN out.
CANDLE_VM_INLINE float exp_f32(float x) {
  using namespace detail;
  // the comparisons keep NaN (a false compare keeps x)
  x = select(x > 89.0f, 89.0f, x);
  x = select(x < -104.0f, -104.0f, x);
  uint32_t n;
  float k = round_magic(x * kLog2e, n);
  float r = x - k * kLn2Hi;
  r = r - k * kLn2Lo;
  float p = expm1_reduced(r) + 1.0f;
  // 2^n as two factors so that n in [-150, 129] neither wraps the exponent field nor
  // rounds twice: p * 2^n1 is exact, the second product rounds (to a subnormal or inf).
  uint32_t n1 = static_cast<uint32_t>(static_cast<int32_t>(n) >> 1);
  uint32_t n2 = n - n1;
  return (p * pow2(n1)) * pow2(n2);
}

// e^x - 1, accurate near 0. Valid for x in [-87, 87] (callers clamp; outside the
// result is that of the clamped value).
CANDLE_VM_INLINE float expm1_f32(float x) {
  using namespace detail;
  x = select(x > 87.0f, 87.0f, x);
  x = select(x < -87.0f, -87.0f, x);
  uint32_t n;
  float k = round_magic(x * kLog2e, n);
  float r = x - k * kLn2Hi;
  r = r - k * kLn2Lo;
  float p = expm1_reduced(r);
  float s = pow2(n);
  // 2^n (p + 1) - 1 = 2^n p + (2^n - 1); 2^n - 1 is exact for n >= -24, and below that
  // the result is -1 anyway.
  return s * p + (s - 1.0f);
}

// tanh(x) = expm1(2|x|) / (expm1(2|x|) + 2) with the sign of x; no cancellation near 0.
CANDLE_VM_INLINE float tanh_f32(float x) {
  using namespace detail;
  float a = abs(x);
  a = select(a > 10.0f, 10.0f, a);  // tanh(10) rounds to 1 in f32
  float u = expm1_f32(2.0f * a);
  return copy_sign(u / (u + 2.0f), x);
}

// 1 / (1 + e^-x), evaluated as e / (1 + e) with e = e^-|x| for negative x so that the
// result stays accurate (and non-zero) where e^-x would overflow.
CANDLE_VM_INLINE float sigmoid_f32(float x) {
  float e = exp_f32(-detail::abs(x));
  float num = detail::select(x < 0.0f, e, 1.0f);
  return num / (1.0f + e);
}

// x * sigmoid(x), as sigmoid_f32 with x folded into the numerator.
CANDLE_VM_INLINE float silu_f32(float x) {
  float e = exp_f32(-detail::abs(x));
  float num = detail::select(x < 0.0f, x * e, x);
  return num / (1.0f + e);
}

// candle's gelu (the tanh approximation) 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3),
// computed as x * sigmoid(2u): the same function, without the cancellation of 1 + tanh(u)
// for negative x.
CANDLE_VM_INLINE float gelu_tanh_f32(float x) {
  constexpr float k2SqrtTwoOverPi = 1.5957691216057308f;  // 2 * sqrt(2 / pi)
  float u2 = k2SqrtTwoOverPi * (x + 0.044715f * (x * x * x));
  return x / (1.0f + exp_f32(-u2));
}

namespace detail {

// erf(x) / x as a polynomial in t = x^2 for |x| <= 1 (near-minimax, error 3.4e-11).
CANDLE_VM_INLINE float erf_small(float x) {
  float t = x * x;
  float p = -9.66704457149e-6f;
  p = p * t + 0.000112659590256f;
  p = p * t + -0.000848408040554f;
  p = p * t + 0.00522103180786f;
  p = p * t + -0.0268654307277f;
  p = p * t + 0.112837824952f;
  p = p * t + -0.376126384680f;
  p = p * t + 1.12837916706f;
  return x * p;
}

// erfc(a) for a >= 1: e^(-a^2) h(1/a) / a, with h(u) = erfc(1/u) e^(1/u^2) / u fitted as a
// polynomial in v = 2u - 1 on u in [0, 1] (near-minimax, error 1.1e-8 on h ~ 0.5).
CANDLE_VM_INLINE float erfc_large(float a) {
  a = select(a > 10.5f, 10.5f, a);  // erfc(10.5) is 0 in f32; keeps inf out of the split below
  float u = 1.0f / a;
  float v = 2.0f * u - 1.0f;
  float p = -3.37058685676e-5f;
  p = p * v + 9.92313243012e-5f;
  p = p * v + -5.43441054253e-5f;
  p = p * v + -0.000180545359972f;
  p = p * v + 0.000514875281802f;
  p = p * v + -0.000816121505790f;
  p = p * v + 0.000622324054786f;
  p = p * v + 0.00132996015267f;
  p = p * v + -0.00679555053346f;
  p = p * v + 0.0148699672751f;
  p = p * v + -0.00915837766165f;
  p = p * v + -0.0836054903650f;
  p = p * v + 0.510791352621f;
  // e^(-a^2) without the rounding of a^2 (which would cost up to a^2 / 2 ulp): split
  // a = hi + lo with hi holding 12 bits, so hi^2 is exact and a^2 = hi^2 + lo (a + hi) with
  // |lo (a + hi)| < 0.1 for the a where e^(-a^2) is not zero.
  float hi = std::bit_cast<float>(std::bit_cast<uint32_t>(a) & 0xfffff000u);
  float d = (a - hi) * (a + hi);
  float e = exp_f32(-(hi * hi)) * (expm1_reduced(-d) + 1.0f);
  return e * (p * u);
}

}  // namespace detail

CANDLE_VM_INLINE float erf_f32(float x) {
  using namespace detail;
  float a = abs(x);
  float big = 1.0f - erfc_large(select(a < 1.0f, 1.0f, a));
  return select(a < 1.0f, erf_small(x), copy_sign(big, x));
}

// erfc(x) with relative accuracy for x > 0 (no 1 - erf cancellation there).
CANDLE_VM_INLINE float erfc_f32(float x) {
  using namespace detail;
  float a = abs(x);
  float tail = erfc_large(select(a < 1.0f, 1.0f, a));
  float r_big = select(x < 0.0f, 2.0f - tail, tail);
  return select(a < 1.0f, 1.0f - erf_small(x), r_big);
}

// 0.5 x (1 + erf(x / sqrt 2)) = 0.5 x erfc(-x / sqrt 2): erfc keeps the negative tail accurate.
CANDLE_VM_INLINE float gelu_erf_f32(float x) {
  constexpr float kMinusInvSqrt2 = -0.70710678118654752f;
  return 0.5f * x * erfc_f32(x * kMinusInvSqrt2);
}

}  // namespace candle::cpu::vm
