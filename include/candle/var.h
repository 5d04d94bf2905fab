// Var: a tensor whose storage may change (trainable parameters); autograd tracks it.
#pragma once

#include "candle/tensor.h"

namespace candle {

class Var {
 public:
  static Var zeros(const Shape& shape, DType dtype, const Device& device);
  static Var ones(const Shape& shape, DType dtype, const Device& device);
  static Var rand(double lo, double up, const Shape& shape, DType dtype, const Device& device);
  static Var randn(double mean, double stddev, const Shape& shape, DType dtype, const Device& device);
  // A variable holding a (contiguous) copy of t's values.
  static Var from_tensor(const Tensor& t);

  const Tensor& as_tensor() const { return t_; }
  operator const Tensor&() const { return t_; }  // NOLINT: a Var is usable wherever a Tensor is
  Tensor into_inner() const { return t_.detach(); }
  const Shape& shape() const { return t_.shape(); }
  DType dtype() const { return t_.dtype(); }
  const Device& device() const { return t_.device(); }
  // Overwrites the values in place; `src` must have the same shape, dtype and device.
  void set(const Tensor& src) const;

 private:
  explicit Var(Tensor t) : t_(std::move(t)) {}
  Tensor t_;
};

}  // namespace candle
