// Scalar: a value of any dtype, for fills, clamps and comparisons with a number.
#pragma once

#include <cstdint>
#include <type_traits>

#include "candle/dtype.h"

namespace candle {

// A scalar of any dtype: integers are kept exactly (i64/u32 beyond 2^53 too).
class Scalar {
 public:
  Scalar(double v) : is_int_(false), f_(v), i_(0), natural_(DType::F64) {}                       // NOLINT
  Scalar(float v) : is_int_(false), f_(v), i_(0), natural_(DType::F32) {}                        // NOLINT
  Scalar(int v) : is_int_(true), f_(v), i_(v), natural_(DType::I64) {}                           // NOLINT
  Scalar(int64_t v) : is_int_(true), f_(static_cast<double>(v)), i_(v), natural_(DType::I64) {}  // NOLINT
  Scalar(uint32_t v) : is_int_(true), f_(v), i_(v), natural_(DType::U32) {}                      // NOLINT
  Scalar(uint8_t v) : is_int_(true), f_(v), i_(v), natural_(DType::U8) {}                        // NOLINT
  Scalar(f16 v) : Scalar(static_cast<float>(v)) { natural_ = DType::F16; }                       // NOLINT
  Scalar(bf16 v) : Scalar(static_cast<float>(v)) { natural_ = DType::BF16; }                     // NOLINT
  Scalar(f8e4m3 v) : Scalar(static_cast<float>(v)) { natural_ = DType::F8E4M3; }                 // NOLINT
  Scalar(uint64_t v)
      : is_int_(true),
        f_(static_cast<double>(v)),
        i_(static_cast<int64_t>(v)),
        natural_(DType::I64) {}  // NOLINT
  // The value as element type T (integers exact, floats rounded once).
  template <typename T>
  T as() const {
    if constexpr (std::is_integral_v<T>)
      return is_int_ ? static_cast<T>(i_) : cast_value<T>(f_);
    else
      return cast_value<T>(f_);
  }
  double to_double() const { return f_; }
  // The dtype of the C++ value it was made from (double -> f64, int -> i64, ...).
  DType natural_dtype() const { return natural_; }

 private:
  bool is_int_;
  double f_;
  int64_t i_;
  DType natural_;
};

}  // namespace candle
