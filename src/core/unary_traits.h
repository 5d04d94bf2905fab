// Facts about unary ops shared by the op layer and the backends.
#pragma once

#include "candle/backend/cpu_storage.h"

namespace candle {

// The unary ops that also exist for integer dtypes (identity for ceil/floor/round).
constexpr bool unary_op_supports_int(UnaryOp op) {
  switch (op) {
    case UnaryOp::Neg:
    case UnaryOp::Abs:
    case UnaryOp::Sqr:
    case UnaryOp::Relu:
    case UnaryOp::Sign:
    case UnaryOp::Ceil:
    case UnaryOp::Floor:
    case UnaryOp::Round: return true;
    default: return false;
  }
}

}  // namespace candle
