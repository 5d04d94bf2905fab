#version 450
// Pooling and resizing over [b, c, h, w] planes (strided input, dense output), one thread per
// output element. Modes: 0 avg_pool2d, 1 max_pool2d (window (kh, kw), stride (s_h, s_w), no
// padding; avg sums row by row left to right from 0 then divides by kh * kw; max starts from
// the window's first element and takes v when v > m or v is NaN, as the CPU), 2 bilinear
// (binding 2: per output row then column i0, i1, bits of w0, w1, computed on the host in f64
// exactly as the CPU; blend along w first, then h, in f32).
// Bindings: 0 input, 1 output, 2 table (bilinear; unused otherwise).
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
  uint n, first;
  uint in_off, sb, sc, sh, sw;
  uint c, oh, ow;
  uint kh, kw, s_h, s_w;
  uint out_off, mode;
} pc;

layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) writeonly buffer Y { T y[]; };
layout(std430, binding = 2) readonly buffer Tab { uint tab[]; };

void main() {
  uint l = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
  if (l >= pc.n) return;
  uint e = pc.first + l;
  uint ox = e % pc.ow, t = e / pc.ow;
  uint oy = t % pc.oh, plane = t / pc.oh;
  uint base = pc.in_off + (plane / pc.c) * pc.sb + (plane % pc.c) * pc.sc;
  float r;
  if (pc.mode == 2u) {
    uint th = 4u * oy, tw = 4u * (pc.oh + ox);
    uint y0 = tab[th], y1 = tab[th + 1u], x0 = tab[tw], x1 = tab[tw + 1u];
    float lh0 = uintBitsToFloat(tab[th + 2u]), lh1 = uintBitsToFloat(tab[th + 3u]);
    float lw0 = uintBitsToFloat(tab[tw + 2u]), lw1 = uintBitsToFloat(tab[tw + 3u]);
    uint r0 = base + y0 * pc.sh, r1 = base + y1 * pc.sh;
    precise float top = float(x[r0 + x0 * pc.sw]) * lw0 + float(x[r0 + x1 * pc.sw]) * lw1;
    precise float bot = float(x[r1 + x0 * pc.sw]) * lw0 + float(x[r1 + x1 * pc.sw]) * lw1;
    precise float v = top * lh0 + bot * lh1;
    r = v;
  } else {
    uint b0 = base + oy * pc.s_h * pc.sh + ox * pc.s_w * pc.sw;
    if (pc.mode == 1u) {
      r = float(x[b0]);
      for (uint i = 0u; i < pc.kh; ++i)
        for (uint j = 0u; j < pc.kw; ++j) {
          float v = float(x[b0 + i * pc.sh + j * pc.sw]);
          r = (v > r || isnan(v)) ? v : r;
        }
    } else {
      precise float s = 0.0;
      for (uint i = 0u; i < pc.kh; ++i)
        for (uint j = 0u; j < pc.kw; ++j) s += float(x[b0 + i * pc.sh + j * pc.sw]);
      r = s / float(pc.kh * pc.kw);
    }
  }
  y[pc.out_off + l] = T(r);
}
