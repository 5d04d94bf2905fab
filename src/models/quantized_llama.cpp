// candle::models::quantized_llama: the llama family from GGUF (llama and mixtral, qwen2, qwen3,
// qwen3moe, gemma, gemma2, gemma3, phi3).
#include "candle/models/quantized_llama.h"

#include <cmath>
#include <initializer_list>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "candle/io/json_limits.h"
#include "candle/models/llama.h"
#include "decoder.h"
#include "tensor_parallel.h"

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

bool meta_bool(const gg::Content& ct, const std::string& key, bool dflt) {
  const gg::Value* v = ct.find(key);
  if (!v) return dflt;
  if (v->value_type() != gg::ValueType::Bool)
    throw Error(ErrorKind::InvalidArgument, "gguf: " + key + " is not a bool");
  return v->to_bool();
}

bool has(const gg::Content& ct, const std::string& name) { return ct.tensor_infos.count(name) != 0; }

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

// a copy in f32 (the file's pages of the tensor released: MmapedFile::release pages out a span once
// all of its tensors are)
Tensor dense(const gg::Content& ct, const std::string& name, const Shape& shape, const Device& dev) {
  Tensor t = qtensor(ct, name, shape, dev).dequantize(dev);
  ct.release(name);
  return t;
}

// A projection of blocks that stay where they are (a copy made for this rank), or, with `repacked`
// (blocks viewed in the mapped file), repacked for the CPU's kernels where they have a packed
// layout (QMatMul::from_arc_repacked: forward reads only the copy).
detail::Proj proj_of(const quantized::QTensor& w, const gg::Content* repacked_from = nullptr) {
  auto arc = std::make_shared<const quantized::QTensor>(w);
  if (!repacked_from) return {quantized::QMatMul::from_arc(std::move(arc)), std::nullopt};
  // the file's pages go part by part as they are copied (a large output head never doubles)
  return {quantized::QMatMul::from_arc_repacked(
              std::move(arc), [repacked_from](const void* p, size_t n) { repacked_from->release(p, n); }),
          std::nullopt};
}

// The file's pages of tensor `name` dropped from memory once its projections read a repacked copy
// (they come back from the file if anything reads the blocks again)
void release_if_repacked(const gg::Content& ct, const std::string& name,
                         std::initializer_list<const detail::Proj*> ps) {
  for (const detail::Proj* p : ps) {
    const auto* q = std::get_if<quantized::QMatMul>(&p->w);
    if (!q || !q->repacked()) return;
  }
  ct.release(name);
}

detail::Proj proj(const gg::Content& ct, const std::string& name, const Shape& shape, const Device& dev,
                  bool bias = false) {
  detail::Proj p = proj_of(qtensor(ct, name + ".weight", shape, dev), &ct);
  release_if_repacked(ct, name + ".weight", {&p});
  if (bias) p.bias = dense(ct, name + ".bias", Shape{shape.dims()[0]}, dev);
  return p;
}

// An MoE layer: the router ffn_gate_inp [experts, dim] and the experts stored as one tensor each,
// ffn_{gate,up}_exps [experts, ffn, dim] and ffn_down_exps [experts, dim, ffn] (read on the CPU,
// each expert's matrix then placed on the device).
detail::MoeMlp moe_layer(const gg::Content& ct, const std::string& b, size_t experts, size_t used, size_t ffn,
                         size_t dim, bool norm_topk, const Device& dev, const detail::TpPlan& tp) {
  const Device cpu = Device::cpu();
  detail::MoeMlp m{proj(ct, b + "ffn_gate_inp", Shape{experts, dim}, dev), {}, {}, {}, used, norm_topk};
  const quantized::QTensor g = qtensor(ct, b + "ffn_gate_exps.weight", Shape{experts, ffn, dim}, cpu);
  const quantized::QTensor u = qtensor(ct, b + "ffn_up_exps.weight", Shape{experts, ffn, dim}, cpu);
  const quantized::QTensor d = qtensor(ct, b + "ffn_down_exps.weight", Shape{experts, dim, ffn}, cpu);
  const auto [m0, mn] = tp.share(ffn, "expert_feed_forward_length");
  for (size_t e = 0; e < experts; ++e) {
    if (tp.world == 1) {
      m.gate.push_back(proj_of(g.get(e, dev), &ct));
      m.up.push_back(proj_of(u.get(e, dev), &ct));
      m.down.push_back(proj_of(d.get(e, dev), &ct));
    } else {  // this rank's intermediate rows: gate / up rows, down columns
      m.gate.push_back(proj_of(g.get(e, cpu).narrow(m0, mn, dev), &ct));
      m.up.push_back(proj_of(u.get(e, cpu).narrow(m0, mn, dev), &ct));
      m.down.push_back(proj_of(d.get(e, cpu).narrow_cols(m0, mn, dev)));
    }
  }
  if (experts > 0) {  // (every expert of a tensor has the same shape and type: packed alike)
    release_if_repacked(ct, b + "ffn_gate_exps.weight", {&m.gate[0]});
    release_if_repacked(ct, b + "ffn_up_exps.weight", {&m.up[0]});
    release_if_repacked(ct, b + "ffn_down_exps.weight", {&m.down[0]});
  }
  return m;
}

}  // namespace

struct ModelWeights::Impl {
  std::string arch;
  detail::Decoder decoder;
  std::vector<nn::KvCache> caches;
};

ModelWeights ModelWeights::from_gguf(const gg::Content& ct, const Device& device,
                                     std::shared_ptr<Comm> comm) {
  const gg::Value* a = ct.find("general.architecture");
  if (!a || a->value_type() != gg::ValueType::String)
    throw Error(ErrorKind::InvalidArgument, "gguf: general.architecture is missing or not a string");
  const std::string arch = a->to_string();
  const bool gemma = arch == "gemma" || arch == "gemma2" || arch == "gemma3";
  if (arch != "llama" && arch != "qwen2" && arch != "qwen3" && arch != "qwen3moe" && arch != "phi3" && !gemma)
    throw Error(ErrorKind::UnsupportedOp,
                "gguf: architecture '" + io::excerpt(arch, 40) +
                    "' is not supported (llama, qwen2, qwen3, qwen3moe, gemma, gemma2, "
                    "gemma3, phi3)");
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
  if (rope_dim == 0 || rope_dim % 2 != 0 || rope_dim > hd)
    throw Error(ErrorKind::InvalidArgument, "gguf: rope.dimension_count " + std::to_string(rope_dim) +
                                                " must be even, > 0 and at most the head size " +
                                                std::to_string(hd));
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
    } else if (type == "yarn") {
      // llama.cpp's rope_yarn: ext_factor 1, attn_factor 1 (so the magnitude 0.1 ln(factor) + 1)
      scaling.kind = llama::RopeScaling::Yarn;
      scaling.factor = meta_f64(ct, p + "rope.scaling.factor", 1.0);
      scaling.original_max_position_embeddings =
          meta_u64(ct, p + "rope.scaling.original_context_length", kMaxPositions, ctx);
      scaling.beta_fast = meta_f64(ct, p + "rope.scaling.yarn_beta_fast", 32.0);
      scaling.beta_slow = meta_f64(ct, p + "rope.scaling.yarn_beta_slow", 1.0);
      if (!(scaling.factor > 0.0) || scaling.original_max_position_embeddings == 0 ||
          !(scaling.beta_fast > 0.0) || !(scaling.beta_slow > 0.0))
        throw Error(ErrorKind::InvalidArgument,
                    "gguf: yarn needs rope.scaling.factor, original_context_length and betas > 0");
    } else if (type != "none") {
      throw Error(ErrorKind::UnsupportedOp,
                  "gguf: rope scaling '" + io::excerpt(type, 40) + "' is not supported (none, linear, yarn)");
    }
  }
  std::vector<float> inv_freq = llama::rope_inv_freq(rope_dim, theta, scaling);
  double mscale = llama::rope_attention_factor(scaling);
  // per-pair divisors of the frequencies: llama3's rope_freqs, or longrope's (phi3's converter) for
  // a short and a long context, the long ones when the context is longer than the original (llama.cpp's
  // choice), with cos and sin scaled by rope.scaling.attn_factor
  auto divide_by = [&](const std::string& name) {
    std::vector<float> f = dense(ct, name, Shape{rope_dim / 2}, device).to_vec1<float>();
    for (size_t i = 0; i < f.size(); ++i) {
      if (!(f[i] > 0.0f) || !std::isfinite(f[i]))
        throw Error(ErrorKind::InvalidArgument, "gguf: " + name + " must be positive and finite");
      inv_freq[i] /= f[i];
    }
  };
  if (has(ct, "rope_freqs.weight")) divide_by("rope_freqs.weight");
  if (has(ct, "rope_factors_long.weight") || has(ct, "rope_factors_short.weight")) {
    const size_t orig = meta_u64(ct, p + "rope.scaling.original_context_length", kMaxPositions, ctx);
    const std::string name = ctx > orig ? "rope_factors_long.weight" : "rope_factors_short.weight";
    if (!has(ct, name)) throw Error(ErrorKind::InvalidArgument, "gguf: longrope without " + name);
    divide_by(name);
    mscale = meta_f64(ct, p + "rope.scaling.attn_factor", 1.0);
    if (!(mscale > 0.0))
      throw Error(ErrorKind::InvalidArgument, "gguf: rope.scaling.attn_factor must be > 0");
  }

  const auto* vocab_info = has(ct, "token_embd.weight") ? &ct.tensor_infos.at("token_embd.weight") : nullptr;
  if (!vocab_info || vocab_info->shape.rank() != 2)
    throw Error(ErrorKind::InvalidArgument, "gguf: missing or malformed token_embd.weight");
  const size_t vocab = vocab_info->shape.dims()[0];
  // the token embeddings: in the machine's memory a quantized table stays in its blocks (a view of the
  // file; the rows a step looks up are dequantized: llama.cpp's get_rows), on a device of its own
  // they are dequantized there once
  std::variant<Tensor, quantized::QTensor> embed;
  const auto embd_type = vocab_info->ggml_dtype;
  if (device.memory().shared_with_system && embd_type != quantized::GgmlDType::F32)
    embed = qtensor(ct, "token_embd.weight", Shape{vocab, dim}, Device::cpu());
  else
    embed = dense(ct, "token_embd.weight", Shape{vocab, dim}, device);
  const bool qwen2 = arch == "qwen2", qk_norm = arch == "qwen3" || arch == "qwen3moe" || arch == "gemma3";
  const bool post_norms = arch == "gemma2" || arch == "gemma3", phi3 = arch == "phi3";
  const size_t experts = meta_u64(ct, p + "expert_count", 4096, 0);
  const size_t used = meta_u64(ct, p + "expert_used_count", 4096, experts ? 2 : 0);
  const size_t expert_ffn = meta_u64(ct, p + "expert_feed_forward_length", kMaxDim, ffn);
  if (experts && (used == 0 || used > experts || expert_ffn == 0))
    throw Error(ErrorKind::InvalidArgument, "gguf: expert_used_count must be in [1, expert_count]");
  const bool norm_topk = meta_bool(ct, p + "expert_weights_norm", true);
  // sliding-window layers: gemma2 every other one from the first; gemma3 all but every
  // sliding_window_pattern-th (llama.cpp's default 6); others where the key is given, all
  const std::optional<size_t> window =
      ct.find(p + "attention.sliding_window")
          ? std::optional<size_t>(meta_u64(ct, p + "attention.sliding_window", kMaxPositions))
          : std::nullopt;
  const size_t pattern =
      arch == "gemma2" ? 2 : meta_u64(ct, p + "attention.sliding_window_pattern", kMaxLayers, 6);
  if (pattern == 0)
    throw Error(ErrorKind::InvalidArgument, "gguf: attention.sliding_window_pattern must be > 0");
  auto sliding = [&](size_t i) {
    if (!window || *window == 0) return false;
    if (arch == "gemma2" || arch == "gemma3") return i % pattern < pattern - 1;
    return true;
  };
  // tensor parallelism (tensor_parallel.h): this rank's heads and MLP rows, read on the CPU (a view
  // of the mapped file) and only those placed on the device
  const detail::TpPlan tp = detail::TpPlan::make(std::move(comm), heads, kv_heads, device);
  const auto [f0, fn] = experts ? std::pair<size_t, size_t>{0, ffn} : tp.share(ffn, "feed_forward_length");
  auto col = [&](const std::string& name, const Shape& full, size_t start, size_t n, bool bias) {
    if (tp.world == 1) return proj(ct, name, full, device, bias);
    detail::Proj pr =
        proj_of(qtensor(ct, name + ".weight", full, Device::cpu()).narrow(start, n, device), &ct);
    release_if_repacked(ct, name + ".weight", {&pr});
    if (bias)
      pr.bias = dense(ct, name + ".bias", Shape{full.dims()[0]}, Device::cpu())
                    .narrow(0, start, n)
                    .to_device(device);
    return pr;
  };
  auto row = [&](const std::string& name, const Shape& full, size_t start, size_t n) {
    if (tp.world == 1) return proj(ct, name, full, device);
    return with_context(
        "tensor parallelism over " + std::to_string(tp.world) + " ranks: " + name + ".weight", [&] {
          return proj_of(qtensor(ct, name + ".weight", full, Device::cpu()).narrow_cols(start, n, device));
        });
  };
  std::vector<detail::DecoderLayer> layers;
  layers.reserve(n_layers);
  for (size_t i = 0; i < n_layers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    std::optional<detail::Proj> q, k, v, gate, up, down;
    if (phi3) {
      // fused projections: attn_qkv rows are q, k, v; ffn_up rows are gate, up
      const quantized::QTensor qkv =
          qtensor(ct, b + "attn_qkv.weight", Shape{(heads + 2 * kv_heads) * hd, dim}, Device::cpu());
      q = proj_of(qkv.narrow(tp.q_head0 * hd, tp.heads * hd, device), &ct);
      k = proj_of(qkv.narrow((heads + tp.kv_head0) * hd, tp.kv_heads * hd, device), &ct);
      v = proj_of(qkv.narrow((heads + kv_heads + tp.kv_head0) * hd, tp.kv_heads * hd, device), &ct);
      release_if_repacked(ct, b + "attn_qkv.weight", {&*q, &*k, &*v});
      const quantized::QTensor gu = qtensor(ct, b + "ffn_up.weight", Shape{2 * ffn, dim}, Device::cpu());
      gate = proj_of(gu.narrow(f0, fn, device), &ct);
      up = proj_of(gu.narrow(ffn + f0, fn, device), &ct);
      release_if_repacked(ct, b + "ffn_up.weight", {&*gate, &*up});
    } else {
      q = col(b + "attn_q", Shape{heads * hd, dim}, tp.q_head0 * hd, tp.heads * hd, qwen2);
      k = col(b + "attn_k", Shape{kv_heads * hd, dim}, tp.kv_head0 * hd, tp.kv_heads * hd, qwen2);
      v = col(b + "attn_v", Shape{kv_heads * hd, dim}, tp.kv_head0 * hd, tp.kv_heads * hd, qwen2);
    }
    std::optional<detail::MoeMlp> moe;
    if (experts && has(ct, b + "ffn_gate_exps.weight")) {
      moe = moe_layer(ct, b, experts, used, expert_ffn, dim, norm_topk, device, tp);
    } else {
      if (!gate) {
        gate = col(b + "ffn_gate", Shape{ffn, dim}, f0, fn, false);
        up = col(b + "ffn_up", Shape{ffn, dim}, f0, fn, false);
      }
      down = row(b + "ffn_down", Shape{dim, ffn}, f0, fn);
    }
    detail::DecoderLayer l{dense(ct, b + "attn_norm.weight", Shape{dim}, device),
                           dense(ct, b + "ffn_norm.weight", Shape{dim}, device),
                           std::nullopt,
                           std::nullopt,
                           std::move(*q),
                           std::move(*k),
                           std::move(*v),
                           row(b + "attn_output", Shape{dim, heads * hd}, tp.q_head0 * hd, tp.heads * hd),
                           std::move(gate),
                           std::move(up),
                           std::move(down),
                           sliding(i) ? window : std::nullopt,
                           std::nullopt,
                           std::nullopt,
                           0,
                           std::move(moe),
                           std::nullopt,
                           std::nullopt};
    if (qk_norm) {
      l.q_norm = dense(ct, b + "attn_q_norm.weight", Shape{hd}, device);
      l.k_norm = dense(ct, b + "attn_k_norm.weight", Shape{hd}, device);
    }
    if (post_norms) {
      l.post_attn_norm = dense(ct, b + "post_attention_norm.weight", Shape{dim}, device);
      l.post_ffn_norm = dense(ct, b + "post_ffw_norm.weight", Shape{dim}, device);
    }
    if (arch == "gemma3" && l.window) l.rope_set = 1;  // the local layers rotate with their own base
    layers.push_back(std::move(l));
  }
  Tensor norm = dense(ct, "output_norm.weight", Shape{dim}, device);
  detail::Proj head = has(ct, "output.weight") ? proj(ct, "output", Shape{vocab, dim}, device)
                                               : proj(ct, "token_embd", Shape{vocab, dim}, device);
  detail::DecoderSpec spec;
  spec.heads = tp.heads;
  spec.kv_heads = tp.kv_heads;
  spec.comm = tp.comm;
  spec.head_dim = hd;
  spec.eps = eps;
  spec.interleaved_rope = arch == "llama";
  spec.rope_dim = rope_dim;
  spec.rope_mscale = mscale;
  spec.inv_freqs = {std::move(inv_freq)};
  if (arch == "gemma3")
    spec.inv_freqs.push_back(
        llama::rope_inv_freq(rope_dim, meta_f64(ct, p + "rope.freq_base_swa", 10000.0), {}));
  spec.max_seq_len = ctx;
  if (gemma) {
    // llama.cpp's gemma: embeddings times sqrt(dim), gelu (tanh) MLPs, the converter's norms
    // already 1 + w; gemma2 / gemma3 scale queries by 1 / sqrt(head size), or by 1 / sqrt(dim /
    // heads) in their 27B shapes (46 and 62 layers), and gemma2 caps logits
    spec.embed_scale = std::sqrt(static_cast<double>(dim));
    spec.gelu_mlp = true;
    const size_t per_head = dim / heads;  // (llama.cpp's integer n_embd / n_head)
    if ((arch == "gemma2" && n_layers == 46) || (arch == "gemma3" && n_layers == 62))
      spec.attn_scale = 1.0 / std::sqrt(static_cast<double>(per_head));
    if (arch == "gemma2") {
      const double a_cap = meta_f64(ct, p + "attn_logit_softcapping", 50.0);
      const double f_cap = meta_f64(ct, p + "final_logit_softcapping", 30.0);
      if (a_cap > 0.0) spec.attn_softcap = a_cap;
      if (f_cap > 0.0) spec.final_softcap = f_cap;
    }
  }
  auto impl = std::make_shared<Impl>(Impl{
      arch,
      detail::Decoder(std::move(spec), std::move(embed), std::move(layers), norm, std::move(head), device),
      {}});
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
