// Fused CPU kernels of candle::nn (softmax, norms, rotary embeddings) over the last dim.
// Inputs: CPU tensors of one float dtype, already validated; any layout (copied contiguous).
#pragma once

#include "candle/tensor.h"

namespace candle::nn::detail {

Tensor softmax_last_dim_cpu(const Tensor& xs);
Tensor rms_norm_cpu(const Tensor& xs, const Tensor& alpha, float eps);
Tensor layer_norm_cpu(const Tensor& xs, const Tensor& alpha, const Tensor& beta, float eps);

enum class RopeKind { Halves, Interleaved, HalvesThd };
// xs [b, h, t, d] ([b, t, h, d] for HalvesThd); cos/sin [t_max, d/2] or [b, t_max, d/2].
Tensor rope_cpu(const Tensor& xs, const Tensor& cos, const Tensor& sin, RopeKind kind);

}  // namespace candle::nn::detail
