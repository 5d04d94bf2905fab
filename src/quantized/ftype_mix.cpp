// llama-quantize's per-tensor type choices (include/candle/quantized/ftype_mix.h), written from
// its documented behaviour.
#include "candle/quantized/ftype_mix.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "candle/error.h"

namespace candle::quantized {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// llama.cpp's "more bits" layers of the _M mixes: the first and last eighth, and every third between
bool use_more_bits(long layer, long n_layers) {
  return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

}  // namespace

FileType parse_file_type(const std::string& arg) {
  // llama.cpp's LLAMA_FTYPE_MOSTLY_* numbers, written as general.file_type
  static const std::map<std::string, FileType> types = {
      {"f32", {GgmlDType::F32, false, 0, "F32"}},
      {"f16", {GgmlDType::F16, false, 1, "F16"}},
      {"bf16", {GgmlDType::BF16, false, 32, "BF16"}},
      {"q4_0", {GgmlDType::Q4_0, false, 2, "Q4_0"}},
      {"q4_1", {GgmlDType::Q4_1, false, 3, "Q4_1"}},
      {"q8_0", {GgmlDType::Q8_0, false, 7, "Q8_0"}},
      {"q5_0", {GgmlDType::Q5_0, false, 8, "Q5_0"}},
      {"q5_1", {GgmlDType::Q5_1, false, 9, "Q5_1"}},
      {"q2_k", {GgmlDType::Q2K, false, 10, "Q2_K"}},
      {"q3_k", {GgmlDType::Q3K, false, 11, "Q3_K_S"}},
      {"q3_k_s", {GgmlDType::Q3K, false, 11, "Q3_K_S"}},
      {"q4_k", {GgmlDType::Q4K, false, 14, "Q4_K_S"}},
      {"q4_k_s", {GgmlDType::Q4K, false, 14, "Q4_K_S"}},
      {"q4_k_m", {GgmlDType::Q4K, true, 15, "Q4_K_M"}},
      {"q5_k", {GgmlDType::Q5K, false, 16, "Q5_K_S"}},
      {"q5_k_s", {GgmlDType::Q5K, false, 16, "Q5_K_S"}},
      {"q5_k_m", {GgmlDType::Q5K, true, 17, "Q5_K_M"}},
      {"q6_k", {GgmlDType::Q6K, false, 18, "Q6_K"}},
      {"iq4_nl", {GgmlDType::IQ4_NL, false, 25, "IQ4_NL"}},
      {"iq4_xs", {GgmlDType::IQ4_XS, false, 30, "IQ4_XS"}},
  };
  auto it = types.find(lower(arg));
  if (it == types.end()) {
    std::string known;
    for (const auto& [k, v] : types) known += (known.empty() ? "" : " ") + k;
    throw Error(ErrorKind::InvalidArgument,
                "unknown type '" + arg.substr(0, 40) + "' (known: " + known + ")");
  }
  return it->second;
}

long tensor_layer_index(const std::string& name) {
  for (const char* p : {"blk.", "layers.", "h."}) {
    auto at = name.find(p);
    if (at == std::string::npos || (at > 0 && name[at - 1] != '.')) continue;
    size_t i = at + std::char_traits<char>::length(p), j = i;
    while (j < name.size() && j - i < 9 && std::isdigit(static_cast<unsigned char>(name[j]))) ++j;
    if (j > i && j < name.size() && name[j] == '.') return std::stol(name.substr(i, j - i));
  }
  return -1;
}

GgmlDType tensor_type_for(const std::string& name, const Shape& shape, const FileType& ft, long n_layers) {
  const bool matrix = shape.rank() == 2 && name.ends_with("weight");
  if (!matrix || !ggml_is_quantized(ft.base)) return matrix ? ft.base : GgmlDType::F32;
  GgmlDType t = ft.base;
  // the output projection: q6_k (q8_0 when its rows are not whole super-blocks) unless q8_0 was asked
  const bool output = name == "output.weight" || name == "lm_head.weight";
  if (output && t != GgmlDType::Q8_0)
    return shape.dims().back() % ggml_block_size(GgmlDType::Q6K) == 0 ? GgmlDType::Q6K : GgmlDType::Q8_0;
  const long layer = tensor_layer_index(name);
  const bool attn_v = contains(name, "attn_v.") || contains(name, "v_proj.");
  const bool ffn_down = contains(name, "ffn_down") || contains(name, "down_proj.");
  const bool attn_qkv = contains(name, "attn_qkv.") || contains(name, "qkv_proj.");
  if (ft.mix_m) {
    if ((attn_v || ffn_down) && layer >= 0 && n_layers > 0 && use_more_bits(layer, n_layers))
      t = GgmlDType::Q6K;
    if (attn_qkv) t = ft.base == GgmlDType::Q4K ? GgmlDType::Q5K : GgmlDType::Q6K;
  } else if (ft.base == GgmlDType::Q4K && ffn_down && layer >= 0 && layer < n_layers / 8) {
    t = GgmlDType::Q5K;  // Q4_K_S: the first eighth of ffn_down
  }
  // a row the super-block does not divide: llama.cpp's fallbacks
  const size_t row = shape.dims().back();
  if (row % ggml_block_size(t) != 0) {
    switch (t) {
      case GgmlDType::Q2K:
      case GgmlDType::Q3K:
      case GgmlDType::IQ4_XS: t = GgmlDType::IQ4_NL; break;
      case GgmlDType::Q4K: t = GgmlDType::Q5_0; break;
      case GgmlDType::Q5K: t = GgmlDType::Q5_1; break;
      case GgmlDType::Q6K: t = GgmlDType::Q8_0; break;
      default: break;
    }
    if (row % ggml_block_size(t) != 0) t = GgmlDType::F16;
  }
  return t;
}

}  // namespace candle::quantized
