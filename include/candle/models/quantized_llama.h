// candle::models::quantized_llama (candle-transformers' quantized_llama, plus qwen2 / qwen3):
// the llama family from a GGUF file (llama.cpp's tensor names and metadata), the weights
// multiplied through quantized::QMatMul.
//
// general.architecture "llama": llama.cpp's converter permutes the q/k rows of HF checkpoints so
// that the rotation pairs adjacent elements: the interleaved rope (rope_i) here, as llama.cpp's
// LLAMA_ROPE_TYPE_NORM. "qwen2" and "qwen3": the NEOX layout (halves, rope), q/k/v biases for
// qwen2 and the q/k RmsNorms (attn_q_norm / attn_k_norm) for qwen3. rope_freqs.weight (llama 3.1
// GGUFs) divides the frequencies; {arch}.rope.scaling.type "linear" divides the positions.
#pragma once

#include <memory>
#include <string>

#include "candle/device.h"
#include "candle/models/causal_lm.h"
#include "candle/quantized/gguf_file.h"
#include "candle/tensor.h"

namespace candle::models::quantized_llama {

class ModelWeights {
 public:
  // Throws Error(UnsupportedOp) naming an unknown architecture, Error(InvalidArgument / Parse)
  // naming a missing or inconsistent key or tensor.
  static ModelWeights from_gguf(const quantized::gguf_file::Content& ct, const Device& device);
  // x [b, t] u32 at positions index_pos.. (index_pos must equal the cached length): the last
  // position's logits [b, vocab] f32.
  Tensor forward(const Tensor& x, size_t index_pos);
  void clear_kv_cache();
  // The position-independent decode (CausalLM::start_static_decode / prefill / decode_step).
  StaticDecode start_static_decode(size_t batch, size_t capacity) const;
  Tensor decode_step(const Tensor& ids, StaticDecode& state) const;
  Tensor prefill(const Tensor& ids, StaticDecode& state, size_t pos) const;
  size_t vocab_size() const;
  size_t max_seq_len() const;
  const std::string& architecture() const;

  struct Impl;

 private:
  explicit ModelWeights(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

}  // namespace candle::models::quantized_llama
