// Helpers for the candle::nn tests.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "candle/candle.h"
#include "candle/nn/nn.h"
#include "test_util.h"

namespace candle::nn_test {

inline std::vector<float> f32_values(const Tensor& t) {
  return t.to_dtype(DType::F32).flatten_to_vec<float>();
}

// The 2x2x3 tensor of candle-nn's ops tests.
inline Tensor ops_data(const Device& dev = Device::cpu()) {
  return Tensor::new_<float>({{{3, 1, 4}, {1, 5, 9}}, {{2, 1, 7}, {8, 2, 8}}}, dev);
}

// Uniform [0, 1) f32 values from the device RNG with a fixed seed.
inline Tensor rand_f32(const Shape& shape, uint64_t seed) {
  Device dev = Device::cpu();
  dev.set_seed(seed);
  return Tensor::rand(0.0, 1.0, shape, DType::F32, dev);
}

// The message of the candle::Error that fn throws ("" when none).
using test_util::error_of;
inline std::string error_text(const std::function<void()>& fn) { return error_of(fn); }

}  // namespace candle::nn_test
