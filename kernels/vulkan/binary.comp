#version 450
// Binary ops on floats: op = BinaryOp (add, sub, mul, div, maximum, minimum, pow).
// Operands: 0 lhs, 1 rhs (strided; broadcasting is stride 0), 2 output (dense).
// Integer variants (u8, u32, i64; no pow: the CPU refuses it): wrapping add/sub/mul, division
// truncating toward zero with x / 0 = 0 and i64 MIN / -1 = MIN, as the CPU.
//! variant f32 T_F32
//! variant f16 T_F16
//! variant u8 I_U8
//! variant u32 I_U32
//! variant i64 I_I64
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#if defined(IT)

layout(std430, binding = 0) readonly buffer A { IT a[]; };
layout(std430, binding = 1) readonly buffer B { IT b[]; };
layout(std430, binding = 2) writeonly buffer Out { IT y[]; };

IC div_(IC u, IC v) {
  if (v == IC(0)) return IC(0);
#if defined(I_I64)
  // on magnitudes (unsigned division), so MIN / -1 wraps and no signed overflow is reached
  uint64_t q = uint64_t(u < IC(0) ? IC(0) - u : u) / uint64_t(v < IC(0) ? IC(0) - v : v);
  return (u < IC(0)) != (v < IC(0)) ? IC(0) - IC(q) : IC(q);
#else
  return u / v;
#endif
}

IC apply(uint op, IC u, IC v) {
  switch (op) {
    case B_ADD: return u + v;
    case B_SUB: return u - v;
    case B_MUL: return u * v;
    case B_DIV: return div_(u, v);
    case B_MAXIMUM: return u < v ? v : u;
    case B_MINIMUM: return v < u ? v : u;
  }
  return u;
}

void main() {
  uint i = ew_index();
  if (i >= pc.n) return;
  uvec3 o = ew_offsets(i);
  y[pc.off[2] + i] = IT(apply(ew_op(), IC(a[o.x]), IC(b[o.y])));
}

#else

layout(std430, binding = 0) readonly buffer A { T a[]; };
layout(std430, binding = 1) readonly buffer B { T b[]; };
layout(std430, binding = 2) writeonly buffer Out { T y[]; };

float apply(uint op, float u, float v) {
  switch (op) {
    case B_ADD: return u + v;
    case B_SUB: return u - v;
    case B_MUL: return u * v;
    case B_DIV: return u / v;
    case B_MAXIMUM: return (u > v || isnan(u)) ? u : v;  // NaN in either operand gives NaN
    case B_MINIMUM: return (u < v || isnan(u)) ? u : v;
    case B_POW: return pow_(u, v);
  }
  return u;
}

void main() {
  uint i = ew_index();
  if (i >= pc.n) return;
  uvec3 o = ew_offsets(i);
  y[pc.off[2] + i] = T(apply(ew_op(), float(a[o.x]), float(b[o.y])));
}

#endif
