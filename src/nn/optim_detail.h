// AdamW's update through the backend's fused step, and its composed tensor-op form (both
// exposed for tests).
#pragma once

#include "candle/backend/backend.h"
#include "candle/tensor.h"
#include "candle/var.h"

namespace candle::nn::detail {

// The per-step constants of candle's AdamW (candle/backend/backend.h).
using AdamWCoeffs = candle::AdamWStep;

// Updates theta, m and v in place with the backend's fused step (BackendStorage::adamw_step_set)
// when it has one for this case (the CPU: contiguous f32/f64 theta, m, v; g of their dtype and
// shape, any layout); returns false, changing nothing, otherwise.
bool adamw_step_fused(const Var& theta, const Var& m, const Var& v, const Tensor& g, const AdamWCoeffs& c);
// The same update with tensor ops and Var::set (any device, any float dtype).
void adamw_step_composed(const Var& theta, const Var& m, const Var& v, const Tensor& g, const AdamWCoeffs& c);

}  // namespace candle::nn::detail
