// The node behind a Tensor handle. Internal: only src/ uses it.
#pragma once

#include "candle/tensor.h"

namespace candle {

struct TensorImpl {
  TensorId id;
  StoragePtr storage;
  Layout layout;
  DType dtype;
  Device device;
  bool is_variable = false;
  bool track_op = false;
};

TensorId next_tensor_id();

}  // namespace candle
