#version 450
// Inclusive prefix sum along the middle dim of a dense [left, len, right] input, one thread
// per (left, right) column walking the dim in order. The running sum is compensated (Kahan,
// `precise`: no reassociation), close to the CPU's f64 accumulator for f32.
// Long dims run as several dispatches over [i0, i1) (lavapipe stops a loop after 65535
// iterations), the running sum and its compensation kept per column in binding 2.
// Integer variants (u8, u32, i64): a plain running sum in uint (u8, u32) or int64_t, wrapping
// as the CPU's; the state is that sum per column (at most 8 bytes, as the float state).
// Bindings: 0 input, 1 output (both dense, same indexing), 2 state (2 floats per column).
//! variant f32 T_F32
//! variant f16 T_F16
//! variant u8 I_U8
//! variant u32 I_U32
//! variant i64 I_I64
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require

#if defined(I_U8)
#define T uint8_t
#define IC uint
#elif defined(I_U32)
#define T uint
#define IC uint
#elif defined(I_I64)
#define T int64_t
#define IC int64_t
#elif defined(T_F16)
#define T float16_t
#else
#define T float
#endif

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint cols;  // left * right
  uint len, right;
  uint in_off, out_off;
  uint i0, i1;
} pc;

layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) writeonly buffer Y { T y[]; };
#if defined(IC)
layout(std430, binding = 2) buffer State { IC state[]; };
#else
layout(std430, binding = 2) buffer State { vec2 state[]; };
#endif

void main() {
  uint c = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
  if (c >= pc.cols) return;
  uint l = c / pc.right, r = c % pc.right;
  uint base = l * pc.len * pc.right + r;
#if defined(IC)
  IC s = IC(0);
  if (pc.i0 > 0u) s = state[c];
  for (uint i = pc.i0; i < pc.i1; ++i) {
    uint at = base + i * pc.right;
    s += IC(x[pc.in_off + at]);
    y[pc.out_off + at] = T(s);
  }
  if (pc.i1 < pc.len) state[c] = s;
#else
  precise float s = 0.0, comp = 0.0;
  if (pc.i0 > 0u) {
    s = state[c].x;
    comp = state[c].y;
  }
  for (uint i = pc.i0; i < pc.i1; ++i) {
    uint at = base + i * pc.right;
    precise float v = float(x[pc.in_off + at]) - comp;
    precise float t = s + v;
    comp = (t - s) - v;
    s = t;
    y[pc.out_off + at] = T(s);
  }
  if (pc.i1 < pc.len) state[c] = vec2(s, comp);
#endif
}
