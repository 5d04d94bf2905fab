#version 450
// Binary ops on floats: op = BinaryOp (add, sub, mul, div, maximum, minimum, pow).
// Operands: 0 lhs, 1 rhs (strided; broadcasting is stride 0), 2 output (dense).
//! variant f32 T_F32
//! variant f16 T_F16
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(std430, binding = 0) readonly buffer A { T a[]; };
layout(std430, binding = 1) readonly buffer B { T b[]; };
layout(std430, binding = 2) writeonly buffer Out { T y[]; };

float apply(uint op, float u, float v) {
  switch (op) {
    case 0: return u + v;
    case 1: return u - v;
    case 2: return u * v;
    case 3: return u / v;
    case 4: return (u > v || isnan(u)) ? u : v;  // NaN in either operand gives NaN
    case 5: return (u < v || isnan(u)) ? u : v;
    case 6: return pow_(u, v);
  }
  return u;
}

void main() {
  uint i = ew_index();
  if (i >= pc.n) return;
  uvec3 o = ew_offsets(i);
  y[pc.off[2] + i] = T(apply(ew_op(), float(a[o.x]), float(b[o.y])));
}
