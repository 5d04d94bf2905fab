// candle_nn::rotary_emb: rotary position embeddings.
//
// cos and sin are [t_max, d/2] (shared over the batch) or [b, t_max, d/2]; the first t rows
// are used. For pair i at position p: y0 = x0 cos[p, i] - x1 sin[p, i], y1 = x0 sin + x1 cos.
#pragma once

#include "candle/tensor.h"

namespace candle::nn::rotary_emb {

// xs [b, h, t, d]; pairs (x[i], x[i + d/2]) (GPT-NeoX / llama layout).
Tensor rope(const Tensor& xs, const Tensor& cos, const Tensor& sin);
// xs [b, h, t, d]; interleaved pairs (x[2i], x[2i + 1]).
Tensor rope_i(const Tensor& xs, const Tensor& cos, const Tensor& sin);
// xs [b, t, h, d]; pairs (x[i], x[i + d/2]).
Tensor rope_thd(const Tensor& xs, const Tensor& cos, const Tensor& sin);
// Tensor-op versions of rope and rope_i (cos/sin: [t, d/2]); the fused kernels equal them.
Tensor rope_slow(const Tensor& xs, const Tensor& cos, const Tensor& sin);
Tensor rope_i_slow(const Tensor& xs, const Tensor& cos, const Tensor& sin);

}  // namespace candle::nn::rotary_emb

namespace candle::nn::ops {
using rotary_emb::rope;
using rotary_emb::rope_i;
using rotary_emb::rope_thd;
}  // namespace candle::nn::ops
