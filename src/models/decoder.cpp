// The decoder-only transformer of models::llama and models::quantized_llama.
#include "decoder.h"

#include <cmath>
#include <string>

#include "candle/nn/attention.h"
#include "candle/nn/ops.h"
#include "candle/nn/rotary_emb.h"

namespace candle::models::detail {
namespace {

// Positions whose rotary tables are computed at load; later positions are computed per call.
constexpr size_t kTablePositions = 8192;

// cos/sin of pos * inv_freq in f32 (transformers computes them in f32 too)
std::pair<Tensor, Tensor> compute_tables(const std::vector<float>& inv_freq, size_t pos, size_t t,
                                         const Device& dev) {
  const size_t half = inv_freq.size();
  std::vector<float> c(t * half), s(t * half);
  for (size_t i = 0; i < t; ++i) {
    const float p = static_cast<float>(pos + i);
    for (size_t j = 0; j < half; ++j) {
      const float a = p * inv_freq[j];
      c[i * half + j] = std::cos(a);
      s[i * half + j] = std::sin(a);
    }
  }
  return {Tensor::from_vec(c, {t, half}, dev), Tensor::from_vec(s, {t, half}, dev)};
}

}  // namespace

Tensor Proj::forward(const Tensor& x) const {
  if (const auto* l = std::get_if<nn::Linear>(&w)) return l->forward(x);
  const auto& q = std::get<quantized::QMatMul>(w);
  Tensor y = q.forward(x);
  return bias ? y.broadcast_add(*bias) : y;
}

Tensor MoeMlp::forward(const Tensor& xs, bool gelu) const {
  const size_t hidden = xs.dims().back(), n = xs.elem_count() / hidden, experts = gate.size();
  Tensor x = xs.reshape({n, hidden});
  Tensor probs = nn::ops::softmax_last_dim(router.forward(x).to_dtype(DType::F32));  // [n, E]
  Tensor top = probs.arg_sort_last_dim(false).narrow(1, 0, top_k).contiguous();      // [n, k] u32
  Tensor weights = probs.gather(top, 1);                                             // [n, k]
  if (norm_topk) weights = weights.broadcast_div(weights.sum_keepdim(1));
  const std::vector<uint32_t> chosen = top.flatten_all().to_vec1<uint32_t>();
  Tensor out = x.zeros_like();
  for (size_t e = 0; e < experts; ++e) {
    std::vector<uint32_t> rows;
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < top_k; ++j)
        if (chosen[i * top_k + j] == e) rows.push_back(static_cast<uint32_t>(i));
    if (rows.empty()) continue;
    Tensor ids = Tensor::from_vec(rows, {rows.size()}, xs.device());
    // the expert's weight for each of its tokens: the matching top-k entry
    Tensor w = (weights * top.eq(Scalar(static_cast<uint32_t>(e))).to_dtype(DType::F32)).sum_keepdim(1);
    Tensor xe = x.index_select(ids, 0);
    Tensor g = gate[e].forward(xe);
    Tensor ye = down[e].forward((gelu ? g.gelu() : g.silu()) * up[e].forward(xe));
    ye = ye.broadcast_mul(w.index_select(ids, 0).to_dtype(ye.dtype()));
    out = out.index_add(ids, ye, 0);
  }
  return out.reshape(xs.shape());
}

Decoder::Decoder(DecoderSpec spec, Tensor embeddings, std::vector<DecoderLayer> layers, Tensor final_norm,
                 Proj lm_head)
    : spec_(std::move(spec)),
      embeddings_(std::move(embeddings)),
      layers_(std::move(layers)),
      final_norm_(std::move(final_norm)),
      lm_head_(std::move(lm_head)) {
  for (const auto& f : spec_.inv_freqs) {
    if (f.size() * 2 != spec_.head_dim)
      throw Error(ErrorKind::Internal, "decoder: rope frequencies do not match the head size");
    auto [c, s] = compute_tables(f, 0, std::min(spec_.max_seq_len, kTablePositions), embeddings_.device());
    cos_tables_.push_back(c);
    sin_tables_.push_back(s);
  }
  for (const auto& l : layers_)
    if (l.rope_set >= spec_.inv_freqs.size())
      throw Error(ErrorKind::Internal, "decoder: a layer's rope set does not exist");
}

std::pair<Tensor, Tensor> Decoder::rope_tables(size_t set, size_t pos, size_t t, DType dtype) const {
  Tensor c, s;
  if (pos + t <= cos_tables_[set].dim(0)) {
    c = cos_tables_[set].narrow(0, pos, t);
    s = sin_tables_[set].narrow(0, pos, t);
  } else {
    std::tie(c, s) = compute_tables(spec_.inv_freqs[set], pos, t, embeddings_.device());
  }
  return {c.to_dtype(dtype), s.to_dtype(dtype)};
}

std::tuple<Tensor, Tensor, Tensor> Decoder::qkv(const DecoderLayer& l, const Tensor& x, const Tensor& cos,
                                                const Tensor& sin) const {
  const size_t b = x.dim(0), t = x.dim(1), hd = spec_.head_dim;
  auto heads = [&](const Proj& p, size_t n, const std::optional<Tensor>& norm) {
    Tensor y = p.forward(x).reshape({b, t, n, hd});
    if (norm) y = nn::ops::rms_norm(y, *norm, static_cast<float>(spec_.eps));
    return y.transpose(1, 2).contiguous();
  };
  Tensor q = heads(l.q, spec_.heads, l.q_norm);
  Tensor k = heads(l.k, spec_.kv_heads, l.k_norm);
  Tensor v = heads(l.v, spec_.kv_heads, std::nullopt);
  if (spec_.interleaved_rope) {
    q = nn::rotary_emb::rope_i(q, cos, sin);
    k = nn::rotary_emb::rope_i(k, cos, sin);
  } else {
    q = nn::rotary_emb::rope(q, cos, sin);
    k = nn::rotary_emb::rope(k, cos, sin);
  }
  return {q, k, v};
}

Tensor Decoder::attn_out(const DecoderLayer& l, const Tensor& y) const {
  return l.o.forward(y.transpose(1, 2).reshape({y.dim(0), y.dim(2), spec_.heads * spec_.head_dim}));
}

double Decoder::attn_scale() const {
  return spec_.attn_scale > 0.0 ? spec_.attn_scale : 1.0 / std::sqrt(static_cast<double>(spec_.head_dim));
}

Tensor Decoder::attention(const DecoderLayer& l, const Tensor& x, size_t index_pos, const Tensor& cos,
                          const Tensor& sin, nn::KvCache* cache) const {
  auto [q, k, v] = qkv(l, x, cos, sin);
  if (cache) {
    if (cache->current_seq_len() != index_pos)
      throw Error(ErrorKind::InvalidArgument, "forward: index_pos " + std::to_string(index_pos) +
                                                  " is not the cached length " +
                                                  std::to_string(cache->current_seq_len()));
    std::tie(k, v) = cache->append(k, v);
  }
  Tensor y = nn::ops::scaled_dot_product_attention(q, k, v, attn_scale(), true, l.window, spec_.attn_softcap);
  return attn_out(l, y);
}

template <typename Attn>
Tensor Decoder::blocks(Tensor x, const std::vector<std::pair<Tensor, Tensor>>& tables, Attn&& attn) const {
  const float eps = static_cast<float>(spec_.eps);
  for (size_t i = 0; i < layers_.size(); ++i) {
    const DecoderLayer& l = layers_[i];
    const auto& [cos, sin] = tables[l.rope_set];
    Tensor h = nn::ops::rms_norm(x, l.attn_norm, eps);
    h = attn(i, l, h, cos, sin);
    if (l.post_attn_norm) h = nn::ops::rms_norm(h, *l.post_attn_norm, eps);
    x = x + h;
    h = nn::ops::rms_norm(x, l.ffn_norm, eps);
    if (l.moe) {
      h = l.moe->forward(h, spec_.gelu_mlp);
    } else {
      Tensor g = l.gate->forward(h);
      h = l.down->forward((spec_.gelu_mlp ? g.gelu() : g.silu()) * l.up->forward(h));
    }
    if (l.post_ffn_norm) h = nn::ops::rms_norm(h, *l.post_ffn_norm, eps);
    x = x + h;
  }
  return x;
}

Tensor Decoder::logits_of(Tensor x) const {
  x = nn::ops::rms_norm(x, final_norm_, static_cast<float>(spec_.eps));
  Tensor logits = lm_head_.forward(x).to_dtype(DType::F32);
  if (spec_.final_softcap) logits = (logits / *spec_.final_softcap).tanh() * *spec_.final_softcap;
  return logits;
}

Tensor Decoder::embed(const Tensor& ids) const {
  Tensor ids_u32 = ids.dtype() == DType::U32 ? ids : ids.to_dtype(DType::U32);
  Tensor x = embeddings_.embedding(ids_u32);
  if (spec_.embed_scale > 0.0) x = x * spec_.embed_scale;
  return x;
}

Tensor Decoder::forward(const Tensor& ids, size_t index_pos, std::vector<nn::KvCache>* caches) const {
  if (ids.rank() != 2)
    throw Error(ErrorKind::ShapeMismatch,
                "forward: input ids must be [b, t], got " + ids.shape().to_string());
  if (caches && caches->size() != layers_.size())
    throw Error(ErrorKind::InvalidArgument, "forward: the cache has " + std::to_string(caches->size()) +
                                                " layers, the model " + std::to_string(layers_.size()));
  const size_t t = ids.dim(1);
  if (t == 0) throw Error(ErrorKind::InvalidArgument, "forward: no input tokens");
  if (index_pos + t > spec_.max_seq_len)
    throw Error(ErrorKind::InvalidArgument, "forward: positions up to " + std::to_string(index_pos + t) +
                                                " exceed the context length " +
                                                std::to_string(spec_.max_seq_len));
  Tensor x = embed(ids);
  std::vector<std::pair<Tensor, Tensor>> tables;
  for (size_t set = 0; set < spec_.inv_freqs.size(); ++set)
    tables.push_back(rope_tables(set, index_pos, t, x.dtype()));
  x = blocks(std::move(x), tables,
             [&](size_t i, const DecoderLayer& l, const Tensor& h, const Tensor& cos, const Tensor& sin) {
               return attention(l, h, index_pos, cos, sin, caches ? &(*caches)[i] : nullptr);
             });
  if (caches) x = x.narrow(1, t - 1, 1);
  Tensor logits = logits_of(x);
  return caches ? logits.squeeze(1) : logits;
}

StaticDecode Decoder::start_static_decode(size_t batch, size_t capacity) const {
  const size_t table_rows = cos_tables_.empty() ? 0 : cos_tables_[0].dim(0);
  if (batch == 0 || capacity == 0 || capacity > spec_.max_seq_len || capacity > table_rows)
    throw Error(ErrorKind::InvalidArgument, "start_static_decode: " + std::to_string(capacity) +
                                                " positions for " + std::to_string(batch) +
                                                " rows (the model takes 1.." +
                                                std::to_string(std::min(spec_.max_seq_len, table_rows)) +
                                                " positions and at least one row)");
  StaticDecode st;
  st.capacity = capacity;
  const Device& dev = embeddings_.device();
  st.pos = Tensor::from_vec(std::vector<uint32_t>{0}, {1}, dev);
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Shape kv{batch, spec_.kv_heads, capacity, spec_.head_dim};
    st.k.push_back(Tensor::zeros(kv, embeddings_.dtype(), dev));
    st.v.push_back(Tensor::zeros(kv, embeddings_.dtype(), dev));
  }
  return st;
}

Tensor Decoder::decode_step(const Tensor& ids, StaticDecode& st) const {
  if (ids.rank() != 2 || ids.dim(1) != 1)
    throw Error(ErrorKind::ShapeMismatch, "decode_step: ids must be [b, 1], got " + ids.shape().to_string());
  if (st.k.size() != layers_.size() || st.v.size() != layers_.size() || st.k.empty() ||
      st.k[0].dim(0) != ids.dim(0) || st.pos.elem_count() != 1 || st.pos.dtype() != DType::U32)
    throw Error(ErrorKind::InvalidArgument,
                "decode_step: the state was not made by start_static_decode for " +
                    std::to_string(ids.dim(0)) + " rows of this model");
  Tensor x = embed(ids);
  // the rope rows of the position, the key count (pos + 1) and the KV write indices, all on the device
  std::vector<std::pair<Tensor, Tensor>> tables;
  for (size_t set = 0; set < spec_.inv_freqs.size(); ++set)
    tables.emplace_back(cos_tables_[set].index_select(st.pos, 0).to_dtype(x.dtype()),
                        sin_tables_[set].index_select(st.pos, 0).to_dtype(x.dtype()));
  const Tensor kv_len = st.pos.affine(1.0, 1.0);
  const Shape one{st.k[0].dim(0), spec_.kv_heads, 1, spec_.head_dim};
  const Tensor at = st.pos.reshape({1, 1, 1, 1}).broadcast_as(one).contiguous();
  x = blocks(std::move(x), tables,
             [&](size_t i, const DecoderLayer& l, const Tensor& h, const Tensor& cos, const Tensor& sin) {
               auto [q, k, v] = qkv(l, h, cos, sin);
               st.k[i].scatter_set(at, k, 2);
               st.v[i].scatter_set(at, v, 2);
               Tensor y = nn::ops::scaled_dot_product_attention_kv_len(
                   q, st.k[i], st.v[i], kv_len, attn_scale(), true, l.window, spec_.attn_softcap);
               return attn_out(l, y);
             });
  return logits_of(x).squeeze(1);
}

}  // namespace candle::models::detail
