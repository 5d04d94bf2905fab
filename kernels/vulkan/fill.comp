#version 450
// const_set: every element of a strided layout (operand 0) set to the value whose bits are in
// p0 (low word) and p1 (high word, 8-byte elements).
//! variant b1 B1
//! variant b2 B2
//! variant b4 B4
//! variant b8 B8
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(std430, binding = 0) writeonly buffer Dst { E d[]; };

void main() {
  uint i = ew_index();
  if (i >= pc.n) return;
  uint o = ew_offsets(i).x;
#if defined(B8)
  d[o] = uvec2(pc.p0, pc.p1);
#else
  d[o] = E(pc.p0);
#endif
}
