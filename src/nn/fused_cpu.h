// Fused CPU kernels of candle::nn (softmax, norms, rotary embeddings) over the last dim.
// Inputs: CPU tensors of one float dtype, already validated; any layout (copied contiguous).
#pragma once

#include <initializer_list>
#include <optional>

#include "candle/backend/cpu_storage.h"
#include "candle/tensor.h"

namespace candle::nn::detail {

Tensor softmax_last_dim_cpu(const Tensor& xs);
Tensor rms_norm_cpu(const Tensor& xs, const Tensor& alpha, float eps);
Tensor layer_norm_cpu(const Tensor& xs, const Tensor& alpha, const Tensor& beta, float eps);

using candle::RopeKind;  // candle/backend.h
// xs [b, h, t, d] ([b, t, h, d] for HalvesThd); cos/sin [t_max, d/2] or [b, t_max, d/2].
Tensor rope_cpu(const Tensor& xs, const Tensor& cos, const Tensor& sin, RopeKind kind);

// Whether a backend's fused kernel (the BackendStorage hooks softmax_last_dim, rms_norm,
// layer_norm, rope) may run: nothing is tracked (the hooks record no backward) and every
// operand has xs' dtype (the composed path casts the others).
inline bool backend_fused_ok(const Tensor& xs, std::initializer_list<const Tensor*> others) {
  if (xs.track_op()) return false;
  for (const Tensor* t : others)
    if (t->track_op() || t->dtype() != xs.dtype()) return false;
  return true;
}

// A hook's result as a tensor of xs' shape, dtype and device (nullopt: no kernel, compose).
inline std::optional<Tensor> from_backend(StoragePtr s, const Tensor& xs) {
  if (!s) return std::nullopt;
  return Tensor::from_storage(std::move(s), Layout::contiguous(xs.shape()), xs.dtype(), xs.device());
}

}  // namespace candle::nn::detail
