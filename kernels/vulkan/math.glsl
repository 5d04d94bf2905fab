// Float helpers shared by kernels (no push constants, no bindings): expm1, erf, erfc, pow
// with std::pow's real results, and act_apply, the UnaryOp activations (codes: op_codes.glsl).
// Include after the GL_EXT_shader_explicit_arithmetic_types extension line.
#include "op_codes.glsl"
// expm1 accurate near 0.
float expm1_(float x) {
  if (abs(x) < 0.5) {
    float t = x * (1.0 / 40320.0) + 1.0 / 5040.0;
    t = t * x + 1.0 / 720.0;
    t = t * x + 1.0 / 120.0;
    t = t * x + 1.0 / 24.0;
    t = t * x + 1.0 / 6.0;
    t = t * x + 0.5;
    t = t * x + 1.0;
    return t * x;
  }
  return exp(x) - 1.0;
}

// erfc for any x (Abramowitz-Stegun 7.1.26 for |x| >= 0.5; absolute error below 2e-7).
float erfc_pos_(float z) {
  float t = 1.0 / (1.0 + 0.3275911 * z);
  float p = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t;
  return p * exp(-z * z);
}
float erf_(float x) {
  float a = abs(x);
  if (a < 0.5) {
    float x2 = x * x;
    // 2/sqrt(pi) (x - x^3/3 + x^5/10 - x^7/42 + x^9/216)
    return 1.1283791670955126 * x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (0.1 + x2 * (-1.0 / 42.0 + x2 / 216.0))));
  }
  float r = 1.0 - erfc_pos_(a);
  return x < 0.0 ? -r : r;
}
float erfc_(float x) {
  if (abs(x) < 0.5) return 1.0 - erf_(x);
  return x > 0.0 ? erfc_pos_(x) : 2.0 - erfc_pos_(-x);
}

// x^e with std::pow's results where they are real (negative bases with integral exponents).
float pow_(float x, float e) {
  const float nan_ = uintBitsToFloat(0x7fc00000u);
  if (e == 0.0 || x == 1.0) return 1.0;
  if (isnan(x) || isnan(e)) return nan_;
  bool integral = trunc(e) == e;
  bool odd = integral && mod(abs(e), 2.0) == 1.0;
  if (x == 0.0) {
    bool neg = (floatBitsToUint(x) >> 31) != 0u;
    float r = e > 0.0 ? 0.0 : uintBitsToFloat(0x7f800000u);
    return odd && neg ? -r : r;
  }
  if (x < 0.0) {
    if (!integral) return nan_;
    float r = exp2(e * log2(-x));
    return odd ? -r : r;
  }
  return exp2(e * log2(x));
}

float sigmoid_(float v) { return 1.0 / (1.0 + exp(-v)); }

float tanh_(float v) {
  float a = abs(v);
  if (a > 9.0) return sign(v);
  float e = expm1_(2.0 * a);
  float r = e / (e + 2.0);
  return v < 0.0 ? -r : r;
}

// UnaryOp op (0..19, backend.h order) applied to v; any other op returns v.
float act_apply(uint op, float v) {
  switch (op) {
    case U_NEG: return -v;
    case U_RECIP: return 1.0 / v;
    case U_EXP: return exp(v);
    case U_LOG: return log(v);
    case U_SIN: return sin(v);
    case U_COS: return cos(v);
    case U_TANH: return tanh_(v);
    case U_ABS: return abs(v);
    case U_SQR: return v * v;
    case U_SQRT: return sqrt(v);
    case U_GELU: return v * sigmoid_(1.5957691216057307 * (v + 0.044715 * v * v * v));  // gelu (tanh)
    case U_GELU_ERF: return 0.5 * v * erfc_(-v * 0.70710678118654752);                       // gelu_erf
    case U_ERF: return erf_(v);
    case U_RELU: return v > 0.0 ? v : 0.0;  // NaN -> 0, as candle's max(x, 0)
    case U_SILU: return v * sigmoid_(v);
    case U_CEIL: return ceil(v);
    case U_FLOOR: return floor(v);
    case U_ROUND: {  // half away from zero
      float t = trunc(v);
      return abs(v - t) >= 0.5 ? t + sign(v) : t;
    }
    case U_SIGN: return v > 0.0 ? 1.0 : (v < 0.0 ? -1.0 : 0.0);
    case U_SIGMOID: return sigmoid_(v);
  }
  return v;
}
