// Autograd results: the gradients of one backward pass (candle's GradStore).
#pragma once

#include <optional>
#include <unordered_map>
#include <vector>

#include "candle/tensor.h"

namespace candle {

// Gradients keyed by tensor id, as returned by Tensor::backward(). Only tensors on a path
// from the root to a Var get an entry.
class GradStore {
 public:
  GradStore() = default;
  // The gradient of `t` (same shape, dtype and device as t), if the pass produced one.
  std::optional<Tensor> get(const Tensor& t) const { return get_id(t.id()); }
  std::optional<Tensor> get_id(TensorId id) const;
  // Removes and returns the gradient of `t`.
  std::optional<Tensor> remove(const Tensor& t);
  // Sets (replaces) the gradient of `t`; returns the previous one, if any.
  std::optional<Tensor> insert(const Tensor& t, Tensor grad);
  std::optional<Tensor> insert_id(TensorId id, Tensor grad);
  // Ids of every tensor with a gradient (no particular order).
  std::vector<TensorId> get_ids() const;
  size_t size() const { return grads_.size(); }
  bool empty() const { return grads_.empty(); }

 private:
  std::unordered_map<TensorId, Tensor> grads_;
};

}  // namespace candle
