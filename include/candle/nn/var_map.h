// candle_nn::VarMap: named trainable variables, created on first use, saved as safetensors.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "candle/nn/init.h"
#include "candle/var.h"

namespace candle::nn {

// Copies share the same map (candle's Arc<Mutex<..>>); thread-safe.
class VarMap {
 public:
  VarMap();
  // Every variable, sorted by name.
  std::vector<Var> all_vars() const;
  std::vector<std::pair<std::string, Var>> named_vars() const;
  // Writes the variables to a safetensors file.
  void save(const std::string& path) const;
  // Sets every variable from the file: a variable missing from the file or with another
  // shape is an error naming it (and the file); values are converted to the variable's dtype.
  void load(const std::string& path) const;
  // Overwrites one variable's values (shape must match).
  void set_one(const std::string& name, const Tensor& value) const;
  // The variable `path`, created with `init` when missing; an existing one must have `shape`.
  Tensor get(const Shape& shape, const std::string& path, const Init& init, DType dtype,
             const Device& device) const;
  bool contains(const std::string& path) const;
  size_t size() const;

 private:
  struct State {
    std::mutex mu;
    std::map<std::string, Var> vars;
  };
  std::shared_ptr<State> state_;
};

}  // namespace candle::nn
