#version 450
// Strided copy of raw elements: operand 0 source, operand 1 destination (both strided).
// copy_strided_src, copy2d and the contiguous copies behind cat/narrow/pad/transpose use it.
//! variant b1 B1
//! variant b2 B2
//! variant b4 B4
//! variant b8 B8
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(std430, binding = 0) readonly buffer Src { E s[]; };
layout(std430, binding = 1) writeonly buffer Dst { E d[]; };

void main() {
  uint i = ew_index();
  if (i >= pc.n) return;
  uvec3 o = ew_offsets(i);
  d[o.y] = s[o.x];
}
