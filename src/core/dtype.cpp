#include "candle/dtype.h"

#include <string>

namespace candle {

std::string_view dtype_name(DType dt) {
  switch (dt) {
    case DType::U8: return "u8";
    case DType::U32: return "u32";
    case DType::I16: return "i16";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::BF16: return "bf16";
    case DType::F16: return "f16";
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::F8E4M3: return "f8e4m3";
  }
  return "unknown";
}

DType dtype_from_name(std::string_view name) {
  for (DType dt : kAllDTypes) {
    if (dtype_name(dt) == name) return dt;
  }
  throw Error(ErrorKind::Parse, "unknown dtype '" + std::string(name) + "'");
}

}  // namespace candle
