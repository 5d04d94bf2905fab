// In-place convolution epilogue (kernels/cuda/epilogue.cu): out[b, c, i] = act(out[b, c, i] + bias[c]).
#pragma once

#include "launch.h"

namespace candle::cuda_k {

// `out` dense [batch, channels, inner] of a float dtype; `bias` [channels] of the same dtype (or
// nullptr); act_op < 0: no activation, else a UnaryOp. Computes in f32 (f64 for f64), rounds once.
cudaError_t bias_act_inplace(Dt dt, void* out, const void* bias, size_t batch, size_t channels, size_t inner,
                             int act_op, cudaStream_t s);

}  // namespace candle::cuda_k
