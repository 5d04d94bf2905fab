#version 450
// Inclusive prefix sum along the middle dim of a dense [left, len, right] input, one thread
// per (left, right) column walking the dim in order. The running sum is compensated (Kahan,
// `precise`: no reassociation), close to the CPU's f64 accumulator for f32.
// Long dims run as several dispatches over [i0, i1) (lavapipe stops a loop after 65535
// iterations), the running sum and its compensation kept per column in binding 2.
// Bindings: 0 input, 1 output (both dense, same indexing), 2 state (2 floats per column).
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
  uint cols;  // left * right
  uint len, right;
  uint in_off, out_off;
  uint i0, i1;
} pc;

layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) writeonly buffer Y { T y[]; };
layout(std430, binding = 2) buffer State { vec2 state[]; };

void main() {
  uint c = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
  if (c >= pc.cols) return;
  uint l = c / pc.right, r = c % pc.right;
  uint base = l * pc.len * pc.right + r;
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
}
