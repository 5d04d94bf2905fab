#version 450
// y[r, row0 + i] = sum_k x[r, k] * W[i, k] for r < m <= 8 (decoding), W's rows read straight
// from their GGML blocks (quant.glsl: the dequantized values exactly), f32 activations and
// accumulation. One work-group of 32 threads per weight row: thread t takes the chunks of 8
// values t, t + 32, ..., decodes each once and uses it for all m rows of x; then a fixed tree
// per row (deterministic). Bindings: 0 the blocks (uint words), 1 x (f32, m rows of k),
// 2 y (f32, m rows of n).
//! variant f16 Q_F16
//! variant bf16 Q_BF16
//! variant q4_0 Q4_0
//! variant q4_1 Q4_1
//! variant q5_0 Q5_0
//! variant q5_1 Q5_1
//! variant q8_0 Q8_0
//! variant q2_k Q2_K
//! variant q3_k Q3_K
//! variant q4_k Q4_K
//! variant q5_k Q5_K
//! variant q6_k Q6_K
//! variant iq4_nl IQ4_NL
//! variant iq4_xs IQ4_XS
#extension GL_GOOGLE_include_directive : require
#include "quant.glsl"

#define WG 32u
#define MAXM 8u
layout(local_size_x = 32) in;

layout(push_constant) uniform Push {
  uint w_off;      // byte of row 0's first block in binding 0
  uint row_bytes;  // bytes of one weight row
  uint rows;       // weight rows of this dispatch
  uint row0;       // their first row in W (the output column)
  uint n, k, m;    // y's columns, the row length, x's rows
  uint x_off, y_off;
} pc;

layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };

shared float part[MAXM * WG];

void main() {
  uint row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  if (row >= pc.rows) return;  // whole work-group: uniform
  uint t = gl_LocalInvocationID.x;
  uint wbase = pc.w_off + row * pc.row_bytes;
  float acc[MAXM];
  for (uint r = 0u; r < MAXM; ++r) acc[r] = 0.0;
  uint nch = (pc.k + 7u) / 8u;
  for (uint c = t; c < nch; c += WG) {
    float v[8];
#if defined(QPLAIN)
    for (uint j = 0u; j < 8u; ++j) v[j] = 8u * c + j < pc.k ? deq1(wbase + 2u * (8u * c + j)) : 0.0;
#else
    deq8(wbase + (c / QCPB) * QB, c % QCPB, v);
#endif
    for (uint r = 0u; r < MAXM; ++r) {
      if (r >= pc.m) break;
      uint xb = pc.x_off + r * pc.k + 8u * c;
      float s = 0.0;
#if defined(QPLAIN)
      for (uint j = 0u; j < 8u; ++j)
        if (8u * c + j < pc.k) s += v[j] * x[xb + j];
#else
      for (uint j = 0u; j < 8u; ++j) s += v[j] * x[xb + j];
#endif
      acc[r] += s;
    }
  }
  for (uint r = 0u; r < MAXM; ++r) {
    if (r >= pc.m) break;
    part[r * WG + t] = acc[r];
  }
  barrier();
  for (uint s = WG / 2u; s > 0u; s >>= 1) {
    if (t < s)
      for (uint r = 0u; r < MAXM; ++r) {
        if (r >= pc.m) break;
        part[r * WG + t] += part[r * WG + t + s];
      }
    barrier();
  }
  if (t < pc.m) y[pc.y_off + t * pc.n + pc.row0 + row] = part[t * WG];
}
