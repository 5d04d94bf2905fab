#version 450
// Comparisons, u8 result: op = CmpOp (eq, ne, lt, le, gt, ge), on floats or (variants u8,
// u32, i64) integers compared in their own type.
// Operands: 0 lhs, 1 rhs (strided), 2 output u8 (dense).
//! variant f32 T_F32
//! variant f16 T_F16
//! variant u8 I_U8
//! variant u32 I_U32
//! variant i64 I_I64
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#if defined(IT)
#define V IC
#define LOAD(v) IC(v)
#else
#define V float
#define LOAD(v) float(v)
#define IT T
#endif

layout(std430, binding = 0) readonly buffer A { IT a[]; };
layout(std430, binding = 1) readonly buffer B { IT b[]; };
layout(std430, binding = 2) writeonly buffer Out { uint8_t y[]; };

bool apply(uint op, V u, V v) {
  switch (op) {
    case C_EQ: return u == v;
    case C_NE: return u != v;
    case C_LT: return u < v;
    case C_LE: return u <= v;
    case C_GT: return u > v;
  }
  return u >= v;
}

void main() {
  uint i = ew_index();
  if (i >= pc.n) return;
  uvec3 o = ew_offsets(i);
  y[pc.off[2] + i] = uint8_t(apply(ew_op(), LOAD(a[o.x]), LOAD(b[o.y])) ? 1u : 0u);
}
