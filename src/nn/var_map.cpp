#include "candle/nn/var_map.h"

#include <unordered_map>

#include "candle/io/safetensors.h"

namespace candle::nn {

VarMap::VarMap() : state_(std::make_shared<State>()) {}

std::vector<Var> VarMap::all_vars() const {
  std::lock_guard lock(state_->mu);
  std::vector<Var> out;
  for (const auto& [name, v] : state_->vars) out.push_back(v);
  return out;
}

std::vector<std::pair<std::string, Var>> VarMap::named_vars() const {
  std::lock_guard lock(state_->mu);
  return {state_->vars.begin(), state_->vars.end()};
}

void VarMap::save(const std::string& path) const {
  std::unordered_map<std::string, Tensor> tensors;
  {
    std::lock_guard lock(state_->mu);
    for (const auto& [name, v] : state_->vars) tensors.emplace(name, v.as_tensor());
  }
  safetensors::save(tensors, path);
}

void VarMap::load(const std::string& path) const {
  safetensors::MmapedSafetensors file(path);
  std::lock_guard lock(state_->mu);
  // check everything first so that a bad file changes nothing
  for (const auto& [name, v] : state_->vars) {
    if (!file.contains(name))
      throw Error(ErrorKind::InvalidArgument, "VarMap::load: cannot find tensor " + name + " in " + path);
    Shape got = file.info(name).second;
    if (got != v.shape())
      throw Error(ErrorKind::ShapeMismatch, "VarMap::load: shape mismatch for " + name + " in " + path +
                                                ", expected: " + v.shape().to_string() +
                                                ", got: " + got.to_string());
  }
  for (const auto& [name, v] : state_->vars) v.set(file.load(name, v.device()).to_dtype(v.dtype()));
}

void VarMap::set_one(const std::string& name, const Tensor& value) const {
  std::lock_guard lock(state_->mu);
  auto it = state_->vars.find(name);
  if (it == state_->vars.end())
    throw Error(ErrorKind::InvalidArgument, "VarMap::set_one: no variable " + name);
  if (it->second.shape() != value.shape())
    throw Error(ErrorKind::ShapeMismatch, "VarMap::set_one: shape mismatch for " + name +
                                              ", expected: " + it->second.shape().to_string() +
                                              ", got: " + value.shape().to_string());
  it->second.set(value.to_dtype(it->second.dtype()).to_device(it->second.device()));
}

Tensor VarMap::get(const Shape& shape, const std::string& path, const Init& init, DType dtype,
                   const Device& device) const {
  std::lock_guard lock(state_->mu);
  auto it = state_->vars.find(path);
  if (it != state_->vars.end()) {
    if (it->second.shape() != shape)
      throw Error(ErrorKind::ShapeMismatch, "shape mismatch for " + path +
                                                " in a VarMap, expected: " + shape.to_string() +
                                                ", got: " + it->second.shape().to_string());
    return it->second.as_tensor();
  }
  Var v = init.var(shape, dtype, device);
  state_->vars.emplace(path, v);
  return v.as_tensor();
}

bool VarMap::contains(const std::string& path) const {
  std::lock_guard lock(state_->mu);
  return state_->vars.count(path) != 0;
}

size_t VarMap::size() const {
  std::lock_guard lock(state_->mu);
  return state_->vars.size();
}

}  // namespace candle::nn
