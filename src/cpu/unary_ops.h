// The per-element functions of the CPU elementwise kernels (unary ops and integer helpers).
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "candle/backend/cpu_storage.h"
#include "core/unary_traits.h"
#include "cpu/vec_math.h"

namespace candle::cpu::ops {

// Wrapping integer arithmetic without signed-overflow UB (and without the int promotion of
// 8/16-bit types overflowing in a product).
template <typename C>
using wide_unsigned_t = std::conditional_t<(sizeof(C) < 4), uint32_t, std::make_unsigned_t<C>>;

template <typename C>
CANDLE_VM_INLINE C wrap_add(C a, C b) {
  using U = wide_unsigned_t<C>;
  return static_cast<C>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
}
template <typename C>
CANDLE_VM_INLINE C wrap_sub(C a, C b) {
  using U = wide_unsigned_t<C>;
  return static_cast<C>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
}
template <typename C>
CANDLE_VM_INLINE C wrap_mul(C a, C b) {
  using U = wide_unsigned_t<C>;
  return static_cast<C>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
}

// f(x) of one unary op on the compute type C (float, double or an integer type).
template <UnaryOp OP>
struct UnaryFn {
  template <typename C>
  CANDLE_VM_INLINE C operator()(C x) const {
    constexpr bool is_f32 = std::is_same_v<C, float>;
    if constexpr (std::is_integral_v<C>) {
      if constexpr (OP == UnaryOp::Neg)
        return wrap_sub(C(0), x);
      else if constexpr (OP == UnaryOp::Abs) {
        if constexpr (std::is_signed_v<C>)
          return x < 0 ? wrap_sub(C(0), x) : x;
        else
          return x;
      } else if constexpr (OP == UnaryOp::Sqr)
        return wrap_mul(x, x);
      else if constexpr (OP == UnaryOp::Relu)
        return x > 0 ? x : C(0);
      else if constexpr (OP == UnaryOp::Sign)
        return static_cast<C>((x > 0) - (x < 0));
      else
        return x;  // ceil, floor, round
    } else if constexpr (OP == UnaryOp::Neg) {
      return -x;
    } else if constexpr (OP == UnaryOp::Recip) {
      return C(1) / x;
    } else if constexpr (OP == UnaryOp::Exp) {
      if constexpr (is_f32)
        return vm::exp_f32(x);
      else
        return std::exp(x);
    } else if constexpr (OP == UnaryOp::Log) {
      return std::log(x);
    } else if constexpr (OP == UnaryOp::Sin) {
      return std::sin(x);
    } else if constexpr (OP == UnaryOp::Cos) {
      return std::cos(x);
    } else if constexpr (OP == UnaryOp::Tanh) {
      if constexpr (is_f32)
        return vm::tanh_f32(x);
      else
        return std::tanh(x);
    } else if constexpr (OP == UnaryOp::Abs) {
      return std::fabs(x);
    } else if constexpr (OP == UnaryOp::Sqr) {
      return x * x;
    } else if constexpr (OP == UnaryOp::Sqrt) {
      return std::sqrt(x);
    } else if constexpr (OP == UnaryOp::Gelu) {
      if constexpr (is_f32) {
        return vm::gelu_tanh_f32(x);
      } else {
        // 0.5 x (1 + tanh(u)) == x * sigmoid(2u), without the cancellation for x < 0
        C u2 = C(1.5957691216057307117) * (x + C(0.044715) * (x * x * x));
        return x / (C(1) + std::exp(-u2));
      }
    } else if constexpr (OP == UnaryOp::GeluErf) {
      if constexpr (is_f32)
        return vm::gelu_erf_f32(x);
      else
        return C(0.5) * x * std::erfc(-x * C(0.70710678118654752440));
    } else if constexpr (OP == UnaryOp::Erf) {
      if constexpr (is_f32)
        return vm::erf_f32(x);
      else
        return std::erf(x);
    } else if constexpr (OP == UnaryOp::Relu) {
      return x > C(0) ? x : C(0);  // NaN -> 0, as candle's max(x, 0)
    } else if constexpr (OP == UnaryOp::Silu) {
      if constexpr (is_f32)
        return vm::silu_f32(x);
      else
        return x / (C(1) + std::exp(-x));
    } else if constexpr (OP == UnaryOp::Sigmoid) {
      if constexpr (is_f32)
        return vm::sigmoid_f32(x);
      else
        return C(1) / (C(1) + std::exp(-x));
    } else if constexpr (OP == UnaryOp::Ceil) {
      return std::ceil(x);
    } else if constexpr (OP == UnaryOp::Floor) {
      return std::floor(x);
    } else if constexpr (OP == UnaryOp::Round) {
      return std::round(x);  // half away from zero, as Rust's round
    } else {
      static_assert(OP == UnaryOp::Sign);
      // 0 for +-0 (and NaN), as candle
      return static_cast<C>((x > C(0)) - (x < C(0)));
    }
  }
};

// Calls fn.template operator()<OP>() with `op` as a template argument.
template <typename Fn>
decltype(auto) with_unary_op(UnaryOp op, Fn&& fn) {
  switch (op) {
    case UnaryOp::Neg: return fn.template operator()<UnaryOp::Neg>();
    case UnaryOp::Recip: return fn.template operator()<UnaryOp::Recip>();
    case UnaryOp::Exp: return fn.template operator()<UnaryOp::Exp>();
    case UnaryOp::Log: return fn.template operator()<UnaryOp::Log>();
    case UnaryOp::Sin: return fn.template operator()<UnaryOp::Sin>();
    case UnaryOp::Cos: return fn.template operator()<UnaryOp::Cos>();
    case UnaryOp::Tanh: return fn.template operator()<UnaryOp::Tanh>();
    case UnaryOp::Abs: return fn.template operator()<UnaryOp::Abs>();
    case UnaryOp::Sqr: return fn.template operator()<UnaryOp::Sqr>();
    case UnaryOp::Sqrt: return fn.template operator()<UnaryOp::Sqrt>();
    case UnaryOp::Gelu: return fn.template operator()<UnaryOp::Gelu>();
    case UnaryOp::GeluErf: return fn.template operator()<UnaryOp::GeluErf>();
    case UnaryOp::Erf: return fn.template operator()<UnaryOp::Erf>();
    case UnaryOp::Relu: return fn.template operator()<UnaryOp::Relu>();
    case UnaryOp::Silu: return fn.template operator()<UnaryOp::Silu>();
    case UnaryOp::Ceil: return fn.template operator()<UnaryOp::Ceil>();
    case UnaryOp::Floor: return fn.template operator()<UnaryOp::Floor>();
    case UnaryOp::Round: return fn.template operator()<UnaryOp::Round>();
    case UnaryOp::Sign: return fn.template operator()<UnaryOp::Sign>();
    case UnaryOp::Sigmoid: return fn.template operator()<UnaryOp::Sigmoid>();
  }
  throw Error(ErrorKind::Internal, "invalid unary op");
}

}  // namespace candle::cpu::ops
