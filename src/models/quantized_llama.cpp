// candle::models::quantized_llama: the llama family from GGUF (llama, qwen2, qwen3).
#include "candle/models/quantized_llama.h"

#include <cmath>
#include <string>
#include <vector>

#include "candle/io/json_limits.h"
#include "candle/models/llama.h"
#include "decoder.h"

namespace candle::models::quantized_llama {
namespace {

namespace gg = quantized::gguf_file;

constexpr uint64_t kMaxDim = uint64_t{1} << 20;
constexpr uint64_t kMaxLayers = 4096;
constexpr uint64_t kMaxPositions = uint64_t{1} << 24;

uint64_t meta_u64(const gg::Content& ct, const std::string& key, uint64_t max,
                  std::optional<uint64_t> dflt = {}) {
  const gg::Value* v = ct.find(key);
  if (!v) {
    if (dflt) return *dflt;
    throw Error(ErrorKind::InvalidArgument, "gguf: missing metadata key " + key);
  }
  uint64_t x;
  try {
    x = v->to_u64();
  } catch (const Error&) {
    throw Error(ErrorKind::InvalidArgument, "gguf: " + key + " is not an unsigned integer");
  }
  if (x > max)
    throw Error(ErrorKind::InvalidArgument, "gguf: " + key + " = " + std::to_string(x) + " is out of range");
  return x;
}

double meta_f64(const gg::Content& ct, const std::string& key, double dflt) {
  const gg::Value* v = ct.find(key);
  if (!v) return dflt;
  double x;
  if (v->value_type() == gg::ValueType::F32)
    x = v->to_f32();
  else if (v->value_type() == gg::ValueType::F64)
    x = v->to_f64();
  else
    throw Error(ErrorKind::InvalidArgument, "gguf: " + key + " is not a float");
  if (!std::isfinite(x)) throw Error(ErrorKind::InvalidArgument, "gguf: " + key + " is not finite");
  return x;
}

// The tensor `name` checked to have `shape`.
quantized::QTensor qtensor(const gg::Content& ct, const std::string& name, const Shape& shape,
                           const Device& dev) {
  auto it = ct.tensor_infos.find(name);
  if (it == ct.tensor_infos.end()) throw Error(ErrorKind::InvalidArgument, "gguf: missing tensor " + name);
  if (it->second.shape != shape)
    throw Error(ErrorKind::ShapeMismatch, "gguf: tensor " + name + " has shape " +
                                              it->second.shape.to_string() + ", expected " +
                                              shape.to_string());
  return ct.tensor(name, dev);
}

Tensor dense(const gg::Content& ct, const std::string& name, const Shape& shape, const Device& dev) {
  return qtensor(ct, name, shape, dev).dequantize(dev);
}

detail::Proj proj(const gg::Content& ct, const std::string& name, const Shape& shape, const Device& dev,
                  bool bias = false) {
  detail::Proj p{quantized::QMatMul::from_qtensor(qtensor(ct, name + ".weight", shape, dev)), std::nullopt};
  if (bias) p.bias = dense(ct, name + ".bias", Shape{shape.dims()[0]}, dev);
  return p;
}

}  // namespace

struct ModelWeights::Impl {
  std::string arch;
  detail::Decoder decoder;
  std::vector<nn::KvCache> caches;
};

ModelWeights ModelWeights::from_gguf(const gg::Content& ct, const Device& device) {
  const gg::Value* a = ct.find("general.architecture");
  if (!a || a->value_type() != gg::ValueType::String)
    throw Error(ErrorKind::InvalidArgument, "gguf: general.architecture is missing or not a string");
  const std::string arch = a->to_string();
  if (arch != "llama" && arch != "qwen2" && arch != "qwen3")
    throw Error(ErrorKind::UnsupportedOp,
                "gguf: architecture '" + io::excerpt(arch, 40) + "' is not supported (llama, qwen2, qwen3)");
  const std::string p = arch + ".";
  const size_t dim = meta_u64(ct, p + "embedding_length", kMaxDim);
  const size_t n_layers = meta_u64(ct, p + "block_count", kMaxLayers);
  const size_t ffn = meta_u64(ct, p + "feed_forward_length", kMaxDim);
  const size_t heads = meta_u64(ct, p + "attention.head_count", kMaxDim);
  const size_t kv_heads = meta_u64(ct, p + "attention.head_count_kv", kMaxDim, heads);
  const size_t ctx = meta_u64(ct, p + "context_length", kMaxPositions, 4096);
  if (dim == 0 || ffn == 0 || heads == 0 || kv_heads == 0 || heads % kv_heads != 0 || ctx == 0)
    throw Error(ErrorKind::InvalidArgument, "gguf: inconsistent head counts or sizes");
  if (!ct.find(p + "attention.key_length") && dim % heads != 0)
    throw Error(ErrorKind::InvalidArgument,
                "gguf: no attention.key_length and the embedding length is not a "
                "multiple of the head count");
  const size_t hd = meta_u64(ct, p + "attention.key_length", kMaxDim, dim / heads);
  const size_t rope_dim = meta_u64(ct, p + "rope.dimension_count", kMaxDim, hd);
  if (hd == 0 || hd % 2 != 0 || heads * hd > kMaxDim)
    throw Error(ErrorKind::InvalidArgument, "gguf: the head size must be even and > 0");
  if (rope_dim != hd)
    throw Error(ErrorKind::UnsupportedOp, "gguf: partial rotary embeddings (rope.dimension_count " +
                                              std::to_string(rope_dim) + " of head size " +
                                              std::to_string(hd) + ") are not supported");
  const double eps = meta_f64(ct, p + "attention.layer_norm_rms_epsilon", 1e-5);
  const double theta = meta_f64(ct, p + "rope.freq_base", 10000.0);
  if (!(theta > 0.0) || !(eps >= 0.0))
    throw Error(ErrorKind::InvalidArgument, "gguf: bad rope.freq_base or eps");

  llama::RopeScaling scaling;
  if (const gg::Value* st = ct.find(p + "rope.scaling.type")) {
    const std::string type = st->value_type() == gg::ValueType::String ? st->to_string() : std::string("?");
    if (type == "linear") {
      scaling.kind = llama::RopeScaling::Linear;
      scaling.factor = meta_f64(ct, p + "rope.scaling.factor", 1.0);
      if (!(scaling.factor > 0.0))
        throw Error(ErrorKind::InvalidArgument, "gguf: rope.scaling.factor must be > 0");
    } else if (type != "none") {
      throw Error(ErrorKind::UnsupportedOp,
                  "gguf: rope scaling '" + io::excerpt(type, 40) + "' is not supported");
    }
  }
  std::vector<float> inv_freq = llama::rope_inv_freq(hd, theta, scaling);
  if (ct.tensor_infos.count("rope_freqs.weight")) {
    std::vector<float> f = dense(ct, "rope_freqs.weight", Shape{hd / 2}, device).to_vec1<float>();
    for (size_t i = 0; i < f.size(); ++i) {
      if (!(f[i] > 0.0f)) throw Error(ErrorKind::InvalidArgument, "gguf: rope_freqs.weight must be > 0");
      inv_freq[i] /= f[i];
    }
  }

  const auto* vocab_info =
      ct.tensor_infos.count("token_embd.weight") ? &ct.tensor_infos.at("token_embd.weight") : nullptr;
  if (!vocab_info || vocab_info->shape.rank() != 2)
    throw Error(ErrorKind::InvalidArgument, "gguf: missing or malformed token_embd.weight");
  const size_t vocab = vocab_info->shape.dims()[0];
  Tensor embed = dense(ct, "token_embd.weight", Shape{vocab, dim}, device);
  const bool qwen2 = arch == "qwen2", qwen3 = arch == "qwen3";
  std::vector<detail::DecoderLayer> layers;
  layers.reserve(n_layers);
  for (size_t i = 0; i < n_layers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    detail::DecoderLayer l{dense(ct, b + "attn_norm.weight", Shape{dim}, device),
                           dense(ct, b + "ffn_norm.weight", Shape{dim}, device),
                           std::nullopt,
                           std::nullopt,
                           proj(ct, b + "attn_q", Shape{heads * hd, dim}, device, qwen2),
                           proj(ct, b + "attn_k", Shape{kv_heads * hd, dim}, device, qwen2),
                           proj(ct, b + "attn_v", Shape{kv_heads * hd, dim}, device, qwen2),
                           proj(ct, b + "attn_output", Shape{dim, heads * hd}, device),
                           proj(ct, b + "ffn_gate", Shape{ffn, dim}, device),
                           proj(ct, b + "ffn_up", Shape{ffn, dim}, device),
                           proj(ct, b + "ffn_down", Shape{dim, ffn}, device),
                           std::nullopt,
                           std::nullopt,
                           std::nullopt,
                           0,
                           std::nullopt,
                           std::nullopt,
                           std::nullopt};
    if (qwen3) {
      l.q_norm = dense(ct, b + "attn_q_norm.weight", Shape{hd}, device);
      l.k_norm = dense(ct, b + "attn_k_norm.weight", Shape{hd}, device);
    }
    layers.push_back(std::move(l));
  }
  Tensor norm = dense(ct, "output_norm.weight", Shape{dim}, device);
  detail::Proj head = ct.tensor_infos.count("output.weight")
                          ? proj(ct, "output", Shape{vocab, dim}, device)
                          : proj(ct, "token_embd", Shape{vocab, dim}, device);
  detail::DecoderSpec spec;
  spec.heads = heads;
  spec.kv_heads = kv_heads;
  spec.head_dim = hd;
  spec.eps = eps;
  spec.interleaved_rope = arch == "llama";
  spec.inv_freqs = {std::move(inv_freq)};
  spec.max_seq_len = ctx;
  auto impl = std::make_shared<Impl>(
      Impl{arch, detail::Decoder(std::move(spec), embed, std::move(layers), norm, std::move(head)), {}});
  impl->caches.reserve(n_layers);
  for (size_t i = 0; i < n_layers; ++i) impl->caches.emplace_back(2, ctx);
  return ModelWeights(std::move(impl));
}

Tensor ModelWeights::forward(const Tensor& x, size_t index_pos) {
  return impl_->decoder.forward(x, index_pos, &impl_->caches);
}

StaticDecode ModelWeights::start_static_decode(size_t batch, size_t capacity) const {
  return impl_->decoder.start_static_decode(batch, capacity);
}

Tensor ModelWeights::decode_step(const Tensor& ids, StaticDecode& state) const {
  return impl_->decoder.decode_step(ids, state);
}

Tensor ModelWeights::prefill(const Tensor& ids, StaticDecode& state, size_t pos) const {
  return impl_->decoder.prefill(ids, state, pos);
}

void ModelWeights::clear_kv_cache() {
  for (auto& c : impl_->caches) c.reset();
}

size_t ModelWeights::vocab_size() const { return impl_->decoder.vocab_size(); }
size_t ModelWeights::max_seq_len() const { return impl_->decoder.spec().max_seq_len; }
const std::string& ModelWeights::architecture() const { return impl_->arch; }

}  // namespace candle::models::quantized_llama
