// PLACEHOLDER: replaced by the family implementation.
#include "candle/candle.h"
namespace candle {
Tensor Tensor::conv1d(const Tensor&, size_t, size_t, size_t, size_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::conv2d(const Tensor&, size_t, size_t, size_t, size_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::conv2d_fused(const Tensor&, const std::optional<Tensor>&, size_t, size_t, size_t, size_t, std::optional<UnaryOp>) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
size_t conv_scratch_limit() { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
void set_conv_scratch_limit(size_t) { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
}  // namespace candle
