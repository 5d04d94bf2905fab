// candle-nn's Module / ModuleT traits, Func and Sequential.
#pragma once

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "candle/tensor.h"

namespace candle::nn {

// A layer mapping one tensor to another (candle's Module).
class Module {
 public:
  virtual ~Module() = default;
  virtual Tensor forward(const Tensor& xs) const = 0;
};

// A layer whose behaviour depends on training mode (candle's ModuleT: dropout, batch norm).
class ModuleT {
 public:
  virtual ~ModuleT() = default;
  virtual Tensor forward_t(const Tensor& xs, bool train) const = 0;
};

// A module from a function (candle's Func / func).
class Func : public Module {
 public:
  explicit Func(std::function<Tensor(const Tensor&)> f) : f_(std::move(f)) {}
  Tensor forward(const Tensor& xs) const override { return f_(xs); }

 private:
  std::function<Tensor(const Tensor&)> f_;
};
inline Func func(std::function<Tensor(const Tensor&)> f) { return Func(std::move(f)); }

class FuncT : public ModuleT {
 public:
  explicit FuncT(std::function<Tensor(const Tensor&, bool)> f) : f_(std::move(f)) {}
  Tensor forward_t(const Tensor& xs, bool train) const override { return f_(xs, train); }

 private:
  std::function<Tensor(const Tensor&, bool)> f_;
};
inline FuncT func_t(std::function<Tensor(const Tensor&, bool)> f) { return FuncT(std::move(f)); }

// Layers applied in order (candle's Sequential): seq().add(linear1).add_fn(relu).add(linear2).
class Sequential : public Module {
 public:
  // Appends a copy of `layer` (any Module); returns the extended sequence.
  template <typename M>
  requires std::is_base_of_v<Module, std::decay_t<M>> Sequential add(M&& layer)
  const {
    Sequential s = *this;
    s.layers_.push_back(std::make_shared<std::decay_t<M>>(std::forward<M>(layer)));
    return s;
  }
  Sequential add_shared(std::shared_ptr<const Module> layer) const {
    Sequential s = *this;
    s.layers_.push_back(std::move(layer));
    return s;
  }
  Sequential add_fn(std::function<Tensor(const Tensor&)> f) const { return add(Func(std::move(f))); }
  size_t len() const { return layers_.size(); }
  bool is_empty() const { return layers_.empty(); }
  Tensor forward(const Tensor& xs) const override;
  // The output of every layer, in order.
  std::vector<Tensor> forward_all(const Tensor& xs) const;

 private:
  std::vector<std::shared_ptr<const Module>> layers_;
};
inline Sequential seq() { return Sequential(); }

}  // namespace candle::nn
