// candle-nn's layers: Linear, Embedding, convolutions, norms and activations.
#pragma once

#include <optional>

#include "candle/nn/module.h"
#include "candle/nn/var_builder.h"
#include "candle/tensor.h"

namespace candle::nn {

// ---- Linear -------------------------------------------------------------------------------
// y = x w^T + b; weight [out, in], bias [out]; x may have 1 or 2 batch dims.
class Linear : public Module {
 public:
  Linear(Tensor weight, std::optional<Tensor> bias) : weight_(std::move(weight)), bias_(std::move(bias)) {}
  const Tensor& weight() const { return weight_; }
  const std::optional<Tensor>& bias() const { return bias_; }
  Tensor forward(const Tensor& xs) const override;

 private:
  Tensor weight_;
  std::optional<Tensor> bias_;
};
// "weight" (Kaiming normal) and "bias" (uniform +-1/sqrt(in)) from vb.
Linear linear(size_t in_dim, size_t out_dim, const VarBuilder& vb);
Linear linear_no_bias(size_t in_dim, size_t out_dim, const VarBuilder& vb);
Linear linear_b(size_t in_dim, size_t out_dim, bool bias, const VarBuilder& vb);

// ---- Embedding ----------------------------------------------------------------------------
// Rows of embeddings [vocab, hidden] selected by integer ids of any shape.
class Embedding : public Module {
 public:
  Embedding(Tensor embeddings, size_t hidden_size)
      : embeddings_(std::move(embeddings)), hidden_size_(hidden_size) {}
  const Tensor& embeddings() const { return embeddings_; }
  size_t hidden_size() const { return hidden_size_; }
  Tensor forward(const Tensor& ids) const override;

 private:
  Tensor embeddings_;
  size_t hidden_size_;
};
// "weight" [in_size, out_size], N(0, 1).
Embedding embedding(size_t in_size, size_t out_size, const VarBuilder& vb);

// ---- convolutions -------------------------------------------------------------------------
struct Conv1dConfig {
  size_t padding = 0, stride = 1, dilation = 1, groups = 1;
};
struct Conv2dConfig {
  size_t padding = 0, stride = 1, dilation = 1, groups = 1;
};
struct ConvTranspose1dConfig {
  size_t padding = 0, output_padding = 0, stride = 1, dilation = 1, groups = 1;
};
// No groups: candle's conv_transpose2d has none.
struct ConvTranspose2dConfig {
  size_t padding = 0, output_padding = 0, stride = 1, dilation = 1;
};

class Conv1d : public Module {
 public:
  Conv1d(Tensor weight, std::optional<Tensor> bias, Conv1dConfig config)
      : weight_(std::move(weight)), bias_(std::move(bias)), config_(config) {}
  const Tensor& weight() const { return weight_; }
  const std::optional<Tensor>& bias() const { return bias_; }
  const Conv1dConfig& config() const { return config_; }
  Tensor forward(const Tensor& xs) const override;

 private:
  Tensor weight_;
  std::optional<Tensor> bias_;
  Conv1dConfig config_;
};

class Conv2d : public Module {
 public:
  Conv2d(Tensor weight, std::optional<Tensor> bias, Conv2dConfig config)
      : weight_(std::move(weight)), bias_(std::move(bias)), config_(config) {}
  const Tensor& weight() const { return weight_; }
  const std::optional<Tensor>& bias() const { return bias_; }
  const Conv2dConfig& config() const { return config_; }
  // conv2d_fused: the bias add happens in the convolution's output pass.
  Tensor forward(const Tensor& xs) const override;

 private:
  Tensor weight_;
  std::optional<Tensor> bias_;
  Conv2dConfig config_;
};

class ConvTranspose1d : public Module {
 public:
  ConvTranspose1d(Tensor weight, std::optional<Tensor> bias, ConvTranspose1dConfig config)
      : weight_(std::move(weight)), bias_(std::move(bias)), config_(config) {}
  const Tensor& weight() const { return weight_; }
  const std::optional<Tensor>& bias() const { return bias_; }
  const ConvTranspose1dConfig& config() const { return config_; }
  Tensor forward(const Tensor& xs) const override;

 private:
  Tensor weight_;
  std::optional<Tensor> bias_;
  ConvTranspose1dConfig config_;
};

class ConvTranspose2d : public Module {
 public:
  ConvTranspose2d(Tensor weight, std::optional<Tensor> bias, ConvTranspose2dConfig config)
      : weight_(std::move(weight)), bias_(std::move(bias)), config_(config) {}
  const Tensor& weight() const { return weight_; }
  const std::optional<Tensor>& bias() const { return bias_; }
  const ConvTranspose2dConfig& config() const { return config_; }
  Tensor forward(const Tensor& xs) const override;

 private:
  Tensor weight_;
  std::optional<Tensor> bias_;
  ConvTranspose2dConfig config_;
};

// weight [out, in / groups, k] (Kaiming normal), bias [out] (uniform +-1/sqrt(in)).
Conv1d conv1d(size_t in_channels, size_t out_channels, size_t kernel_size, Conv1dConfig cfg,
              const VarBuilder& vb);
Conv1d conv1d_no_bias(size_t in_channels, size_t out_channels, size_t kernel_size, Conv1dConfig cfg,
                      const VarBuilder& vb);
// weight [out, in / groups, k, k].
Conv2d conv2d(size_t in_channels, size_t out_channels, size_t kernel_size, Conv2dConfig cfg,
              const VarBuilder& vb);
Conv2d conv2d_no_bias(size_t in_channels, size_t out_channels, size_t kernel_size, Conv2dConfig cfg,
                      const VarBuilder& vb);
// weight [in, out / groups, k]; weight and bias uniform +-1/sqrt(out * k).
ConvTranspose1d conv_transpose1d(size_t in_channels, size_t out_channels, size_t kernel_size,
                                 ConvTranspose1dConfig cfg, const VarBuilder& vb);
ConvTranspose1d conv_transpose1d_no_bias(size_t in_channels, size_t out_channels, size_t kernel_size,
                                         ConvTranspose1dConfig cfg, const VarBuilder& vb);
// weight [in, out, k, k]; weight and bias uniform +-1/sqrt(out * k * k).
ConvTranspose2d conv_transpose2d(size_t in_channels, size_t out_channels, size_t kernel_size,
                                 ConvTranspose2dConfig cfg, const VarBuilder& vb);
ConvTranspose2d conv_transpose2d_no_bias(size_t in_channels, size_t out_channels, size_t kernel_size,
                                         ConvTranspose2dConfig cfg, const VarBuilder& vb);

// ---- LayerNorm / RmsNorm --------------------------------------------------------------------
struct LayerNormConfig {
  double eps = 1e-5;
  // false: rms norm (no mean subtraction, no bias)
  bool remove_mean = true;
  bool affine = true;
};

// Normalises the last dim: (x - mean) / sqrt(var + eps) * weight + bias.
class LayerNorm : public Module {
 public:
  LayerNorm(Tensor weight, Tensor bias, double eps);
  static LayerNorm new_no_bias(Tensor weight, double eps);
  // No mean subtraction, no bias.
  static LayerNorm rms_norm(Tensor weight, double eps);
  const Tensor& weight() const { return weight_; }
  const std::optional<Tensor>& bias() const { return bias_; }
  double eps() const { return eps_; }
  bool remove_mean() const { return remove_mean_; }
  Tensor forward(const Tensor& xs) const override;

 private:
  LayerNorm(Tensor weight, std::optional<Tensor> bias, double eps, bool remove_mean)
      : weight_(std::move(weight)), bias_(std::move(bias)), eps_(eps), remove_mean_(remove_mean) {}
  Tensor weight_;
  std::optional<Tensor> bias_;
  double eps_;
  bool remove_mean_;
};
// "weight" (ones) and, for an affine mean-removing norm, "bias" (zeros); candle also accepts
// the older "gamma"/"beta" names.
LayerNorm layer_norm(size_t size, LayerNormConfig config, const VarBuilder& vb);
LayerNorm layer_norm_no_bias(size_t size, double eps, const VarBuilder& vb);

class RmsNorm : public Module {
 public:
  RmsNorm(Tensor weight, double eps) : inner_(LayerNorm::rms_norm(std::move(weight), eps)) {}
  const LayerNorm& into_inner() const { return inner_; }
  Tensor forward(const Tensor& xs) const override;

 private:
  LayerNorm inner_;
};
RmsNorm rms_norm(size_t size, double eps, const VarBuilder& vb);

// ---- GroupNorm ----------------------------------------------------------------------------
// [b, c, ...]: normalises each of num_groups channel groups, then weight/bias per channel.
class GroupNorm : public Module {
 public:
  // num_groups must divide num_channels.
  GroupNorm(Tensor weight, Tensor bias, size_t num_channels, size_t num_groups, double eps);
  Tensor forward(const Tensor& xs) const override;

 private:
  Tensor weight_, bias_;
  size_t num_channels_, num_groups_;
  double eps_;
};
GroupNorm group_norm(size_t num_groups, size_t num_channels, double eps, const VarBuilder& vb);

// ---- BatchNorm ----------------------------------------------------------------------------
struct BatchNormConfig {
  double eps = 1e-5;
  bool remove_mean = true;
  bool affine = true;
  // running = running * (1 - momentum) + batch * momentum
  double momentum = 0.1;
};

// Over dim 1 of [b, c, ...]. forward / forward_t(train = false) use the running statistics;
// forward_train / forward_t(train = true) use the batch's (biased variance) and update the
// running ones: running = running * (1 - momentum) + batch * momentum, the variance stored
// unbiased (n / (n - 1)), as candle and PyTorch. Running statistics given as variables (a
// VarMap's, through batch_norm()) are updated in place, so a saved VarMap holds them; plain
// tensors are copied first.
class BatchNorm : public Module, public ModuleT {
 public:
  BatchNorm(size_t num_features, const Tensor& running_mean, const Tensor& running_var, Tensor weight,
            Tensor bias, double eps);
  static BatchNorm new_no_bias(size_t num_features, const Tensor& running_mean, const Tensor& running_var,
                               double eps);
  BatchNorm& with_momentum(double momentum);
  // false: training mode does not subtract the batch mean (candle's remove_mean).
  BatchNorm& with_remove_mean(bool remove_mean) {
    remove_mean_ = remove_mean;
    return *this;
  }
  const Tensor& running_mean() const { return running_mean_; }
  const Tensor& running_var() const { return running_var_; }
  double eps() const { return eps_; }
  double momentum() const { return momentum_; }
  Tensor forward(const Tensor& xs) const override { return forward_eval(xs); }
  Tensor forward_t(const Tensor& xs, bool train) const override {
    return train ? forward_train(xs) : forward_eval(xs);
  }
  Tensor forward_eval(const Tensor& xs) const;
  Tensor forward_train(const Tensor& xs) const;
  // Batch statistics without updating the running ones (candle's forward_learning).
  Tensor forward_learning(const Tensor& xs) const;

 private:
  BatchNorm(size_t num_features, const Tensor& running_mean, const Tensor& running_var,
            std::optional<std::pair<Tensor, Tensor>> weight_and_bias, double eps);
  Tensor normalize(const Tensor& xs, const Tensor& mean, const Tensor& var) const;
  void check_input(const Tensor& xs) const;
  size_t num_features_;
  // contiguous variables, written in place by forward_train
  Tensor running_mean_, running_var_;
  std::optional<std::pair<Tensor, Tensor>> weight_and_bias_;
  double eps_;
  double momentum_ = 0.1;
  bool remove_mean_ = true;
};
// "running_mean" (zeros), "running_var" (ones), and with affine "weight" (ones) / "bias" (zeros).
BatchNorm batch_norm(size_t num_features, BatchNormConfig config, const VarBuilder& vb);

// ---- Activation ---------------------------------------------------------------------------
// candle_nn::Activation. Gelu is the erf form; NewGelu and GeluPytorchTanh the tanh one.
struct Activation : public Module {
  enum Kind {
    Gelu,
    NewGelu,
    Relu,
    Relu2,
    Relu6,
    Silu,
    Sigmoid,
    HardSigmoid,
    Swiglu,
    Swish,
    HardSwish,
    Elu,
    LeakyRelu,
    GeluPytorchTanh,
  };
  Kind kind;
  // Elu's alpha, LeakyRelu's negative slope.
  double param = 0.0;

  Activation(Kind k) : kind(k) {}  // NOLINT: Activation a = Activation::Silu;
  static Activation elu(double alpha) { return Activation(Elu, alpha); }
  static Activation leaky_relu(double slope) { return Activation(LeakyRelu, slope); }
  Tensor forward(const Tensor& xs) const override;
  bool operator==(const Activation& o) const { return kind == o.kind && param == o.param; }

 private:
  Activation(Kind k, double p) : kind(k), param(p) {}
};

}  // namespace candle::nn
