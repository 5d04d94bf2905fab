#version 450
// GGML blocks to f32 (or f16 bits) values, the CPU dequantizer's bit for bit (quant.glsl).
// One thread per 8 values. Bindings: 0 the blocks (uint words, read by byte), 1 the output
// (f32, or f16 bits packed in pairs). Push: w_off the byte of this dispatch's first block in
// binding 0, o_off the output element of its first value (even for f16), n the values of this
// dispatch (whole blocks; any count for f16 / bf16), f16out: write f16.
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

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint w_off, o_off, n, f16out;
} pc;

layout(std430, binding = 1) writeonly buffer OutF { float of[]; };
layout(std430, binding = 1) writeonly buffer OutH { uint oh[]; };

void main() {
  uint c = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
  uint e0 = 8u * c;
  if (e0 >= pc.n) return;
  float v[8];
#if defined(QPLAIN)
  for (uint j = 0u; j < 8u; ++j) v[j] = e0 + j < pc.n ? deq1(pc.w_off + 2u * (e0 + j)) : 0.0;
#else
  deq8(pc.w_off + (c / QCPB) * QB, c % QCPB, v);
#endif
  if (pc.f16out != 0u) {
    for (uint j = 0u; j < 8u; j += 2u) {
      if (e0 + j >= pc.n) break;
#if defined(Q_F16)
      // f16 to f16: the bits as they are (a NaN keeps its payload, as the CPU's copy)
      uint lo = qu16(pc.w_off + 2u * (e0 + j));
      uint hi = e0 + j + 1u < pc.n ? qu16(pc.w_off + 2u * (e0 + j + 1u)) : 0u;
#else
      uint lo = qf2h(v[j]), hi = e0 + j + 1u < pc.n ? qf2h(v[j + 1u]) : 0u;
#endif
      oh[(pc.o_off + e0 + j) >> 1] = lo | (hi << 16);
    }
  } else {
    for (uint j = 0u; j < 8u; ++j)
      if (e0 + j < pc.n) of[pc.o_off + e0 + j] = v[j];
  }
}
