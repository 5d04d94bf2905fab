// candle::models::llama (candle-transformers' llama, mistral, qwen2 and qwen3): decoder-only
// transformers from a Hugging Face config.json and safetensors weights (through nn::VarBuilder).
//
// The family: pre-norm blocks (RmsNorm, attention with grouped-query heads and rotary position
// embeddings in the GPT-NeoX "halves" layout, RmsNorm, SwiGLU MLP), a final RmsNorm and an LM
// head (tied to the embeddings with tie_word_embeddings). The members differ in:
//   llama    rope_scaling "linear" or "llama3" (llama 3.1 / 3.2); attention_bias, mlp_bias
//   mistral  sliding_window (every layer)
//   qwen2    q/k/v biases; use_sliding_window + max_window_layers
//   qwen3    head_dim, per-head RmsNorms of q and k (q_norm, k_norm) before the rotation
//   mixtral  mistral with a sparse MoE MLP (block_sparse_moe: gate, experts.N.w1/w2/w3)
//   qwen3_moe qwen3 with MoE MLPs (mlp.gate, mlp.experts.N.*; norm_topk_prob, mlp_only_layers)
//   phi3     fused qkv_proj and gate_up_proj; sliding_window (partial rotary factors other than 1 and
//            longrope scaling are refused)
//   gemma    gelu MLP, RmsNorm by (1 + w), embeddings scaled by sqrt(hidden); gemma2: norms after the
//            attention and the MLP, query_pre_attn_scalar, attention and final logit soft-capping,
//            sliding layers; gemma3_text: gemma2 without the soft-caps plus q/k norms and a second
//            rope_theta for the sliding layers
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "candle/comm.h"
#include "candle/models/causal_lm.h"
#include "candle/nn/kv_cache.h"
#include "candle/nn/var_builder.h"
#include "candle/tensor.h"

namespace candle::models::llama {

struct RopeScaling {
  enum Kind { None, Linear, Llama3, Yarn, LongRope };
  Kind kind = None;
  double factor = 1.0;
  // llama3 only
  double low_freq_factor = 1.0, high_freq_factor = 4.0;
  size_t original_max_position_embeddings = 8192;  // llama3, yarn and longrope
  // yarn only: the dims between the two correction bounds blend interpolated and original
  // frequencies; cos and sin are scaled by attention_factor (default 0.1 ln(factor) + 1)
  double beta_fast = 32.0, beta_slow = 1.0;
  // yarn and longrope: the factor cos and sin are scaled by (nullopt: the kind's default)
  std::optional<double> attention_factor;
  // longrope (phi3, phi3.5, phi4-mini): each frequency divided by its factor, one per rotated pair;
  // the long ones when the model's context is longer than the original (as candle and llama.cpp
  // choose), the short ones otherwise. factor is max_position_embeddings / the original, and the
  // default attention factor sqrt(1 + ln(factor) / ln(original)).
  std::vector<float> short_factor, long_factor;
  bool long_context = false;
};

// The factor cos and sin are scaled by: yarn's and longrope's attention factor, 1 for other kinds.
double rope_attention_factor(const RopeScaling& scaling);

struct LlamaConfig {
  // llama, mistral, mixtral, qwen2, qwen3, qwen3_moe, phi3, gemma, gemma2, gemma3_text
  std::string model_type = "llama";
  size_t hidden_size = 0, intermediate_size = 0, vocab_size = 0;
  size_t num_hidden_layers = 0, num_attention_heads = 0, num_key_value_heads = 0;
  size_t head_dim = 0;  // hidden_size / num_attention_heads unless config.json says
  size_t max_position_embeddings = 4096;
  double rms_norm_eps = 1e-6, rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;  // biases of q_proj, k_proj, v_proj
  bool o_bias = false;    // bias of o_proj
  bool mlp_bias = false;  // biases of gate_proj, up_proj, down_proj
  bool qk_norm = false;   // qwen3
  // the window of each layer that has one (mistral: every layer; qwen2/3 with use_sliding_window:
  // the layers from max_window_layers on)
  std::optional<size_t> sliding_window;
  size_t max_window_layers = 0;
  // transformers 5's layer_types: true for "sliding_attention" (overrides max_window_layers)
  std::vector<bool> sliding_layers;
  // gemma, gemma2, gemma3_text
  bool gelu_mlp = false;                        // gelu (tanh approximation) instead of silu in the MLP
  bool norm_plus_one = false;                   // RmsNorm scales by 1 + weight
  bool embed_scale = false;                     // embeddings times sqrt(hidden_size)
  bool post_norms = false;                      // norms of the attention / MLP outputs (gemma2, gemma3)
  std::optional<double> query_pre_attn_scalar;  // attention scale 1 / sqrt(this) instead of head_dim
  std::optional<double> attn_logit_softcapping, final_logit_softcapping;
  std::optional<double> rope_local_theta;  // gemma3: the sliding layers' rope_theta
  double partial_rotary_factor = 1.0;      // the rotated part of each head (phi3 / phi4-mini: 0.75)
  // mixtral, qwen3_moe: sparse mixture-of-experts MLPs (0 experts: dense)
  size_t num_experts = 0, num_experts_per_tok = 0, moe_intermediate_size = 0;
  bool norm_topk_prob = true;
  std::vector<bool> dense_layers;  // qwen3_moe: mlp_only_layers / decoder_sparse_step
  std::optional<uint32_t> bos_token_id;
  std::vector<uint32_t> eos_token_ids;

  // Parses a config.json, with the rope settings either as rope_theta + rope_scaling or as
  // transformers 5's rope_parameters (hostile input: a clear Error(Parse / InvalidArgument / UnsupportedOp)
  // naming the key on anything missing, mistyped, out of range or unknown, e.g. an unknown
  // model_type or rope_scaling type).
  static LlamaConfig from_json(std::string_view json);
  // The sliding window of layer `layer` (nullopt: full causal attention).
  std::optional<size_t> layer_window(size_t layer) const;
};

// The inverse frequencies of the rotary embedding (head_dim / 2 values), with the config's
// scaling applied, computed in f32 as transformers does.
std::vector<float> rope_inv_freq(size_t head_dim, double theta, const RopeScaling& scaling);

// The KV caches of one generation: one per layer.
class Cache {
 public:
  Cache(const LlamaConfig& cfg, size_t max_seq_len = 0);  // 0: max_position_embeddings
  std::vector<nn::KvCache>& layers() { return kvs_; }
  size_t current_seq_len() const { return kvs_.empty() ? 0 : kvs_[0].current_seq_len(); }
  void reset();

 private:
  std::vector<nn::KvCache> kvs_;
};

class Llama {
 public:
  // The weights under `vb` (model.embed_tokens, model.layers.N.{self_attn,mlp,...}, model.norm,
  // lm_head), in vb's dtype and on its device. With `comm` (candle/comm.h), this rank's share of a
  // tensor-parallel model: its heads and MLP rows only are read (VarBuilder::get_narrow), and its
  // forward passes add the ranks' partial sums through comm, so every rank, called with the same
  // inputs from its own thread, gets the whole model's logits. The query heads (and the MLP sizes)
  // must divide by the world size, the kv heads divide it or by it; comm's device is vb's.
  static Llama load(const nn::VarBuilder& vb, const LlamaConfig& cfg, std::shared_ptr<Comm> comm = nullptr);
  // input_ids [b, t] u32 at positions index_pos..index_pos+t-1 (index_pos must equal the
  // cache's length): the logits of the last position [b, vocab] f32; appends to the cache.
  Tensor forward(const Tensor& input_ids, size_t index_pos, Cache& cache) const;
  // [b, t] from position 0 without a cache: logits [b, t, vocab] f32. Works under autograd
  // (a VarMap-backed VarBuilder gives trainable weights).
  Tensor forward_all(const Tensor& input_ids) const;
  // The position-independent decode (CausalLM::start_static_decode / prefill / decode_step).
  StaticDecode start_static_decode(size_t batch, size_t capacity) const;
  Tensor decode_step(const Tensor& ids, StaticDecode& state) const;
  Tensor prefill(const Tensor& ids, StaticDecode& state, size_t pos) const;
  const LlamaConfig& config() const;

  struct Impl;
  explicit Llama(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<const Impl> impl_;
};

}  // namespace candle::models::llama
