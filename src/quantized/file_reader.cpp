#include "quantized/file_reader.h"

#include <cstdio>

namespace candle::quantized::detail {

std::string printable(std::string_view s, size_t max) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i == max) return out + "...";
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

namespace {

// ggml's type ids that GgmlDType does not have (ggml v0.5.0: ids below 40)
struct OtherType {
  uint32_t id;
  const char* name;
  bool removed;
};
constexpr OtherType kOtherTypes[] = {
    {4, "q4_2", true},        {5, "q4_3", true},        {16, "iq2_xxs", false}, {17, "iq2_xs", false},
    {18, "iq3_xxs", false},   {19, "iq1_s", false},     {21, "iq3_s", false},   {22, "iq2_s", false},
    {24, "i8", false},        {25, "i16", false},       {26, "i32", false},     {27, "i64", false},
    {28, "f64", false},       {29, "iq1_m", false},     {31, "q4_0_4_4", true}, {32, "q4_0_4_8", true},
    {33, "q4_0_8_8", true},   {34, "tq1_0", false},     {35, "tq2_0", false},   {36, "iq4_nl_4_4", true},
    {37, "iq4_nl_4_8", true}, {38, "iq4_nl_8_8", true}, {39, "mxfp4", false},
};

}  // namespace

GgmlDType ggml_dtype_of_id(uint32_t id, const std::string& where) {
  if (auto t = ggml_dtype_from_id(id)) return *t;
  for (const auto& o : kOtherTypes) {
    if (o.id != id) continue;
    if (o.removed)
      throw Error(ErrorKind::Parse,
                  where + ": type id " + std::to_string(id) + " (" + o.name + ") was removed from ggml");
    throw Error(ErrorKind::UnsupportedOp,
                where + ": unsupported type " + o.name + " (id " + std::to_string(id) + ")");
  }
  throw Error(ErrorKind::Parse, where + ": unknown type id " + std::to_string(id));
}

}  // namespace candle::quantized::detail
