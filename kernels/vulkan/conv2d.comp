#version 450
// conv2d (and conv1d as a conv2d of height 1) as an implicit GEMM, no im2col buffer: per
// (batch, group), OUT[m, p] = sum_k W[m, k] * X[k, p] with m an output channel of the group,
// p an output pixel (oy * ow + ox) and k = (ci, ky, kx). The host precomputes, for every k,
// the input offset of tap (ci, ky, kx) relative to the pixel's corner and the tap's (dy, dx)
// (binding 4), so the loads need no divisions: every padding / stride / dilation / group
// count runs at the speed of the plain case. Tiles of BM output channels x BN pixels per
// work-group of 256 threads, k in steps of 16 through shared memory, f32 accumulation in a
// fixed k order (deterministic). The epilogue adds the bias and applies the activation.
// Grid: (pixel tiles, channel tiles, batch * groups).
// Bindings: 0 input (strided), 1 weight (dense [c_out, K]), 2 output (dense), 3 bias,
// 4 k table (uvec2: offset, dy << 16 | dx).
// Variants <dtype>_<BM>x<BN>: BM output channels (16 * TM) x BN pixels (16 * TN, dividing 256).
//! variant f32_32x128 T_F32 BM=32 BN=128
//! variant f16_32x128 T_F16 BM=32 BN=128
//! variant f32_64x64 T_F32 BM=64 BN=64
//! variant f16_64x64 T_F16 BM=64 BN=64
//! variant f32_64x128 T_F32 BM=64 BN=128
//! variant f16_64x128 T_F16 BM=64 BN=128
//! variant f32_128x128 T_F32 BM=128 BN=128
//! variant f16_128x128 T_F16 BM=128 BN=128
//! variant f32_64x256 T_F32 BM=64 BN=256
//! variant f16_64x256 T_F16 BM=64 BN=256
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_GOOGLE_include_directive : require
#include "math.glsl"

#if defined(T_F16)
#define T float16_t
#else
#define T float
#endif

#define TM (BM / 16)
#define TN (BN / 16)

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint in_off, sb, sc, sh, sw;  // input: first element, strides of b, c, h, w
  uint ih, iw;
  uint w_off, out_off, bias_off, bias_st;
  uint ci_g, co_g, groups, K;  // K = ci_g * kh * kw
  uint oh, ow;
  uint stride_h, stride_w, pad_h, pad_w;
  uint act;     // UnaryOp code, 255: none
  uint has_bias;
  uint tile0;   // pixel tile of gl_WorkGroupID.x == 0
  uint bg0;     // batch * groups index of gl_WorkGroupID.z == 0
} pc;

layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) readonly buffer W { T w[]; };
layout(std430, binding = 2) writeonly buffer Y { T y[]; };
layout(std430, binding = 3) readonly buffer Bias { T bias[]; };
layout(std430, binding = 4) readonly buffer KTab { uvec2 ktab[]; };

shared float As[16][BM + 1];
shared float Bs[16][BN + 1];

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint tx = tid % 16u, ty = tid / 16u;
  uint N = pc.oh * pc.ow;
  uint m0 = gl_WorkGroupID.y * BM, p0 = (pc.tile0 + gl_WorkGroupID.x) * BN;
  uint bg = pc.bg0 + gl_WorkGroupID.z;
  uint bi = bg / pc.groups, g = bg % pc.groups;
  uint xbase = pc.in_off + bi * pc.sb + g * pc.ci_g * pc.sc;
  uint wbase = pc.w_off + g * pc.co_g * pc.K;
  // this thread's B column is fixed (256 is a multiple of BN)
  uint cb = tid % BN, kb0 = tid / BN;
  uint p = p0 + cb;
  bool pvalid = p < N;
  uint oy = pvalid ? p / pc.ow : 0u, ox = pvalid ? p % pc.ow : 0u;
  int iy0 = int(oy * pc.stride_h) - int(pc.pad_h), ix0 = int(ox * pc.stride_w) - int(pc.pad_w);
  uint pbase = xbase + uint(iy0 * int(pc.sh) + ix0 * int(pc.sw));

  float acc[TM][TN];
  for (int i = 0; i < TM; ++i)
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0;

  for (uint k0 = 0u; k0 < pc.K; k0 += 16u) {
    for (uint e = tid; e < BM * 16u; e += 256u) {
      uint r = e / 16u, kk = e % 16u;
      uint gm = m0 + r, gk = k0 + kk;
      As[kk][r] = (gm < pc.co_g && gk < pc.K) ? float(w[wbase + gm * pc.K + gk]) : 0.0;
    }
    for (uint kb = kb0; kb < 16u; kb += 256u / BN) {
      uint gk = k0 + kb;
      float v = 0.0;
      if (pvalid && gk < pc.K) {
        uvec2 t = ktab[gk];
        uint iy = uint(iy0 + int(t.y >> 16)), ix = uint(ix0 + int(t.y & 0xffffu));
        if (iy < pc.ih && ix < pc.iw) v = float(x[pbase + t.x]);
      }
      Bs[kb][cb] = v;
    }
    barrier();
    for (uint kk = 0u; kk < 16u; ++kk) {
      float av[TM], bv[TN];
      for (uint i = 0u; i < TM; ++i) av[i] = As[kk][ty + 16u * i];
      for (uint j = 0u; j < TN; ++j) bv[j] = Bs[kk][tx + 16u * j];
      for (uint i = 0u; i < TM; ++i)
        for (uint j = 0u; j < TN; ++j) acc[i][j] += av[i] * bv[j];
    }
    barrier();
  }
  for (uint i = 0u; i < TM; ++i) {
    uint m = m0 + ty + 16u * i;
    if (m >= pc.co_g) continue;
    uint co = g * pc.co_g + m;
    float b = pc.has_bias != 0u ? float(bias[pc.bias_off + co * pc.bias_st]) : 0.0;
    uint obase = pc.out_off + (bi * pc.groups * pc.co_g + co) * N;
    for (uint j = 0u; j < TN; ++j) {
      uint col = p0 + tx + 16u * j;
      if (col < N) {
        float v = acc[i][j] + b;
        if (pc.act != 255u) v = act_apply(pc.act, v);
        y[obase + col] = T(v);
      }
    }
  }
}
