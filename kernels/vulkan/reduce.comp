#version 450
// Reductions of contiguous rows: sum, min, max, argmin, argmax (op = ReduceOp order).
// Each work-group reduces `chunk` elements of one row (256 threads, each a fixed strided
// subset, then a fixed tree): deterministic. With several chunks per row the work-groups write
// partials (f32 value + u32 index within the row) that a second pass (IN_P) reduces.
// Bindings: 0 values in, 1 indices in (IN_P only; else a dummy), 2 values out, 3 indices out.
//! variant f32 IN_F32 OUT_F32
//! variant f16 IN_F16 OUT_F16
//! variant f32_p IN_F32 OUT_P
//! variant f16_p IN_F16 OUT_P
//! variant p_f32 IN_P OUT_F32
//! variant p_f16 IN_P OUT_F16
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_16bit_storage : require

#if defined(IN_F16)
#define TI float16_t
#else
#define TI float
#endif
#if defined(OUT_F16)
#define TO float16_t
#else
#define TO float
#endif

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint row_len;     // elements per row
  uint row_stride;  // elements between rows
  uint chunk;       // elements per work-group
  uint chunks;      // work-groups per row
  uint op;
  uint in_off;      // first element of row `row0` in binding 0 (and 1)
  uint out_off;     // first output of this dispatch in bindings 2 and 3
  uint w0;          // global index of this dispatch's first work-group
  uint row0;        // the row of work-group w0
  uint c0;          // the chunk of work-group w0 (in_off is that chunk's first element)
  uint n_groups;    // work-groups in this dispatch
} pc;

layout(std430, binding = 0) readonly buffer InV { TI xv[]; };
layout(std430, binding = 1) readonly buffer InI { uint xi[]; };
layout(std430, binding = 2) writeonly buffer OutV { TO yv[]; };
layout(std430, binding = 3) writeonly buffer OutI { uint yi[]; };

const uint EMPTY = 0xffffffffu;
shared float sv[256];
shared uint si[256];

// Folds (v2, i2) into (v, i); order-independent, so the result does not depend on the tree.
void combine(inout float v, inout uint i, float v2, uint i2) {
  if (i2 == EMPTY) return;
  if (i == EMPTY) {
    v = v2;
    i = i2;
    return;
  }
  uint op = pc.op;
  if (op == 0u) {
    v += v2;
    return;
  }
  bool n1 = isnan(v), n2 = isnan(v2);
  bool take;
  if (n1 || n2) {
    take = n2 && (!n1 || i2 < i);  // the first NaN
  } else {
    bool better = (op == 2u || op == 4u) ? v2 > v : v2 < v;
    take = better || (v2 == v && i2 < i);
  }
  if (take) {
    v = v2;
    i = i2;
  }
}

void main() {
  uint wl = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  if (wl >= pc.n_groups) return;  // whole work-group: uniform
  uint w = pc.w0 + wl;
  uint row = w / pc.chunks, c = w % pc.chunks;
  uint begin = c * pc.chunk;
  uint end = min(pc.row_len, begin + pc.chunk);
  // (modular arithmetic: the sum is the element's offset in the binding)
  uint base = pc.in_off + (row - pc.row0) * pc.row_stride - pc.c0 * pc.chunk;
  uint t = gl_LocalInvocationID.x;
  float v = 0.0;
  uint ix = EMPTY;
  for (uint k = begin + t; k < end; k += 256u) {
#if defined(IN_P)
    combine(v, ix, xv[base + k], xi[base + k]);
#else
    combine(v, ix, float(xv[base + k]), k);
#endif
  }
  sv[t] = v;
  si[t] = ix;
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1) {
    if (t < s) {
      float a = sv[t];
      uint ia = si[t];
      combine(a, ia, sv[t + s], si[t + s]);
      sv[t] = a;
      si[t] = ia;
    }
    barrier();
  }
  if (t == 0u) {
    uint o = pc.out_off + wl;
#if defined(OUT_P)
    yv[o] = sv[0];
    yi[o] = si[0];
#else
    if (pc.op >= 3u)
      yi[o] = si[0];
    else
      yv[o] = TO(si[0] == EMPTY ? 0.0 : sv[0]);
#endif
  }
}
