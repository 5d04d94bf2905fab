#include "candle/nn/optim.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "candle/backend/backend.h"
#include "optim_detail.h"

namespace candle::nn {

void Optimizer::backward_step(const Tensor& loss) { step(loss.backward()); }

namespace {

std::vector<Var> float_vars(std::vector<Var> vars) {
  std::erase_if(vars, [](const Var& v) { return !dtype_is_float(v.dtype()); });
  return vars;
}

void check_finite_param(double v, const char* name, const char* opt) {
  if (!std::isfinite(v))
    throw Error(ErrorKind::InvalidArgument,
                std::string(opt) + ": " + name + " must be finite, got " + std::to_string(v));
}

}  // namespace

// ---- SGD ----------------------------------------------------------------------------------

SGD::SGD(std::vector<Var> vars, double learning_rate, double momentum)
    : vars_(float_vars(std::move(vars))), velocity_(vars_.size()), lr_(learning_rate), momentum_(momentum) {
  check_finite_param(learning_rate, "learning rate", "SGD");
  if (!(momentum >= 0.0 && std::isfinite(momentum)))
    throw Error(ErrorKind::InvalidArgument, "SGD: momentum must be >= 0, got " + std::to_string(momentum));
}

void SGD::push(const Var& var) {
  if (!dtype_is_float(var.dtype())) return;
  vars_.push_back(var);
  velocity_.emplace_back();
}

void SGD::step(const GradStore& grads) {
  for (size_t i = 0; i < vars_.size(); ++i) {
    const Var& var = vars_[i];
    std::optional<Tensor> g = grads.get(var.as_tensor());
    if (!g) continue;
    if (momentum_ == 0.0) {
      var.set(var.as_tensor() - (*g * lr_));
      continue;
    }
    std::optional<Var>& b = velocity_[i];
    if (!b)
      b = Var::from_tensor(*g);
    else
      b->set(b->as_tensor() * momentum_ + *g);
    var.set(var.as_tensor() - b->as_tensor() * lr_);
  }
}

// ---- AdamW --------------------------------------------------------------------------------

AdamW::AdamW(std::vector<Var> vars, ParamsAdamW params) : params_(params) {
  check_finite_param(params.lr, "lr", "AdamW");
  check_finite_param(params.eps, "eps", "AdamW");
  check_finite_param(params.weight_decay, "weight_decay", "AdamW");
  if (!(params.beta1 >= 0.0 && params.beta1 < 1.0) || !(params.beta2 >= 0.0 && params.beta2 < 1.0))
    throw Error(ErrorKind::InvalidArgument, "AdamW: beta1 and beta2 must be in [0, 1), got " +
                                                std::to_string(params.beta1) + " and " +
                                                std::to_string(params.beta2));
  for (Var& v : float_vars(std::move(vars))) {
    Var m = Var::zeros(v.shape(), v.dtype(), v.device());
    Var s = Var::zeros(v.shape(), v.dtype(), v.device());
    vars_.push_back(VarAdamW{std::move(v), std::move(m), std::move(s)});
  }
}

AdamW AdamW::new_lr(std::vector<Var> vars, double learning_rate) {
  ParamsAdamW p;
  p.lr = learning_rate;
  return AdamW(std::move(vars), p);
}

void AdamW::step(const GradStore& grads) {
  ++step_t_;
  const int t = static_cast<int>(std::min<size_t>(step_t_, 1u << 30));
  detail::AdamWCoeffs c{};
  c.lr = params_.lr;
  c.beta1 = params_.beta1;
  c.beta2 = params_.beta2;
  c.eps = params_.eps;
  c.decay = 1.0 - params_.lr * params_.weight_decay;
  c.scale_m = 1.0 / (1.0 - std::pow(params_.beta1, t));
  c.scale_v = 1.0 / (1.0 - std::pow(params_.beta2, t));
  for (const VarAdamW& va : vars_) {
    std::optional<Tensor> g = grads.get(va.var.as_tensor());
    if (!g) continue;
    if (!detail::adamw_step_fused(va.var, va.first_moment, va.second_moment, *g, c))
      detail::adamw_step_composed(va.var, va.first_moment, va.second_moment, *g, c);
  }
}

AdamW::State AdamW::state() const {
  State s;
  s.step_t = step_t_;
  for (const VarAdamW& va : vars_) {
    s.first_moments.push_back(va.first_moment.as_tensor().copy());
    s.second_moments.push_back(va.second_moment.as_tensor().copy());
  }
  return s;
}

void AdamW::set_state(const State& s) {
  if (s.first_moments.size() != vars_.size() || s.second_moments.size() != vars_.size())
    throw Error(ErrorKind::InvalidArgument,
                "AdamW::set_state: the state has " + std::to_string(s.first_moments.size()) + "/" +
                    std::to_string(s.second_moments.size()) + " moments, the optimizer " +
                    std::to_string(vars_.size()) + " variables");
  for (size_t i = 0; i < vars_.size(); ++i) {
    const VarAdamW& va = vars_[i];
    for (const Tensor* m : {&s.first_moments[i], &s.second_moments[i]}) {
      if (m->shape() != va.var.shape())
        throw Error(ErrorKind::ShapeMismatch, "AdamW::set_state: moment " + std::to_string(i) +
                                                  " has shape " + m->shape().to_string() + ", its variable " +
                                                  va.var.shape().to_string());
    }
  }
  for (size_t i = 0; i < vars_.size(); ++i) {
    const VarAdamW& va = vars_[i];
    va.first_moment.set(s.first_moments[i].to_dtype(va.var.dtype()).to_device(va.var.device()));
    va.second_moment.set(s.second_moments[i].to_dtype(va.var.dtype()).to_device(va.var.device()));
  }
  step_t_ = s.step_t;
}

// ---- the AdamW update ---------------------------------------------------------------------

namespace detail {

bool adamw_step_fused(const Var& theta, const Var& m, const Var& v, const Tensor& g, const AdamWCoeffs& c) {
  const Tensor& t = theta.as_tensor();
  if (g.dtype() != t.dtype() || g.shape() != t.shape()) return false;
  for (const Tensor* x : {&m.as_tensor(), &v.as_tensor()}) {
    if (x->dtype() != t.dtype() || x->shape() != t.shape() || !x->device().same_device(t.device()))
      return false;
  }
  if (!g.device().same_device(t.device())) return false;
  const Tensor &mt = m.as_tensor(), &vt = v.as_tensor();
  return t.storage()->adamw_step_set(t.layout(), *mt.storage(), mt.layout(), *vt.storage(), vt.layout(),
                                     *g.storage(), g.layout(), c);
}

void adamw_step_composed(const Var& theta, const Var& m, const Var& v, const Tensor& g,
                         const AdamWCoeffs& c) {
  Tensor next_m = m.as_tensor() * c.beta1 + g * (1.0 - c.beta1);
  Tensor next_v = v.as_tensor() * c.beta2 + g.sqr() * (1.0 - c.beta2);
  Tensor m_hat = next_m * c.scale_m;
  Tensor v_hat = next_v * c.scale_v;
  Tensor adjusted = m_hat / (v_hat.sqrt() + c.eps);
  Tensor next_theta = theta.as_tensor() * c.decay - adjusted * c.lr;
  m.set(next_m);
  v.set(next_v);
  theta.set(next_theta);
}

}  // namespace detail
}  // namespace candle::nn
