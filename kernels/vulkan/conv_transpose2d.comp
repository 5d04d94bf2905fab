#version 450
// conv_transpose2d (and conv_transpose1d as height 1), one thread per output element:
// out[b, co, oy, ox] = sum over ci of co's group, ky, kx with oy + pad - ky * dil = iy * stride
// (and the same along x) of x[b, ci, iy, ix] * w[ci, co % co_g, ky, kx], in that order.
// Bindings: 0 input (strided), 1 weight (dense [c_in, co_g, kh, kw]), 2 output (dense).
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
  uint n, first;  // outputs of this dispatch, index of its first
  uint in_off, sb, sc, sh, sw;
  uint ih, iw;
  uint w_off, out_off;
  uint ci_g, co_g, groups;
  uint kh, kw, oh, ow;
  uint stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
} pc;

layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) readonly buffer W { T w[]; };
layout(std430, binding = 2) writeonly buffer Y { T y[]; };

void main() {
  uint l = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
  if (l >= pc.n) return;
  uint e = pc.first + l;
  uint ox = e % pc.ow, t = e / pc.ow;
  uint oy = t % pc.oh;
  t /= pc.oh;
  uint c_out = pc.co_g * pc.groups;
  uint co = t % c_out, bi = t / c_out;
  uint g = co / pc.co_g, cl = co % pc.co_g;
  float acc = 0.0;
  for (uint c = 0u; c < pc.ci_g; ++c) {
    uint ci = g * pc.ci_g + c;
    uint xb = pc.in_off + bi * pc.sb + ci * pc.sc;
    uint wb = pc.w_off + (ci * pc.co_g + cl) * pc.kh * pc.kw;
    for (uint ky = 0u; ky < pc.kh; ++ky) {
      int ny = int(oy + pc.pad_h) - int(ky * pc.dil_h);
      if (ny < 0 || uint(ny) % pc.stride_h != 0u) continue;
      uint iy = uint(ny) / pc.stride_h;
      if (iy >= pc.ih) continue;
      for (uint kx = 0u; kx < pc.kw; ++kx) {
        int nx = int(ox + pc.pad_w) - int(kx * pc.dil_w);
        if (nx < 0 || uint(nx) % pc.stride_w != 0u) continue;
        uint ix = uint(nx) / pc.stride_w;
        if (ix >= pc.iw) continue;
        acc += float(x[xb + iy * pc.sh + ix * pc.sw]) * float(w[wb + ky * pc.kw + kx]);
      }
    }
  }
  y[pc.out_off + l] = T(acc);
}
