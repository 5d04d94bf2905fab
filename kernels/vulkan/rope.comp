#version 450
// Rotary embeddings (candle::nn rope / rope_i / rope_thd), one thread per output pair:
// (y0, y1) = (x0 cos - x1 sin, x0 sin + x1 cos) with x0, x1 the elements (i, i + d/2) of a
// row (kind 0 halves, 2 halves with x [b, t, h, d]) or (2i, 2i + 1) (kind 1 interleaved), and
// cos/sin[(b,) t, i]. x [b, d1, d2, d] and cos/sin are read through their strides (cs0 = 0
// for 2-D cos/sin); y is dense. f32 compute, one rounding at the store.
// Bindings: 0 x, 1 cos, 2 sin, 3 y.
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
  uint n;     // pairs: b * d1 * d2 * d/2
  uint half_, d1, d2, kind;
  uint x_off, xs0, xs1, xs2, xs3;
  uint c_off, cs0, cs1, cs2;
  uint s_off, ss0, ss1, ss2;
  uint y_off;
} pc;

layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) readonly buffer C { T cs[]; };
layout(std430, binding = 2) readonly buffer S { T sn[]; };
layout(std430, binding = 3) writeonly buffer Y { T y[]; };

void main() {
  const uint p = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
  if (p >= pc.n) return;
  const uint i = p % pc.half_, r = p / pc.half_;
  const uint i2 = r % pc.d2, i1 = (r / pc.d2) % pc.d1, bi = r / pc.d2 / pc.d1;
  const uint ti = pc.kind == 2u ? i1 : i2;
  // positions of the pair in the row
  const uint j0 = pc.kind == 1u ? 2u * i : i;
  const uint j1 = pc.kind == 1u ? 2u * i + 1u : i + pc.half_;
  const uint xb = pc.x_off + bi * pc.xs0 + i1 * pc.xs1 + i2 * pc.xs2;
  const float x0 = float(x[xb + j0 * pc.xs3]), x1 = float(x[xb + j1 * pc.xs3]);
  const float c = float(cs[pc.c_off + bi * pc.cs0 + ti * pc.cs1 + i * pc.cs2]);
  const float s = float(sn[pc.s_off + bi * pc.ss0 + ti * pc.ss1 + i * pc.ss2]);
  // precise: no fused multiply-add, the products are rounded as on the CPU
  precise float y0 = x0 * c - x1 * s;
  precise float y1 = x0 * s + x1 * c;
  const uint yb = pc.y_off + r * 2u * pc.half_;
  y[yb + j0] = T(y0);
  y[yb + j1] = T(y1);
}
