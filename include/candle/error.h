// candle::Error: the one exception type of the library (candle's Result<T> error).
#pragma once

#include <exception>
#include <string>
#include <vector>

namespace candle {

enum class ErrorKind {
  ShapeMismatch,
  DTypeMismatch,
  DimOutOfRange,
  IndexOutOfRange,
  UnsupportedOp,
  DeviceMismatch,
  Device,
  Io,
  Parse,
  InvalidArgument,
  Internal,
};

const char* error_kind_name(ErrorKind kind);

class Error : public std::exception {
 public:
  Error(ErrorKind kind, std::string message);

  ErrorKind kind() const noexcept { return kind_; }
  // The innermost message, without context.
  const std::string& message() const noexcept { return message_; }
  // Context entries, outermost last (e.g. "loading tensor 'w' from model.safetensors").
  const std::vector<std::string>& context() const noexcept { return context_; }
  // Returns a copy of this error with one more context entry.
  Error with_context(std::string ctx) const;
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  void rebuild_what();
  ErrorKind kind_;
  std::string message_;
  std::vector<std::string> context_;
  std::string what_;
};

// Rethrows a candle::Error from `fn` with `ctx` added; other exceptions pass through.
template <typename Fn>
auto with_context(const std::string& ctx, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const Error& e) {
    throw e.with_context(ctx);
  }
}

}  // namespace candle
