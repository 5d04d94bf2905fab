#version 450
// rms_norm (layer == 0): y = x / sqrt(mean(x^2) + eps) * alpha, and layer_norm (layer == 1):
// y = (x - mean) / sqrt(mean((x - mean)^2) + eps) * alpha + beta, per row of the last dim
// (rows.glsl), in the CPU kernel's order of operations; f32 compute, one rounding at the
// store. alpha/beta are read through (offset, stride). Bindings: 0 x, 1 alpha, 2 beta (rms:
// alpha again), 3 y.
//! variant f32 T_F32
//! variant f16 T_F16
#extension GL_GOOGLE_include_directive : require
#include "rows.glsl"

layout(push_constant) uniform Push {
  uint n_rows;      // rows of this dispatch
  uint d;           // row length
  uint row_stride;  // elements between rows of x
  uint x_off;       // first element of row 0 in binding 0
  uint y_off;       // in binding 3
  uint tpr_log2;    // threads per row = 1 << tpr_log2
  uint a_off, a_st, b_off, b_st;
  uint eps_bits;    // f32
  uint layer;
} pc;

layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) readonly buffer A { T alpha[]; };
layout(std430, binding = 2) readonly buffer B { T beta[]; };
layout(std430, binding = 3) writeonly buffer Y { T y[]; };

void main() {
  const uint tpr = 1u << pc.tpr_log2;
  const uint t = gl_LocalInvocationID.x, lane = t & (tpr - 1u);
  const uint g = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  const uint row = g * (256u >> pc.tpr_log2) + (t >> pc.tpr_log2);
  const bool live = row < pc.n_rows;
  const uint xb = pc.x_off + row * pc.row_stride, yb = pc.y_off + row * pc.d;
  const float n = float(pc.d);
  float mean = 0.0;
  if (pc.layer != 0u) {
    float s = 0.0;
    if (live)
      for (uint i = lane; i < pc.d; i += tpr) s += float(x[xb + i]);
    mean = row_reduce(s, t, lane, tpr, false) / n;
  }
  float q = 0.0;
  if (live)
    for (uint i = lane; i < pc.d; i += tpr) {
      float v = float(x[xb + i]) - mean;
      q += v * v;
    }
  const float var = row_reduce(q, t, lane, tpr, false) / n;
  const float denom = sqrt(var + uintBitsToFloat(pc.eps_bits));
  if (!live) return;
  if (pc.layer != 0u) {
    for (uint i = lane; i < pc.d; i += tpr) {
      float a = float(alpha[pc.a_off + i * pc.a_st]), b = float(beta[pc.b_off + i * pc.b_st]);
      y[yb + i] = T((float(x[xb + i]) - mean) / denom * a + b);
    }
  } else {
    for (uint i = lane; i < pc.d; i += tpr)
      y[yb + i] = T(float(x[xb + i]) / denom * float(alpha[pc.a_off + i * pc.a_st]));
  }
}
