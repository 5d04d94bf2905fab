// The op codes shared by the tensor API and the backends (unary, binary, cmp, reduce, rope).
#pragma once

#include <cstdint>

namespace candle {

enum class UnaryOp : uint8_t {
  Neg,
  Recip,
  Exp,
  Log,
  Sin,
  Cos,
  Tanh,
  Abs,
  Sqr,
  Sqrt,
  Gelu,
  GeluErf,
  Erf,
  Relu,
  Silu,
  Ceil,
  Floor,
  Round,
  Sign,
  Sigmoid,  // keep last: kUnaryOpCount
};
inline constexpr int kUnaryOpCount = static_cast<int>(UnaryOp::Sigmoid) + 1;
enum class BinaryOp : uint8_t { Add, Sub, Mul, Div, Maximum, Minimum, Pow };
enum class CmpOp : uint8_t { Eq, Ne, Lt, Le, Gt, Ge };
enum class ReduceOp : uint8_t { Sum, Min, Max, ArgMin, ArgMax };
// The rotary embeddings of candle::nn: rotate the halves [0, d/2) / [d/2, d) of the last dim
// (xs [b, h, t, d]), interleaved pairs (2i, 2i+1) ([b, h, t, d]), or halves with xs [b, t, h, d].
enum class RopeKind : uint8_t { Halves, Interleaved, HalvesThd };

// Names for messages and counters; a switch per enum (the compiler flags a missing case).
const char* unary_op_name(UnaryOp op);
const char* binary_op_name(BinaryOp op);
const char* cmp_op_name(CmpOp op);
const char* reduce_op_name(ReduceOp op);

}  // namespace candle
