// Pooling and resizing: shape rules and argument checks, then the backend kernel
// (src/cpu/pool.cpp on the CPU).
#include <cmath>
#include <optional>
#include <string>

#include "candle/tensor.h"
#include "core/backprop_op.h"
#include "ops/conv_backward.h"
#include "ops/op_util.h"

namespace candle {
namespace {

std::string pair_str(std::array<size_t, 2> a) {
  std::string s = "(";
  s += std::to_string(a[0]);
  s += ", ";
  s += std::to_string(a[1]);
  s += ")";
  return s;
}

// Checks the kernel and stride of a 2-D pooling and returns the output shape.
Shape pool_out_shape(const Tensor& t, std::array<size_t, 2> k, std::array<size_t, 2> s, const char* op) {
  auto [b, c, h, w] = t.shape().dims4(op);
  if (k[0] == 0 || k[1] == 0 || s[0] == 0 || s[1] == 0) {
    throw Error(ErrorKind::InvalidArgument, std::string(op) + ": kernel " + pair_str(k) + " and stride " +
                                                pair_str(s) + " must be positive, input shape " +
                                                t.shape().to_string());
  }
  if (h < k[0] || w < k[1]) {
    throw Error(ErrorKind::InvalidArgument, std::string(op) + ": kernel-size " + pair_str(k) +
                                                " is larger than the input size " + std::to_string(h) + "," +
                                                std::to_string(w) + ", input shape " + t.shape().to_string());
  }
  return Shape{b, c, (h - k[0]) / s[0] + 1, (w - k[1]) / s[1] + 1};
}

// A non-empty output needs a non-empty input along the resized dims.
void check_resizable(const Tensor& t, const Shape& out, size_t first_dim, const char* op) {
  if (out.elem_count() == 0) return;
  for (size_t d = first_dim; d < t.rank(); ++d) {
    if (t.dims()[d] == 0) {
      throw Error(ErrorKind::InvalidArgument, std::string(op) + ": cannot resize the empty input " +
                                                  t.shape().to_string() + " to " + out.to_string());
    }
  }
}

size_t scaled_size(size_t in, double scale, const Tensor& t, const char* what, const char* op) {
  if (!std::isfinite(scale) || scale <= 0.0) {
    throw Error(ErrorKind::InvalidArgument,
                std::string(op) + ": the " + what + " scale must be finite and positive, got " +
                    std::to_string(scale) + ", input shape " + t.shape().to_string());
  }
  const double v = std::floor(static_cast<double>(in) * scale);
  if (v >= 9.0e15) {
    throw Error(ErrorKind::InvalidArgument, std::string(op) + ": the " + what + " scale " +
                                                std::to_string(scale) + " is too large for input shape " +
                                                t.shape().to_string());
  }
  return static_cast<size_t>(v);
}

Tensor bilinear(const Tensor& t, size_t oh, size_t ow, bool align_corners, std::optional<double> sh,
                std::optional<double> sw, const char* op) {
  auto [b, c, h, w] = t.shape().dims4(op);
  (void)h;
  (void)w;
  ops::check_float(t, op);
  Shape out{b, c, oh, ow};
  check_resizable(t, out, 2, op);
  StoragePtr s = t.storage()->upsample_bilinear2d(t.layout(), oh, ow, align_corners, sh, sw);
  return autograd::record(
      ops::make_result(std::move(s), out, t.dtype(), t.device()), op,
      CANDLE_BACKWARD(align_corners, sh, sw) {
        gi[0] = autograd::upsample_bilinear2d_grad(g, in[0], align_corners, sh, sw);
      },
      t);
}

}  // namespace

Tensor Tensor::avg_pool2d_with_stride(std::array<size_t, 2> kernel, std::array<size_t, 2> stride) const {
  const char* op = "avg_pool2d";
  Shape out = pool_out_shape(*this, kernel, stride, op);
  ops::check_float(*this, op);
  StoragePtr s = storage()->avg_pool2d(layout(), kernel, stride);
  return autograd::record(
      ops::make_result(std::move(s), out, dtype(), device()), op,
      CANDLE_BACKWARD(kernel, stride) { gi[0] = autograd::avg_pool2d_grad(g, in[0], kernel, stride); },
      *this);
}

Tensor Tensor::max_pool2d_with_stride(std::array<size_t, 2> kernel, std::array<size_t, 2> stride) const {
  Shape out = pool_out_shape(*this, kernel, stride, "max_pool2d");
  StoragePtr s = storage()->max_pool2d(layout(), kernel, stride);
  return autograd::record(
      ops::make_result(std::move(s), out, dtype(), device()), "max_pool2d",
      CANDLE_BACKWARD(kernel, stride) { gi[0] = autograd::max_pool2d_grad(g, in[0], kernel, stride); },
      *this);
}

Tensor Tensor::upsample_nearest1d(size_t target_l) const {
  const char* op = "upsample_nearest1d";
  auto [b, c, l] = shape().dims3(op);
  (void)l;
  Shape out{b, c, target_l};
  check_resizable(*this, out, 2, op);
  StoragePtr s = storage()->upsample_nearest1d(layout(), target_l);
  return autograd::record(
      ops::make_result(std::move(s), out, dtype(), device()), op,
      CANDLE_BACKWARD() { gi[0] = autograd::upsample_nearest1d_grad(g, in[0]); }, *this);
}

Tensor Tensor::upsample_nearest2d(size_t target_h, size_t target_w) const {
  const char* op = "upsample_nearest2d";
  auto [b, c, h, w] = shape().dims4(op);
  (void)h;
  (void)w;
  Shape out{b, c, target_h, target_w};
  check_resizable(*this, out, 2, op);
  StoragePtr s = storage()->upsample_nearest2d(layout(), target_h, target_w);
  return autograd::record(
      ops::make_result(std::move(s), out, dtype(), device()), op,
      CANDLE_BACKWARD() { gi[0] = autograd::upsample_nearest2d_grad(g, in[0]); }, *this);
}

Tensor Tensor::upsample_bilinear2d(size_t target_h, size_t target_w, bool align_corners) const {
  return bilinear(*this, target_h, target_w, align_corners, std::nullopt, std::nullopt,
                  "upsample_bilinear2d");
}

Tensor Tensor::upsample_bilinear2d_with_scale(double scale_h, double scale_w, bool align_corners) const {
  const char* op = "upsample_bilinear2d_with_scale";
  auto [b, c, h, w] = shape().dims4(op);
  (void)b;
  (void)c;
  const size_t oh = scaled_size(h, scale_h, *this, "height", op);
  const size_t ow = scaled_size(w, scale_w, *this, "width", op);
  return bilinear(*this, oh, ow, align_corners, scale_h, scale_w, op);
}

}  // namespace candle
