// Gradients of the convolution family, for the autograd engine (internal: src/ and the tests).
//
// Each function checks its operands (ranks, dtypes, devices, shapes against the parameters)
// and throws a candle::Error naming the op on bad input, then makes one backend call
// (BackendStorage::*_grad*; CPU kernels in src/cpu/conv_grad*.cpp). Inputs may be any
// strided views; results are new contiguous tensors of the operands' dtype. Every float dtype
// is supported (f16/bf16/f8e4m3 are computed in f32 and rounded once).
//
// The Params* structs are those of the forward call (include/candle/backend.h): for conv,
// c_in = x.dim(1), c_out = kernel.dim(0); for conv_transpose, c_in = x.dim(1) and
// c_out = kernel.dim(1) * groups, with output_padding. The make_*_params helpers build them
// from the forward's operands and arguments.
#pragma once

#include <array>
#include <optional>

#include "candle/backend/cpu_storage.h"
#include "candle/tensor.h"

namespace candle::ops::grad {

// The parameters of x.conv1d(kernel, padding, stride, dilation, groups) and friends.
ParamsConv1D make_conv1d_params(const Tensor& x, const Tensor& kernel, size_t padding, size_t stride,
                                size_t dilation, size_t groups);
ParamsConv2D make_conv2d_params(const Tensor& x, const Tensor& kernel, size_t padding, size_t stride,
                                size_t dilation, size_t groups);
ParamsConv1D make_conv_transpose1d_params(const Tensor& x, const Tensor& kernel, size_t padding,
                                          size_t output_padding, size_t stride, size_t dilation,
                                          size_t groups);
ParamsConv2D make_conv_transpose2d_params(const Tensor& x, const Tensor& kernel, size_t padding,
                                          size_t output_padding, size_t stride, size_t dilation);

// conv2d: x [b, c_in, h, w], grad_out [b, c_out, oh, ow] -> [c_out, c_in / groups, k_h, k_w].
Tensor conv2d_grad_kernel(const Tensor& x, const Tensor& grad_out, const ParamsConv2D& p);
// conv2d: grad_out [b, c_out, oh, ow], kernel [c_out, c_in / groups, k_h, k_w] -> [b, c_in, h, w]
// (input rows/cols that no output read get 0).
Tensor conv2d_grad_input(const Tensor& grad_out, const Tensor& kernel, const ParamsConv2D& p);
// conv1d: x [b, c_in, l], grad_out [b, c_out, l_out] -> [c_out, c_in / groups, k].
Tensor conv1d_grad_kernel(const Tensor& x, const Tensor& grad_out, const ParamsConv1D& p);
// conv1d: grad_out [b, c_out, l_out], kernel [c_out, c_in / groups, k] -> [b, c_in, l].
Tensor conv1d_grad_input(const Tensor& grad_out, const Tensor& kernel, const ParamsConv1D& p);

// conv_transpose2d: x [b, c_in, h, w], grad_out [b, c_out, oh, ow] -> [c_in, c_out, k_h, k_w].
Tensor conv_transpose2d_grad_kernel(const Tensor& x, const Tensor& grad_out, const ParamsConv2D& p);
// conv_transpose2d: grad_out [b, c_out, oh, ow], kernel [c_in, c_out, k_h, k_w] -> [b, c_in, h, w].
Tensor conv_transpose2d_grad_input(const Tensor& grad_out, const Tensor& kernel, const ParamsConv2D& p);
// conv_transpose1d: x [b, c_in, l], grad_out [b, c_out, l_out] -> [c_in, c_out / groups, k].
Tensor conv_transpose1d_grad_kernel(const Tensor& x, const Tensor& grad_out, const ParamsConv1D& p);
// conv_transpose1d: grad_out [b, c_out, l_out], kernel [c_in, c_out / groups, k] -> [b, c_in, l].
Tensor conv_transpose1d_grad_input(const Tensor& grad_out, const Tensor& kernel, const ParamsConv1D& p);

// The bias gradient of a conv: grad_out [b, c, ...] (rank >= 2) summed over every dim but 1 -> [c].
Tensor conv_bias_grad(const Tensor& grad_out);

// max_pool2d_with_stride(kernel, stride) of x [b, c, h, w]: grad_out [b, c, oh, ow] -> x's shape.
// Each output's gradient goes to the first maximal position of its window (row-major); a NaN
// counts as the maximum (the last NaN of a window, as PyTorch's CPU kernel); overlaps add.
Tensor max_pool2d_grad(const Tensor& x, const Tensor& grad_out, std::array<size_t, 2> kernel,
                       std::array<size_t, 2> stride);
// avg_pool2d_with_stride(kernel, stride) of an input of shape x_shape [b, c, h, w].
Tensor avg_pool2d_grad(const Shape& x_shape, const Tensor& grad_out, std::array<size_t, 2> kernel,
                       std::array<size_t, 2> stride);

// upsample_nearest1d of an input [b, c, in_l]: grad_out [b, c, out_l] -> [b, c, in_l].
Tensor upsample_nearest1d_grad(const Tensor& grad_out, size_t in_l);
// upsample_nearest2d of an input [b, c, in_h, in_w]: grad_out [b, c, out_h, out_w] -> [b, c, in_h, in_w].
Tensor upsample_nearest2d_grad(const Tensor& grad_out, size_t in_h, size_t in_w);
// upsample_bilinear2d (scale_h/scale_w unset) or upsample_bilinear2d_with_scale (set: the
// forward's scale factors) of an input [b, c, in_h, in_w].
Tensor upsample_bilinear2d_grad(const Tensor& grad_out, size_t in_h, size_t in_w, bool align_corners,
                                std::optional<double> scale_h = std::nullopt,
                                std::optional<double> scale_w = std::nullopt);

}  // namespace candle::ops::grad
