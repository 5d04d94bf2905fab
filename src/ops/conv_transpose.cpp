// conv_transpose1d / conv_transpose2d: shape and parameter checks, then one backend call.
//
// Kernel layouts are candle's (and PyTorch's): [c_in, c_out / groups, k] and
// [c_in, c_out, k_h, k_w]; the output has c_out = kernel.dim(1) * groups channels.
#include <cstdint>
#include <string>

#include "candle/backend/cpu_storage.h"
#include "candle/tensor.h"
#include "core/backprop_op.h"
#include "ops/conv_backward.h"
#include "ops/conv_grad.h"
#include "ops/op_util.h"

namespace candle {
namespace {

std::string shapes_of(const Tensor& input, const Tensor& kernel) {
  return "input: " + input.shape().to_string() + ", kernel: " + kernel.shape().to_string();
}

[[noreturn]] void conv_error(ErrorKind kind, const char* op, const std::string& what, const Tensor& input,
                             const Tensor& kernel) {
  throw Error(kind, std::string(op) + ": " + what + ", " + shapes_of(input, kernel));
}

// The output length along one axis, checked as PyTorch does (in signed arithmetic: the
// formula goes negative for a large padding).
size_t transposed_len(const char* op, const char* axis, size_t in, size_t k, size_t padding,
                      size_t output_padding, size_t stride, size_t dilation, const Tensor& input,
                      const Tensor& kernel) {
  if (in == 0 || k == 0) {
    conv_error(ErrorKind::ShapeMismatch, op, std::string("empty ") + axis + " extent", input, kernel);
  }
  if (stride == 0) conv_error(ErrorKind::InvalidArgument, op, "stride must be positive", input, kernel);
  if (dilation == 0) conv_error(ErrorKind::InvalidArgument, op, "dilation must be positive", input, kernel);
  if (output_padding >= stride && output_padding >= dilation) {
    conv_error(ErrorKind::InvalidArgument, op,
               "output_padding (" + std::to_string(output_padding) + ") must be smaller than stride (" +
                   std::to_string(stride) + ") or dilation (" + std::to_string(dilation) + ")",
               input, kernel);
  }
  const __int128 len = (static_cast<__int128>(in) - 1) * stride - 2 * static_cast<__int128>(padding) +
                       static_cast<__int128>(dilation) * (k - 1) + output_padding + 1;
  if (len <= 0 || len > static_cast<__int128>(INT64_MAX)) {
    conv_error(ErrorKind::ShapeMismatch, op,
               std::string("output ") + axis + " size " + std::to_string(static_cast<long long>(len)) +
                   " is not positive (padding " + std::to_string(padding) + ")",
               input, kernel);
  }
  return static_cast<size_t>(len);
}

void check_operands(const Tensor& input, const Tensor& kernel, size_t rank, const char* op) {
  ops::check_same_device(input, kernel, op);
  ops::check_same_dtype(input, kernel, op);
  ops::check_float(input, op);
  if (input.rank() != rank || kernel.rank() != rank) {
    conv_error(ErrorKind::ShapeMismatch, op, "expected rank-" + std::to_string(rank) + " input and kernel",
               input, kernel);
  }
  if (input.dims()[1] != kernel.dims()[0]) {
    conv_error(ErrorKind::ShapeMismatch, op,
               "in_channel mismatch between input (" + std::to_string(input.dims()[1]) + ") and kernel (" +
                   std::to_string(kernel.dims()[0]) + ")",
               input, kernel);
  }
}

}  // namespace

Tensor Tensor::conv_transpose1d(const Tensor& kernel, size_t padding, size_t output_padding, size_t stride,
                                size_t dilation, size_t groups) const {
  const char* op = "conv_transpose1d";
  check_operands(*this, kernel, 3, op);
  const size_t b = dims()[0], c_in = dims()[1], l_in = dims()[2];
  const size_t k = kernel.dims()[2];
  if (groups == 0 || c_in % groups != 0) {
    conv_error(ErrorKind::ShapeMismatch, op,
               "groups (" + std::to_string(groups) + ") must divide the input channels (" +
                   std::to_string(c_in) + ")",
               *this, kernel);
  }
  const size_t l_out =
      transposed_len(op, "length", l_in, k, padding, output_padding, stride, dilation, *this, kernel);
  const ParamsConv1D p = ops::grad::make_conv_transpose1d_params(*this, kernel, padding, output_padding,
                                                                 stride, dilation, groups);
  const Shape out_shape{b, p.c_out, l_out};
  Tensor y =
      out_shape.elem_count() == 0
          ? Tensor::zeros(out_shape, dtype(), device())
          : ops::make_result(storage()->conv_transpose1d(layout(), *kernel.storage(), kernel.layout(), p),
                             out_shape, dtype(), device());
  return autograd::record(
      std::move(y), op,
      CANDLE_BACKWARD(p) {
        const Tensor& x = in[0];
        const Tensor& w = in[1];
        if (g.elem_count() == 0) return;
        if (x.track_op()) gi[0] = ops::grad::conv_transpose1d_grad_input(g, w, p);
        if (w.track_op()) gi[1] = ops::grad::conv_transpose1d_grad_kernel(x, g, p);
      },
      *this, kernel);
}

Tensor Tensor::conv_transpose2d(const Tensor& kernel, size_t padding, size_t output_padding, size_t stride,
                                size_t dilation) const {
  const char* op = "conv_transpose2d";
  check_operands(*this, kernel, 4, op);
  const size_t b = dims()[0], i_h = dims()[2], i_w = dims()[3];
  const size_t c_out = kernel.dims()[1], k_h = kernel.dims()[2], k_w = kernel.dims()[3];
  const size_t o_h =
      transposed_len(op, "height", i_h, k_h, padding, output_padding, stride, dilation, *this, kernel);
  const size_t o_w =
      transposed_len(op, "width", i_w, k_w, padding, output_padding, stride, dilation, *this, kernel);
  const ParamsConv2D p =
      ops::grad::make_conv_transpose2d_params(*this, kernel, padding, output_padding, stride, dilation);
  const Shape out_shape{b, c_out, o_h, o_w};
  Tensor y =
      out_shape.elem_count() == 0
          ? Tensor::zeros(out_shape, dtype(), device())
          : ops::make_result(storage()->conv_transpose2d(layout(), *kernel.storage(), kernel.layout(), p),
                             out_shape, dtype(), device());
  return autograd::record(
      std::move(y), op,
      CANDLE_BACKWARD(p) {
        const Tensor& x = in[0];
        const Tensor& w = in[1];
        if (g.elem_count() == 0) return;
        if (x.track_op()) gi[0] = ops::grad::conv_transpose2d_grad_input(g, w, p);
        if (w.track_op()) gi[1] = ops::grad::conv_transpose2d_grad_kernel(x, g, p);
      },
      *this, kernel);
}

}  // namespace candle
