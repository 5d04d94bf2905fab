// PLACEHOLDER: replaced by the family implementation.
#include "candle/candle.h"
namespace candle {
Tensor Tensor::avg_pool2d_with_stride(std::array<size_t, 2>, std::array<size_t, 2>) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::max_pool2d_with_stride(std::array<size_t, 2>, std::array<size_t, 2>) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::upsample_nearest1d(size_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::upsample_nearest2d(size_t, size_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::upsample_bilinear2d(size_t, size_t, bool) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::upsample_bilinear2d_with_scale(double, double, bool) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
}  // namespace candle
