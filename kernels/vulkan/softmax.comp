#version 450
// softmax over the last dim: y = exp(x - max) / sum(exp(x - max)) per row (rows.glsl), f32
// compute, one rounding at the store. Rows of x start row_stride apart (last dim dense);
// y is dense. Bindings: 0 x, 1 y.
//! variant f32 T_F32
//! variant f16 T_F16
#extension GL_GOOGLE_include_directive : require
#include "rows.glsl"

layout(push_constant) uniform Push {
  uint n_rows;      // rows of this dispatch
  uint d;           // row length
  uint row_stride;  // elements between rows of x
  uint x_off;       // first element of row 0 in binding 0
  uint y_off;       // in binding 1
  uint tpr_log2;    // threads per row = 1 << tpr_log2
} pc;

layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) writeonly buffer Y { T y[]; };

void main() {
  const uint tpr = 1u << pc.tpr_log2;
  const uint t = gl_LocalInvocationID.x, lane = t & (tpr - 1u);
  const uint g = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  const uint row = g * (256u >> pc.tpr_log2) + (t >> pc.tpr_log2);
  const bool live = row < pc.n_rows;
  const uint xb = pc.x_off + row * pc.row_stride, yb = pc.y_off + row * pc.d;
  float m = uintBitsToFloat(0xff800000u);  // -inf
  if (live)
    for (uint i = lane; i < pc.d; i += tpr) {
      float v = float(x[xb + i]);
      m = v > m ? v : m;
    }
  m = row_reduce(m, t, lane, tpr, true);
  float s = 0.0;
  if (live)
    for (uint i = lane; i < pc.d; i += tpr) s += exp(float(x[xb + i]) - m);
  s = row_reduce(s, t, lane, tpr, false);
  if (live)
    for (uint i = lane; i < pc.d; i += tpr) y[yb + i] = T(exp(float(x[xb + i]) - m) / s);
}
