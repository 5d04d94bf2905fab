#include "candle/quantized/ggml_dtype.h"

#include <algorithm>
#include <cctype>
#include <iterator>
#include <string>

#include "candle/error.h"
#include "candle/quantized/blocks.h"

namespace candle::quantized {

namespace {

struct TypeInfo {
  GgmlDType type;
  std::string_view name;
  size_t block;
  size_t bytes;
};

constexpr TypeInfo kTypes[] = {
    {GgmlDType::F32, "f32", 1, 4},
    {GgmlDType::F16, "f16", 1, 2},
    {GgmlDType::Q4_0, "q4_0", kQK4_0, sizeof(BlockQ4_0)},
    {GgmlDType::Q4_1, "q4_1", kQK4_1, sizeof(BlockQ4_1)},
    {GgmlDType::Q5_0, "q5_0", kQK5_0, sizeof(BlockQ5_0)},
    {GgmlDType::Q5_1, "q5_1", kQK5_1, sizeof(BlockQ5_1)},
    {GgmlDType::Q8_0, "q8_0", kQK8_0, sizeof(BlockQ8_0)},
    {GgmlDType::Q8_1, "q8_1", kQK8_1, sizeof(BlockQ8_1)},
    {GgmlDType::Q2K, "q2_K", kQK_K, sizeof(BlockQ2_K)},
    {GgmlDType::Q3K, "q3_K", kQK_K, sizeof(BlockQ3_K)},
    {GgmlDType::Q4K, "q4_K", kQK_K, sizeof(BlockQ4_K)},
    {GgmlDType::Q5K, "q5_K", kQK_K, sizeof(BlockQ5_K)},
    {GgmlDType::Q6K, "q6_K", kQK_K, sizeof(BlockQ6_K)},
    {GgmlDType::Q8K, "q8_K", kQK_K, sizeof(BlockQ8_K)},
    {GgmlDType::IQ4_NL, "iq4_nl", kQK4_NL, sizeof(BlockIQ4_NL)},
    {GgmlDType::IQ4_XS, "iq4_xs", kQK_K, sizeof(BlockIQ4_XS)},
    {GgmlDType::BF16, "bf16", 1, 2},
};
static_assert(std::size(kTypes) == std::size(kAllGgmlDTypes));

const TypeInfo& info(GgmlDType t) {
  for (const auto& i : kTypes)
    if (i.type == t) return i;
  throw Error(ErrorKind::InvalidArgument, "unknown GgmlDType id " + std::to_string(static_cast<uint32_t>(t)));
}

}  // namespace

std::string_view ggml_dtype_name(GgmlDType t) { return info(t).name; }
size_t ggml_block_size(GgmlDType t) { return info(t).block; }
size_t ggml_type_size(GgmlDType t) { return info(t).bytes; }
bool ggml_is_quantized(GgmlDType t) {
  return t != GgmlDType::F32 && t != GgmlDType::F16 && t != GgmlDType::BF16;
}

std::optional<GgmlDType> ggml_dtype_from_id(uint32_t id) {
  for (const auto& i : kTypes)
    if (static_cast<uint32_t>(i.type) == id) return i.type;
  return std::nullopt;
}

std::optional<GgmlDType> ggml_dtype_from_name(std::string_view name) {
  auto lower = [](std::string_view s) {
    std::string r(s);
    std::transform(r.begin(), r.end(), r.begin(), [](unsigned char c) { return std::tolower(c); });
    return r;
  };
  std::string n = lower(name);
  for (const auto& i : kTypes)
    if (lower(i.name) == n) return i.type;
  return std::nullopt;
}

size_t ggml_row_bytes(GgmlDType t, uint64_t n) {
  const auto& i = info(t);
  if (n % i.block != 0)
    throw Error(ErrorKind::InvalidArgument, "a row of " + std::to_string(n) +
                                                " elements is not a whole number of " + std::string(i.name) +
                                                " blocks of " + std::to_string(i.block));
  return static_cast<size_t>(n / i.block) * i.bytes;
}

}  // namespace candle::quantized
