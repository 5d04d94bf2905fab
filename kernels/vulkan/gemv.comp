#version 450
// GEMV for m == 1: y[b, j] = sum_k x[b, k] * B[b, k, j] (same push constants as matmul.comp).
// mode 0 (push `mode`): one thread per output j, k in order (coalesced when B's rows are
// contiguous); mode 1: one work-group per output j, 256 threads over k, then a fixed tree (B's
// columns contiguous: a transposed weight). Deterministic. Bindings: 0 x, 1 B, 2 y.
//! variant f32 T_F32
//! variant f16 T_F16
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_16bit_storage : require

#if defined(T_F16)
#define T float16_t
#else
#define T float
#endif

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint m, n, k;
  uint a_off, a_bs, a_sm, a_sk;
  uint b_off, b_bs, b_sk, b_sn;
  uint c_off;
  uint batch0;
  uint mode;
} pc;

layout(std430, binding = 0) readonly buffer A { T a[]; };
layout(std430, binding = 1) readonly buffer B { T b[]; };
layout(std430, binding = 2) writeonly buffer C { T c[]; };

shared float part[256];

void main() {
  uint bt = pc.batch0 + gl_WorkGroupID.z;
  uint abase = pc.a_off + bt * pc.a_bs, bbase = pc.b_off + bt * pc.b_bs;
  uint g = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  uint t = gl_LocalInvocationID.x;
  if (pc.mode == 0u) {
    uint j = g * 256u + t;
    if (j >= pc.n) return;
    float acc = 0.0;
    for (uint kk = 0u; kk < pc.k; ++kk) acc += float(a[abase + kk * pc.a_sk]) * float(b[bbase + kk * pc.b_sk + j * pc.b_sn]);
    c[pc.c_off + bt * pc.n + j] = T(acc);
    return;
  }
  uint j = g;
  if (j >= pc.n) return;  // whole work-group: uniform
  float acc = 0.0;
  for (uint kk = t; kk < pc.k; kk += 256u) acc += float(a[abase + kk * pc.a_sk]) * float(b[bbase + kk * pc.b_sk + j * pc.b_sn]);
  part[t] = acc;
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1) {
    if (t < s) part[t] += part[t + s];
    barrier();
  }
  if (t == 0u) c[pc.c_off + bt * pc.n + j] = T(part[0]);
}
