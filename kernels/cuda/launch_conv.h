// The host-side entry points of the convolution, pooling and resizing kernels (conv2d.cu,
// conv2d_tc.cu, conv_transpose.cu, pool.cu, resize.cu). Conventions as launch.h: device pointers with the
// operands' start offsets applied, strides in elements, dense row-major outputs, the launch's
// cudaError_t returned.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "launch.h"

namespace candle::cuda_k {

// One 2-D convolution problem (conv1d: ih = kh = 1, sh = 0, pad_h = 0, s_h = d_h = 1).
// Channel counts per group; the input is read through its strides (sb, sc, sh, sw).
struct ConvArgs {
  int64_t b = 0, groups = 1, ci_g = 0, co_g = 0;
  int64_t ih = 0, iw = 0, kh = 0, kw = 0, oh = 0, ow = 0;
  int64_t pad_h = 0, pad_w = 0, s_h = 1, s_w = 1, d_h = 1, d_w = 1;
  int64_t sb = 0, sc = 0, sh = 0, sw = 0;
  int64_t bias_st = 0;  // the bias's element stride
  int32_t act = -1;     // a UnaryOp's value, or -1 for none
  bool has_bias = false;
  bool wide = false;  // 64-bit index arithmetic (else every offset fits in int32)
};

// out [b, groups * co_g, oh, ow] = act(conv(x, w) + bias[co]) as an implicit GEMM per
// (image, group); w dense [groups * co_g, ci_g * kh * kw]; `taps` (device) holds, per
// k = (ci, ky, kx), {ci * sc + ky * d_h * sh + kx * d_w * sw, ky * d_h, kx * d_w}. dt: a float
// dtype (f16 / bf16 / f8 accumulate in f32).
cudaError_t conv2d(Dt dt, const void* x, const void* w, const int64_t* taps, const void* bias, void* out,
                   const ConvArgs& a, cudaStream_t s);

// The same convolution on tensor cores (conv2d_tc.cu, sm_80 and newer): f16 / bf16 products, or f32
// operands rounded to TF32, accumulated in f32; the epilogue as conv2d's. cudaErrorInvalidValue
// for other dtypes.
cudaError_t conv2d_tc(Dt dt, const void* x, const void* w, const int64_t* taps, const void* bias, void* out,
                      const ConvArgs& a, cudaStream_t s);

// out [b, groups * co_g, oh, ow] = the transposed convolution of x [b, groups * ci_g, ih, iw]
// with w dense [groups * ci_g, co_g, kh, kw] (pad/stride/dilation of ConvArgs; no epilogue).
cudaError_t conv_transpose2d(Dt dt, const void* x, const void* w, void* out, const ConvArgs& a,
                             cudaStream_t s);

// Planes (b, c) of h x w elements read through strides; outputs oh x ow per plane.
struct PlaneArgs {
  int64_t b = 0, c = 0, h = 0, w = 0;
  int64_t sb = 0, sc = 0, sh = 0, sw = 0;
  int64_t oh = 0, ow = 0;
  bool wide = false;
};

// Pooling windows (kh, kw) with strides (s_h, s_w), no padding. max: any dtype, NaN
// propagating as the CPU (the last NaN of the window in row-major order); avg: float dtypes,
// the window summed row by row, left to right, then divided by kh * kw.
cudaError_t max_pool2d(Dt dt, const void* x, void* out, const PlaneArgs& p, int64_t kh, int64_t kw,
                       int64_t s_h, int64_t s_w, cudaStream_t s);
cudaError_t avg_pool2d(Dt dt, const void* x, void* out, const PlaneArgs& p, int64_t kh, int64_t kw,
                       int64_t s_h, int64_t s_w, cudaStream_t s);

// out[plane, y, x] = x[plane + offs[y] + offs[oh + x]] (offs: oh row offsets then ow column
// offsets, in elements); elements of `esize` bytes.
cudaError_t upsample_nearest(size_t esize, const void* x, const int64_t* offs, void* out, const PlaneArgs& p,
                             cudaStream_t s);

// Bilinear: offs = {row0[oh], row1[oh], col0[ow], col1[ow]} (element offsets), wts the matching
// weights {lh0[oh], lh1[oh], lw0[ow], lw1[ow]} in the compute type (f64 for f64, else f32):
// out = (r0[c0] lw0 + r0[c1] lw1) lh0 + (r1[c0] lw0 + r1[c1] lw1) lh1, unfused.
cudaError_t upsample_bilinear(Dt dt, const void* x, const int64_t* offs, const void* wts, void* out,
                              const PlaneArgs& p, cudaStream_t s);

// ---- gradients (conv_grad.cu, pool_grad.cu) ----

// Kernel gradients as a correlation: out[a, bl, ky, kx] (dense [groups * a_g, b_g, kh, kw]) =
// sum over (image, py, px) of A[img, a, py, px] * B[img, (a / a_g) * b_g + bl, py * s_h - pad_h +
// ky * d_h, px * s_w - pad_w + kx * d_w] (0 outside B). conv: A = grad_out, B = x; conv_transpose:
// A = x, B = grad_out. One block per output element, a fixed-order tree reduction.
struct CorrArgs {
  int64_t b = 0, groups = 1, a_g = 0, b_g = 0;
  int64_t ph = 0, pw = 0, bh = 0, bw = 0, kh = 0, kw = 0;
  int64_t pad_h = 0, pad_w = 0, s_h = 1, s_w = 1, d_h = 1, d_w = 1;
  int64_t asb = 0, asc = 0, ash = 0, asw = 0;
  int64_t bsb = 0, bsc = 0, bsh = 0, bsw = 0;
  bool wide = false;
};
cudaError_t conv_grad_kernel(Dt dt, const void* a, const void* b, void* out, const CorrArgs& c,
                             cudaStream_t s);

// out[ch] = the sum over images and positions of g (dense [b, c, r]); one block per channel.
cudaError_t conv_bias_grad(Dt dt, const void* g, void* out, int64_t b, int64_t c, int64_t r, cudaStream_t s);

// Pooling gradients, one thread per input element (p: the input planes and strides, oh/ow the
// pooled size; g dense [b, c, oh, ow]; out dense [b, c, h, w]), adding the windows that cover
// it in row-major order. max: a window's gradient goes to its first maximum (strict >, the
// last NaN), found as the forward does; x read through p's strides.
cudaError_t max_pool2d_grad(Dt dt, const void* x, const void* g, void* out, const PlaneArgs& p, int64_t kh,
                            int64_t kw, int64_t s_h, int64_t s_w, cudaStream_t s);
cudaError_t avg_pool2d_grad(Dt dt, const void* g, void* out, const PlaneArgs& p, int64_t kh, int64_t kw,
                            int64_t s_h, int64_t s_w, cudaStream_t s);
// Nearest gradients: ranges = {y0[h], y1[h], x0[w], x1[w]}, the output rows / columns [y0, y1) x
// [x0, x1) that read input (y, x); g dense [b, c, oh, ow]; out dense [b, c, h, w].
cudaError_t upsample_nearest_grad(Dt dt, const void* g, const int64_t* ranges, void* out, const PlaneArgs& p,
                                  cudaStream_t s);

// Bilinear gradients, one thread per input element, in the CPU's order of additions: tab holds
// CSR lists {row_start[h + 1], row_entries, col_start[w + 1], col_entries} (starting at
// tab[0], tab[rows_at], tab[cols_at], tab[cols_at + w + 1]), an entry (o << 1 | which) naming an
// output row / column and which of its two taps reaches the element; wts as upsample_bilinear's.
cudaError_t upsample_bilinear_grad(Dt dt, const void* g, const int64_t* tab, int64_t cols_at, const void* wts,
                                   void* out, const PlaneArgs& p, cudaStream_t s);

}  // namespace candle::cuda_k
