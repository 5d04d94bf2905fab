// The decoder-only transformer of models::llama and models::quantized_llama.
#include "decoder.h"

#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "candle/graph.h"
#include "candle/nn/attention.h"
#include "candle/nn/ops.h"
#include "candle/nn/rotary_emb.h"

namespace candle::models::detail {
namespace {

// CANDLE_DECODER_PROFILE=1 (read once): the wall time of each phase of the forward passes, summed over
// the process and printed to stderr at its exit. CPU ops run when called, so the times are theirs; on
// a GPU they are the launches' (the device's own profiler tells its kernels' times).
enum class Phase { Embed, QkvProj, HeadsRope, KvCache, Attention, OProj, Norms, GateUp, Act, Down, Logits };
constexpr std::array<const char*, 11> kPhaseNames = {
    "embedding",    "q/k/v matmuls",  "heads + rope", "kv cache",    "attention",     "o matmul",
    "norms + adds", "gate/up matmul", "activation",   "down matmul", "norm + lm_head"};

struct PhaseTotals {
  std::array<std::atomic<uint64_t>, kPhaseNames.size()> ns{}, calls{};
  PhaseTotals() = default;
  PhaseTotals(const PhaseTotals&) = delete;
  PhaseTotals& operator=(const PhaseTotals&) = delete;
  ~PhaseTotals() {
    uint64_t sum = 0;
    for (const auto& n : ns) sum += n.load();
    if (sum == 0) return;
    std::fprintf(stderr, "decoder profile (CANDLE_DECODER_PROFILE):\n%-16s %10s %10s %6s\n", "phase", "calls",
                 "ms", "%");
    for (size_t i = 0; i < ns.size(); ++i)
      std::fprintf(stderr, "%-16s %10llu %10.1f %6.1f\n", kPhaseNames[i],
                   static_cast<unsigned long long>(calls[i].load()), static_cast<double>(ns[i].load()) / 1e6,
                   100.0 * static_cast<double>(ns[i].load()) / static_cast<double>(sum));
    std::fprintf(stderr, "%-16s %10s %10.1f\n", "sum", "", static_cast<double>(sum) / 1e6);
  }
};

bool profiling() {
  static const bool on = [] {
    const char* e = std::getenv("CANDLE_DECODER_PROFILE");
    return e && *e && std::string(e) != "0";
  }();
  return on;
}

PhaseTotals& phase_totals() {
  static PhaseTotals t;
  return t;
}

// f() (of any result, void too), its wall time added to phase p's where profiling
template <typename F>
auto timed(Phase p, F&& f) {
  if (!profiling()) return f();
  struct Add {
    size_t i;
    std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
    explicit Add(size_t phase) : i(phase) {}
    Add(const Add&) = delete;
    Add& operator=(const Add&) = delete;
    ~Add() {
      const auto d = std::chrono::steady_clock::now() - t0;
      phase_totals().ns[i] += static_cast<uint64_t>(std::chrono::nanoseconds(d).count());
      phase_totals().calls[i] += 1;
    }
  } add(static_cast<size_t>(p));
  return f();
}

// Positions whose rotary tables are computed at load; later positions are computed per call.
constexpr size_t kTablePositions = 8192;

// cos/sin of pos * inv_freq in f32 (transformers computes them in f32 too)
std::pair<Tensor, Tensor> compute_tables(const std::vector<float>& inv_freq, size_t pos, size_t t,
                                         const Device& dev, double mscale = 1.0) {
  const size_t half = inv_freq.size();
  std::vector<float> c(t * half), s(t * half);
  const auto m = static_cast<float>(mscale);
  for (size_t i = 0; i < t; ++i) {
    const float p = static_cast<float>(pos + i);
    for (size_t j = 0; j < half; ++j) {
      const float a = p * inv_freq[j];
      c[i * half + j] = std::cos(a) * m;  // (times 1 exactly when there is no scaling)
      s[i * half + j] = std::sin(a) * m;
    }
  }
  return {Tensor::from_vec(c, {t, half}, dev), Tensor::from_vec(s, {t, half}, dev)};
}

// CANDLE_STACK_PROJECTIONS=1 / 0 stacks q|k|v and gate|up on any device / on none; by default
// where the weights live in a device's own memory (uploaded), not the machine's (where they are
// memory-mapped views of the file, which a stacked copy would duplicate)
bool stack_projections(const Device& dev) {
  const char* e = std::getenv("CANDLE_STACK_PROJECTIONS");
  if (e && *e) return std::string(e) != "0";
  return !dev.memory().shared_with_system;
}

// Where they are not stacked: q|k|v and gate|up of block types of one block size as a QMatMul::group
// (the weights stay where they are; one quantization of the input and one pass over the threads each).
// CANDLE_GROUP_PROJECTIONS=0 keeps them apart (a benchmark's switch).
bool group_projections() {
  static const bool on = [] {
    const char* e = std::getenv("CANDLE_GROUP_PROJECTIONS");
    return !(e && std::string(e) == "0");
  }();
  return on;
}

// The prompt positions one forward() with a KV cache runs at once (CANDLE_PREFILL_CHUNK, 0: all):
// by default 256 where the activations live in the machine's memory (a 512-token prompt then holds
// half the activations: TinyLlama Q8_0's peak resident memory at pp512 1259 -> 1203 MiB, the same
// logits, 4-6% slower at 2 threads), all of them on a device of its own memory
std::atomic<long> g_prefill_chunk{-1};  // set_prefill_chunk's value, -1: none

size_t prefill_chunk(const Device& dev) {
  if (const long set = g_prefill_chunk.load(std::memory_order_relaxed); set >= 0)
    return set == 0 ? SIZE_MAX : static_cast<size_t>(set);
  static const long env = [] {
    const char* e = std::getenv("CANDLE_PREFILL_CHUNK");
    if (!e || !*e) return -1L;
    char* end = nullptr;
    const long v = std::strtol(e, &end, 10);
    return end != e && *end == '\0' && v >= 0 ? v : -1L;
  }();
  if (env >= 0) return env == 0 ? SIZE_MAX : static_cast<size_t>(env);
  return dev.memory().shared_with_system ? 256 : SIZE_MAX;
}

}  // namespace

void set_prefill_chunk(long positions) { g_prefill_chunk.store(positions, std::memory_order_relaxed); }

Tensor Proj::forward(const Tensor& x) const {
  if (const auto* l = std::get_if<nn::Linear>(&w)) return l->forward(x);
  const auto& q = std::get<quantized::QMatMul>(w);
  Tensor y = q.forward(x);
  return bias ? y.broadcast_add(*bias) : y;
}

std::optional<Proj> Proj::group(const std::vector<const Proj*>& parts) {
  std::vector<quantized::QMatMul> qs;
  std::vector<Tensor> biases;
  for (const Proj* p : parts) {
    const auto* q = std::get_if<quantized::QMatMul>(&p->w);
    if (!q || !q->qtensor() || !quantized::ggml_is_quantized(q->dtype())) return std::nullopt;
    if (!qs.empty() && quantized::ggml_block_size(q->dtype()) != quantized::ggml_block_size(qs[0].dtype()))
      return std::nullopt;
    qs.push_back(*q);
    if (p->bias) biases.push_back(*p->bias);
  }
  if (!biases.empty() && biases.size() != parts.size()) return std::nullopt;
  std::optional<Tensor> bias;
  if (!biases.empty()) bias = Tensor::cat(biases, 0);
  return Proj{quantized::QMatMul::group(std::move(qs)), bias};
}

std::optional<Proj> Proj::stack(const std::vector<const Proj*>& parts) {
  std::vector<Tensor> biases;
  for (const Proj* p : parts) {
    const auto* l = std::get_if<nn::Linear>(&p->w);
    const std::optional<Tensor>& b = l ? l->bias() : p->bias;
    if (b) biases.push_back(*b);
  }
  if (!biases.empty() && biases.size() != parts.size()) return std::nullopt;
  // the stacked bias, made only once the weights are known to stack
  auto bias = [&]() -> std::optional<Tensor> {
    if (biases.empty()) return std::nullopt;
    return Tensor::cat(biases, 0);
  };
  std::vector<Tensor> ws;
  std::vector<const quantized::QTensor*> qs;
  for (const Proj* p : parts) {
    if (const auto* l = std::get_if<nn::Linear>(&p->w)) {
      ws.push_back(l->weight());
    } else {
      const auto& q = std::get<quantized::QMatMul>(p->w);
      if (const quantized::QTensor* t = q.qtensor())
        qs.push_back(t);
      else
        ws.push_back(q.weight());
    }
  }
  if (!ws.empty() && !qs.empty()) return std::nullopt;
  if (!qs.empty()) {
    for (const auto* t : qs)
      // blocks on a device with kernels for them, or host blocks where the QTensor's device is the
      // machine's memory (a device that has no kernels would only get a host copy)
      if (t->dtype() != qs[0]->dtype() ||
          (!t->device_data().defined() && !t->device().memory().shared_with_system))
        return std::nullopt;
    auto w = std::make_shared<const quantized::QTensor>(quantized::QTensor::cat_rows(qs));
    return Proj{quantized::QMatMul::from_arc(std::move(w)), bias()};
  }
  // trained weights (variables, or computed from them) stay apart: a stacked copy would not see
  // the optimizer's updates
  for (const Tensor& w : ws)
    if (w.dtype() != ws[0].dtype() || w.rank() != 2 || w.track_op()) return std::nullopt;
  for (const Tensor& b : biases)
    if (b.track_op()) return std::nullopt;
  return Proj{nn::Linear(Tensor::cat(ws, 0), bias()), std::nullopt};
}

namespace {
// CANDLE_MOE_DEVICE_ROUTING=1 routes every MoE layer on the device (see MoeMlp::forward); by default
// only inside a recorded graph
bool moe_device_routing() {
  const char* e = std::getenv("CANDLE_MOE_DEVICE_ROUTING");
  return Graph::recording() || (e && *e && std::string(e) != "0");
}
}  // namespace

Tensor MoeMlp::forward(const Tensor& xs, bool gelu) const {
  const size_t hidden = xs.dims().back(), n = xs.elem_count() / hidden, experts = gate.size();
  Tensor x = xs.reshape({n, hidden});
  Tensor probs = nn::ops::softmax_last_dim(router.forward(x).to_dtype(DType::F32));  // [n, E]
  Tensor top = probs.arg_sort_last_dim(false).narrow(1, 0, top_k).contiguous();      // [n, k] u32
  Tensor weights = probs.gather(top, 1);                                             // [n, k]
  if (norm_topk) weights = weights.broadcast_div(weights.sum_keepdim(1));
  auto expert = [&](size_t e, const Tensor& xe) {
    Tensor g = gate[e].forward(xe);
    return down[e].forward(gelu ? g.gelu() * up[e].forward(xe) : nn::ops::silu_mul(g, up[e].forward(xe)));
  };
  Tensor out = x.zeros_like();
  if (moe_device_routing()) {
    // The choice stays on the device (a recorded decode step replays with other tokens, so no
    // choice can be read on the host): every expert runs on every token and adds its output where
    // it was chosen. The chosen experts' terms are added in the same order as below, and x + 0 = x,
    // so the values equal the host-routed path's; unchosen outputs are masked, not multiplied by 0.
    for (size_t e = 0; e < experts; ++e) {
      Tensor chosen = top.eq(Scalar(static_cast<uint32_t>(e))).to_dtype(DType::F32);  // [n, k]
      Tensor w = (weights * chosen).sum_keepdim(1);                                   // [n, 1]
      Tensor ye = expert(e, x);
      Tensor picked = chosen.sum_keepdim(1).gt(Scalar(0.0f)).broadcast_as(ye.shape());
      out = out + picked.where_cond(ye.broadcast_mul(w.to_dtype(ye.dtype())), ye.zeros_like());
    }
    return out.reshape(xs.shape());
  }
  const std::vector<uint32_t> chosen = top.flatten_all().to_vec1<uint32_t>();
  for (size_t e = 0; e < experts; ++e) {
    std::vector<uint32_t> rows;
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < top_k; ++j)
        if (chosen[i * top_k + j] == e) rows.push_back(static_cast<uint32_t>(i));
    if (rows.empty()) continue;
    Tensor ids = Tensor::from_vec(rows, {rows.size()}, xs.device());
    // the expert's weight for each of its tokens: the matching top-k entry
    Tensor w = (weights * top.eq(Scalar(static_cast<uint32_t>(e))).to_dtype(DType::F32)).sum_keepdim(1);
    Tensor ye = expert(e, x.index_select(ids, 0));
    ye = ye.broadcast_mul(w.index_select(ids, 0).to_dtype(ye.dtype()));
    out = out.index_add(ids, ye, 0);
  }
  return out.reshape(xs.shape());
}

Decoder::Decoder(DecoderSpec spec, std::variant<Tensor, quantized::QTensor> embeddings,
                 std::vector<DecoderLayer> layers, Tensor final_norm, Proj lm_head, const Device& device)
    : spec_(std::move(spec)),
      embeddings_(std::move(embeddings)),
      dev_(device),
      dtype_(std::holds_alternative<Tensor>(embeddings_) ? std::get<Tensor>(embeddings_).dtype()
                                                         : DType::F32),
      vocab_(std::holds_alternative<Tensor>(embeddings_)
                 ? std::get<Tensor>(embeddings_).dim(0)
                 : std::get<quantized::QTensor>(embeddings_).shape().dims()[0]),
      layers_(std::move(layers)),
      final_norm_(std::move(final_norm)),
      lm_head_(std::move(lm_head)) {
  for (size_t set = 0; set < spec_.inv_freqs.size(); ++set) {
    const auto& f = spec_.inv_freqs[set];
    if (f.size() * 2 != spec_.rotary_dim() || spec_.rotary_dim() > spec_.head_dim)
      throw Error(ErrorKind::Internal, "decoder: rope frequencies do not match the head size");
    auto [c, s] = compute_tables(f, 0, std::min(spec_.max_seq_len, kTablePositions), dev_, mscale(set));
    cos_tables_.push_back(c);
    sin_tables_.push_back(s);
  }
  for (const auto& l : layers_)
    if (l.rope_set >= spec_.inv_freqs.size())
      throw Error(ErrorKind::Internal, "decoder: a layer's rope set does not exist");
  const bool stack = stack_projections(dev_);
  if (!stack && !group_projections()) return;
  auto join = [&](const std::vector<const Proj*>& parts) {
    return stack ? Proj::stack(parts) : Proj::group(parts);
  };
  const Proj empty{nn::Linear(Tensor(), std::nullopt), std::nullopt};
  for (auto& l : layers_) {
    if (!l.qkv && (l.qkv = join({&l.q, &l.k, &l.v}))) l.q = l.k = l.v = empty;
    if (l.gate && l.up && !l.gate_up && (l.gate_up = join({&*l.gate, &*l.up}))) l.gate = l.up = empty;
  }
}

void Decoder::check_span(const char* what, size_t pos, size_t t, size_t limit, const char* limit_name) {
  if (t == 0) throw Error(ErrorKind::InvalidArgument, std::string(what) + ": no input tokens");
  if (pos + t > limit)
    throw Error(ErrorKind::InvalidArgument, std::string(what) + ": positions up to " +
                                                std::to_string(pos + t) + " exceed " + limit_name + " of " +
                                                std::to_string(limit));
}

std::pair<Tensor, Tensor> Decoder::rope_tables(size_t set, size_t pos, size_t t, DType dtype) const {
  Tensor c, s;
  if (pos + t <= cos_tables_[set].dim(0)) {
    c = cos_tables_[set].narrow(0, pos, t);
    s = sin_tables_[set].narrow(0, pos, t);
  } else {
    std::tie(c, s) = compute_tables(spec_.inv_freqs[set], pos, t, dev_, mscale(set));
  }
  return {c.to_dtype(dtype), s.to_dtype(dtype)};
}

std::tuple<Tensor, Tensor, Tensor> Decoder::qkv(const DecoderLayer& l, const Tensor& x, const Tensor& cos,
                                                const Tensor& sin) const {
  const size_t b = x.dim(0), t = x.dim(1), hd = spec_.head_dim, nq = spec_.heads, nkv = spec_.kv_heads;
  // [b, t, n * hd] -> [b, n, t, hd], normed
  auto heads = [&](const Tensor& y, size_t n, const std::optional<Tensor>& norm) {
    Tensor h = y.reshape({b, t, n, hd});
    if (norm) h = nn::ops::rms_norm(h, *norm, static_cast<float>(spec_.eps));
    return h.transpose(1, 2).contiguous();
  };
  auto rotate = [&](const Tensor& h) {
    return spec_.interleaved_rope ? nn::rotary_emb::rope_i(h, cos, sin) : nn::rotary_emb::rope(h, cos, sin);
  };
  // partial rotary: the first rotary_dim() dims of each head turn, the rest pass through
  const size_t rd = spec_.rotary_dim();
  auto rope = [&](const Tensor& h) {
    if (rd == hd) return rotate(h);
    return Tensor::cat({rotate(h.narrow(3, 0, rd).contiguous()), h.narrow(3, rd, hd - rd)}, 3);
  };
  if (l.qkv) {
    Tensor y = timed(Phase::QkvProj, [&] { return l.qkv->forward(x); });
    return timed(Phase::HeadsRope, [&]() -> std::tuple<Tensor, Tensor, Tensor> {
      Tensor v = heads(y.narrow(2, (nq + nkv) * hd, nkv * hd), nkv, std::nullopt);
      if (!l.q_norm && !l.k_norm) {
        // q and k heads side by side rotate in one call (a decode step's [1, 1, n] row is a view)
        Tensor qk = rope(heads(y.narrow(2, 0, (nq + nkv) * hd), nq + nkv, std::nullopt));
        return {qk.narrow(1, 0, nq), qk.narrow(1, nq, nkv), v};
      }
      return {rope(heads(y.narrow(2, 0, nq * hd), nq, l.q_norm)),
              rope(heads(y.narrow(2, nq * hd, nkv * hd), nkv, l.k_norm)), v};
    });
  }
  Tensor q, k, v;
  std::tie(q, k, v) = timed(Phase::QkvProj, [&] {
    return std::tuple<Tensor, Tensor, Tensor>{l.q.forward(x), l.k.forward(x), l.v.forward(x)};
  });
  return timed(Phase::HeadsRope, [&] {
    return std::tuple<Tensor, Tensor, Tensor>{rope(heads(q, nq, l.q_norm)), rope(heads(k, nkv, l.k_norm)),
                                              heads(v, nkv, std::nullopt)};
  });
}

Tensor Decoder::attn_out(const DecoderLayer& l, const Tensor& y) const {
  return reduce(timed(Phase::OProj, [&] {
    return l.o.forward(y.transpose(1, 2).reshape({y.dim(0), y.dim(2), spec_.heads * spec_.head_dim}));
  }));
}

double Decoder::attn_scale() const {
  return spec_.attn_scale > 0.0 ? spec_.attn_scale : 1.0 / std::sqrt(static_cast<double>(spec_.head_dim));
}

Tensor Decoder::attention(const DecoderLayer& l, const Tensor& x, size_t index_pos, const Tensor& cos,
                          const Tensor& sin, nn::KvCache* cache) const {
  Tensor q, k, v;
  std::tie(q, k, v) = qkv(l, x, cos, sin);
  if (cache) {
    if (cache->current_seq_len() != index_pos)
      throw Error(ErrorKind::InvalidArgument, "forward: index_pos " + std::to_string(index_pos) +
                                                  " is not the cached length " +
                                                  std::to_string(cache->current_seq_len()));
    std::tie(k, v) = timed(Phase::KvCache, [&] { return cache->append(k, v); });
  }
  Tensor y = timed(Phase::Attention, [&] {
    return nn::ops::scaled_dot_product_attention(q, k, v, attn_scale(), true, l.window, spec_.attn_softcap);
  });
  return attn_out(l, y);
}

template <typename Attn>
Tensor Decoder::blocks(Tensor x, const std::vector<std::pair<Tensor, Tensor>>& tables, Attn&& attn) const {
  const float eps = static_cast<float>(spec_.eps);
  // each residual add and the norm after it in one op (add_rms_norm): the layer's input norm comes
  // from the previous layer's last add
  Tensor h = layers_.empty()
                 ? Tensor()
                 : timed(Phase::Norms, [&] { return nn::ops::rms_norm(x, layers_[0].attn_norm, eps); });
  for (size_t i = 0; i < layers_.size(); ++i) {
    const DecoderLayer& l = layers_[i];
    const auto& [cos, sin] = tables[l.rope_set];
    h = attn(i, l, h, cos, sin);
    timed(Phase::Norms, [&] {
      if (l.post_attn_norm) h = nn::ops::rms_norm(h, *l.post_attn_norm, eps);
      std::tie(x, h) = nn::ops::add_rms_norm(x, h, l.ffn_norm, eps);
    });
    if (l.moe) {
      h = l.moe->forward(h, spec_.gelu_mlp);
    } else {
      Tensor g, u;
      timed(Phase::GateUp, [&] {
        if (l.gate_up) {
          Tensor gu = l.gate_up->forward(h);
          const size_t f = gu.dims().back() / 2;
          g = gu.narrow(gu.rank() - 1, 0, f);
          u = gu.narrow(gu.rank() - 1, f, f);
        } else {
          g = l.gate->forward(h);
          u = l.up->forward(h);
        }
      });
      Tensor a = timed(Phase::Act, [&] { return spec_.gelu_mlp ? g.gelu() * u : nn::ops::silu_mul(g, u); });
      h = timed(Phase::Down, [&] { return l.down->forward(a); });
    }
    h = reduce(h);
    timed(Phase::Norms, [&] {
      if (l.post_ffn_norm) h = nn::ops::rms_norm(h, *l.post_ffn_norm, eps);
      if (i + 1 < layers_.size()) {
        std::tie(x, h) = nn::ops::add_rms_norm(x, h, layers_[i + 1].attn_norm, eps);
      } else {
        x = x + h;
      }
    });
  }
  return x;
}

Tensor Decoder::logits_of(Tensor x) const {
  return timed(Phase::Logits, [&] {
    x = nn::ops::rms_norm(x, final_norm_, static_cast<float>(spec_.eps));
    Tensor logits = lm_head_.forward(x).to_dtype(DType::F32);
    if (spec_.final_softcap) logits = (logits / *spec_.final_softcap).tanh() * *spec_.final_softcap;
    return logits;
  });
}

Tensor Decoder::embed(const Tensor& ids) const {
  return timed(Phase::Embed, [&] { return embed_ids(ids); });
}

Tensor Decoder::embed_ids(const Tensor& ids) const {
  Tensor ids_u32 = ids.dtype() == DType::U32 ? ids : ids.to_dtype(DType::U32);
  Tensor x = std::holds_alternative<Tensor>(embeddings_)
                 ? std::get<Tensor>(embeddings_).embedding(ids_u32)
                 : std::get<quantized::QTensor>(embeddings_).embedding(ids_u32, dev_);
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
  check_span("forward", index_pos, t, spec_.max_seq_len, "the context length");
  if (const size_t chunk = prefill_chunk(dev_); caches && t > chunk) {
    // the prompt in chunks through the cache: each position's logits as in one pass, the last one's
    for (size_t p = 0; p + chunk < t; p += chunk)
      forward_positions(ids.narrow(1, p, chunk), index_pos + p, caches, false);
    const size_t last = (t - 1) / chunk * chunk;
    return forward_positions(ids.narrow(1, last, t - last), index_pos + last, caches);
  }
  return forward_positions(ids, index_pos, caches);
}

Tensor Decoder::forward_positions(const Tensor& ids, size_t index_pos, std::vector<nn::KvCache>* caches,
                                  bool logits) const {
  const size_t t = ids.dim(1);
  Tensor x = embed(ids);
  std::vector<std::pair<Tensor, Tensor>> tables;
  for (size_t set = 0; set < spec_.inv_freqs.size(); ++set)
    tables.push_back(rope_tables(set, index_pos, t, x.dtype()));
  x = blocks(std::move(x), tables,
             [&](size_t i, const DecoderLayer& l, const Tensor& h, const Tensor& cos, const Tensor& sin) {
               return attention(l, h, index_pos, cos, sin, caches ? &(*caches)[i] : nullptr);
             });
  if (!logits) return {};
  if (caches) x = x.narrow(1, t - 1, 1);
  Tensor out = logits_of(x);
  return caches ? out.squeeze(1) : out;
}

StaticDecode Decoder::start_static_decode(size_t batch, size_t capacity) const {
  if (batch == 0 || capacity == 0 || capacity > spec_.max_seq_len)
    throw Error(ErrorKind::InvalidArgument,
                "start_static_decode: " + std::to_string(capacity) + " positions for " +
                    std::to_string(batch) + " rows (the model takes 1.." + std::to_string(spec_.max_seq_len) +
                    " positions and at least one row)");
  StaticDecode st;
  st.capacity = capacity;
  const Device& dev = dev_;
  st.pos = Tensor::from_vec(std::vector<uint32_t>{0}, {1}, dev);
  // the model's rope tables where they reach (views), else tables of the whole capacity
  for (size_t set = 0; set < spec_.inv_freqs.size(); ++set) {
    if (capacity <= cos_tables_[set].dim(0)) {
      st.cos.push_back(cos_tables_[set].narrow(0, 0, capacity));
      st.sin.push_back(sin_tables_[set].narrow(0, 0, capacity));
    } else {
      auto [c, s] = compute_tables(spec_.inv_freqs[set], 0, capacity, dev, mscale(set));
      st.cos.push_back(c);
      st.sin.push_back(s);
    }
  }
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Shape kv{batch, spec_.kv_heads, capacity, spec_.head_dim};
    st.k.push_back(Tensor::zeros(kv, dtype_, dev));
    st.v.push_back(Tensor::zeros(kv, dtype_, dev));
  }
  return st;
}

void Decoder::check_state(const char* what, const Tensor& ids, const StaticDecode& st) const {
  if (ids.rank() != 2)
    throw Error(ErrorKind::ShapeMismatch,
                std::string(what) + ": ids must be [b, t], got " + ids.shape().to_string());
  if (st.k.size() != layers_.size() || st.v.size() != layers_.size() || st.k.empty() ||
      st.k[0].dim(0) != ids.dim(0) || st.k[0].dim(2) != st.capacity || st.pos.elem_count() != 1 ||
      st.pos.dtype() != DType::U32 || st.cos.size() != spec_.inv_freqs.size() ||
      st.sin.size() != spec_.inv_freqs.size())
    throw Error(ErrorKind::InvalidArgument, std::string(what) +
                                                ": the state was not made by start_static_decode for " +
                                                std::to_string(ids.dim(0)) + " rows of this model");
}

Tensor Decoder::decode_step(const Tensor& ids, StaticDecode& st) const {
  check_state("decode_step", ids, st);
  if (ids.dim(1) != 1)
    throw Error(ErrorKind::ShapeMismatch, "decode_step: ids must be [b, 1], got " + ids.shape().to_string());
  Tensor x = embed(ids);
  // the rope rows of the position, the key count (pos + 1) and the KV write indices, all on the device
  std::vector<std::pair<Tensor, Tensor>> tables;
  for (size_t set = 0; set < spec_.inv_freqs.size(); ++set)
    tables.emplace_back(st.cos[set].index_select(st.pos, 0).to_dtype(x.dtype()),
                        st.sin[set].index_select(st.pos, 0).to_dtype(x.dtype()));
  const Tensor kv_len = st.pos.affine(1.0, 1.0);
  const Shape one{st.k[0].dim(0), spec_.kv_heads, 1, spec_.head_dim};
  // (a broadcast view: a backend may read the one position instead of an id per element)
  const Tensor at = st.pos.reshape({1, 1, 1, 1}).broadcast_as(one);
  x = blocks(std::move(x), tables,
             [&](size_t i, const DecoderLayer& l, const Tensor& h, const Tensor& cos, const Tensor& sin) {
               Tensor q, k, v;  // (not a structured binding: clang before 16 cannot capture those)
               std::tie(q, k, v) = qkv(l, h, cos, sin);
               timed(Phase::KvCache, [&] {
                 st.k[i].scatter_set(at, k, 2);
                 st.v[i].scatter_set(at, v, 2);
               });
               Tensor y = timed(Phase::Attention, [&] {
                 return nn::ops::scaled_dot_product_attention_kv_len(
                     q, st.k[i], st.v[i], kv_len, attn_scale(), true, l.window, spec_.attn_softcap);
               });
               return attn_out(l, y);
             });
  return logits_of(x).squeeze(1);
}

Tensor Decoder::prefill(const Tensor& ids, StaticDecode& st, size_t pos) const {
  check_state("prefill", ids, st);
  const size_t t = ids.dim(1);
  check_span("prefill", pos, t, st.capacity, "the state's capacity");
  if (const size_t chunk = prefill_chunk(dev_); t > chunk) {  // as forward(): in chunks
    const size_t last = (t - 1) / chunk * chunk;
    for (size_t p = 0; p < last; p += chunk) prefill(ids.narrow(1, p, chunk), st, pos + p);
    return prefill(ids.narrow(1, last, t - last), st, pos + last);
  }
  Tensor x = embed(ids);
  std::vector<std::pair<Tensor, Tensor>> tables;
  for (size_t set = 0; set < spec_.inv_freqs.size(); ++set)
    tables.emplace_back(st.cos[set].narrow(0, pos, t).to_dtype(x.dtype()),
                        st.sin[set].narrow(0, pos, t).to_dtype(x.dtype()));
  x = blocks(std::move(x), tables,
             [&](size_t i, const DecoderLayer& l, const Tensor& h, const Tensor& cos, const Tensor& sin) {
               Tensor q, k, v;  // (not a structured binding: clang before 16 cannot capture those)
               std::tie(q, k, v) = qkv(l, h, cos, sin);
               timed(Phase::KvCache, [&] {
                 st.k[i].slice_set(k, 2, pos);
                 st.v[i].slice_set(v, 2, pos);
               });
               Tensor y = timed(Phase::Attention, [&] {
                 return nn::ops::scaled_dot_product_attention(q, st.k[i].narrow(2, 0, pos + t),
                                                              st.v[i].narrow(2, 0, pos + t), attn_scale(),
                                                              true, l.window, spec_.attn_softcap);
               });
               return attn_out(l, y);
             });
  return logits_of(x.narrow(1, t - 1, 1)).squeeze(1);
}

}  // namespace candle::models::detail
