// Internal pieces of the CPU convolutions (src/cpu/conv*.cpp), shared by the im2col + GEMM
// path and the Winograd path.
#pragma once

#include <cstddef>
#include <optional>

#include "candle/backend/cpu_storage.h"

namespace candle::cpu {

// One 2-D convolution with per-axis padding/stride/dilation (conv1d is the h = 1 case).
struct ConvGeom {
  size_t b, c_in, ih, iw, c_out, kh, kw;
  size_t pad_h, pad_w, s_h, s_w, d_h, d_w, groups;
  size_t oh, ow;
  size_t cin_g() const { return c_in / groups; }
  size_t cout_g() const { return c_out / groups; }
  size_t kdim() const { return cin_g() * kh * kw; }
};

// out = act(conv + bias) for f32 with the Winograd F(4x4, 3x3) algorithm. Only for 3x3 and
// 5x5 (as four 3x3 sub-kernels), stride 1, dilation 1, groups 1 convolutions; returns false (doing nothing)
// when it does not apply or would not win for this shape. in/ker/out contiguous; bias may be null.
bool conv2d_winograd_f32(const ConvGeom& g, const float* in, const float* ker, const float* bias,
                         std::optional<UnaryOp> act, float* out);

// Applies bias[co] + act to n values of output channel co, in place.
void conv_epilogue_f32(float* x, size_t n, float bias, bool has_bias, std::optional<UnaryOp> act);
void conv_epilogue_f64(double* x, size_t n, double bias, bool has_bias, std::optional<UnaryOp> act);

}  // namespace candle::cpu
