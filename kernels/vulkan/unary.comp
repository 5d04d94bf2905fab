#version 450
// Unary ops on floats: op 0..19 = UnaryOp (backend.h order), 20 affine (x * p0 + p1),
// 21 powf (x^p0), 22 elu (alpha p0). Operands: 0 input (strided), 1 output (dense).
//! variant f32 T_F32
//! variant f16 T_F16
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(std430, binding = 0) readonly buffer In { T x[]; };
layout(std430, binding = 1) writeonly buffer Out { T y[]; };

float apply(uint op, float v) {
  if (op < 20u) return act_apply(op, v);
  switch (op) {
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
