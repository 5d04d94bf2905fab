// quantized::GgmlDType: the element types of GGUF / GGML tensors. The numeric values are ggml's
// type ids, as written in GGUF tensor infos; a block of block_size() elements takes
// type_size() bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace candle::quantized {

enum class GgmlDType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2K = 10,
  Q3K = 11,
  Q4K = 12,
  Q5K = 13,
  Q6K = 14,
  Q8K = 15,
  IQ4_NL = 20,
  IQ4_XS = 23,
  BF16 = 30,
};

// every type above, in id order
inline constexpr GgmlDType kAllGgmlDTypes[] = {
    GgmlDType::F32,  GgmlDType::F16,  GgmlDType::Q4_0,   GgmlDType::Q4_1,   GgmlDType::Q5_0, GgmlDType::Q5_1,
    GgmlDType::Q8_0, GgmlDType::Q8_1, GgmlDType::Q2K,    GgmlDType::Q3K,    GgmlDType::Q4K,  GgmlDType::Q5K,
    GgmlDType::Q6K,  GgmlDType::Q8K,  GgmlDType::IQ4_NL, GgmlDType::IQ4_XS, GgmlDType::BF16};

// ggml's name: "f32", "q4_0", "q4_K", "iq4_xs", ...
std::string_view ggml_dtype_name(GgmlDType t);
// elements per block (1 for f32 / f16 / bf16)
size_t ggml_block_size(GgmlDType t);
// bytes per block
size_t ggml_type_size(GgmlDType t);
bool ggml_is_quantized(GgmlDType t);
// the type of a ggml id, or nullopt for an id this build does not know (other IQ types, ...)
std::optional<GgmlDType> ggml_dtype_from_id(uint32_t id);
// the type of a name as ggml_dtype_name gives it (case-insensitive), or nullopt
std::optional<GgmlDType> ggml_dtype_from_name(std::string_view name);
// bytes of a row of n elements; throws candle::Error when the block size does not divide n
size_t ggml_row_bytes(GgmlDType t, uint64_t n);

}  // namespace candle::quantized
