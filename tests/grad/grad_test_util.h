// Helpers for the autograd tests: a finite-difference gradient check in f64.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "candle/backprop.h"
#include "candle/candle.h"
#include "candle/var.h"

namespace candle::grad_test {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// Deterministic values in [lo, hi) (f64).
inline Tensor uniform(const Shape& shape, double lo, double hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(shape.elem_count());
  for (double& x : v) x = d(rng);
  return Tensor::from_vec(v, shape, Device::cpu());
}

// Like uniform, with each |value| at least `gap` (keeps inputs off kinks at 0).
inline Tensor away_from_zero(const Shape& shape, double gap, double hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(gap, hi);
  std::vector<double> v(shape.elem_count());
  for (size_t i = 0; i < v.size(); ++i) v[i] = (rng() % 2 ? 1.0 : -1.0) * d(rng);
  return Tensor::from_vec(v, shape, Device::cpu());
}

// Central differences of L = sum(f(inputs) * R), R a fixed random tensor, against backward(),
// for every element of every input. With `strided`, each input reaches f as a strided view
// of its Var (every stride doubled), so the op sees a non-contiguous operand.
// Tolerance: |analytic - numeric| <= tol * (1 + |numeric|); step eps (1e-6 by default).
inline void check_fd_mode(const Fn& f, const std::vector<Tensor>& values, bool strided, double tol,
                          double eps) {
  std::vector<Var> vars;
  std::vector<Tensor> args;
  uint32_t seed = 1000;
  for (const Tensor& v : values) {
    if (strided && v.rank() > 0 && v.elem_count() > 1) {
      Tensor other = uniform(v.shape(), -1.0, 1.0, seed++);
      vars.push_back(Var::from_tensor(Tensor::stack({v, other}, -1)));
      args.push_back(vars.back().as_tensor().narrow(-1, 0, 1).squeeze(-1));
      ASSERT_FALSE(args.back().is_contiguous());
    } else {
      vars.push_back(Var::from_tensor(v));
      args.push_back(vars.back().as_tensor());
    }
  }
  Tensor out = f(args);
  ASSERT_TRUE(out.track_op());
  Tensor r = uniform(out.shape(), -1.0, 1.0, 77).to_dtype(out.dtype());
  auto loss = [&]() { return f(args).mul(r).sum_all().to_dtype(DType::F64).to_scalar<double>(); };
  GradStore grads = out.mul(r).sum_all().backward();
  for (size_t k = 0; k < vars.size(); ++k) {
    const Var& var = vars[k];
    auto g = grads.get(var.as_tensor());
    ASSERT_TRUE(g.has_value()) << "no gradient for input " << k;
    ASSERT_EQ(g->shape(), var.shape());
    ASSERT_FALSE(g->track_op());
    std::vector<double> ana = g->to_dtype(DType::F64).flatten_to_vec<double>();
    std::vector<double> base = var.as_tensor().flatten_to_vec<double>();
    for (size_t i = 0; i < base.size(); ++i) {
      std::vector<double> p = base;
      p[i] = base[i] + eps;
      var.set(Tensor::from_vec(p, var.shape(), Device::cpu()));
      const double lp = loss();
      p[i] = base[i] - eps;
      var.set(Tensor::from_vec(p, var.shape(), Device::cpu()));
      const double lm = loss();
      const double num = (lp - lm) / (2 * eps);
      EXPECT_NEAR(ana[i], num, tol * (1.0 + std::abs(num)))
          << "input " << k << " element " << i << (strided ? " (strided)" : " (contiguous)");
    }
    var.set(Tensor::from_vec(base, var.shape(), Device::cpu()));
  }
}

inline void check_fd(const Fn& f, const std::vector<Tensor>& values, double tol = 1e-6, double eps = 1e-6) {
  {
    SCOPED_TRACE("contiguous inputs");
    check_fd_mode(f, values, false, tol, eps);
  }
  {
    SCOPED_TRACE("strided inputs");
    check_fd_mode(f, values, true, tol, eps);
  }
}

}  // namespace candle::grad_test
