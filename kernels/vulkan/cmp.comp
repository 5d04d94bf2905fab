#version 450
// Comparisons on floats, u8 result: op = CmpOp (eq, ne, lt, le, gt, ge).
// Operands: 0 lhs, 1 rhs (strided), 2 output u8 (dense).
//! variant f32 T_F32
//! variant f16 T_F16
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(std430, binding = 0) readonly buffer A { T a[]; };
layout(std430, binding = 1) readonly buffer B { T b[]; };
layout(std430, binding = 2) writeonly buffer Out { uint8_t y[]; };

bool apply(uint op, float u, float v) {
  switch (op) {
    case 0: return u == v;
    case 1: return u != v;
    case 2: return u < v;
    case 3: return u <= v;
    case 4: return u > v;
  }
  return u >= v;
}

void main() {
  uint i = ew_index();
  if (i >= pc.n) return;
  uvec3 o = ew_offsets(i);
  y[pc.off[2] + i] = uint8_t(apply(ew_op(), float(a[o.x]), float(b[o.y])) ? 1u : 0u);
}
