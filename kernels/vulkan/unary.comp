#version 450
// Unary ops on floats: op = UnaryOp (op_codes.glsl), U_AFFINE (x * p0 + p1),
// 21 powf (x^p0), 22 elu (alpha p0). Operands: 0 input (strided), 1 output (dense).
// Integer variants (u8, u32, i64): the ops the CPU has for integers, wrapping as the CPU:
// neg, abs, sqr, relu, sign; ceil, floor and round are the identity; 20 affine with integral
// mul (p0) and add (p1), as u32 bits (i64: an i32, sign-extended). The host sends no other op.
//! variant f32 T_F32
//! variant f16 T_F16
//! variant u8 I_U8
//! variant u32 I_U32
//! variant i64 I_I64
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#if defined(IT)

layout(std430, binding = 0) readonly buffer In { IT x[]; };
layout(std430, binding = 1) writeonly buffer Out { IT y[]; };

IC apply(uint op, IC v) {
  switch (op) {
    case U_NEG: return IC(0) - v;
#if defined(I_I64)
    case U_ABS: return v < IC(0) ? IC(0) - v : v;
    case U_SIGN: return v > IC(0) ? IC(1) : (v < IC(0) ? IC(-1) : IC(0));
    case U_AFFINE: return v * IC(int(pc.p0)) + IC(int(pc.p1));
#else
    case U_SIGN: return v > 0u ? 1u : 0u;
    case U_AFFINE: return v * pc.p0 + pc.p1;
#endif
    case U_SQR: return v * v;
    case U_RELU: return v > IC(0) ? v : IC(0);
  }
  return v;  // abs of unsigned, ceil, floor, round
}

void main() {
  uint i = ew_index();
  if (i >= pc.n) return;
  uint o = ew_offsets(i).x;
  y[pc.off[1] + i] = IT(apply(ew_op(), IC(x[o])));
}

#else

layout(std430, binding = 0) readonly buffer In { T x[]; };
layout(std430, binding = 1) writeonly buffer Out { T y[]; };

float apply(uint op, float v) {
  if (op < U_AFFINE) return act_apply(op, v);
  switch (op) {
    case U_AFFINE: return v * ew_p0() + ew_p1();
    case U_POWF: return pow_(v, ew_p0());
    case U_ELU: return v >= 0.0 ? v : ew_p0() * expm1_(v);
  }
  return v;
}

void main() {
  uint i = ew_index();
  if (i >= pc.n) return;
  uint o = ew_offsets(i).x;
  y[pc.off[1] + i] = T(apply(ew_op(), float(x[o])));
}

#endif
