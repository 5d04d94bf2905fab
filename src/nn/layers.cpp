// Linear, Embedding and the convolution layers.
#include "candle/nn/layers.h"

#include <cmath>
#include <string>

namespace candle::nn {

// ---- Linear -------------------------------------------------------------------------------

Tensor Linear::forward(const Tensor& xs) const {
  // The weight is broadcast over up to two batch dims, as candle does, so that the matmul
  // sees equal batch dims.
  Tensor w;
  const auto& d = xs.dims();
  if (d.size() == 4)
    w = weight_.broadcast_left({d[0], d[1]}).t();
  else if (d.size() == 3)
    w = weight_.broadcast_left({d[0]}).t();
  else
    w = weight_.t();
  Tensor y = xs.matmul(w);
  return bias_ ? y.broadcast_add(*bias_) : y;
}

Linear linear_b(size_t in_dim, size_t out_dim, bool bias, const VarBuilder& vb) {
  Tensor w = vb.get_with_hints({out_dim, in_dim}, "weight", init::DEFAULT_KAIMING_NORMAL);
  if (!bias) return Linear(w, std::nullopt);
  double bound = 1.0 / std::sqrt(static_cast<double>(in_dim));
  Tensor b = vb.get_with_hints({out_dim}, "bias", Init::Uniform{-bound, bound});
  return Linear(w, b);
}
Linear linear(size_t in_dim, size_t out_dim, const VarBuilder& vb) {
  return linear_b(in_dim, out_dim, true, vb);
}
Linear linear_no_bias(size_t in_dim, size_t out_dim, const VarBuilder& vb) {
  return linear_b(in_dim, out_dim, false, vb);
}

// ---- Embedding ----------------------------------------------------------------------------

Tensor Embedding::forward(const Tensor& ids) const {
  std::vector<size_t> dims = ids.dims();
  dims.push_back(hidden_size_);
  return embeddings_.index_select(ids.flatten_all(), 0).reshape(Shape(dims));
}

Embedding embedding(size_t in_size, size_t out_size, const VarBuilder& vb) {
  Tensor w = vb.get_with_hints({in_size, out_size}, "weight", Init::Randn{0.0, 1.0});
  return Embedding(w, out_size);
}

// ---- convolutions -------------------------------------------------------------------------

namespace {

// bias [c_out] reshaped to broadcast over [b, c_out, ...] of rank `rank`.
Tensor add_channel_bias(const Tensor& y, const std::optional<Tensor>& bias) {
  if (!bias) return y;
  std::vector<size_t> s(y.rank(), 1);
  s[1] = bias->elem_count();
  return y.broadcast_add(bias->reshape(Shape(s)));
}

void check_groups(size_t in_channels, size_t out_channels, size_t groups, const char* op) {
  if (groups == 0 || in_channels % groups != 0 || out_channels % groups != 0)
    throw Error(ErrorKind::InvalidArgument, std::string(op) + ": groups (" + std::to_string(groups) +
                                                ") must divide in_channels (" + std::to_string(in_channels) +
                                                ") and out_channels (" + std::to_string(out_channels) + ")");
}

std::optional<Tensor> conv_bias(bool with_bias, size_t out_channels, const Init& init, const VarBuilder& vb) {
  if (!with_bias) return std::nullopt;
  return vb.get_with_hints({out_channels}, "bias", init);
}

Init uniform_bound(double fan) {
  double bound = 1.0 / std::sqrt(fan);
  return Init::Uniform{-bound, bound};
}

Conv1d make_conv1d(size_t in_c, size_t out_c, size_t k, Conv1dConfig cfg, bool bias, const VarBuilder& vb) {
  check_groups(in_c, out_c, cfg.groups, "conv1d");
  Tensor w = vb.get_with_hints({out_c, in_c / cfg.groups, k}, "weight", init::DEFAULT_KAIMING_NORMAL);
  return Conv1d(w, conv_bias(bias, out_c, uniform_bound(static_cast<double>(in_c)), vb), cfg);
}

Conv2d make_conv2d(size_t in_c, size_t out_c, size_t k, Conv2dConfig cfg, bool bias, const VarBuilder& vb) {
  check_groups(in_c, out_c, cfg.groups, "conv2d");
  Tensor w = vb.get_with_hints({out_c, in_c / cfg.groups, k, k}, "weight", init::DEFAULT_KAIMING_NORMAL);
  return Conv2d(w, conv_bias(bias, out_c, uniform_bound(static_cast<double>(in_c)), vb), cfg);
}

ConvTranspose1d make_convt1d(size_t in_c, size_t out_c, size_t k, ConvTranspose1dConfig cfg, bool bias,
                             const VarBuilder& vb) {
  check_groups(in_c, out_c, cfg.groups, "conv_transpose1d");
  Init init = uniform_bound(static_cast<double>(out_c * k));
  Tensor w = vb.get_with_hints({in_c, out_c / cfg.groups, k}, "weight", init);
  return ConvTranspose1d(w, conv_bias(bias, out_c, init, vb), cfg);
}

ConvTranspose2d make_convt2d(size_t in_c, size_t out_c, size_t k, ConvTranspose2dConfig cfg, bool bias,
                             const VarBuilder& vb) {
  Init init = uniform_bound(static_cast<double>(out_c * k * k));
  Tensor w = vb.get_with_hints({in_c, out_c, k, k}, "weight", init);
  return ConvTranspose2d(w, conv_bias(bias, out_c, init, vb), cfg);
}

}  // namespace

Tensor Conv1d::forward(const Tensor& xs) const {
  Tensor y = xs.conv1d(weight_, config_.padding, config_.stride, config_.dilation, config_.groups);
  return add_channel_bias(y, bias_);
}

Tensor Conv2d::forward(const Tensor& xs) const {
  return xs.conv2d_fused(weight_, bias_, config_.padding, config_.stride, config_.dilation, config_.groups,
                         std::nullopt);
}

Tensor ConvTranspose1d::forward(const Tensor& xs) const {
  Tensor y = xs.conv_transpose1d(weight_, config_.padding, config_.output_padding, config_.stride,
                                 config_.dilation, config_.groups);
  return add_channel_bias(y, bias_);
}

Tensor ConvTranspose2d::forward(const Tensor& xs) const {
  Tensor y =
      xs.conv_transpose2d(weight_, config_.padding, config_.output_padding, config_.stride, config_.dilation);
  return add_channel_bias(y, bias_);
}

Conv1d conv1d(size_t in_c, size_t out_c, size_t k, Conv1dConfig cfg, const VarBuilder& vb) {
  return make_conv1d(in_c, out_c, k, cfg, true, vb);
}
Conv1d conv1d_no_bias(size_t in_c, size_t out_c, size_t k, Conv1dConfig cfg, const VarBuilder& vb) {
  return make_conv1d(in_c, out_c, k, cfg, false, vb);
}
Conv2d conv2d(size_t in_c, size_t out_c, size_t k, Conv2dConfig cfg, const VarBuilder& vb) {
  return make_conv2d(in_c, out_c, k, cfg, true, vb);
}
Conv2d conv2d_no_bias(size_t in_c, size_t out_c, size_t k, Conv2dConfig cfg, const VarBuilder& vb) {
  return make_conv2d(in_c, out_c, k, cfg, false, vb);
}
ConvTranspose1d conv_transpose1d(size_t in_c, size_t out_c, size_t k, ConvTranspose1dConfig cfg,
                                 const VarBuilder& vb) {
  return make_convt1d(in_c, out_c, k, cfg, true, vb);
}
ConvTranspose1d conv_transpose1d_no_bias(size_t in_c, size_t out_c, size_t k, ConvTranspose1dConfig cfg,
                                         const VarBuilder& vb) {
  return make_convt1d(in_c, out_c, k, cfg, false, vb);
}
ConvTranspose2d conv_transpose2d(size_t in_c, size_t out_c, size_t k, ConvTranspose2dConfig cfg,
                                 const VarBuilder& vb) {
  return make_convt2d(in_c, out_c, k, cfg, true, vb);
}
ConvTranspose2d conv_transpose2d_no_bias(size_t in_c, size_t out_c, size_t k, ConvTranspose2dConfig cfg,
                                         const VarBuilder& vb) {
  return make_convt2d(in_c, out_c, k, cfg, false, vb);
}

}  // namespace candle::nn
