#version 450
// index_add (ids per position: IDS1D), scatter_set and scatter_add (ids per element) into a
// dense destination [left, dst_dim, right] from a dense source [left, n, right]. One thread per
// (left, right) column walks k = 0..n in order, so updates of one destination element happen
// in increasing k (the CPU's order; set: the last one wins) without atomics: deterministic.
// An id >= dst_dim (the dtype's max value is the candle "skip" id) is skipped. ids_check.comp
// ran first: when it found a bad id (the fault block holds this op's tag) nothing is written
// and thread 0 copies that id for the error message.
// Bindings: 0 destination (read-write), 1 ids (u32 or i64), 2 source, 3 fault block.
//! variant set_b1_u32 B1 ID_U32
//! variant set_b2_u32 B2 ID_U32
//! variant set_b4_u32 B4 ID_U32
//! variant set_b8_u32 B8 ID_U32
//! variant set_b1_i64 B1 ID_I64
//! variant set_b2_i64 B2 ID_I64
//! variant set_b4_i64 B4 ID_I64
//! variant set_b8_i64 B8 ID_I64
//! variant add_f32_u32 ADD T_F32 ID_U32
//! variant add_f16_u32 ADD T_F16 ID_U32
//! variant add_f32_i64 ADD T_F32 ID_I64
//! variant add_f16_i64 ADD T_F16 ID_I64
//! variant add_u8_u32 ADD I_U8 ID_U32
//! variant add_u32_u32 ADD I_U32 ID_U32
//! variant add_i64_u32 ADD I_I64 ID_U32
//! variant add_u8_i64 ADD I_U8 ID_I64
//! variant add_u32_i64 ADD I_U32 ID_I64
//! variant add_i64_i64 ADD I_I64 ID_I64
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require

// ADD_E(a, b): a + b rounded to E (floats through f32; integers wrap, as the CPU's)
#if defined(ADD) && defined(I_U8)
#define E uint8_t
#define ADD_E(a, b) E(uint(a) + uint(b))
#elif defined(ADD) && defined(I_U32)
#define E uint
#define ADD_E(a, b) ((a) + (b))
#elif defined(ADD) && defined(I_I64)
#define E int64_t
#define ADD_E(a, b) ((a) + (b))
#elif defined(ADD)
#if defined(T_F16)
#define E float16_t
#else
#define E float
#endif
#define ADD_E(a, b) E(float(a) + float(b))
#elif defined(B1)
#define E uint8_t
#elif defined(B2)
#define E uint16_t
#elif defined(B8)
#define E uvec2
#else
#define E uint
#endif

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint cols;  // left * right
  uint n, dst_dim, right;
  uint dst_off, ids_off, src_off;
  uint ids_1d;  // 1: ids[k] (index_add), 0: ids[l, k, r]
  uint k0, k1;  // this dispatch's positions (lavapipe stops a loop after 65535 iterations)
  uint tag;     // this op's id check
} pc;

layout(std430, binding = 0) buffer Dst { E d[]; };
#if defined(ID_I64)
layout(std430, binding = 1) readonly buffer Ids { uvec2 ids[]; };
#else
layout(std430, binding = 1) readonly buffer Ids { uint ids[]; };
#endif
layout(std430, binding = 2) readonly buffer Src { E s[]; };
layout(std430, binding = 3) buffer Fault { uint fault[]; };
#include "ids_fault.glsl"

void main() {
  uint c = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
  if (c >= pc.cols) return;
  if (ids_faulted(pc.tag, pc.ids_off, c == 0u)) return;
  uint l = c / pc.right, r = c % pc.right;
  for (uint k = pc.k0; k < pc.k1; ++k) {
    uint se = (l * pc.n + k) * pc.right + r;
    uint at = pc.ids_off + (pc.ids_1d != 0u ? k : se);
#if defined(ID_I64)
    uvec2 id2 = ids[at];
    uint id = id2.y != 0u ? 0xffffffffu : id2.x;
#else
    uint id = ids[at];
#endif
    if (id >= pc.dst_dim) continue;
    uint de = pc.dst_off + (l * pc.dst_dim + id) * pc.right + r;
#if defined(ADD)
    d[de] = ADD_E(d[de], s[pc.src_off + se]);
#else
    d[de] = s[pc.src_off + se];
#endif
  }
}
