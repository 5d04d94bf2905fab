// candle_nn::init: how VarMap-backed builders create variables.
#pragma once

#include <variant>

#include "candle/var.h"

namespace candle::nn {

// The non-linearity following a layer, for Kaiming's gain.
struct NonLinearity {
  enum Kind { ReLU, Linear, Sigmoid, Tanh, SELU, ExplicitGain } kind;
  double explicit_gain = 1.0;
  NonLinearity(Kind k) : kind(k) {}  // NOLINT: NonLinearity::ReLU reads like candle
  static NonLinearity gain_of(double g) {
    NonLinearity n(ExplicitGain);
    n.explicit_gain = g;
    return n;
  }
  // sqrt(2) for ReLU, 5/3 for Tanh, 1 for Linear and Sigmoid, 0.75 for SELU.
  double gain() const;
};

enum class FanInOut { FanIn, FanOut };
// FanIn: dims[1] * receptive field (1 below rank 2); FanOut: dims[0] * receptive field.
size_t fan_for_shape(FanInOut fan, const Shape& shape);

enum class NormalOrUniform { Normal, Uniform };

// candle's Init enum: Init::Const{1.0}, Init::Randn{0.0, 0.02}, Init::Uniform{-b, b},
// Init::Kaiming{NormalOrUniform::Normal, FanInOut::FanIn, NonLinearity::ReLU}.
struct Init {
  struct Const {
    double value;
  };
  struct Randn {
    double mean, stdev;
  };
  struct Uniform {
    double lo, up;
  };
  struct Kaiming {
    NormalOrUniform dist;
    FanInOut fan;
    NonLinearity non_linearity;
  };
  std::variant<Const, Randn, Uniform, Kaiming> value;

  Init(Const c) : value(c) {}    // NOLINT
  Init(Randn r) : value(r) {}    // NOLINT
  Init(Uniform u) : value(u) {}  // NOLINT
  Init(Kaiming k) : value(k) {}  // NOLINT

  // A new variable of `shape` initialised this way (device RNG for the random kinds).
  Var var(const Shape& shape, DType dtype, const Device& device) const;
};

namespace init {
inline const Init ZERO = Init::Const{0.0};
inline const Init ONE = Init::Const{1.0};
inline const Init DEFAULT_KAIMING_UNIFORM =
    Init::Kaiming{NormalOrUniform::Uniform, FanInOut::FanIn, NonLinearity::ReLU};
inline const Init DEFAULT_KAIMING_NORMAL =
    Init::Kaiming{NormalOrUniform::Normal, FanInOut::FanIn, NonLinearity::ReLU};
}  // namespace init

}  // namespace candle::nn
