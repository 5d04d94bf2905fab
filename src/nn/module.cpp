#include "candle/nn/module.h"

namespace candle::nn {

Tensor Sequential::forward(const Tensor& xs) const {
  Tensor x = xs;
  for (const auto& layer : layers_) x = layer->forward(x);
  return x;
}

std::vector<Tensor> Sequential::forward_all(const Tensor& xs) const {
  std::vector<Tensor> out;
  out.reserve(layers_.size());
  Tensor x = xs;
  for (const auto& layer : layers_) {
    x = layer->forward(x);
    out.push_back(x);
  }
  return out;
}

}  // namespace candle::nn
