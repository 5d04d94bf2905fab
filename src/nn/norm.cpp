// LayerNorm, RmsNorm, GroupNorm, BatchNorm and Activation.
#include <string>

#include "candle/nn/layers.h"
#include "candle/nn/ops.h"
#include "check.h"

namespace candle::nn {
namespace {

DType internal_dtype(DType dt) { return dt == DType::F64 ? DType::F64 : DType::F32; }

void check_vec_len(const Tensor& t, size_t n, const std::string& what, const char* op) {
  if (t.rank() != 1 || t.dim(0) != n)
    throw Error(ErrorKind::ShapeMismatch, std::string(op) + ": " + what + " has shape " +
                                              t.shape().to_string() + ", expected [" + std::to_string(n) +
                                              "]");
}

}  // namespace

// ---- LayerNorm ----------------------------------------------------------------------------

LayerNorm::LayerNorm(Tensor weight, Tensor bias, double eps)
    : weight_(std::move(weight)), bias_(std::move(bias)), eps_(eps), remove_mean_(true) {}

LayerNorm LayerNorm::new_no_bias(Tensor weight, double eps) {
  return LayerNorm(std::move(weight), std::nullopt, eps, true);
}

LayerNorm LayerNorm::rms_norm(Tensor weight, double eps) {
  return LayerNorm(std::move(weight), std::nullopt, eps, false);
}

Tensor LayerNorm::forward(const Tensor& xs) const {
  float eps = static_cast<float>(eps_);
  if (remove_mean_ && bias_) return ops::layer_norm(xs, weight_, *bias_, eps);
  if (!remove_mean_ && !bias_) return ops::rms_norm(xs, weight_, eps);
  detail::check_float(xs, "layer_norm");
  if (xs.rank() == 0)
    throw Error(ErrorKind::ShapeMismatch, "layer_norm expects at least one dim, got a scalar");
  DType dt = xs.dtype();
  double hidden = static_cast<double>(xs.dims().back());
  Tensor x = xs.to_dtype(internal_dtype(dt));
  if (remove_mean_) x = x.broadcast_sub(x.sum_keepdim(-1) / hidden);
  Tensor norm_x = x.sqr().sum_keepdim(-1) / hidden;
  Tensor y = x.broadcast_div((norm_x + eps_).sqrt()).to_dtype(dt).broadcast_mul(weight_);
  return bias_ ? y.broadcast_add(*bias_) : y;
}

LayerNorm layer_norm(size_t size, LayerNormConfig config, const VarBuilder& vb) {
  // Older checkpoints name the affine parameters gamma / beta.
  bool old_names = !vb.contains_tensor("weight") && vb.contains_tensor("gamma");
  Tensor w = config.affine ? vb.get_with_hints({size}, old_names ? "gamma" : "weight", init::ONE)
                           : Tensor::ones({size}, vb.dtype(), vb.device());
  if (config.remove_mean && config.affine) {
    Tensor b = vb.get_with_hints({size}, old_names ? "beta" : "bias", init::ZERO);
    return LayerNorm(w, b, config.eps);
  }
  return config.remove_mean ? LayerNorm::new_no_bias(w, config.eps) : LayerNorm::rms_norm(w, config.eps);
}

LayerNorm layer_norm_no_bias(size_t size, double eps, const VarBuilder& vb) {
  Tensor w = vb.get_with_hints({size}, "weight", init::ONE);
  return LayerNorm::new_no_bias(w, eps);
}

Tensor RmsNorm::forward(const Tensor& xs) const {
  return ops::rms_norm(xs, inner_.weight(), static_cast<float>(inner_.eps()));
}

RmsNorm rms_norm(size_t size, double eps, const VarBuilder& vb) {
  return RmsNorm(vb.get_with_hints({size}, "weight", init::ONE), eps);
}

// ---- GroupNorm ----------------------------------------------------------------------------

GroupNorm::GroupNorm(Tensor weight, Tensor bias, size_t num_channels, size_t num_groups, double eps)
    : weight_(std::move(weight)),
      bias_(std::move(bias)),
      num_channels_(num_channels),
      num_groups_(num_groups),
      eps_(eps) {
  if (num_groups == 0 || num_channels % num_groups != 0)
    throw Error(ErrorKind::InvalidArgument, "GroupNorm: num_groups (" + std::to_string(num_groups) +
                                                ") must divide num_channels (" +
                                                std::to_string(num_channels) + ")");
  check_vec_len(weight_, num_channels, "weight", "GroupNorm");
  check_vec_len(bias_, num_channels, "bias", "GroupNorm");
}

Tensor GroupNorm::forward(const Tensor& xs) const {
  detail::check_float(xs, "group_norm");
  if (xs.rank() < 2 || xs.dim(1) != num_channels_)
    throw Error(ErrorKind::ShapeMismatch, "group_norm: input " + xs.shape().to_string() + " does not have " +
                                              std::to_string(num_channels_) + " channels in dim 1");
  DType dt = xs.dtype();
  size_t b = xs.dim(0);
  size_t hidden = xs.elem_count() / (b * num_groups_);
  Tensor x = xs.reshape({b, num_groups_, hidden}).to_dtype(internal_dtype(dt));
  double n = static_cast<double>(hidden);
  x = x.broadcast_sub(x.sum_keepdim(2) / n);
  Tensor norm_x = x.sqr().sum_keepdim(2) / n;
  Tensor normed = x.broadcast_div((norm_x + eps_).sqrt()).to_dtype(dt).reshape(xs.shape());
  std::vector<size_t> ws(xs.rank(), 1);
  ws[1] = num_channels_;
  return normed.broadcast_mul(weight_.reshape(Shape(ws))).broadcast_add(bias_.reshape(Shape(ws)));
}

GroupNorm group_norm(size_t num_groups, size_t num_channels, double eps, const VarBuilder& vb) {
  Tensor w = vb.get_with_hints({num_channels}, "weight", init::ONE);
  Tensor b = vb.get_with_hints({num_channels}, "bias", init::ZERO);
  return GroupNorm(w, b, num_channels, num_groups, eps);
}

// ---- BatchNorm ----------------------------------------------------------------------------

namespace {

// A variable shares its storage (candle's Var::from_tensor keeps a variable as it is); any
// other tensor becomes a fresh variable holding a copy.
Tensor running_stat(const Tensor& t) {
  if (t.is_variable() && t.is_contiguous()) return t;
  return Var::from_tensor(t).as_tensor();
}

}  // namespace

BatchNorm& BatchNorm::with_momentum(double momentum) {
  if (!(momentum >= 0.0 && momentum <= 1.0))
    throw Error(ErrorKind::InvalidArgument,
                "batch-norm momentum must be in [0, 1], got " + std::to_string(momentum));
  momentum_ = momentum;
  return *this;
}

BatchNorm::BatchNorm(size_t num_features, const Tensor& running_mean, const Tensor& running_var,
                     std::optional<std::pair<Tensor, Tensor>> weight_and_bias, double eps)
    : num_features_(num_features),
      running_mean_(running_stat(running_mean)),
      running_var_(running_stat(running_var)),
      weight_and_bias_(std::move(weight_and_bias)),
      eps_(eps) {
  if (!(eps >= 0.0))
    throw Error(ErrorKind::InvalidArgument, "batch-norm eps cannot be negative " + std::to_string(eps));
  check_vec_len(running_mean, num_features, "running mean", "batch-norm");
  check_vec_len(running_var, num_features, "running var", "batch-norm");
  detail::check_float(running_mean, "batch-norm running mean");
  detail::check_float(running_var, "batch-norm running var");
  if (weight_and_bias_) {
    check_vec_len(weight_and_bias_->first, num_features, "weight", "batch-norm");
    check_vec_len(weight_and_bias_->second, num_features, "bias", "batch-norm");
  }
}

BatchNorm::BatchNorm(size_t num_features, const Tensor& running_mean, const Tensor& running_var,
                     Tensor weight, Tensor bias, double eps)
    : BatchNorm(num_features, running_mean, running_var, std::make_pair(std::move(weight), std::move(bias)),
                eps) {}

BatchNorm BatchNorm::new_no_bias(size_t num_features, const Tensor& running_mean, const Tensor& running_var,
                                 double eps) {
  return BatchNorm(num_features, running_mean, running_var, std::nullopt, eps);
}

void BatchNorm::check_input(const Tensor& xs) const {
  if (xs.rank() < 2)
    throw Error(ErrorKind::ShapeMismatch,
                "batch-norm input tensor must have at least two dimensions, got " + xs.shape().to_string());
  if (xs.dim(1) != num_features_)
    throw Error(ErrorKind::ShapeMismatch, "batch-norm input " + xs.shape().to_string() + " does not have " +
                                              std::to_string(num_features_) + " features in dim 1");
  detail::check_float(xs, "batch-norm");
}

// (x - mean) / sqrt(var + eps) * weight + bias, with mean/var [c] broadcast over dim 1.
Tensor BatchNorm::normalize(const Tensor& xs, const Tensor& mean, const Tensor& var) const {
  std::vector<size_t> s(xs.rank(), 1);
  s[1] = num_features_;
  Shape target(s);
  DType dt = xs.dtype();
  Tensor x = xs.to_dtype(internal_dtype(dt));
  Tensor m = mean.to_dtype(x.dtype()).reshape(target);
  Tensor v = var.to_dtype(x.dtype()).reshape(target);
  Tensor y = x.broadcast_sub(m).broadcast_div((v + eps_).sqrt()).to_dtype(dt);
  if (!weight_and_bias_) return y;
  return y.broadcast_mul(weight_and_bias_->first.reshape(target))
      .broadcast_add(weight_and_bias_->second.reshape(target));
}

Tensor BatchNorm::forward_eval(const Tensor& xs) const {
  check_input(xs);
  return normalize(xs, running_mean_, running_var_);
}

Tensor BatchNorm::forward_learning(const Tensor& xs) const {
  check_input(xs);
  // per-channel statistics over every dim but 1 (biased variance, as PyTorch's training mode)
  Tensor x = xs.to_dtype(internal_dtype(xs.dtype())).transpose(0, 1).flatten_from(1);
  Tensor mean = x.mean_keepdim(1);
  Tensor var = x.broadcast_sub(mean).sqr().mean_keepdim(1);
  return normalize(xs, mean.flatten_all(), var.flatten_all());
}

Tensor BatchNorm::forward_train(const Tensor& xs) const {
  check_input(xs);
  Tensor x = xs.to_dtype(internal_dtype(xs.dtype())).transpose(0, 1).flatten_from(1);
  double n = static_cast<double>(x.dim(1));
  DType rd = running_mean_.dtype();
  Tensor mean = x.mean_keepdim(1);
  if (remove_mean_) {
    Tensor rm = running_mean_ * (1.0 - momentum_) + mean.flatten_all().detach().to_dtype(rd) * momentum_;
    running_mean_.slice_set(rm, 0, 0);
  } else {
    // candle's remove_mean = false: no centring, the "variance" is the mean square
    mean = mean.zeros_like();
  }
  Tensor var = x.broadcast_sub(mean).sqr().mean_keepdim(1).flatten_all();
  double unbias = n > 1 ? n / (n - 1.0) : 1.0;
  Tensor rv = running_var_ * (1.0 - momentum_) + var.detach().to_dtype(rd) * (momentum_ * unbias);
  running_var_.slice_set(rv, 0, 0);
  return normalize(xs, mean.flatten_all(), var);
}

BatchNorm batch_norm(size_t num_features, BatchNormConfig config, const VarBuilder& vb) {
  if (!(config.eps >= 0.0))
    throw Error(ErrorKind::InvalidArgument,
                "batch-norm eps cannot be negative " + std::to_string(config.eps));
  Tensor rm = vb.get_with_hints({num_features}, "running_mean", init::ZERO);
  Tensor rv = vb.get_with_hints({num_features}, "running_var", init::ONE);
  BatchNorm bn = config.affine
                     ? BatchNorm(num_features, rm, rv, vb.get_with_hints({num_features}, "weight", init::ONE),
                                 vb.get_with_hints({num_features}, "bias", init::ZERO), config.eps)
                     : BatchNorm::new_no_bias(num_features, rm, rv, config.eps);
  bn.with_momentum(config.momentum).with_remove_mean(config.remove_mean);
  return bn;
}

// ---- Activation ---------------------------------------------------------------------------

Tensor Activation::forward(const Tensor& xs) const {
  switch (kind) {
    case Gelu: return xs.gelu_erf();
    case NewGelu:
    case GeluPytorchTanh: return xs.gelu();
    case Relu: return xs.relu();
    case Relu2: return xs.relu().sqr();
    case Relu6: return xs.clamp(Scalar(0.0), Scalar(6.0));
    case Silu: return xs.silu();
    case Sigmoid: return ops::sigmoid(xs);
    case HardSigmoid: return ops::hard_sigmoid(xs);
    case Swiglu: return ops::swiglu(xs);
    case Swish: return xs * ops::sigmoid(xs);
    case HardSwish: return xs * ops::hard_sigmoid(xs);
    case Elu: return xs.elu(param);
    case LeakyRelu: return ops::leaky_relu(xs, param);
  }
  throw Error(ErrorKind::InvalidArgument, "unknown activation");
}

}  // namespace candle::nn
