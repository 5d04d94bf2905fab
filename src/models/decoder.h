// The decoder-only transformer shared by models::llama (safetensors, nn::Linear) and
// models::quantized_llama (GGUF, quantized::QMatMul): pre-norm blocks of grouped-query attention
// with rotary embeddings and a SwiGLU MLP.
#pragma once

#include <memory>
#include <optional>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "candle/comm.h"
#include "candle/models/causal_lm.h"
#include "candle/nn/kv_cache.h"
#include "candle/nn/layers.h"
#include "candle/quantized/quantized.h"
#include "candle/tensor.h"

namespace candle::models::detail {

// A projection x w^T (+ bias): a plain Linear or a quantized matmul.
struct Proj {
  std::variant<nn::Linear, quantized::QMatMul> w;
  std::optional<Tensor> bias;  // with QMatMul
  Tensor forward(const Tensor& x) const;
  // the projections stacked by output rows, or nothing where they do not stack (different weight
  // types or kinds, some with a bias and some without)
  static std::optional<Proj> stack(const std::vector<const Proj*>& parts);
  // the same product without a stacked copy: quantized weights of block types of one block size as a
  // QMatMul::group, or nothing (other kinds, blocks of 32 beside blocks of 256, some with a bias and
  // some without)
  static std::optional<Proj> group(const std::vector<const Proj*>& parts);
};

// A sparse mixture-of-experts MLP (mixtral, qwen3_moe): a router picks top_k of the experts per
// token (softmax over all of them, then the k largest, renormalised when norm_topk); the token's
// output is the weighted sum of those experts' SwiGLU MLPs.
struct MoeMlp {
  Proj router;  // [num_experts, hidden]
  std::vector<Proj> gate, up, down;
  size_t top_k = 2;
  bool norm_topk = true;
  Tensor forward(const Tensor& x, bool gelu) const;
};

struct DecoderLayer {
  Tensor attn_norm, ffn_norm;
  std::optional<Tensor> q_norm, k_norm;  // [head_dim]
  Proj q, k, v, o;
  std::optional<Proj> gate, up, down;  // the dense MLP (absent with moe)
  std::optional<size_t> window;
  // gemma2 / gemma3: norms of the attention and MLP outputs before the residual adds
  std::optional<Tensor> post_attn_norm, post_ffn_norm;
  size_t rope_set = 0;        // which of the spec's frequency sets (gemma3: local vs global layers)
  std::optional<MoeMlp> moe;  // instead of gate / up / down
  // Off the CPU, where projections of one input stack (same weight type): q|k|v and gate|up as one
  // matmul each (one launch and one activation quantization instead of three or two); the parts
  // are then emptied. On the CPU (whose weights stay memory-mapped or packed where they are)
  // quantized ones of one block size are grouped instead (Proj::group: no copy).
  std::optional<Proj> qkv, gate_up;
};

struct DecoderSpec {
  size_t heads = 0, kv_heads = 0, head_dim = 0;
  double eps = 1e-6;
  bool interleaved_rope = false;              // rope_i (llama GGUFs) instead of rope (halves)
  std::vector<std::vector<float>> inv_freqs;  // one or more sets of rotary_dim() / 2 frequencies
  size_t rope_dim = 0;                        // rotated dims of a head (partial rotary); 0: all
  double rope_mscale = 1.0;                   // cos and sin of the first set times this (yarn)
  size_t rotary_dim() const { return rope_dim ? rope_dim : head_dim; }
  size_t max_seq_len = 4096;
  double attn_scale = 0.0;   // 0: 1 / sqrt(head_dim)
  double embed_scale = 0.0;  // 0: none (gemma: sqrt(hidden))
  bool gelu_mlp = false;     // gelu (tanh) instead of silu
  std::optional<double> attn_softcap, final_softcap;
  // tensor parallelism: this rank's share of the heads (heads / kv_heads above) and of the MLP;
  // the attention output and MLP projections (row-parallel) give partial sums, added over the
  // ranks by comm before the residual (nullptr: one rank holds everything)
  std::shared_ptr<Comm> comm;
};

// The prompt positions that forward() with a KV cache and prefill() run at once (0: all; -1: the
// default, CANDLE_PREFILL_CHUNK or 256 where activations live in the machine's memory); for tests
// and benchmarks
void set_prefill_chunk(long positions);

class Decoder {
 public:
  // embeddings: [vocab, hidden] as a tensor, or kept in its quantization blocks (a GGUF's table in
  // the machine's memory: only the rows a step looks up are dequantized, on `device`)
  Decoder(DecoderSpec spec, std::variant<Tensor, quantized::QTensor> embeddings,
          std::vector<DecoderLayer> layers, Tensor final_norm, Proj lm_head, const Device& device);
  // ids [b, t] at index_pos..; with caches: appended to (index_pos must be their length) and the
  // last position's logits [b, vocab]; without: [b, t, vocab]. Logits f32.
  Tensor forward(const Tensor& ids, size_t index_pos, std::vector<nn::KvCache>* caches) const;
  // CausalLM's static decode (candle/models/causal_lm.h): the state, then one step.
  StaticDecode start_static_decode(size_t batch, size_t capacity) const;
  Tensor decode_step(const Tensor& ids, StaticDecode& state) const;
  Tensor prefill(const Tensor& ids, StaticDecode& state, size_t pos) const;
  const DecoderSpec& spec() const { return spec_; }
  // the factor of rope set `set`'s cos / sin tables (yarn scales the first set only)
  double mscale(size_t set) const { return set == 0 ? spec_.rope_mscale : 1.0; }
  size_t num_layers() const { return layers_.size(); }
  size_t vocab_size() const { return vocab_; }

 private:
  // forward() over positions run at once; logits false: the cache appended to and nothing returned
  Tensor forward_positions(const Tensor& ids, size_t index_pos, std::vector<nn::KvCache>* caches,
                           bool logits = true) const;
  // cos / sin [t, head_dim / 2] of frequency set `set` for positions pos..pos+t-1, in dtype
  std::pair<Tensor, Tensor> rope_tables(size_t set, size_t pos, size_t t, DType dtype) const;
  Tensor attention(const DecoderLayer& l, const Tensor& x, size_t index_pos, const Tensor& cos,
                   const Tensor& sin, nn::KvCache* cache) const;
  // q, k, v of x [b, t, hidden] as [b, heads, t, head_dim], normed and rotated
  std::tuple<Tensor, Tensor, Tensor> qkv(const DecoderLayer& l, const Tensor& x, const Tensor& cos,
                                         const Tensor& sin) const;
  // the attention output's projection, y [b, heads, t, head_dim] -> [b, t, hidden]
  Tensor attn_out(const DecoderLayer& l, const Tensor& y) const;
  // the blocks after the embedding, with the layer's attention given
  template <typename Attn>
  Tensor blocks(Tensor x, const std::vector<std::pair<Tensor, Tensor>>& tables, Attn&& attn) const;
  Tensor logits_of(Tensor x) const;
  // Error(InvalidArgument) unless 1 <= t and pos + t <= limit (`limit_name`: what the limit is)
  static void check_span(const char* what, size_t pos, size_t t, size_t limit, const char* limit_name);
  // Error(InvalidArgument) unless `st` was made by start_static_decode for `ids`' rows
  void check_state(const char* what, const Tensor& ids, const StaticDecode& st) const;
  Tensor embed(const Tensor& ids) const;
  Tensor embed_ids(const Tensor& ids) const;  // embed()'s work
  double attn_scale() const;
  // a row-parallel projection's partial sums added over the ranks (the identity with one rank)
  Tensor reduce(const Tensor& partial) const {
    return spec_.comm ? spec_.comm->all_reduce_sum(partial) : partial;
  }
  DecoderSpec spec_;
  std::variant<Tensor, quantized::QTensor> embeddings_;
  Device dev_;
  DType dtype_;  // of the activations and the KV cache: the embeddings' (f32 for a quantized table)
  size_t vocab_;
  std::vector<DecoderLayer> layers_;
  Tensor final_norm_;
  Proj lm_head_;
  // per frequency set: [min(max_seq_len, kTablePositions), head_dim / 2] f32
  std::vector<Tensor> cos_tables_, sin_tables_;
};

}  // namespace candle::models::detail
