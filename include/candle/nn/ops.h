// candle_nn::ops: softmax, norms, activations, dropout, pixel shuffle, padding.
#pragma once

#include <utility>

#include "candle/nn/module.h"
#include "candle/tensor.h"

namespace candle::nn::ops {

// exp(x - max) / sum over `dim` (numerically stable).
Tensor softmax(const Tensor& xs, int64_t dim);
// x - max - log(sum(exp(x - max))) over `dim`.
Tensor log_softmax(const Tensor& xs, int64_t dim);
// softmax over the last dim; one fused multi-core pass per row on the CPU.
Tensor softmax_last_dim(const Tensor& xs);
Tensor sigmoid(const Tensor& xs);
Tensor silu(const Tensor& xs);
// silu(first half) * second half of the last dim.
Tensor swiglu(const Tensor& xs);
// silu(gate) * up (same shape and dtype): one kernel where the backend has it (CUDA), else the
// two ops; the same values either way.
Tensor silu_mul(const Tensor& gate, const Tensor& up);
// clamp((x + 3) / 6, 0, 1)
Tensor hard_sigmoid(const Tensor& xs);
Tensor leaky_relu(const Tensor& xs, double negative_slope);
// x / sqrt(mean(x^2) + eps) * alpha over the last dim (alpha: [last dim]); fused on the CPU.
Tensor rms_norm(const Tensor& xs, const Tensor& alpha, float eps);
// A transformer's residual add and the norm after it: {xs + h, rms_norm(xs + h, alpha, eps)}, the
// composed ops' values; one kernel where the device has one (CUDA).
std::pair<Tensor, Tensor> add_rms_norm(const Tensor& xs, const Tensor& h, const Tensor& alpha, float eps);
// The same with tensor ops (what rms_norm runs off the CPU or under autograd).
Tensor rms_norm_slow(const Tensor& xs, const Tensor& alpha, float eps);
// (x - mean) / sqrt(var + eps) * alpha + beta over the last dim; fused on the CPU.
Tensor layer_norm(const Tensor& xs, const Tensor& alpha, const Tensor& beta, float eps);
Tensor layer_norm_slow(const Tensor& xs, const Tensor& alpha, const Tensor& beta, float eps);
// Zeroes each element with probability drop_p (device RNG) and scales the rest by 1/(1-p).
Tensor dropout(const Tensor& xs, float drop_p);
// [b, c*r*r, h, w] -> [b, c, h*r, w*r]
Tensor pixel_shuffle(const Tensor& xs, size_t upscale_factor);
// [b, c, h*r, w*r] -> [b, c*r*r, h, w]
Tensor pixel_unshuffle(const Tensor& xs, size_t downscale_factor);
// Pads the last two dims of [b, c, h, w] by `pad` on each side, repeating the border.
Tensor replication_pad2d(const Tensor& xs, size_t pad);

}  // namespace candle::nn::ops

namespace candle::nn {

// candle_nn::Dropout: active only when training (ops::dropout, drawing from the device's
// RNG, so Device::set_seed makes it reproducible); the identity otherwise.
class Dropout : public ModuleT {
 public:
  // drop_p in [0, 1).
  explicit Dropout(float drop_p);
  float drop_p() const { return drop_p_; }
  Tensor forward_t(const Tensor& xs, bool train) const override {
    return train ? ops::dropout(xs, drop_p_) : xs;
  }

 private:
  float drop_p_;
};

}  // namespace candle::nn
