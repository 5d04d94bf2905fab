// candle::quantized file types: the per-tensor block types of a GGUF model file as llama.cpp's
// llama-quantize chooses them (LLAMA_FTYPE_* and its K-quant mixes), shared by candle-quantize
// and candle-make-random-llama.
//
// Only weight matrices are quantized (2-d tensors whose name ends in "weight"; norms, biases and
// 1-d tensors stay f32); under K-quant types the output projection takes q6_k; the _M mixes put
// attn_v / ffn_down of the first and last eighth of the layers (and every third between) in
// q6_k; a block type whose block does not divide a row falls back to a legacy type (then f16).
#pragma once

#include <cstdint>
#include <string>

#include "candle/quantized/ggml_dtype.h"
#include "candle/shape.h"

namespace candle::quantized {

// A file type: the base block type, and whether it is one of llama.cpp's _M mixes.
struct FileType {
  GgmlDType base = GgmlDType::F32;
  bool mix_m = false;      // _M: attn_v / ffn_down of some layers in q6_k
  uint32_t file_type = 0;  // llama.cpp's general.file_type (LLAMA_FTYPE_MOSTLY_*)
  std::string name;        // "Q4_K_M", ...
};

// "f32" "f16" "bf16" "q4_0" "q4_1" "q5_0" "q5_1" "q8_0" "q2_k" "q3_k" "q3_k_s" "q4_k" "q4_k_s"
// "q4_k_m" "q5_k" "q5_k_s" "q5_k_m" "q6_k" "iq4_nl" "iq4_xs" (case-insensitive); anything else
// is Error(InvalidArgument) listing the known names.
FileType parse_file_type(const std::string& arg);

// The layer index of a GGUF ("blk.N.") or Hugging Face ("layers.N.", "h.N.") tensor name, or -1.
long tensor_layer_index(const std::string& name);

// The block type of the tensor `name` of `shape` (candle's order) in a model of `n_layers`
// layers written as `ft`.
GgmlDType tensor_type_for(const std::string& name, const Shape& shape, const FileType& ft, long n_layers);

}  // namespace candle::quantized
