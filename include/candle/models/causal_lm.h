// candle::models::CausalLM: one interface over the decoder-only language models, and a loader
// that picks the family from the file.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "candle/comm.h"
#include "candle/device.h"
#include "candle/dtype.h"
#include "candle/graph.h"
#include "candle/quantized/gguf_file.h"
#include "candle/tensor.h"

namespace candle::models {

// A decode whose device work does not depend on the position, so that candle::Graph can record
// one step and replay it for every token: the KV buffers of the whole capacity allocated ahead
// (zeros), the position a device tensor. Made by CausalLM::start_static_decode; the prompt goes in
// with CausalLM::prefill, the tokens after it with decode_step (DecodeSession does both).
struct StaticDecode {
  Tensor pos;                    // u32 [1] on the model's device: the next token's position (write it,
                                 // e.g. with slice_set, before each step: decode_step does not advance it)
  std::vector<Tensor> k, v;      // per layer [batch, kv heads, capacity, head dim]
  std::vector<Tensor> cos, sin;  // per rope frequency set [capacity, rotary dims / 2] f32
  size_t capacity = 0;
};

class CausalLM {
 public:
  virtual ~CausalLM() = default;
  // A StaticDecode of `batch` rows and `capacity` positions (<= max_seq_len()), at position 0;
  // Error(UnsupportedOp) for a model without one. Independent of forward()'s KV cache.
  virtual StaticDecode start_static_decode(size_t batch, size_t capacity);
  // ids [batch, t] u32 at positions pos..pos+t-1 of `state` (a prompt, or the next turn of a
  // chat): their keys and values written there, attending to positions 0..pos+t-1; the last
  // position's logits [batch, vocab] f32, the same as forward()'s. state.pos is not touched.
  virtual Tensor prefill(const Tensor& ids, StaticDecode& state, size_t pos);
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
// With `comm` (candle/comm.h; device: comm's): this rank's share of a tensor-parallel model; every
// rank loads the same path on its own thread and makes the same calls, and gets the same logits.
std::unique_ptr<CausalLM> load_causal_lm(const std::string& path, const Device& device, DType dtype,
                                         std::shared_ptr<Comm> comm = nullptr);
// A tensor-parallel model over `devices` (all CPU, or distinct CUDA GPUs through NCCL): rank r on
// devices[r], each on a thread of its own (rank 0 the caller's), every call made on all of them;
// the logits are rank 0's (on devices[0]). One device: load_causal_lm. No static decode (its graphs
// would hold the collectives); a rank's error aborts the group and is rethrown, after which the
// model is unusable.
std::unique_ptr<CausalLM> load_causal_lm_parallel(const std::string& path, const std::vector<Device>& devices,
                                                  DType dtype);
// The same from a GGUF already read (a caller that also wants its tokenizer reads the file once).
std::unique_ptr<CausalLM> load_causal_lm(const quantized::gguf_file::Content& gguf, const Device& device,
                                         std::shared_ptr<Comm> comm = nullptr);

// One sequence's generation through the static decode: the prompt by prefill, then each token by a
// decode step recorded once as a candle::Graph and replayed (a CUDA graph on CUDA: one launch per
// token; on devices that record no graphs the same step runs eagerly, giving forward()'s logits).
// The state holds `reserve` positions at first and doubles (up to the context length) when the
// text outgrows it: the keys and values are copied over and the step recorded again.
class DecodeSession {
 public:
  DecodeSession(CausalLM& model, const Device& device, size_t reserve = 512);
  // (the recorded step refers to this object: it stays where it was made)
  DecodeSession(const DecodeSession&) = delete;
  DecodeSession& operator=(const DecodeSession&) = delete;
  // Feeds `ids` after what the session holds: the last one's logits [vocab] f32. A single token
  // goes through the recorded step (its logits tensor is rewritten by the next feed: read it
  // first), several through prefill. Error(InvalidArgument) past the context length.
  Tensor feed(const std::vector<uint32_t>& ids);
  size_t pos() const { return pos_; }
  size_t capacity() const { return state_ ? state_->capacity : 0; }
  // Forgets the text (the buffers are kept).
  void reset() { pos_ = 0; }
  // Whether the decode step is a recorded graph (Device::records_graphs), and its node count.
  bool recorded() const { return graph_ && graph_->recorded(); }
  size_t graph_nodes() const { return graph_ ? graph_->nodes() : 0; }

 private:
  void reserve_for(size_t positions);
  CausalLM& model_;
  Device device_;
  size_t reserve_;
  std::optional<StaticDecode> state_;
  Tensor step_ids_, step_logits_;
  std::optional<Graph> graph_;
  size_t pos_ = 0;
};

}  // namespace candle::models
