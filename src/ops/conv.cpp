// conv1d, conv2d and conv2d_fused: argument checks and output shapes, then one backend call.
// (conv_transpose1d/2d live in conv_transpose.cpp.)
#include <atomic>
#include <cstdlib>
#include <optional>
#include <string>

#include "candle/tensor.h"
#include "candle/utils.h"
#include "core/backprop_op.h"
#include "ops/conv_backward.h"
#include "ops/conv_grad.h"
#include "ops/op_util.h"

namespace candle {
namespace {

constexpr size_t kDefaultConvScratch = size_t{256} << 20;

size_t default_conv_scratch() {
  if (const char* env = std::getenv("CANDLE_CONV_SCRATCH_MB")) {
    char* end = nullptr;
    const unsigned long long mb = std::strtoull(env, &end, 10);
    if (end != env && *end == '\0' && mb > 0) return static_cast<size_t>(mb) << 20;
  }
  return kDefaultConvScratch;
}

std::atomic<size_t>& conv_scratch_setting() {
  static std::atomic<size_t> v{default_conv_scratch()};
  return v;
}

[[noreturn]] void conv_error(ErrorKind kind, const char* op, const std::string& what, const Tensor& x,
                             const Tensor& k) {
  throw Error(kind, std::string(op) + ": " + what + ", input: " + x.shape().to_string() +
                        ", kernel: " + k.shape().to_string());
}

// Shared checks; `spatial` is 1 or 2. Returns nothing: throws a candle::Error on bad input.
void check_conv(const Tensor& x, const Tensor& k, size_t spatial, size_t padding, size_t stride,
                size_t dilation, size_t groups, const char* op) {
  const size_t rank = spatial + 2;
  if (x.rank() != rank) {
    conv_error(ErrorKind::ShapeMismatch, op, "input must have rank " + std::to_string(rank), x, k);
  }
  if (k.rank() != rank) {
    conv_error(ErrorKind::ShapeMismatch, op, "kernel must have rank " + std::to_string(rank), x, k);
  }
  ops::check_same_device(x, k, op);
  ops::check_same_dtype(x, k, op);
  ops::check_float(x, op);
  if (stride == 0) conv_error(ErrorKind::InvalidArgument, op, "stride must be positive", x, k);
  if (dilation == 0) conv_error(ErrorKind::InvalidArgument, op, "dilation must be positive", x, k);
  if (groups == 0) conv_error(ErrorKind::InvalidArgument, op, "groups must be positive", x, k);
  const size_t c_in = x.dim(1), c_out = k.dim(0), c_in_k = k.dim(1);
  if (c_in % groups != 0) {
    conv_error(
        ErrorKind::ShapeMismatch, op,
        "groups " + std::to_string(groups) + " do not divide the input channels " + std::to_string(c_in), x,
        k);
  }
  if (c_out % groups != 0) {
    conv_error(
        ErrorKind::ShapeMismatch, op,
        "groups " + std::to_string(groups) + " do not divide the output channels " + std::to_string(c_out), x,
        k);
  }
  if (c_in_k * groups != c_in) {
    conv_error(ErrorKind::ShapeMismatch, op,
               "in_channel mismatch between input (" + std::to_string(c_in) + ", groups " +
                   std::to_string(groups) + ") and kernel (" + std::to_string(c_in_k) + ")",
               x, k);
  }
  for (size_t d = 0; d < spatial; ++d) {
    const size_t in = x.dim(2 + d), ks = k.dim(2 + d);
    if (ks == 0) conv_error(ErrorKind::ShapeMismatch, op, "kernel has a zero-sized spatial dim", x, k);
    const size_t span = dilation * (ks - 1) + 1;
    if (in + 2 * padding < span) {
      conv_error(ErrorKind::ShapeMismatch, op,
                 "kernel (dilated size " + std::to_string(span) + ") larger than the padded input (" +
                     std::to_string(in + 2 * padding) + ")",
                 x, k);
    }
  }
}

// The Tensor method of a unary op (for conv2d_fused's unfused chain).
Tensor apply_unary(const Tensor& t, UnaryOp op) {
  switch (op) {
    case UnaryOp::Neg: return t.neg();
    case UnaryOp::Recip: return t.recip();
    case UnaryOp::Exp: return t.exp();
    case UnaryOp::Log: return t.log();
    case UnaryOp::Sin: return t.sin();
    case UnaryOp::Cos: return t.cos();
    case UnaryOp::Tanh: return t.tanh();
    case UnaryOp::Abs: return t.abs();
    case UnaryOp::Sqr: return t.sqr();
    case UnaryOp::Sqrt: return t.sqrt();
    case UnaryOp::Gelu: return t.gelu();
    case UnaryOp::GeluErf: return t.gelu_erf();
    case UnaryOp::Erf: return t.erf();
    case UnaryOp::Relu: return t.relu();
    case UnaryOp::Silu: return t.silu();
    case UnaryOp::Sigmoid: return t.sigmoid();
    case UnaryOp::Ceil: return t.ceil();
    case UnaryOp::Floor: return t.floor();
    case UnaryOp::Round: return t.round();
    case UnaryOp::Sign: return t.sign();
  }
  throw Error(ErrorKind::InvalidArgument, "conv2d_fused: unknown activation");
}

}  // namespace

size_t conv_scratch_limit() { return conv_scratch_setting().load(std::memory_order_relaxed); }

// 0 restores the default (CANDLE_CONV_SCRATCH_MB, else 256 MiB).
void set_conv_scratch_limit(size_t bytes) {
  conv_scratch_setting().store(bytes == 0 ? default_conv_scratch() : bytes, std::memory_order_relaxed);
}

Tensor Tensor::conv1d(const Tensor& kernel, size_t padding, size_t stride, size_t dilation,
                      size_t groups) const {
  check_conv(*this, kernel, 1, padding, stride, dilation, groups, "conv1d");
  const ParamsConv1D p = ops::grad::make_conv1d_params(*this, kernel, padding, stride, dilation, groups);
  const Shape out{p.b_size, p.c_out, p.l_out()};
  return autograd::record(
      ops::make_result(storage()->conv1d(layout(), *kernel.storage(), kernel.layout(), p), out, dtype(),
                       device()),
      "conv1d",
      CANDLE_BACKWARD(p) {
        const Tensor& x = in[0];
        const Tensor& w = in[1];
        if (x.track_op()) gi[0] = ops::grad::conv1d_grad_input(g, w, p);
        if (w.track_op()) gi[1] = ops::grad::conv1d_grad_kernel(x, g, p);
      },
      *this, kernel);
}

Tensor Tensor::conv2d(const Tensor& kernel, size_t padding, size_t stride, size_t dilation,
                      size_t groups) const {
  return conv2d_fused(kernel, std::nullopt, padding, stride, dilation, groups, std::nullopt);
}

// The bias and activation are applied to the f32/f64 accumulator before the one rounding to
// the output dtype (for f16/bf16 this is slightly more accurate than the unfused chain).
Tensor Tensor::conv2d_fused(const Tensor& kernel, const std::optional<Tensor>& bias, size_t padding,
                            size_t stride, size_t dilation, size_t groups,
                            std::optional<UnaryOp> activation) const {
  const char* op = bias || activation ? "conv2d_fused" : "conv2d";
  check_conv(*this, kernel, 2, padding, stride, dilation, groups, op);
  const bool tracked = track_op() || kernel.track_op() || (bias && bias->track_op());
  const bool relu_or_none = !activation || *activation == UnaryOp::Relu;
  if ((bias || activation) && tracked && !relu_or_none) {
    // differentiable: the unfused chain conv2d -> broadcast_add -> activation, each op
    // recording its node (same values for f32/f64; f16/bf16 round between the steps)
    if (bias) {
      ops::check_same_device(*this, *bias, op);
      ops::check_same_dtype(*this, *bias, op);
      if (bias->rank() != 1 || bias->dim(0) != kernel.dim(0)) {
        throw Error(ErrorKind::ShapeMismatch, std::string(op) + ": bias must have shape [" +
                                                  std::to_string(kernel.dim(0)) + "], got " +
                                                  bias->shape().to_string());
      }
    }
    Tensor y = conv2d(kernel, padding, stride, dilation, groups);
    if (bias) y = y.broadcast_add(bias->reshape(Shape{1, bias->dim(0), 1, 1}));
    if (activation) y = apply_unary(y, *activation);
    return y;
  }
  ConvEpilogue ep;
  ep.activation = activation;
  if (bias) {
    ops::check_same_device(*this, *bias, op);
    ops::check_same_dtype(*this, *bias, op);
    if (bias->rank() != 1 || bias->dim(0) != kernel.dim(0)) {
      throw Error(ErrorKind::ShapeMismatch, std::string(op) + ": bias must have shape [" +
                                                std::to_string(kernel.dim(0)) + "], got " +
                                                bias->shape().to_string());
    }
    ep.bias = bias->storage().get();
    ep.bias_layout = bias->layout();
  }
  const ParamsConv2D p = ops::grad::make_conv2d_params(*this, kernel, padding, stride, dilation, groups);
  const Shape out{p.b_size, p.c_out, p.out_h(), p.out_w()};
  Tensor y = ops::make_result(storage()->conv2d(layout(), *kernel.storage(), kernel.layout(), p, ep), out,
                              dtype(), device());
  if (bias || activation) {
    // bias and/or relu, fused in the forward and in one backward node: the relu's mask comes
    // from the output (relu(z) > 0 exactly where z > 0), the bias gradient from a per-channel
    // sum (ops::grad::conv_bias_grad), then the conv's own gradients
    const bool relu = activation.has_value();
    auto backward = CANDLE_BACKWARD(p, relu) {
      const Tensor& x = in[0];
      const Tensor& w = in[1];
      Tensor gz = g;
      if (relu) {
        Tensor zero = Tensor::zeros(Shape{}, g.dtype(), g.device()).broadcast_as(g.shape());
        gz = out.gt(Scalar(0.0)).where_cond(g, zero);
      }
      if (x.track_op()) gi[0] = ops::grad::conv2d_grad_input(gz, w, p);
      if (w.track_op()) gi[1] = ops::grad::conv2d_grad_kernel(x, gz, p);
      if (in.size() > 2 && in[2].track_op()) gi[2] = ops::grad::conv_bias_grad(gz);
    };
    if (bias) return autograd::record(std::move(y), op, std::move(backward), *this, kernel, *bias);
    return autograd::record(std::move(y), op, std::move(backward), *this, kernel);
  }
  return autograd::record(
      std::move(y), "conv2d",
      CANDLE_BACKWARD(p) {
        const Tensor& x = in[0];
        const Tensor& w = in[1];
        if (x.track_op()) gi[0] = ops::grad::conv2d_grad_input(g, w, p);
        if (w.track_op()) gi[1] = ops::grad::conv2d_grad_kernel(x, g, p);
      },
      *this, kernel);
}

}  // namespace candle
