#include "candle/backprop.h"

namespace candle {

std::optional<Tensor> GradStore::get_id(TensorId id) const {
  auto it = grads_.find(id);
  if (it == grads_.end()) return std::nullopt;
  return it->second;
}

std::optional<Tensor> GradStore::remove(const Tensor& t) {
  auto it = grads_.find(t.id());
  if (it == grads_.end()) return std::nullopt;
  Tensor g = std::move(it->second);
  grads_.erase(it);
  return g;
}

std::optional<Tensor> GradStore::insert(const Tensor& t, Tensor grad) {
  return insert_id(t.id(), std::move(grad));
}

std::optional<Tensor> GradStore::insert_id(TensorId id, Tensor grad) {
  auto [it, inserted] = grads_.try_emplace(id, grad);
  if (inserted) return std::nullopt;
  Tensor old = std::move(it->second);
  it->second = std::move(grad);
  return old;
}

std::vector<TensorId> GradStore::get_ids() const {
  std::vector<TensorId> ids;
  ids.reserve(grads_.size());
  for (const auto& [id, g] : grads_) ids.push_back(id);
  return ids;
}

}  // namespace candle

// PLACEHOLDER until the autograd engine lands.
#include "candle/error.h"
namespace candle {
GradStore Tensor::backward() const { throw Error(ErrorKind::UnsupportedOp, "backward: not implemented yet"); }
}  // namespace candle
