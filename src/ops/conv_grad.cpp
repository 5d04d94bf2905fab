// Gradients of the convolution family (see conv_grad.h): operand checks, then one backend call.
#include "ops/conv_grad.h"

#include <cmath>
#include <string>

#include "ops/op_util.h"

namespace candle::ops::grad {
namespace {

[[noreturn]] void fail(ErrorKind kind, const char* op, const std::string& what) {
  throw Error(kind, std::string(op) + ": " + what);
}

std::string num(size_t v) { return std::to_string(v); }

void check_pair(const Tensor& a, const Tensor& b, size_t rank, const char* op, const char* an,
                const char* bn) {
  check_same_device(a, b, op);
  check_same_dtype(a, b, op);
  check_float(a, op);
  if (a.rank() != rank || b.rank() != rank) {
    fail(ErrorKind::ShapeMismatch, op,
         std::string("expected rank-") + num(rank) + " " + an + " and " + bn + ", got " +
             a.shape().to_string() + " and " + b.shape().to_string());
  }
}

void check_shape(const Tensor& t, const Shape& want, const char* op, const char* what) {
  if (t.shape() != want) {
    fail(ErrorKind::ShapeMismatch, op,
         std::string(what) + " has shape " + t.shape().to_string() + ", expected " + want.to_string() +
             " from the conv parameters");
  }
}

void check_common(size_t stride, size_t dilation, size_t groups, size_t c_in, size_t c_out, const char* op) {
  if (stride == 0) fail(ErrorKind::InvalidArgument, op, "stride must be positive");
  if (dilation == 0) fail(ErrorKind::InvalidArgument, op, "dilation must be positive");
  if (groups == 0) fail(ErrorKind::InvalidArgument, op, "groups must be positive");
  if (c_in % groups != 0 || c_out % groups != 0) {
    fail(ErrorKind::ShapeMismatch, op,
         "groups " + num(groups) + " must divide the channels (c_in " + num(c_in) + ", c_out " + num(c_out) +
             ")");
  }
}

// One spatial axis of a conv: the kernel fits in the padded input.
void check_conv_axis(size_t in, size_t k, size_t padding, size_t dilation, const char* op, const char* axis) {
  if (k == 0) fail(ErrorKind::ShapeMismatch, op, std::string("kernel ") + axis + " is 0");
  if (in + 2 * padding < dilation * (k - 1) + 1) {
    fail(ErrorKind::ShapeMismatch, op,
         std::string("kernel ") + axis + " (dilated " + num(dilation * (k - 1) + 1) +
             ") larger than the padded input (" + num(in + 2 * padding) + ")");
  }
}

// One spatial axis of a conv_transpose: a positive output length.
void check_transpose_axis(size_t in, size_t k, size_t padding, size_t output_padding, size_t stride,
                          size_t dilation, const char* op, const char* axis) {
  if (in == 0 || k == 0) fail(ErrorKind::ShapeMismatch, op, std::string("empty ") + axis + " extent");
  if (output_padding >= stride && output_padding >= dilation) {
    fail(ErrorKind::InvalidArgument, op,
         "output_padding (" + num(output_padding) + ") must be smaller than stride (" + num(stride) +
             ") or dilation (" + num(dilation) + ")");
  }
  const __int128 len = (static_cast<__int128>(in) - 1) * stride - 2 * static_cast<__int128>(padding) +
                       static_cast<__int128>(dilation) * (k - 1) + output_padding + 1;
  if (len <= 0) fail(ErrorKind::ShapeMismatch, op, std::string("output ") + axis + " size is not positive");
}

void check_p2(const ParamsConv2D& p, const char* op) {
  check_common(p.stride, p.dilation, p.groups, p.c_in, p.c_out, op);
  check_conv_axis(p.i_h, p.k_h, p.padding, p.dilation, op, "height");
  check_conv_axis(p.i_w, p.k_w, p.padding, p.dilation, op, "width");
}
void check_p1(const ParamsConv1D& p, const char* op) {
  check_common(p.stride, p.dilation, p.groups, p.c_in, p.c_out, op);
  check_conv_axis(p.l_in, p.k_size, p.padding, p.dilation, op, "length");
}
void check_pt2(const ParamsConv2D& p, const char* op) {
  check_common(p.stride, p.dilation, p.groups, p.c_in, p.c_out, op);
  check_transpose_axis(p.i_h, p.k_h, p.padding, p.output_padding, p.stride, p.dilation, op, "height");
  check_transpose_axis(p.i_w, p.k_w, p.padding, p.output_padding, p.stride, p.dilation, op, "width");
}
void check_pt1(const ParamsConv1D& p, const char* op) {
  check_common(p.stride, p.dilation, p.groups, p.c_in, p.c_out, op);
  check_transpose_axis(p.l_in, p.k_size, p.padding, p.output_padding, p.stride, p.dilation, op, "length");
}

Tensor result(StoragePtr s, const Shape& shape, const Tensor& like) {
  return make_result(std::move(s), shape, like.dtype(), like.device());
}

}  // namespace

ParamsConv1D make_conv1d_params(const Tensor& x, const Tensor& kernel, size_t padding, size_t stride,
                                size_t dilation, size_t groups) {
  auto [b, c_in, l] = x.shape().dims3("conv1d");
  auto [c_out, cig, k] = kernel.shape().dims3("conv1d");
  (void)cig;
  return ParamsConv1D{b, l, c_out, c_in, k, padding, 0, stride, dilation, groups};
}

ParamsConv2D make_conv2d_params(const Tensor& x, const Tensor& kernel, size_t padding, size_t stride,
                                size_t dilation, size_t groups) {
  auto [b, c_in, h, w] = x.shape().dims4("conv2d");
  auto [c_out, cig, kh, kw] = kernel.shape().dims4("conv2d");
  (void)cig;
  return ParamsConv2D{b, h, w, kh, kw, c_out, c_in, padding, 0, stride, dilation, groups};
}

ParamsConv1D make_conv_transpose1d_params(const Tensor& x, const Tensor& kernel, size_t padding,
                                          size_t output_padding, size_t stride, size_t dilation,
                                          size_t groups) {
  auto [b, c_in, l] = x.shape().dims3("conv_transpose1d");
  auto [kc, cog, k] = kernel.shape().dims3("conv_transpose1d");
  (void)kc;
  return ParamsConv1D{b, l, cog * groups, c_in, k, padding, output_padding, stride, dilation, groups};
}

ParamsConv2D make_conv_transpose2d_params(const Tensor& x, const Tensor& kernel, size_t padding,
                                          size_t output_padding, size_t stride, size_t dilation) {
  auto [b, c_in, h, w] = x.shape().dims4("conv_transpose2d");
  auto [kc, c_out, kh, kw] = kernel.shape().dims4("conv_transpose2d");
  (void)kc;
  return ParamsConv2D{b, h, w, kh, kw, c_out, c_in, padding, output_padding, stride, dilation, 1};
}

// ---- conv ------------------------------------------------------------------------------------

Tensor conv2d_grad_kernel(const Tensor& x, const Tensor& grad_out, const ParamsConv2D& p) {
  const char* op = "conv2d_grad_kernel";
  check_pair(x, grad_out, 4, op, "input", "grad_out");
  check_p2(p, op);
  check_shape(x, Shape{p.b_size, p.c_in, p.i_h, p.i_w}, op, "input");
  check_shape(grad_out, Shape{p.b_size, p.c_out, p.out_h(), p.out_w()}, op, "grad_out");
  return result(x.storage()->conv2d_grad_kernel(x.layout(), *grad_out.storage(), grad_out.layout(), p),
                Shape{p.c_out, p.c_in / p.groups, p.k_h, p.k_w}, x);
}

Tensor conv2d_grad_input(const Tensor& grad_out, const Tensor& kernel, const ParamsConv2D& p) {
  const char* op = "conv2d_grad_input";
  check_pair(grad_out, kernel, 4, op, "grad_out", "kernel");
  check_p2(p, op);
  check_shape(kernel, Shape{p.c_out, p.c_in / p.groups, p.k_h, p.k_w}, op, "kernel");
  check_shape(grad_out, Shape{p.b_size, p.c_out, p.out_h(), p.out_w()}, op, "grad_out");
  return result(
      grad_out.storage()->conv2d_grad_input(grad_out.layout(), *kernel.storage(), kernel.layout(), p),
      Shape{p.b_size, p.c_in, p.i_h, p.i_w}, grad_out);
}

Tensor conv1d_grad_kernel(const Tensor& x, const Tensor& grad_out, const ParamsConv1D& p) {
  const char* op = "conv1d_grad_kernel";
  check_pair(x, grad_out, 3, op, "input", "grad_out");
  check_p1(p, op);
  check_shape(x, Shape{p.b_size, p.c_in, p.l_in}, op, "input");
  check_shape(grad_out, Shape{p.b_size, p.c_out, p.l_out()}, op, "grad_out");
  return result(x.storage()->conv1d_grad_kernel(x.layout(), *grad_out.storage(), grad_out.layout(), p),
                Shape{p.c_out, p.c_in / p.groups, p.k_size}, x);
}

Tensor conv1d_grad_input(const Tensor& grad_out, const Tensor& kernel, const ParamsConv1D& p) {
  const char* op = "conv1d_grad_input";
  check_pair(grad_out, kernel, 3, op, "grad_out", "kernel");
  check_p1(p, op);
  check_shape(kernel, Shape{p.c_out, p.c_in / p.groups, p.k_size}, op, "kernel");
  check_shape(grad_out, Shape{p.b_size, p.c_out, p.l_out()}, op, "grad_out");
  return result(
      grad_out.storage()->conv1d_grad_input(grad_out.layout(), *kernel.storage(), kernel.layout(), p),
      Shape{p.b_size, p.c_in, p.l_in}, grad_out);
}

// ---- conv_transpose --------------------------------------------------------------------------

Tensor conv_transpose2d_grad_kernel(const Tensor& x, const Tensor& grad_out, const ParamsConv2D& p) {
  const char* op = "conv_transpose2d_grad_kernel";
  check_pair(x, grad_out, 4, op, "input", "grad_out");
  check_pt2(p, op);
  check_shape(x, Shape{p.b_size, p.c_in, p.i_h, p.i_w}, op, "input");
  check_shape(grad_out, Shape{p.b_size, p.c_out, p.out_h_transpose(), p.out_w_transpose()}, op, "grad_out");
  return result(
      x.storage()->conv_transpose2d_grad_kernel(x.layout(), *grad_out.storage(), grad_out.layout(), p),
      Shape{p.c_in, p.c_out / p.groups, p.k_h, p.k_w}, x);
}

Tensor conv_transpose2d_grad_input(const Tensor& grad_out, const Tensor& kernel, const ParamsConv2D& p) {
  const char* op = "conv_transpose2d_grad_input";
  check_pair(grad_out, kernel, 4, op, "grad_out", "kernel");
  check_pt2(p, op);
  check_shape(kernel, Shape{p.c_in, p.c_out / p.groups, p.k_h, p.k_w}, op, "kernel");
  check_shape(grad_out, Shape{p.b_size, p.c_out, p.out_h_transpose(), p.out_w_transpose()}, op, "grad_out");
  return result(grad_out.storage()->conv_transpose2d_grad_input(grad_out.layout(), *kernel.storage(),
                                                                kernel.layout(), p),
                Shape{p.b_size, p.c_in, p.i_h, p.i_w}, grad_out);
}

Tensor conv_transpose1d_grad_kernel(const Tensor& x, const Tensor& grad_out, const ParamsConv1D& p) {
  const char* op = "conv_transpose1d_grad_kernel";
  check_pair(x, grad_out, 3, op, "input", "grad_out");
  check_pt1(p, op);
  check_shape(x, Shape{p.b_size, p.c_in, p.l_in}, op, "input");
  check_shape(grad_out, Shape{p.b_size, p.c_out, p.l_out_transpose()}, op, "grad_out");
  return result(
      x.storage()->conv_transpose1d_grad_kernel(x.layout(), *grad_out.storage(), grad_out.layout(), p),
      Shape{p.c_in, p.c_out / p.groups, p.k_size}, x);
}

Tensor conv_transpose1d_grad_input(const Tensor& grad_out, const Tensor& kernel, const ParamsConv1D& p) {
  const char* op = "conv_transpose1d_grad_input";
  check_pair(grad_out, kernel, 3, op, "grad_out", "kernel");
  check_pt1(p, op);
  check_shape(kernel, Shape{p.c_in, p.c_out / p.groups, p.k_size}, op, "kernel");
  check_shape(grad_out, Shape{p.b_size, p.c_out, p.l_out_transpose()}, op, "grad_out");
  return result(grad_out.storage()->conv_transpose1d_grad_input(grad_out.layout(), *kernel.storage(),
                                                                kernel.layout(), p),
                Shape{p.b_size, p.c_in, p.l_in}, grad_out);
}

Tensor conv_bias_grad(const Tensor& grad_out) {
  const char* op = "conv_bias_grad";
  check_float(grad_out, op);
  if (grad_out.rank() < 2) {
    fail(ErrorKind::ShapeMismatch, op, "grad_out must have rank >= 2, got " + grad_out.shape().to_string());
  }
  return result(grad_out.storage()->conv_bias_grad(grad_out.layout()), Shape{grad_out.dim(1)}, grad_out);
}

// ---- pooling and resizing --------------------------------------------------------------------

namespace {
Shape pooled(const Shape& x, std::array<size_t, 2> k, std::array<size_t, 2> s, const char* op) {
  auto [b, c, h, w] = x.dims4(op);
  if (k[0] == 0 || k[1] == 0 || s[0] == 0 || s[1] == 0) {
    fail(ErrorKind::InvalidArgument, op, "kernel and stride must be positive, input shape " + x.to_string());
  }
  if (h < k[0] || w < k[1]) {
    fail(ErrorKind::InvalidArgument, op,
         "kernel (" + num(k[0]) + ", " + num(k[1]) + ") is larger than the input " + x.to_string());
  }
  return Shape{b, c, (h - k[0]) / s[0] + 1, (w - k[1]) / s[1] + 1};
}
}  // namespace

Tensor max_pool2d_grad(const Tensor& x, const Tensor& grad_out, std::array<size_t, 2> kernel,
                       std::array<size_t, 2> stride) {
  const char* op = "max_pool2d_grad";
  check_pair(x, grad_out, 4, op, "input", "grad_out");
  check_shape(grad_out, pooled(x.shape(), kernel, stride, op), op, "grad_out");
  return result(
      x.storage()->max_pool2d_grad(x.layout(), *grad_out.storage(), grad_out.layout(), kernel, stride),
      x.shape(), x);
}

Tensor avg_pool2d_grad(const Shape& x_shape, const Tensor& grad_out, std::array<size_t, 2> kernel,
                       std::array<size_t, 2> stride) {
  const char* op = "avg_pool2d_grad";
  check_float(grad_out, op);
  check_shape(grad_out, pooled(x_shape, kernel, stride, op), op, "grad_out");
  return result(
      grad_out.storage()->avg_pool2d_grad(grad_out.layout(), x_shape[2], x_shape[3], kernel, stride), x_shape,
      grad_out);
}

namespace {
void check_resize_in(const Tensor& g, size_t first, const std::vector<size_t>& in, const char* op) {
  check_float(g, op);
  if (g.rank() != first + in.size()) {
    fail(ErrorKind::ShapeMismatch, op,
         "grad_out must have rank " + num(first + in.size()) + ", got " + g.shape().to_string());
  }
  for (size_t v : in) {
    if (v == 0 && g.elem_count() != 0) {
      fail(ErrorKind::InvalidArgument, op,
           "an empty input cannot give the non-empty output " + g.shape().to_string());
    }
  }
}
}  // namespace

Tensor upsample_nearest1d_grad(const Tensor& grad_out, size_t in_l) {
  const char* op = "upsample_nearest1d_grad";
  check_resize_in(grad_out, 2, {in_l}, op);
  return result(grad_out.storage()->upsample_nearest1d_grad(grad_out.layout(), in_l),
                Shape{grad_out.dim(0), grad_out.dim(1), in_l}, grad_out);
}

Tensor upsample_nearest2d_grad(const Tensor& grad_out, size_t in_h, size_t in_w) {
  const char* op = "upsample_nearest2d_grad";
  check_resize_in(grad_out, 2, {in_h, in_w}, op);
  return result(grad_out.storage()->upsample_nearest2d_grad(grad_out.layout(), in_h, in_w),
                Shape{grad_out.dim(0), grad_out.dim(1), in_h, in_w}, grad_out);
}

Tensor upsample_bilinear2d_grad(const Tensor& grad_out, size_t in_h, size_t in_w, bool align_corners,
                                std::optional<double> scale_h, std::optional<double> scale_w) {
  const char* op = "upsample_bilinear2d_grad";
  check_resize_in(grad_out, 2, {in_h, in_w}, op);
  for (auto s : {scale_h, scale_w}) {
    if (s && (!std::isfinite(*s) || *s <= 0.0)) {
      fail(ErrorKind::InvalidArgument, op,
           "scale factors must be finite and positive, got " + std::to_string(*s));
    }
  }
  return result(grad_out.storage()->upsample_bilinear2d_grad(grad_out.layout(), in_h, in_w, align_corners,
                                                             scale_h, scale_w),
                Shape{grad_out.dim(0), grad_out.dim(1), in_h, in_w}, grad_out);
}

}  // namespace candle::ops::grad
