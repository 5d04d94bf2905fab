#version 450
// where_cond: out = cond != 0 ? on_true : on_false, for values of any dtype (by element size).
// Operands: 0 cond (u8 or u32), 1 on_true, 2 on_false (strided), 3 output (dense).
//! variant u8_b1 C_U8 B1
//! variant u8_b2 C_U8 B2
//! variant u8_b4 C_U8 B4
//! variant u8_b8 C_U8 B8
//! variant u32_b1 C_U32 B1
//! variant u32_b2 C_U32 B2
//! variant u32_b4 C_U32 B4
//! variant u32_b8 C_U32 B8
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#if defined(C_U8)
#define C uint8_t
#else
#define C uint
#endif

layout(std430, binding = 0) readonly buffer Cond { C c[]; };
layout(std430, binding = 1) readonly buffer OnTrue { E t[]; };
layout(std430, binding = 2) readonly buffer OnFalse { E f[]; };
layout(std430, binding = 3) writeonly buffer Out { E y[]; };

void main() {
  uint i = ew_index();
  if (i >= pc.n) return;
  uvec3 o = ew_offsets(i);
  y[pc.off[3] + i] = uint(c[o.x]) != 0u ? t[o.y] : f[o.z];
}
