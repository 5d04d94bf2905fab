// PLACEHOLDER: replaced by the family implementation.
#include "candle/candle.h"
#include <ostream>
#include <string>
namespace candle {
Tensor Tensor::matmul(const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::broadcast_matmul(const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::dot(const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::mv(const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
}  // namespace candle
