#version 450
// upsample_nearest1d/2d over [b, c, h, w] planes (strided input, dense output), any element
// size: out[.., oy, ox] = in[.., hidx[oy], widx[ox]] with the index tables (binding 2:
// hidx[oh] then widx[ow]) computed on the host exactly as the CPU (floor(o * in / out)).
//! variant b1 B1
//! variant b2 B2
//! variant b4 B4
//! variant b8 B8
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
  uint n, first;
  uint in_off, sb, sc, sh, sw;
  uint c, oh, ow;
  uint kh, kw, s_h, s_w;
  uint out_off, mode;
} pc;

layout(std430, binding = 0) readonly buffer X { E x[]; };
layout(std430, binding = 1) writeonly buffer Y { E y[]; };
layout(std430, binding = 2) readonly buffer Tab { uint tab[]; };

void main() {
  uint l = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
  if (l >= pc.n) return;
  uint e = pc.first + l;
  uint ox = e % pc.ow, t = e / pc.ow;
  uint oy = t % pc.oh, plane = t / pc.oh;
  uint base = pc.in_off + (plane / pc.c) * pc.sb + (plane % pc.c) * pc.sc;
  y[pc.out_off + l] = x[base + tab[oy] * pc.sh + tab[pc.oh + ox] * pc.sw];
}
