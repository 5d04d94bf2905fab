// Scaled dot-product attention with grouped-query heads, causal and sliding-window masking and
// logit soft-capping, for the transformer models (candle::models).
#pragma once

#include <optional>

#include "candle/tensor.h"

namespace candle::nn::ops {

// softmax(q k^T * scale [+ mask]) v per head.
//   q [b, h, tq, d], k [b, hkv, tk, d], v [b, hkv, tk, dv]: h a multiple of hkv (grouped-query
//   attention: query head i reads kv head i / (h / hkv); nothing is repeated or copied);
//   q, k, v f32, f16 or bf16 (one dtype); the result [b, h, tq, dv] in that dtype.
//   Positions: keys 0..tk-1, query i at offset + i with offset = tk - tq (the queries are the last
//   tq positions, as after a KV cache append); tq <= tk.
//   causal: a query sees the keys at or before its position.
//   sliding_window w: a query at p sees only the keys at positions > p - w (mistral's window).
//   softcap c: scores = c * tanh(scores / c) after the scale (gemma2).
// On the CPU a fused multi-core kernel (online softmax over blocks of 64 keys, f32 accumulation;
// no mask tensor, no score matrix): bit-identical for any thread count. Off the CPU, and when an
// operand is tracked by autograd, scaled_dot_product_attention_slow (the fused op records no
// backward: the tensor ops carry the gradient).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                                    bool causal, std::optional<size_t> sliding_window = std::nullopt,
                                    std::optional<double> softcap = std::nullopt);
// The same with tensor ops (matmuls, an additive [tq, tk] mask, softmax in f32).
Tensor scaled_dot_product_attention_slow(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                                         bool causal, std::optional<size_t> sliding_window = std::nullopt,
                                         std::optional<double> softcap = std::nullopt);

// The same over key / value buffers that hold kv_len keys (a u32 scalar tensor on q's device):
// k [b, hkv, cap, d] and v [b, hkv, cap, dv] are a KV cache's whole capacity, the keys are positions
// 0..kv_len-1 and query i is at kv_len - tq + i (tq <= kv_len <= cap). A backend that reads the count
// on the device (the CPU's kernel) does work whose shape does not depend on it, which a CUDA graph
// can record once for every decode position; elsewhere the count is read back and the buffers
// narrowed (correct, not recordable).
Tensor scaled_dot_product_attention_kv_len(const Tensor& q, const Tensor& k, const Tensor& v,
                                           const Tensor& kv_len, double scale, bool causal,
                                           std::optional<size_t> sliding_window = std::nullopt,
                                           std::optional<double> softcap = std::nullopt);

}  // namespace candle::nn::ops
