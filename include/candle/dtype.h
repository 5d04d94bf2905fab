// Element types and the one dtype visitor (`dispatch`).
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string_view>
#include <type_traits>

#include "candle/error.h"

namespace candle {

enum class DType : uint8_t { U8, U32, I16, I32, I64, BF16, F16, F32, F64, F8E4M3 };

inline constexpr DType kAllDTypes[] = {DType::U8,   DType::U32, DType::I16, DType::I32, DType::I64,
                                       DType::BF16, DType::F16, DType::F32, DType::F64, DType::F8E4M3};

// IEEE 754 binary16.
struct f16 {
  uint16_t bits = 0;
  f16() = default;
  explicit f16(float v) : bits(from_f32(v)) {}
  explicit operator float() const { return to_f32(bits); }
  static f16 from_bits(uint16_t b) {
    f16 h;
    h.bits = b;
    return h;
  }
  static uint16_t from_f32(float v) {
    uint32_t x = std::bit_cast<uint32_t>(v);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return static_cast<uint16_t>(sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
    if (ax < 0x38800000u) {                                               // subnormal or zero in f16
      // add 0.5 (as f32) so the FPU rounds the mantissa to nearest even for us
      float f = std::bit_cast<float>(ax) + 0.5f;
      return static_cast<uint16_t>(sign | (std::bit_cast<uint32_t>(f) - 0x3f000000u));
    }
    uint32_t mant_odd = (ax >> 13) & 1u;
    ax += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round to nearest even
    return static_cast<uint16_t>(sign | (ax >> 13));
  }
  static float to_f32(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
      float f = static_cast<float>(mant) * 5.9604644775390625e-08f;  // 2^-24
      return sign ? -f : f;
    }
    if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
    return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
  }
};

// bfloat16: the upper half of an f32, rounded to nearest even.
struct bf16 {
  uint16_t bits = 0;
  bf16() = default;
  explicit bf16(float v) : bits(from_f32(v)) {}
  explicit operator float() const { return to_f32(bits); }
  static bf16 from_bits(uint16_t b) {
    bf16 h;
    h.bits = b;
    return h;
  }
  static uint16_t from_f32(float v) {
    uint32_t x = std::bit_cast<uint32_t>(v);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
    x += 0x7fffu + ((x >> 16) & 1u);
    return static_cast<uint16_t>(x >> 16);
  }
  static float to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }
};

// float8 e4m3fn (OCP FP8): bias 7, no infinities, 0x7f/0xff are NaN, max 448.
// Values beyond the largest finite number become NaN, as in PyTorch.
struct f8e4m3 {
  uint8_t bits = 0;
  f8e4m3() = default;
  explicit f8e4m3(float v) : bits(from_f32(v)) {}
  explicit operator float() const { return to_f32(bits); }
  static f8e4m3 from_bits(uint8_t b) {
    f8e4m3 h;
    h.bits = b;
    return h;
  }
  static uint8_t from_f32(float v) {
    uint32_t x = std::bit_cast<uint32_t>(v);
    uint8_t sign = static_cast<uint8_t>((x >> 24) & 0x80u);
    float a = std::fabs(v);
    if (std::isnan(v) || a > 464.0f) return static_cast<uint8_t>(sign | 0x7f);
    if (a < 0.015625f) {  // below 2^-6: subnormal, steps of 2^-9
      float q = std::nearbyint(a * 512.0f);
      return static_cast<uint8_t>(sign | static_cast<uint8_t>(q));
    }
    uint32_t ax = std::bit_cast<uint32_t>(a);
    uint32_t mant_odd = (ax >> 20) & 1u;
    ax += 0x7ffffu + mant_odd;
    int e = static_cast<int>(ax >> 23) - 127 + 7;
    uint32_t m = (ax >> 20) & 0x7u;
    return static_cast<uint8_t>(sign | (e << 3) | m);
  }
  static float to_f32(uint8_t b) {
    bool neg = b & 0x80;
    uint32_t e = (b >> 3) & 0xfu;
    uint32_t m = b & 0x7u;
    float r;
    if (e == 0xf && m == 0x7) return std::numeric_limits<float>::quiet_NaN();
    if (e == 0)
      r = static_cast<float>(m) * 0.001953125f;  // 2^-9
    else
      r = std::bit_cast<float>(((e + 120u) << 23) | (m << 20));
    return neg ? -r : r;
  }
};

template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<uint8_t> {
  static constexpr DType value = DType::U8;
};
template <>
struct DTypeOf<uint32_t> {
  static constexpr DType value = DType::U32;
};
template <>
struct DTypeOf<int16_t> {
  static constexpr DType value = DType::I16;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::I32;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::I64;
};
template <>
struct DTypeOf<bf16> {
  static constexpr DType value = DType::BF16;
};
template <>
struct DTypeOf<f16> {
  static constexpr DType value = DType::F16;
};
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::F32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::F64;
};
template <>
struct DTypeOf<f8e4m3> {
  static constexpr DType value = DType::F8E4M3;
};

template <typename T>
inline constexpr DType dtype_of = DTypeOf<T>::value;

template <typename T>
inline constexpr bool is_half_like_v =
    std::is_same_v<T, f16> || std::is_same_v<T, bf16> || std::is_same_v<T, f8e4m3>;
template <typename T>
inline constexpr bool is_float_v = std::is_floating_point_v<T> || is_half_like_v<T>;

// The type arithmetic on T is done in: float for the 16/8-bit floats, T otherwise.
template <typename T>
using compute_t = std::conditional_t<is_half_like_v<T>, float, T>;

// Converts between any two element types (through float/double for the small floats;
// float -> integer truncates toward zero as a C cast, NaN gives 0, out of range saturates).
template <typename To, typename From>
inline To cast_value(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (is_half_like_v<From>) {
    return cast_value<To>(static_cast<float>(v));
  } else if constexpr (is_half_like_v<To>) {
    return To(static_cast<float>(v));
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    if (std::isnan(v)) return To(0);
    if (v <= static_cast<From>(std::numeric_limits<To>::lowest())) return std::numeric_limits<To>::lowest();
    if (v >= static_cast<From>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

constexpr size_t dtype_size(DType dt) {
  switch (dt) {
    case DType::U8: return 1;
    case DType::F8E4M3: return 1;
    case DType::I16: return 2;
    case DType::BF16: return 2;
    case DType::F16: return 2;
    case DType::U32: return 4;
    case DType::I32: return 4;
    case DType::F32: return 4;
    case DType::I64: return 8;
    case DType::F64: return 8;
  }
  return 0;
}

constexpr bool dtype_is_float(DType dt) {
  return dt == DType::BF16 || dt == DType::F16 || dt == DType::F32 || dt == DType::F64 || dt == DType::F8E4M3;
}
constexpr bool dtype_is_int(DType dt) { return !dtype_is_float(dt); }

// candle's names: "u8", "u32", "i16", "i32", "i64", "bf16", "f16", "f32", "f64", "f8e4m3".
std::string_view dtype_name(DType dt);
// Parses a candle dtype name; throws Error(Parse) on anything else.
DType dtype_from_name(std::string_view name);

// Calls fn.template operator()<T>() with the C++ type of `dt`:
//   dispatch(dt, [&]<typename T>() { ... });
template <typename Fn>
decltype(auto) dispatch(DType dt, Fn&& fn) {
  switch (dt) {
    case DType::U8: return fn.template operator()<uint8_t>();
    case DType::U32: return fn.template operator()<uint32_t>();
    case DType::I16: return fn.template operator()<int16_t>();
    case DType::I32: return fn.template operator()<int32_t>();
    case DType::I64: return fn.template operator()<int64_t>();
    case DType::BF16: return fn.template operator()<bf16>();
    case DType::F16: return fn.template operator()<f16>();
    case DType::F32: return fn.template operator()<float>();
    case DType::F64: return fn.template operator()<double>();
    case DType::F8E4M3: return fn.template operator()<f8e4m3>();
  }
  throw Error(ErrorKind::Internal, "dispatch: invalid dtype");
}

// As dispatch, for the float dtypes only; throws UnsupportedOp naming `op` otherwise.
template <typename Fn>
decltype(auto) dispatch_float(DType dt, const char* op, Fn&& fn) {
  switch (dt) {
    case DType::BF16: return fn.template operator()<bf16>();
    case DType::F16: return fn.template operator()<f16>();
    case DType::F32: return fn.template operator()<float>();
    case DType::F64: return fn.template operator()<double>();
    case DType::F8E4M3: return fn.template operator()<f8e4m3>();
    default:
      throw Error(ErrorKind::UnsupportedOp,
                  std::string("unsupported dtype ") + std::string(dtype_name(dt)) + " for op " + op);
  }
}

}  // namespace candle
