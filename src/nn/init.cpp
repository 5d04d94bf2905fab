#include "candle/nn/init.h"

#include <cmath>

namespace candle::nn {

double NonLinearity::gain() const {
  switch (kind) {
    case ReLU: return std::sqrt(2.0);
    case Tanh: return 5.0 / 3.0;
    case Linear:
    case Sigmoid: return 1.0;
    case SELU: return 0.75;
    case ExplicitGain: return explicit_gain;
  }
  return 1.0;
}

size_t fan_for_shape(FanInOut fan, const Shape& shape) {
  const auto& dims = shape.dims();
  size_t receptive = 1;
  for (size_t i = 2; i < dims.size(); ++i) receptive *= dims[i];
  if (fan == FanInOut::FanIn) return dims.size() < 2 ? 1 : dims[1] * receptive;
  return dims.empty() ? 1 : dims[0] * receptive;
}

Var Init::var(const Shape& shape, DType dtype, const Device& device) const {
  return std::visit(
      [&](const auto& v) -> Var {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, Const>) {
          if (v.value == 0.0) return Var::zeros(shape, dtype, device);
          if (v.value == 1.0) return Var::ones(shape, dtype, device);
          return Var::from_tensor(Tensor::full(Scalar(v.value), shape, dtype, device));
        } else if constexpr (std::is_same_v<V, Randn>) {
          return Var::randn(v.mean, v.stdev, shape, dtype, device);
        } else if constexpr (std::is_same_v<V, Uniform>) {
          return Var::rand(v.lo, v.up, shape, dtype, device);
        } else {
          size_t fan = fan_for_shape(v.fan, shape);
          double std = v.non_linearity.gain() / std::sqrt(static_cast<double>(fan));
          if (v.dist == NormalOrUniform::Uniform) {
            double bound = std::sqrt(3.0) * std;
            return Var::rand(-bound, bound, shape, dtype, device);
          }
          return Var::randn(0.0, std, shape, dtype, device);
        }
      },
      value);
}

}  // namespace candle::nn
