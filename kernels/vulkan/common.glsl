// Shared by the element-wise kernels: the push constants (EwPush in src/vulkan/storage.h), the
// work-item index, strided offsets and the element types of a variant.
//
// Variant macros: T_F32 / T_F16 pick the float type T of the operands (float16_t needs
// shaderFloat16 + 16-bit storage); B1/B2/B4/B8 pick a raw element type E of that many bytes;
// I_U8 / I_U32 / I_I64 pick an integer element type IT (uint8_t needs shaderInt8 + 8-bit
// storage, int64_t shaderInt64) and its compute type IC: uint for u8 and u32 (a u8 result is
// the low 8 bits, as the CPU's wrapping arithmetic), int64_t for i64 (two's complement wraps).

#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require

#if defined(T_F16)
#define T float16_t
#else
#define T float
#endif

#if defined(B1)
#define E uint8_t
#elif defined(B2)
#define E uint16_t
#elif defined(B8)
#define E uvec2
#else
#define E uint
#endif

#if defined(I_U8)
#define IT uint8_t
#define IC uint
#elif defined(I_U32)
#define IT uint
#define IC uint
#elif defined(I_I64)
#define IT int64_t
#define IC int64_t
#endif

layout(local_size_x = 256) in;

layout(push_constant) uniform EwPush {
  uint n;        // elements of this dispatch
  uint rank_op;  // rank | op << 8
  uint p0, p1;   // parameters (float bits or integers)
  uint off[4];   // first element of each operand in its binding
  uint dims[6];
  uint st[18];   // strides of the strided operands 0..2: st[6 * i + d]
} pc;

// The work item's element index; >= pc.n for the idle tail.
uint ew_index() {
  return (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
}

uint ew_op() { return pc.rank_op >> 8; }
float ew_p0() { return uintBitsToFloat(pc.p0); }
float ew_p1() { return uintBitsToFloat(pc.p1); }

// Element offsets of the strided operands 0..2 for row-major element i.
uvec3 ew_offsets(uint i) {
  uvec3 o = uvec3(pc.off[0], pc.off[1], pc.off[2]);
  uint rank = pc.rank_op & 0xffu;
  for (int d = int(rank) - 1; d >= 0; --d) {
    uint dim = pc.dims[d];
    uint idx = i % dim;
    i /= dim;
    o += idx * uvec3(pc.st[d], pc.st[6 + d], pc.st[12 + d]);
  }
  return o;
}

#include "math.glsl"
