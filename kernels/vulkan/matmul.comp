#version 450
// Batched GEMM over strided operands: C[b] (m x n, dense) = A[b] (m x k) * B[b] (k x n).
// 64 x 64 output tiles per work-group of 256 threads (4 x 4 each), k in steps of 16 through
// shared memory; f32 accumulation in a fixed k order (deterministic). Grid: (n/64, m/64, batch).
// Bindings: 0 A, 1 B, 2 C.
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
  uint batch0;  // batch index of gl_WorkGroupID.z == 0
} pc;

layout(std430, binding = 0) readonly buffer A { T a[]; };
layout(std430, binding = 1) readonly buffer B { T b[]; };
layout(std430, binding = 2) writeonly buffer C { T c[]; };

shared float As[16][65];
shared float Bs[16][65];

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint tx = tid % 16u, ty = tid / 16u;
  uint row0 = gl_WorkGroupID.y * 64u, col0 = gl_WorkGroupID.x * 64u;
  uint bt = pc.batch0 + gl_WorkGroupID.z;
  uint abase = pc.a_off + bt * pc.a_bs, bbase = pc.b_off + bt * pc.b_bs;
  float acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0;
  for (uint k0 = 0u; k0 < pc.k; k0 += 16u) {
    // 64 x 16 of A and 16 x 64 of B, 4 elements per thread each
    for (uint e = tid; e < 1024u; e += 256u) {
      uint r = e / 16u, kk = e % 16u;  // A: row r, column kk
      uint gr = row0 + r, gk = k0 + kk;
      As[kk][r] = (gr < pc.m && gk < pc.k) ? float(a[abase + gr * pc.a_sm + gk * pc.a_sk]) : 0.0;
      uint kb = e / 64u, cb = e % 64u;  // B: row kb, column cb
      uint gkb = k0 + kb, gc = col0 + cb;
      Bs[kb][cb] = (gkb < pc.k && gc < pc.n) ? float(b[bbase + gkb * pc.b_sk + gc * pc.b_sn]) : 0.0;
    }
    barrier();
    for (uint kk = 0u; kk < 16u; ++kk) {
      float av[4], bv[4];
      for (uint i = 0u; i < 4u; ++i) av[i] = As[kk][ty + 16u * i];
      for (uint j = 0u; j < 4u; ++j) bv[j] = Bs[kk][tx + 16u * j];
      for (uint i = 0u; i < 4u; ++i)
        for (uint j = 0u; j < 4u; ++j) acc[i][j] += av[i] * bv[j];
    }
    barrier();
  }
  uint cbase = pc.c_off + bt * pc.m * pc.n;
  for (uint i = 0u; i < 4u; ++i) {
    uint r = row0 + ty + 16u * i;
    if (r >= pc.m) continue;
    for (uint j = 0u; j < 4u; ++j) {
      uint col = col0 + tx + 16u * j;
      if (col < pc.n) c[cbase + r * pc.n + col] = T(acc[i][j]);
    }
  }
}
