#version 450
// Checks ids against [0, limit) before an indexing op reads or writes anything: the dtype's
// maximum is candle's "skip" id and passes. A bad id marks the fault block (Context::
// register_id_check) with this check's tag and lowers word 1 to the first bad position; the
// op's kernel, dispatched after, sees its tag there, writes nothing and copies that id into
// words 2..3 for the error message.
// Bindings: 0 ids (u32 or i64), 1 fault block.
//! variant u32 ID_U32
//! variant i64 ID_I64

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint n;       // ids
  uint ids_off;
  uint limit;   // the dim's size
  uint tag;
} pc;

#if defined(ID_I64)
layout(std430, binding = 0) readonly buffer Ids { uvec2 ids[]; };
#else
layout(std430, binding = 0) readonly buffer Ids { uint ids[]; };
#endif
layout(std430, binding = 1) buffer Fault { uint fault[]; };

void main() {
  uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
  if (i >= pc.n) return;
#if defined(ID_I64)
  uvec2 v = ids[pc.ids_off + i];
  bool skip = v.x == 0xffffffffu && v.y == 0x7fffffffu;
  bool bad = !skip && (v.y != 0u || v.x >= pc.limit);
#else
  uint v = ids[pc.ids_off + i];
  bool bad = v != 0xffffffffu && v >= pc.limit;
#endif
  if (!bad) return;
  uint prev = atomicCompSwap(fault[0], 0u, pc.tag);
  if (prev == 0u || prev == pc.tag)
    atomicMin(fault[1], i);
  else
    atomicOr(fault[4], 1u);
}
