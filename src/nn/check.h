// Argument checks shared by candle::nn's ops (the same messages as the core ops' checks, which
// are private to candle::core).
#pragma once

#include <string>

#include "candle/tensor.h"

namespace candle::nn::detail {

// Throws UnsupportedOp unless t has a float dtype.
inline void check_float(const Tensor& t, const char* op) {
  if (!dtype_is_float(t.dtype()))
    throw Error(ErrorKind::UnsupportedOp,
                std::string("unsupported dtype ") + std::string(dtype_name(t.dtype())) + " for op " + op);
}

// Throws DeviceMismatch unless a and b live on the same device.
inline void check_same_device(const Tensor& a, const Tensor& b, const char* op) {
  if (!a.device().same_device(b.device()))
    throw Error(ErrorKind::DeviceMismatch, std::string("device mismatch in ") + op + ", lhs: " +
                                               a.device().to_string() + ", rhs: " + b.device().to_string());
}

}  // namespace candle::nn::detail
