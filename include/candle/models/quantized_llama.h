// candle::models::quantized_llama (candle-transformers' quantized_llama, plus qwen2 / qwen3):
// the llama family from a GGUF file (llama.cpp's tensor names and metadata), the weights
// multiplied through quantized::QMatMul.
//
// general.architecture "llama": llama.cpp's converter permutes the q/k rows of HF checkpoints so
// that the rotation pairs adjacent elements: the interleaved rope (rope_i) here, as llama.cpp's
// LLAMA_ROPE_TYPE_NORM. "qwen2" and "qwen3": the NEOX layout (halves, rope), q/k/v biases for
// qwen2 and the q/k RmsNorms (attn_q_norm / attn_k_norm) for qwen3. rope_freqs.weight (llama 3.1
// GGUFs) divides the frequencies; {arch}.rope.scaling.type "linear" divides the positions, "yarn"
// (rope.scaling.factor, original_context_length, yarn_beta_fast / slow) blends interpolated and
// original frequencies and scales cos / sin by 0.1 ln(factor) + 1, as llama.cpp's rope_yarn.
// MoE: {arch}.expert_count / expert_used_count (mixtral is "llama" with experts; "qwen3moe" adds
// expert_feed_forward_length), the router ffn_gate_inp and the experts as ffn_{gate,up,down}_exps
// [experts, ...]. "gemma", "gemma2", "gemma3": norms stored as 1 + w (llama.cpp's converter),
// embeddings scaled by sqrt(dim), gelu MLPs; gemma2 / gemma3 post_attention_norm and post_ffw_norm,
// attention.sliding_window on every other layer (gemma2) or all but every
// attention.sliding_window_pattern-th (gemma3, default 6), gemma2's logit soft-caps, gemma3's q/k
// norms and local rope base rope.freq_base_swa (default 10000). "phi3": the fused attn_qkv and
// ffn_up (gate | up) split into their parts. rope.dimension_count below the head size: partial
// rotary (the first dims of each head rotate; phi4-mini). Tested against transformers through GGUFs written
// from the fixtures (tests/models/llm_transformers_test.cpp).
#pragma once

#include <memory>
#include <string>

#include "candle/comm.h"
#include "candle/device.h"
#include "candle/models/causal_lm.h"
#include "candle/quantized/gguf_file.h"
#include "candle/tensor.h"

namespace candle::models::quantized_llama {

class ModelWeights {
 public:
  // Throws Error(UnsupportedOp) naming an unknown architecture, Error(InvalidArgument / Parse)
  // naming a missing or inconsistent key or tensor.
  // With `comm`: this rank's share of a tensor-parallel model (as llama::Llama::load; the blocks
  // of o / down are split at whole quantization blocks).
  static ModelWeights from_gguf(const quantized::gguf_file::Content& ct, const Device& device,
                                std::shared_ptr<Comm> comm = nullptr);
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
