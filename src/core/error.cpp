#include "candle/error.h"

namespace candle {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::ShapeMismatch: return "shape mismatch";
    case ErrorKind::DTypeMismatch: return "dtype mismatch";
    case ErrorKind::DimOutOfRange: return "dim out of range";
    case ErrorKind::IndexOutOfRange: return "index out of range";
    case ErrorKind::UnsupportedOp: return "unsupported op";
    case ErrorKind::DeviceMismatch: return "device mismatch";
    case ErrorKind::Device: return "device error";
    case ErrorKind::Io: return "i/o error";
    case ErrorKind::Parse: return "parse error";
    case ErrorKind::InvalidArgument: return "invalid argument";
    case ErrorKind::Internal: return "internal error";
  }
  return "error";
}

Error::Error(ErrorKind kind, std::string message) : kind_(kind), message_(std::move(message)) {
  rebuild_what();
}

Error Error::with_context(std::string ctx) const {
  Error e = *this;
  e.context_.push_back(std::move(ctx));
  e.rebuild_what();
  return e;
}

void Error::rebuild_what() {
  what_.clear();
  for (auto it = context_.rbegin(); it != context_.rend(); ++it) {
    what_ += *it;
    what_ += ": ";
  }
  what_ += message_;
}

}  // namespace candle
