// Shared by the GGUF and legacy GGML readers: a bounds-checked little-endian cursor over a
// hostile file, ggml type ids checked with a message naming the type, and text for error
// messages (escaped and truncated: names in a hostile file are untrusted). Internal.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "candle/error.h"
#include "candle/quantized/ggml_dtype.h"
#include "io/utf8.h"

namespace candle::quantized::detail {

// At most `max` bytes of `s`, non-printable bytes as \xNN, "..." marking a cut.
std::string printable(std::string_view s, size_t max = 64);
using candle::io::valid_utf8;
// The GgmlDType of id `id`, or Error(UnsupportedOp / Parse) naming it: "unsupported type
// iq2_xxs (id 16)", "type id 4 (q4_2) was removed from ggml", "unknown type id 99".
GgmlDType ggml_dtype_of_id(uint32_t id, const std::string& where);

class ByteReader {
 public:
  ByteReader(std::span<const uint8_t> bytes, std::string label) : b_(bytes), label_(std::move(label)) {}

  size_t pos() const { return pos_; }
  size_t size() const { return b_.size(); }
  size_t remaining() const { return b_.size() - pos_; }
  bool at_end() const { return pos_ == b_.size(); }
  const std::string& label() const { return label_; }

  [[noreturn]] void fail(const std::string& msg, ErrorKind kind = ErrorKind::Parse) const {
    throw Error(kind, label_ + ": " + msg);
  }
  // throws "unexpected end of file reading <what> at offset P (the file is N bytes)"
  void need(uint64_t n, const char* what) const {
    if (n > remaining())
      fail(std::string("unexpected end of file reading ") + what + " at offset " + std::to_string(pos_) +
           " (the file is " + std::to_string(b_.size()) + " bytes)");
  }
  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  uint32_t u32(const char* what) { return read<uint32_t>(what); }
  uint64_t u64(const char* what) { return read<uint64_t>(what); }
  // n bytes as a view into the file
  std::string_view bytes(uint64_t n, const char* what) {
    need(n, what);
    std::string_view s(reinterpret_cast<const char*>(b_.data() + pos_), static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }
  void skip(uint64_t n, const char* what) { (void)bytes(n, what); }

 private:
  std::span<const uint8_t> b_;
  std::string label_;
  size_t pos_ = 0;
};

}  // namespace candle::quantized::detail
