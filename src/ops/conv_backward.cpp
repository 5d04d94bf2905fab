// Backward passes of the pool / resize family (see conv_backward.h): thin adapters from the
// autograd nodes' saved operands to the dedicated gradient ops of ops/conv_grad.h, whose CPU
// kernels are partitioned by output element (bit-identical for any thread count). The conv
// nodes capture their forward's parameters and call ops/conv_grad.h directly.
#include "ops/conv_backward.h"

#include "candle/backend/cpu_storage.h"
#include "ops/conv_grad.h"

namespace candle::autograd {
// ---- pooling and resizing ----------------------------------------------------------------------

Tensor avg_pool2d_grad(const Tensor& g, const Tensor& x, std::array<size_t, 2> kernel,
                       std::array<size_t, 2> stride) {
  return ops::grad::avg_pool2d_grad(x.shape(), g, kernel, stride);
}

Tensor max_pool2d_grad(const Tensor& g, const Tensor& x, std::array<size_t, 2> kernel,
                       std::array<size_t, 2> stride) {
  return ops::grad::max_pool2d_grad(x, g, kernel, stride);
}

Tensor upsample_nearest1d_grad(const Tensor& g, const Tensor& x) {
  return ops::grad::upsample_nearest1d_grad(g, x.dim(2));
}

Tensor upsample_nearest2d_grad(const Tensor& g, const Tensor& x) {
  return ops::grad::upsample_nearest2d_grad(g, x.dim(2), x.dim(3));
}

Tensor upsample_bilinear2d_grad(const Tensor& g, const Tensor& x, bool align_corners,
                                std::optional<double> scale_h, std::optional<double> scale_w) {
  return ops::grad::upsample_bilinear2d_grad(g, x.dim(2), x.dim(3), align_corners, scale_h, scale_w);
}

}  // namespace candle::autograd
