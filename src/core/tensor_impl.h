// The node behind a Tensor handle. Internal: only src/ uses it.
#pragma once

#include <cstdint>
#include <memory>

#include "candle/backend/backend.h"
#include "candle/tensor.h"

namespace candle {

namespace autograd {
class BackpropOp;
}

struct TensorImpl {
  TensorImpl();
  TensorImpl(const TensorImpl&) = delete;
  TensorImpl& operator=(const TensorImpl&) = delete;
  // Tears the recorded graph down iteratively (a deep chain would otherwise recurse once
  // per node); see autograd::release_graph.
  ~TensorImpl();

  TensorId id;
  StoragePtr storage;
  Layout layout;
  DType dtype;
  Device device;
  bool is_variable = false;
  bool track_op = false;
  // The op that produced this tensor, when it was recorded for backprop (track_op is then
  // true). It holds the op's inputs, never this tensor itself: no reference cycles.
  std::shared_ptr<autograd::BackpropOp> op;
};

TensorId next_tensor_id();

// Debug counter: the number of TensorImpls alive in the process (tests use it to check
// that training steps release their graphs).
int64_t live_tensor_impls();

}  // namespace candle
