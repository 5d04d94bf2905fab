// The fused CPU pass of AdamW and its composed tensor-op form (both for tests).
#pragma once

#include "candle/tensor.h"
#include "candle/var.h"

namespace candle::nn::detail {

// The per-step constants of candle's AdamW.
struct AdamWCoeffs {
  double lr, beta1, beta2, eps;
  double decay;             // 1 - lr * weight_decay
  double scale_m, scale_v;  // 1 / (1 - beta^t)
};

// Whether adamw_step_cpu can update theta: theta, m and v contiguous f32/f64 CPU tensors of
// one dtype and shape, g of the same dtype, shape and device (any layout).
bool adamw_fused_applies(const Var& theta, const Var& m, const Var& v, const Tensor& g);
// One multi-core pass writing m, v and theta in place; each element is independent, so the
// bytes do not depend on the thread count.
void adamw_step_cpu(const Var& theta, const Var& m, const Var& v, const Tensor& g, const AdamWCoeffs& c);
// The same update with tensor ops and Var::set (any device, any float dtype).
void adamw_step_composed(const Var& theta, const Var& m, const Var& v, const Tensor& g, const AdamWCoeffs& c);

}  // namespace candle::nn::detail
