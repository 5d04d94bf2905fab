#version 450
// Reductions of contiguous rows: sum, min, max, argmin, argmax (op = ReduceOp order).
// Each work-group reduces `chunk` elements of one row (256 threads, each a fixed strided
// subset, then a fixed tree): deterministic. With several chunks per row the work-groups write
// partials (value + u32 index within the row) that a second pass (IN_P) reduces.
// Float variants (f32, f16) combine in f32 with f32 partials. Integer variants (K_U8, K_U32,
// K_I64) combine in uint (u8, u32) or int64_t (i64) with partials of that type: sums wrap (the
// CPU's, whatever the order: wrapping addition is associative), min/max compare in the type,
// and ties go to the first index, as the CPU.
// Bindings: 0 values in, 1 indices in (IN_P only; else a dummy), 2 values out, 3 indices out.
//! variant f32 IN_F32 OUT_F32
//! variant f16 IN_F16 OUT_F16
//! variant f32_p IN_F32 OUT_P
//! variant f16_p IN_F16 OUT_P
//! variant p_f32 IN_P OUT_F32
//! variant p_f16 IN_P OUT_F16
//! variant u8 K_U8
//! variant u32 K_U32
//! variant i64 K_I64
//! variant u8_p K_U8 OUT_P
//! variant u32_p K_U32 OUT_P
//! variant i64_p K_I64 OUT_P
//! variant p_u8 K_U8 IN_P
//! variant p_u32 K_U32 IN_P
//! variant p_i64 K_I64 IN_P
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require

#if defined(K_U8) || defined(K_U32) || defined(K_I64)
#define INT_K
#endif

// V: the type values are combined (and partials stored) in
#if defined(K_I64)
#define V int64_t
#elif defined(INT_K)
#define V uint
#else
#define V float
#endif

#if defined(IN_P)
#define TI V
#elif defined(K_U8)
#define TI uint8_t
#elif defined(K_U32)
#define TI uint
#elif defined(K_I64)
#define TI int64_t
#elif defined(IN_F16)
#define TI float16_t
#else
#define TI float
#endif

#if defined(OUT_P)
#define TO V
#elif defined(K_U8)
#define TO uint8_t
#elif defined(K_U32)
#define TO uint
#elif defined(K_I64)
#define TO int64_t
#elif defined(OUT_F16)
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
  uint idx_off;     // in_off's counterpart in binding 1 (IN_P)
} pc;

layout(std430, binding = 0) readonly buffer InV { TI xv[]; };
layout(std430, binding = 1) readonly buffer InI { uint xi[]; };
layout(std430, binding = 2) writeonly buffer OutV { TO yv[]; };
layout(std430, binding = 3) writeonly buffer OutI { uint yi[]; };

const uint EMPTY = 0xffffffffu;
shared V sv[256];
shared uint si[256];

// Folds (v2, i2) into (v, i); order-independent, so the result does not depend on the tree.
void combine(inout V v, inout uint i, V v2, uint i2) {
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
#if defined(INT_K)
  bool better = (op == 2u || op == 4u) ? v2 > v : v2 < v;
  if (better || (v2 == v && i2 < i)) {
    v = v2;
    i = i2;
  }
#else
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
#endif
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
  uint base_i = base - pc.in_off + pc.idx_off;
  uint t = gl_LocalInvocationID.x;
  V v = V(0);
  uint ix = EMPTY;
  for (uint k = begin + t; k < end; k += 256u) {
#if defined(IN_P)
    combine(v, ix, xv[base + k], xi[base_i + k]);
#else
    combine(v, ix, V(xv[base + k]), k);
#endif
  }
  sv[t] = v;
  si[t] = ix;
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1) {
    if (t < s) {
      V a = sv[t];
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
      yv[o] = TO(si[0] == EMPTY ? V(0) : sv[0]);
#endif
  }
}
