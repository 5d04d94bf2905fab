#version 450
// Unary ops on floats: op 0..19 = UnaryOp (backend.h order), 20 affine (x * p0 + p1),
// 21 powf (x^p0), 22 elu (alpha p0). Operands: 0 input (strided), 1 output (dense).
//! variant f32 T_F32
//! variant f16 T_F16
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(std430, binding = 0) readonly buffer In { T x[]; };
layout(std430, binding = 1) writeonly buffer Out { T y[]; };

float sigmoid_(float v) { return 1.0 / (1.0 + exp(-v)); }

float tanh_(float v) {
  float a = abs(v);
  if (a > 9.0) return sign(v);
  float e = expm1_(2.0 * a);
  float r = e / (e + 2.0);
  return v < 0.0 ? -r : r;
}

float apply(uint op, float v) {
  switch (op) {
    case 0: return -v;
    case 1: return 1.0 / v;
    case 2: return exp(v);
    case 3: return log(v);
    case 4: return sin(v);
    case 5: return cos(v);
    case 6: return tanh_(v);
    case 7: return abs(v);
    case 8: return v * v;
    case 9: return sqrt(v);
    case 10: return v * sigmoid_(1.5957691216057307 * (v + 0.044715 * v * v * v));  // gelu (tanh)
    case 11: return 0.5 * v * erfc_(-v * 0.70710678118654752);                       // gelu_erf
    case 12: return erf_(v);
    case 13: return v > 0.0 ? v : 0.0;  // NaN -> 0, as candle's max(x, 0)
    case 14: return v * sigmoid_(v);
    case 15: return ceil(v);
    case 16: return floor(v);
    case 17: {  // half away from zero
      float t = trunc(v);
      return abs(v - t) >= 0.5 ? t + sign(v) : t;
    }
    case 18: return v > 0.0 ? 1.0 : (v < 0.0 ? -1.0 : 0.0);
    case 19: return sigmoid_(v);
    case 20: return v * ew_p0() + ew_p1();
    case 21: return pow_(v, ew_p0());
    case 22: return v >= 0.0 ? v : ew_p0() * expm1_(v);
  }
  return v;
}

void main() {
  uint i = ew_index();
  if (i >= pc.n) return;
  uint o = ew_offsets(i).x;
  y[pc.off[1] + i] = T(apply(ew_op(), float(x[o])));
}
