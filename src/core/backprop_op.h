// Autograd internals: the node an op records on its result, and the helpers the op files
// use to record it. Internal: only src/ uses it.
//
// An op records a node when one of its inputs track_op() (a Var, or made from one) and its
// result has a float dtype. The node lives on the result's TensorImpl and holds the inputs
// (as Tensors) plus whatever the backward needs, captured by value in a lambda; it never
// holds the result itself (the engine passes it in), so no reference cycles form. When no
// input is tracked, recording costs a few flag tests and allocates nothing.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "candle/tensor.h"

namespace candle::autograd {

class BackpropOp {
 public:
  BackpropOp(const char* name, std::vector<Tensor> inputs) : name_(name), inputs_(std::move(inputs)) {}
  virtual ~BackpropOp() = default;
  BackpropOp(const BackpropOp&) = delete;
  BackpropOp& operator=(const BackpropOp&) = delete;

  const char* name() const { return name_; }
  const std::vector<Tensor>& inputs() const { return inputs_; }
  // For the graph teardown only.
  std::vector<Tensor>& mutable_inputs() { return inputs_; }

  // Fills grads[i] (grads has one slot per input) with the gradient of input i given the
  // gradient `grad` of the result `out`; a slot left undefined means no gradient flows there.
  virtual void backward(const Tensor& out, const Tensor& grad, std::vector<Tensor>& grads) const = 0;

 private:
  const char* name_;
  std::vector<Tensor> inputs_;
};

// fn(inputs, out, grad, grads)
template <typename F>
class FnOp final : public BackpropOp {
 public:
  FnOp(const char* name, std::vector<Tensor> inputs, F fn)
      : BackpropOp(name, std::move(inputs)), fn_(std::move(fn)) {}
  void backward(const Tensor& out, const Tensor& grad, std::vector<Tensor>& grads) const override {
    fn_(inputs(), out, grad, grads);
  }

 private:
  F fn_;
};

// False on a thread while a backward pass runs there (its ops record nothing).
bool grad_enabled();

class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// Marks `out` as tracked and sets its node.
void attach(const Tensor& out, std::shared_ptr<BackpropOp> op);

// Whether a result over these inputs gets a node: grad mode on, a float result that is not
// one of the inputs itself (ops return self for no-op views), and some input tracked.
bool should_record(const Tensor& out, const std::vector<Tensor>& inputs);

// Records fn as the backward of `out` over `inputs` when should_record; returns out.
template <typename F>
Tensor record_vec(Tensor out, const char* name, std::vector<Tensor> inputs, F&& fn) {
  if (!should_record(out, inputs)) return out;
  attach(out, std::make_shared<FnOp<std::decay_t<F>>>(name, std::move(inputs), std::forward<F>(fn)));
  return out;
}

// Variadic form: the inputs are tested for tracking before anything is built.
template <typename F, typename... Ts>
Tensor record(Tensor out, const char* name, F&& fn, const Ts&... in) {
  if (!(in.track_op() || ...)) return out;
  return record_vec(std::move(out), name, std::vector<Tensor>{in...}, std::forward<F>(fn));
}

// Sums g (whose shape is a broadcast of `shape`) back to `shape`: over the extra leading
// dims and over the dims where shape has 1 and g does not.
Tensor sum_to_shape(const Tensor& g, const Shape& shape);

// A zeros tensor with t's shape, dtype and device.
inline Tensor zeros_of(const Tensor& t) { return Tensor::zeros(t.shape(), t.dtype(), t.device()); }

}  // namespace candle::autograd

// The lambda head of a backward: captures, then (in, out, g, gi) as FnOp passes them.
#define CANDLE_BACKWARD(...)                                                                              \
  [__VA_ARGS__]([[maybe_unused]] const std::vector<::candle::Tensor>& in,                                 \
                [[maybe_unused]] const ::candle::Tensor& out, [[maybe_unused]] const ::candle::Tensor& g, \
                [[maybe_unused]] std::vector<::candle::Tensor>& gi)
