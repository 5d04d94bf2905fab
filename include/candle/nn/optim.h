// candle_nn::optim: the Optimizer interface, SGD and AdamW.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "candle/backprop.h"
#include "candle/tensor.h"
#include "candle/var.h"

namespace candle::nn {

// candle's Optimizer trait. step() updates every variable that has a gradient in `grads`
// (through Var::set); variables without one are left alone.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual void step(const GradStore& grads) = 0;
  virtual double learning_rate() const = 0;
  virtual void set_learning_rate(double lr) = 0;
  // step(loss.backward())
  void backward_step(const Tensor& loss);
};

// Stochastic gradient descent. With momentum 0 (the default) this is candle's SGD:
//   theta <- theta - lr * g
// With momentum mu > 0 it is PyTorch's SGD (dampening 0, no Nesterov, no weight decay):
//   b <- g on the first step of a variable, b <- mu * b + g afterwards;  theta <- theta - lr * b
// Variables of a non-float dtype are dropped, as candle does.
class SGD : public Optimizer {
 public:
  SGD(std::vector<Var> vars, double learning_rate, double momentum = 0.0);
  void step(const GradStore& grads) override;
  double learning_rate() const override { return lr_; }
  void set_learning_rate(double lr) override { lr_ = lr; }
  double momentum() const { return momentum_; }
  void push(const Var& var);
  const std::vector<Var>& vars() const { return vars_; }
  std::vector<Var> into_inner() const { return vars_; }

 private:
  std::vector<Var> vars_;
  // momentum buffers, created on a variable's first step
  std::vector<std::optional<Var>> velocity_;
  double lr_;
  double momentum_;
};

struct ParamsAdamW {
  double lr = 0.001;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
};

// candle's AdamW (decoupled weight decay). At step t (counted from 1), for each variable
// theta with gradient g:
//   m <- beta1 * m + (1 - beta1) * g
//   v <- beta2 * v + (1 - beta2) * g^2
//   m_hat = m / (1 - beta1^t),  v_hat = v / (1 - beta2^t)
//   theta <- theta * (1 - lr * weight_decay) - lr * m_hat / (sqrt(v_hat) + eps)
// A contiguous f32/f64 variable on the CPU is updated by one fused multi-core pass; other
// variables by the same formula composed of tensor ops. Non-float variables are dropped.
class AdamW : public Optimizer {
 public:
  explicit AdamW(std::vector<Var> vars, ParamsAdamW params = {});
  static AdamW new_lr(std::vector<Var> vars, double learning_rate);
  void step(const GradStore& grads) override;
  double learning_rate() const override { return params_.lr; }
  void set_learning_rate(double lr) override { params_.lr = lr; }
  const ParamsAdamW& params() const { return params_; }
  void set_params(const ParamsAdamW& params) { params_ = params; }
  // Steps taken so far (t of the last step).
  size_t step_count() const { return step_t_; }

  // The optimizer state, to checkpoint and restore a run: per variable (in construction
  // order) its first and second moments. set_state checks the count and shapes.
  struct State {
    size_t step_t = 0;
    std::vector<Tensor> first_moments, second_moments;
  };
  State state() const;
  void set_state(const State& state);

 private:
  struct VarAdamW {
    Var var, first_moment, second_moment;
  };
  std::vector<VarAdamW> vars_;
  size_t step_t_ = 0;
  ParamsAdamW params_;
};

}  // namespace candle::nn
