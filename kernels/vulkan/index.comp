#version 450
// index_select (mode 0) and gather (mode 1) over a contiguous source seen as
// [left, src_dim, right]; out is [left, n_ids, right] (dense). index_select reads ids[i],
// gather ids[element]. ids_check.comp ran first: when it found a bad id (the fault block
// holds this op's tag) nothing is written and thread 0 copies that id for the error message.
// A skip id (the dtype's maximum) gives 0. A source past one binding (left == 1) is bound in
// ranges of rows [id_lo, id_lo + id_n), one dispatch each: a dispatch writes the outputs whose
// id falls in its range (the first one also writes the zeros of the skip ids).
// Bindings: 0 source, 1 ids (u32 or i64), 2 output, 3 fault block.
//! variant b1_u32 B1 ID_U32
//! variant b2_u32 B2 ID_U32
//! variant b4_u32 B4 ID_U32
//! variant b8_u32 B8 ID_U32
//! variant b1_i64 B1 ID_I64
//! variant b2_i64 B2 ID_I64
//! variant b4_i64 B4 ID_I64
//! variant b8_i64 B8 ID_I64
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require

#if defined(B1)
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
  uint n;  // output elements in this dispatch
  uint first;  // global index of this dispatch's first output element
  uint src_dim, n_ids, right;
  uint src_off, ids_off, out_off;
  uint mode;
  uint tag;          // this op's id check
  uint id_lo, id_n;  // the rows of the source bound from src_off
} pc;

layout(std430, binding = 0) readonly buffer Src { E s[]; };
#if defined(ID_I64)
layout(std430, binding = 1) readonly buffer Ids { uvec2 ids[]; };
#else
layout(std430, binding = 1) readonly buffer Ids { uint ids[]; };
#endif
layout(std430, binding = 2) writeonly buffer Out { E y[]; };
layout(std430, binding = 3) buffer Fault { uint fault[]; };
#include "ids_fault.glsl"

void main() {
  uint l = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
  if (l >= pc.n) return;
  if (ids_faulted(pc.tag, pc.ids_off, l == 0u)) return;
  uint e = pc.first + l;
  uint r = e % pc.right, q = e / pc.right;
  uint i = q % pc.n_ids, left = q / pc.n_ids;
  uint at = pc.ids_off + (pc.mode == 0u ? i : e);
#if defined(ID_I64)
  uvec2 id2 = ids[at];
  uint id = id2.y != 0u ? 0xffffffffu : id2.x;
#else
  uint id = ids[at];
#endif
  if (id >= pc.src_dim) {
    if (pc.id_lo == 0u) {
#if defined(B8)
      y[pc.out_off + l] = uvec2(0u);
#else
      y[pc.out_off + l] = E(0u);
#endif
    }
    return;
  }
  uint rel = id - pc.id_lo;
  if (rel >= pc.id_n) return;  // another dispatch's rows
  y[pc.out_off + l] = s[pc.src_off + (left * pc.id_n + rel) * pc.right + r];
}
