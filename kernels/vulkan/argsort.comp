#version 450
// arg_sort_last_dim of a dense [rows, len] input by ranking: element i of a row goes to
// position #{j : v_j sorts before v_i} + #{j < i : v_j ties with v_i} (a stable sort; NaN sorts
// as the largest value, as the CPU and PyTorch). One thread per element, the row read in
// tiles of 256 through shared memory. Grid: (ceil(len / 256), rows of this dispatch).
// Bindings: 0 input, 1 output (u32 indices).
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
  uint len, row0, descending;
  uint in_off, out_off;
} pc;

layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) writeonly buffer Y { uint y[]; };

shared float tile[256];

bool less_(float a, float b) { return a < b || (!isnan(a) && isnan(b)); }

void main() {
  uint i = gl_WorkGroupID.x * 256u + gl_LocalInvocationID.x;
  uint row = pc.row0 + gl_WorkGroupID.y;
  uint base = row * pc.len;
  bool live = i < pc.len;
  float vi = live ? float(x[pc.in_off + base + i]) : 0.0;
  bool desc = pc.descending != 0u;
  uint pos = 0u;
  // (at most 65535 iterations of one loop on lavapipe: rows up to 16M elements)
  for (uint j0 = 0u; j0 < pc.len; j0 += 256u) {
    uint j = j0 + gl_LocalInvocationID.x;
    tile[gl_LocalInvocationID.x] = j < pc.len ? float(x[pc.in_off + base + j]) : 0.0;
    barrier();
    uint m = min(256u, pc.len - j0);
    if (live) {
      for (uint t = 0u; t < m; ++t) {
        float vj = tile[t];
        bool before = desc ? less_(vi, vj) : less_(vj, vi);
        bool tie = !less_(vi, vj) && !less_(vj, vi);
        pos += (before || (tie && j0 + t < i)) ? 1u : 0u;
      }
    }
    barrier();
  }
  if (live) y[pc.out_off + base + pos] = i;
}
