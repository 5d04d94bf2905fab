// candle::models::CausalLM: one interface over the decoder-only language models, and a loader
// that picks the family from the file.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "candle/device.h"
#include "candle/dtype.h"
#include "candle/quantized/gguf_file.h"
#include "candle/tensor.h"

namespace candle::models {

// A decode whose device work does not depend on the position, so that cuda::Graph can record
// one step and replay it for every token: the KV buffers of the whole capacity allocated ahead
// (zeros), the position a device tensor. Made by CausalLM::start_static_decode.
struct StaticDecode {
  Tensor pos;                // u32 [1] on the model's device: the next token's position (write it,
                             // e.g. with slice_set, before each step: decode_step does not advance it)
  std::vector<Tensor> k, v;  // per layer [batch, kv heads, capacity, head dim]
  size_t capacity = 0;
};

class CausalLM {
 public:
  virtual ~CausalLM() = default;
  // A StaticDecode of `batch` rows and `capacity` positions (<= max_seq_len()), at position 0;
  // Error(UnsupportedOp) for a model without one. Independent of forward()'s KV cache.
  virtual StaticDecode start_static_decode(size_t batch, size_t capacity);
  // One token per row, ids [batch, 1] u32 on the model's device, at state.pos: its keys and values
  // written there, attending to positions 0..pos; the logits [batch, vocab] f32. Every op reads the
  // position from device tensors (the rope rows by index_select, the KV writes by scatter_set,
  // attention with the key count on the device), so the same step serves every position.
  virtual Tensor decode_step(const Tensor& ids, StaticDecode& state);
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
