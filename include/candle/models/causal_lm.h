// candle::models::CausalLM: one interface over the decoder-only language models, and a loader
// that picks the family from the file.
#pragma once

#include <memory>
#include <string>

#include "candle/device.h"
#include "candle/dtype.h"
#include "candle/quantized/gguf_file.h"
#include "candle/tensor.h"

namespace candle::models {

class CausalLM {
 public:
  virtual ~CausalLM() = default;
  // ids [b, t] u32 at positions index_pos.. (index_pos: the tokens already fed since the last
  // clear_kv_cache): the last position's logits [b, vocab] f32.
  virtual Tensor forward(const Tensor& ids, size_t index_pos) = 0;
  virtual void clear_kv_cache() = 0;
  virtual size_t vocab_size() const = 0;
  virtual size_t max_seq_len() const = 0;
  // "llama", "mistral", "qwen2", "qwen3" (model_type or general.architecture)
  virtual std::string architecture() const = 0;
};

// `path`: a .gguf file (quantized_llama; `dtype` is not used: activations are f32), or a folder
// with config.json and model.safetensors or sharded weights (model.safetensors.index.json),
// loaded in `dtype` on `device`. An unknown architecture / model_type is an Error naming it; a
// truncated or malformed file the reader's error.
std::unique_ptr<CausalLM> load_causal_lm(const std::string& path, const Device& device, DType dtype);
// The same from a GGUF already read (a caller that also wants its tokenizer reads the file once).
std::unique_ptr<CausalLM> load_causal_lm(const quantized::gguf_file::Content& gguf, const Device& device);

}  // namespace candle::models
