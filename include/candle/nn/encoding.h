// candle_nn::encoding: one-hot encoding.
#pragma once

#include "candle/tensor.h"

namespace candle::nn::encoding {

// indices (an integer dtype; -1 gives a row of off_value) -> indices.shape ++ [depth], of the
// dtype of on_value (Scalar's natural dtype: 1.0f -> f32, uint8_t -> u8, ...).
// An index >= depth or < -1 is an error.
Tensor one_hot(const Tensor& indices, size_t depth, const Scalar& on_value, const Scalar& off_value);

}  // namespace candle::nn::encoding
