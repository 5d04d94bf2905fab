// candle_nn::loss: losses composed of differentiable tensor ops; each returns a scalar tensor.
#pragma once

#include "candle/tensor.h"

namespace candle::nn::loss {

// Negative log likelihood: inp [N, C] log-probabilities, target [N] integer class ids
// (u8, u32 or i64); -mean(inp[i, target[i]]).
Tensor nll(const Tensor& inp, const Tensor& target);
// log_softmax(inp, 1) then nll; inp [N, C] raw logits.
Tensor cross_entropy(const Tensor& inp, const Tensor& target);
// mean((inp - target)^2); equal shapes.
Tensor mse(const Tensor& inp, const Tensor& target);
// mean(|inp - target|); equal shapes.
Tensor l1(const Tensor& inp, const Tensor& target);
// Binary cross-entropy of sigmoid(inp) against target (probabilities), averaged over every
// element, as PyTorch's binary_cross_entropy_with_logits. Computed in the stable form
// max(x, 0) - x * t + log(1 + exp(-|x|)); candle takes log(sigmoid(x)), which gives inf/NaN
// once |x| is large (about 17 in f32).
Tensor binary_cross_entropy_with_logit(const Tensor& inp, const Tensor& target);
// PyTorch's HuberLoss: per element d = inp - target,
//   0.5 * d^2                     if |d| < delta
//   delta * (|d| - 0.5 * delta)   otherwise,
// averaged. delta > 0.
Tensor huber(const Tensor& inp, const Tensor& target, double delta);

}  // namespace candle::nn::loss
