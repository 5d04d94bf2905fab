// Backward passes of the conv / pool / resize family (see conv_backward.h): thin adapters from
// the autograd nodes' saved operands to the dedicated gradient ops of ops/conv_grad.h, whose
// CPU kernels are partitioned by output element (bit-identical for any thread count).
#include "ops/conv_backward.h"

#include "candle/backend/cpu_storage.h"
#include "ops/conv_grad.h"

namespace candle::autograd {
namespace {

// The output padding of a transposed convolution, recovered from its output length.
size_t transpose_output_padding(size_t in, size_t out, size_t k, size_t padding, size_t stride,
                                size_t dilation) {
  const size_t base = (in - 1) * stride + dilation * (k - 1) + 1 - 2 * padding;
  return out - base;
}

}  // namespace

// ---- convolutions ------------------------------------------------------------------------------

Tensor conv1d_grad_input(const Tensor& g, const Tensor& x, const Tensor& w, size_t padding, size_t stride,
                         size_t dilation, size_t groups) {
  return ops::grad::conv1d_grad_input(g, w,
                                      ops::grad::make_conv1d_params(x, w, padding, stride, dilation, groups));
}

Tensor conv1d_grad_kernel(const Tensor& g, const Tensor& x, const Tensor& w, size_t padding, size_t stride,
                          size_t dilation, size_t groups) {
  return ops::grad::conv1d_grad_kernel(
      x, g, ops::grad::make_conv1d_params(x, w, padding, stride, dilation, groups));
}

Tensor conv2d_grad_input(const Tensor& g, const Tensor& x, const Tensor& w, size_t padding, size_t stride,
                         size_t dilation, size_t groups) {
  return ops::grad::conv2d_grad_input(g, w,
                                      ops::grad::make_conv2d_params(x, w, padding, stride, dilation, groups));
}

Tensor conv2d_grad_kernel(const Tensor& g, const Tensor& x, const Tensor& w, size_t padding, size_t stride,
                          size_t dilation, size_t groups) {
  return ops::grad::conv2d_grad_kernel(
      x, g, ops::grad::make_conv2d_params(x, w, padding, stride, dilation, groups));
}

namespace {
ParamsConv1D convt1d_params(const Tensor& g, const Tensor& x, const Tensor& w, size_t padding, size_t stride,
                            size_t dilation, size_t groups) {
  const size_t op = transpose_output_padding(x.dim(2), g.dim(2), w.dim(2), padding, stride, dilation);
  return ops::grad::make_conv_transpose1d_params(x, w, padding, op, stride, dilation, groups);
}
ParamsConv2D convt2d_params(const Tensor& g, const Tensor& x, const Tensor& w, size_t padding, size_t stride,
                            size_t dilation) {
  // output_padding is one value for both dims (candle's conv_transpose2d)
  const size_t op = transpose_output_padding(x.dim(2), g.dim(2), w.dim(2), padding, stride, dilation);
  return ops::grad::make_conv_transpose2d_params(x, w, padding, op, stride, dilation);
}
}  // namespace

Tensor conv_transpose1d_grad_input(const Tensor& g, const Tensor& x, const Tensor& w, size_t padding,
                                   size_t stride, size_t dilation, size_t groups) {
  return ops::grad::conv_transpose1d_grad_input(g, w,
                                                convt1d_params(g, x, w, padding, stride, dilation, groups));
}

Tensor conv_transpose1d_grad_kernel(const Tensor& g, const Tensor& x, const Tensor& w, size_t padding,
                                    size_t stride, size_t dilation, size_t groups) {
  return ops::grad::conv_transpose1d_grad_kernel(x, g,
                                                 convt1d_params(g, x, w, padding, stride, dilation, groups));
}

Tensor conv_transpose2d_grad_input(const Tensor& g, const Tensor& x, const Tensor& w, size_t padding,
                                   size_t stride, size_t dilation) {
  return ops::grad::conv_transpose2d_grad_input(g, w, convt2d_params(g, x, w, padding, stride, dilation));
}

Tensor conv_transpose2d_grad_kernel(const Tensor& g, const Tensor& x, const Tensor& w, size_t padding,
                                    size_t stride, size_t dilation) {
  return ops::grad::conv_transpose2d_grad_kernel(x, g, convt2d_params(g, x, w, padding, stride, dilation));
}

// ---- pooling and resizing ----------------------------------------------------------------------

Tensor avg_pool2d_grad(const Tensor& g, const Tensor& x, std::array<size_t, 2> kernel,
                       std::array<size_t, 2> stride) {
  return ops::grad::avg_pool2d_grad(x.shape(), g, kernel, stride);
}

Tensor max_pool2d_grad(const Tensor& g, const Tensor& x, std::array<size_t, 2> kernel,
                       std::array<size_t, 2> stride) {
  return ops::grad::max_pool2d_grad(x, g, kernel, stride);
}

Tensor upsample_nearest1d_grad(const Tensor& g, const Tensor& x) {
  return ops::grad::upsample_nearest1d_grad(g, x.dim(2));
}

Tensor upsample_nearest2d_grad(const Tensor& g, const Tensor& x) {
  return ops::grad::upsample_nearest2d_grad(g, x.dim(2), x.dim(3));
}

Tensor upsample_bilinear2d_grad(const Tensor& g, const Tensor& x, bool align_corners,
                                std::optional<double> scale_h, std::optional<double> scale_w) {
  return ops::grad::upsample_bilinear2d_grad(g, x.dim(2), x.dim(3), align_corners, scale_h, scale_w);
}

}  // namespace candle::autograd
