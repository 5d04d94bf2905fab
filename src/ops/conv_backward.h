// The backward passes of the pooling and resizing ops, one small function each,
// written with existing (deterministic) ops. Internal: the op files in src/ops record nodes
// that call these; faster dedicated kernels can replace a body without touching the callers.
#pragma once

#include <array>
#include <optional>

#include "candle/tensor.h"

namespace candle::autograd {

Tensor avg_pool2d_grad(const Tensor& g, const Tensor& x, std::array<size_t, 2> kernel,
                       std::array<size_t, 2> stride);
// Each output's gradient goes to the first maximum of its window (row-major), added up
// where windows overlap.
Tensor max_pool2d_grad(const Tensor& g, const Tensor& x, std::array<size_t, 2> kernel,
                       std::array<size_t, 2> stride);
Tensor upsample_nearest1d_grad(const Tensor& g, const Tensor& x);
Tensor upsample_nearest2d_grad(const Tensor& g, const Tensor& x);
Tensor upsample_bilinear2d_grad(const Tensor& g, const Tensor& x, bool align_corners,
                                std::optional<double> scale_h, std::optional<double> scale_w);

}  // namespace candle::autograd
