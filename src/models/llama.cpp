// candle::models::llama: config.json parsing, rotary frequencies and loading from a VarBuilder.
#include "candle/models/llama.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "candle/io/json_limits.h"
#include "decoder.h"
#include "tensor_parallel.h"

namespace candle::models::llama {
namespace {

using nlohmann::json;

constexpr size_t kMaxDim = size_t{1} << 20;    // hidden, intermediate, head dims
constexpr size_t kMaxVocab = size_t{1} << 24;  // vocabulary
constexpr size_t kMaxLayers = 4096;
constexpr size_t kMaxPositions = size_t{1} << 24;

Error config_error(const std::string& key, const std::string& why) {
  return Error(ErrorKind::InvalidArgument, "config.json: " + key + ": " + why);
}

const json* find(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}

size_t get_size(const json& j, const char* key, size_t max, std::optional<size_t> dflt = std::nullopt) {
  const json* v = find(j, key);
  if (!v) {
    if (dflt) return *dflt;
    throw config_error(key, "missing");
  }
  if (!v->is_number_integer()) throw config_error(key, "expected an integer");
  if (v->is_number_unsigned()) {
    uint64_t x = v->get<uint64_t>();
    if (x > max)
      throw config_error(key, std::to_string(x) + " is out of range (max " + std::to_string(max) + ")");
    return static_cast<size_t>(x);
  }
  int64_t x = v->get<int64_t>();
  if (x < 0 || static_cast<uint64_t>(x) > max)
    throw config_error(key, std::to_string(x) + " is out of range");
  return static_cast<size_t>(x);
}

double get_double(const json& j, const char* key, double dflt) {
  const json* v = find(j, key);
  if (!v) return dflt;
  if (!v->is_number()) throw config_error(key, "expected a number");
  double x = v->get<double>();
  if (!std::isfinite(x)) throw config_error(key, "not finite");
  return x;
}

bool get_bool(const json& j, const char* key, bool dflt) {
  const json* v = find(j, key);
  if (!v) return dflt;
  if (!v->is_boolean()) throw config_error(key, "expected true or false");
  return v->get<bool>();
}

std::string get_string(const json& j, const char* key, const std::string& dflt) {
  const json* v = find(j, key);
  if (!v) return dflt;
  if (!v->is_string()) throw config_error(key, "expected a string");
  return v->get<std::string>();
}

std::vector<uint32_t> get_token_ids(const json& j, const char* key) {
  const json* v = find(j, key);
  std::vector<uint32_t> out;
  if (!v) return out;
  auto one = [&](const json& x) {
    if (!x.is_number_unsigned() || x.get<uint64_t>() > std::numeric_limits<uint32_t>::max())
      throw config_error(key, "expected token ids");
    out.push_back(static_cast<uint32_t>(x.get<uint64_t>()));
  };
  if (v->is_array()) {
    if (v->size() > 1024) throw config_error(key, "too many token ids");
    for (const auto& x : *v) one(x);
  } else {
    one(*v);
  }
  return out;
}

// A longrope factor list: positive finite numbers, at most one per rotated pair of any head.
std::vector<float> get_factors(const json& j, const char* key, const std::string& where) {
  const json* v = find(j, key);
  if (!v || !v->is_array() || v->empty() || v->size() > kMaxDim / 2)
    throw config_error(where + "." + key, "expected a list of numbers, one per rotated pair of dims");
  std::vector<float> out;
  out.reserve(v->size());
  for (const auto& x : *v) {
    if (!x.is_number() || !(x.get<double>() > 0.0) || !std::isfinite(static_cast<float>(x.get<double>())))
      throw config_error(where + "." + key, "expected positive finite numbers");
    out.push_back(static_cast<float>(x.get<double>()));
  }
  return out;
}

// rope_scaling (the older form) or rope_parameters (transformers 5: it also holds rope_theta);
// `root` is the whole config (phi3 keeps original_max_position_embeddings there)
RopeScaling parse_rope_scaling(const json* v, const std::string& key, const json& root,
                               size_t max_positions) {
  RopeScaling r;
  if (!v) return r;
  if (!v->is_object()) throw config_error(key, "expected an object");
  std::string type = get_string(*v, "rope_type", get_string(*v, "type", "default"));
  if (type == "default") return r;
  r.factor = get_double(*v, "factor", 1.0);
  if (!(r.factor > 0.0)) throw config_error(key + ".factor", "must be > 0");
  if (type == "dynamic") {
    // dynamic NTK changes the base only for sequences longer than max_position_embeddings, which is
    // also the longest context these models run: within it, transformers' frequencies are the original
    return r;
  }
  if (type == "longrope" || type == "su") {  // "su": the name of Phi-3's first configs
    r.kind = RopeScaling::LongRope;
    r.short_factor = get_factors(*v, "short_factor", key);
    r.long_factor = get_factors(*v, "long_factor", key);
    if (r.short_factor.size() != r.long_factor.size())
      throw config_error(key, "short_factor and long_factor differ in length");
    const char* orig = "original_max_position_embeddings";
    const json& src = find(*v, orig) ? *v : root;
    r.original_max_position_embeddings = get_size(src, orig, kMaxPositions, max_positions);
    if (r.original_max_position_embeddings < 2) throw config_error(orig, "must be >= 2");
    // transformers: the ratio of the two context lengths replaces `factor` when the original is given
    if (find(src, orig))
      r.factor = static_cast<double>(max_positions) / static_cast<double>(r.original_max_position_embeddings);
    r.long_context = max_positions > r.original_max_position_embeddings;
    if (find(*v, "attention_factor")) {
      r.attention_factor = get_double(*v, "attention_factor", 1.0);
      if (!(*r.attention_factor > 0.0)) throw config_error(key + ".attention_factor", "must be > 0");
    }
    return r;
  }
  if (type == "linear") {
    r.kind = RopeScaling::Linear;
  } else if (type == "llama3") {
    r.kind = RopeScaling::Llama3;
    r.low_freq_factor = get_double(*v, "low_freq_factor", 1.0);
    r.high_freq_factor = get_double(*v, "high_freq_factor", 4.0);
    r.original_max_position_embeddings =
        get_size(*v, "original_max_position_embeddings", kMaxPositions, 8192);
    if (!(r.low_freq_factor > 0.0) || !(r.high_freq_factor > r.low_freq_factor) ||
        r.original_max_position_embeddings == 0)
      throw config_error(key,
                         "llama3 needs 0 < low_freq_factor < high_freq_factor and "
                         "original_max_position_embeddings > 0");
  } else if (type == "yarn") {
    r.kind = RopeScaling::Yarn;
    r.beta_fast = get_double(*v, "beta_fast", 32.0);
    r.beta_slow = get_double(*v, "beta_slow", 1.0);
    r.original_max_position_embeddings =
        get_size(*v, "original_max_position_embeddings", kMaxPositions, 4096);
    if (find(*v, "attention_factor") && !(*v)["attention_factor"].is_null())
      r.attention_factor = get_double(*v, "attention_factor", 1.0);
    if (!(r.beta_fast > 0.0) || !(r.beta_slow > 0.0) || r.original_max_position_embeddings == 0)
      throw config_error(key, "yarn needs beta_fast, beta_slow and original_max_position_embeddings > 0");
  } else {
    throw Error(ErrorKind::UnsupportedOp, "config.json: " + key + " type '" + io::excerpt(type, 40) +
                                              "' is not supported (default, "
                                              "linear, llama3, yarn, longrope, dynamic)");
  }
  return r;
}

}  // namespace

LlamaConfig LlamaConfig::from_json(std::string_view text) {
  io::check_json_depth(text, 32, "config.json");
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    throw Error(ErrorKind::Parse, std::string("config.json: ") + io::excerpt(e.what(), 200));
  }
  if (!j.is_object()) throw Error(ErrorKind::Parse, "config.json: expected an object");
  LlamaConfig c;
  c.model_type = get_string(j, "model_type", "llama");
  const std::string& mt = c.model_type;
  const bool gemma = mt == "gemma" || mt == "gemma2" || mt == "gemma3_text";
  const bool moe = mt == "mixtral" || mt == "qwen3_moe";
  if (mt != "llama" && mt != "mistral" && mt != "qwen2" && mt != "qwen3" && mt != "phi3" && !gemma && !moe)
    throw Error(
        ErrorKind::UnsupportedOp,
        "config.json: model_type '" + io::excerpt(mt, 40) +
            "' is not supported (llama, mistral, mixtral, qwen2, qwen3, qwen3_moe, phi3, gemma, gemma2, "
            "gemma3_text)");
  const std::string act =
      gemma ? get_string(j, "hidden_activation", get_string(j, "hidden_act", "gelu_pytorch_tanh"))
            : get_string(j, "hidden_act", "silu");
  if (act == "gelu_pytorch_tanh")
    c.gelu_mlp = true;
  else if (act != "silu")
    throw Error(ErrorKind::UnsupportedOp, "config.json: hidden activation '" + io::excerpt(act, 40) +
                                              "' is not supported (silu, gelu_pytorch_tanh)");
  if (gemma) {
    c.norm_plus_one = c.embed_scale = true;
    c.post_norms = mt != "gemma";
    auto positive = [&](const char* key, std::optional<double>& out) {
      if (!find(j, key)) return;
      out = get_double(j, key, 0.0);
      if (!(*out > 0.0)) throw config_error(key, "must be > 0");
    };
    positive("query_pre_attn_scalar", c.query_pre_attn_scalar);
    positive("attn_logit_softcapping", c.attn_logit_softcapping);
    positive("final_logit_softcapping", c.final_logit_softcapping);
  }
  c.hidden_size = get_size(j, "hidden_size", kMaxDim);
  c.intermediate_size = get_size(j, "intermediate_size", kMaxDim);
  c.vocab_size = get_size(j, "vocab_size", kMaxVocab);
  c.num_hidden_layers = get_size(j, "num_hidden_layers", kMaxLayers);
  c.num_attention_heads = get_size(j, "num_attention_heads", kMaxDim);
  c.num_key_value_heads = get_size(j, "num_key_value_heads", kMaxDim, c.num_attention_heads);
  if (c.hidden_size == 0 || c.intermediate_size == 0 || c.vocab_size == 0 || c.num_attention_heads == 0 ||
      c.num_key_value_heads == 0)
    throw config_error("hidden_size/intermediate_size/vocab_size/heads", "must be > 0");
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    throw config_error("num_key_value_heads", "must divide num_attention_heads");
  if (find(j, "head_dim"))
    c.head_dim = get_size(j, "head_dim", kMaxDim);
  else if (c.hidden_size % c.num_attention_heads == 0)
    c.head_dim = c.hidden_size / c.num_attention_heads;
  else
    throw config_error("head_dim", "missing, and hidden_size is not a multiple of num_attention_heads");
  if (c.head_dim == 0 || c.head_dim % 2 != 0) throw config_error("head_dim", "must be even and > 0");
  if (c.num_attention_heads * c.head_dim > kMaxDim) throw config_error("head_dim", "too large");
  c.max_position_embeddings = get_size(j, "max_position_embeddings", kMaxPositions, 4096);
  if (c.max_position_embeddings == 0) throw config_error("max_position_embeddings", "must be > 0");
  c.rms_norm_eps = get_double(j, "rms_norm_eps", 1e-6);
  if (!(c.rms_norm_eps >= 0.0)) throw config_error("rms_norm_eps", "must be >= 0");
  c.rope_theta = get_double(j, "rope_theta", 10000.0);
  // rope_parameters (transformers 5), per layer type for gemma3; else rope_theta + rope_scaling
  const json* rp = find(j, "rope_parameters");
  std::string rope_key = rp ? "rope_parameters" : "rope_scaling";
  const json* rope_global = rp ? rp : find(j, "rope_scaling");
  const json* rope_local = nullptr;
  if (rp && rp->is_object() && find(*rp, "full_attention")) {
    rope_global = find(*rp, "full_attention");
    rope_local = find(*rp, "sliding_attention");
    rope_key = "rope_parameters.full_attention";
    if (!rope_global->is_object() || (rope_local && !rope_local->is_object()))
      throw config_error("rope_parameters", "expected objects per layer type");
  }
  if (rp && rope_global->is_object()) c.rope_theta = get_double(*rope_global, "rope_theta", c.rope_theta);
  if (!(c.rope_theta > 0.0)) throw config_error("rope_theta", "must be > 0");
  c.rope_scaling = parse_rope_scaling(rope_global, rope_key, j, c.max_position_embeddings);
  if (rope_local) {
    if (parse_rope_scaling(rope_local, "rope_parameters.sliding_attention", j, c.max_position_embeddings)
            .kind != RopeScaling::None)
      throw Error(ErrorKind::UnsupportedOp,
                  "config.json: rope scaling of the sliding layers is not supported");
    c.rope_local_theta = get_double(*rope_local, "rope_theta", 10000.0);
  } else if (mt == "gemma3_text") {
    c.rope_local_theta = get_double(j, "rope_local_base_freq", 10000.0);
  }
  if (c.rope_local_theta && !(*c.rope_local_theta > 0.0))
    throw config_error("rope_local_base_freq", "must be > 0");
  c.tie_word_embeddings = get_bool(j, "tie_word_embeddings", false);
  const bool attention_bias = get_bool(j, "attention_bias", false);
  if (c.model_type == "qwen2") {
    c.qkv_bias = true;
  } else {
    c.qkv_bias = c.o_bias = attention_bias;
  }
  c.mlp_bias = c.model_type == "llama" && get_bool(j, "mlp_bias", false);
  c.qk_norm = mt == "qwen3" || mt == "qwen3_moe" || mt == "gemma3_text";
  if (moe) {
    c.num_experts = get_size(j, find(j, "num_local_experts") ? "num_local_experts" : "num_experts", 4096);
    c.num_experts_per_tok = get_size(j, "num_experts_per_tok", 4096);
    if (c.num_experts == 0 || c.num_experts_per_tok == 0 || c.num_experts_per_tok > c.num_experts)
      throw config_error("num_experts_per_tok", "must be in [1, the number of experts]");
    c.moe_intermediate_size =
        mt == "qwen3_moe" ? get_size(j, "moe_intermediate_size", kMaxDim) : c.intermediate_size;
    if (c.moe_intermediate_size == 0) throw config_error("moe_intermediate_size", "must be > 0");
    c.norm_topk_prob = mt == "mixtral" || get_bool(j, "norm_topk_prob", false);
    c.dense_layers.assign(c.num_hidden_layers, false);
    if (mt == "qwen3_moe") {
      const size_t step = get_size(j, "decoder_sparse_step", kMaxLayers, 1);
      if (step == 0) throw config_error("decoder_sparse_step", "must be > 0");
      for (size_t i = 0; i < c.num_hidden_layers; ++i) c.dense_layers[i] = (i + 1) % step != 0;
      if (const json* ml = find(j, "mlp_only_layers")) {
        if (!ml->is_array()) throw config_error("mlp_only_layers", "expected layer indices");
        for (const auto& x : *ml) {
          if (!x.is_number_unsigned() || x.get<uint64_t>() >= c.num_hidden_layers)
            throw config_error("mlp_only_layers", "expected layer indices");
          c.dense_layers[x.get<size_t>()] = true;
        }
      }
    }
  }
  for (const json* o : std::initializer_list<const json*>{&j, find(j, "rope_parameters")}) {
    if (o && o->is_object() && find(*o, "partial_rotary_factor")) {
      c.partial_rotary_factor = get_double(*o, "partial_rotary_factor", 1.0);
      const double dims = c.partial_rotary_factor * static_cast<double>(c.head_dim);
      if (!(c.partial_rotary_factor > 0.0 && c.partial_rotary_factor <= 1.0) ||
          static_cast<size_t>(dims) % 2 != 0 || static_cast<size_t>(dims) == 0)
        throw config_error("partial_rotary_factor",
                           "must be in (0, 1] and give an even number of rotated dims");
    }
  }
  if (c.rope_scaling.kind == RopeScaling::LongRope) {
    const size_t pairs = static_cast<size_t>(c.partial_rotary_factor * static_cast<double>(c.head_dim)) / 2;
    if (c.rope_scaling.short_factor.size() != pairs)
      throw config_error(rope_key, "longrope has " + std::to_string(c.rope_scaling.short_factor.size()) +
                                       " factors for " + std::to_string(pairs) + " rotated pairs of dims");
  }
  if (mt == "mistral" || mt == "mixtral" || mt == "phi3" || mt == "gemma2" || mt == "gemma3_text") {
    if (find(j, "sliding_window")) c.sliding_window = get_size(j, "sliding_window", kMaxPositions);
  } else if (mt == "qwen2" || mt == "qwen3" || mt == "qwen3_moe") {
    if (get_bool(j, "use_sliding_window", false)) {
      c.sliding_window = get_size(j, "sliding_window", kMaxPositions);
      c.max_window_layers = get_size(j, "max_window_layers", kMaxLayers, 0);
    }
  }
  if (const json* lt = find(j, "layer_types")) {
    // transformers 5 names each layer's attention; it overrides max_window_layers
    if (!lt->is_array() || lt->size() != c.num_hidden_layers)
      throw config_error("layer_types", "expected one string per layer");
    for (const auto& t : *lt) {
      if (!t.is_string()) throw config_error("layer_types", "expected strings");
      const std::string name = t.get<std::string>();
      if (name != "full_attention" && name != "sliding_attention")
        throw Error(ErrorKind::UnsupportedOp,
                    "config.json: layer type '" + io::excerpt(name, 40) + "' is not supported");
      c.sliding_layers.push_back(name == "sliding_attention");
    }
    if (!c.sliding_window && find(j, "sliding_window"))
      c.sliding_window = get_size(j, "sliding_window", kMaxPositions);
    for (bool sl : c.sliding_layers)
      if (sl && !c.sliding_window)
        throw config_error("layer_types", "a sliding layer without sliding_window");
  }
  if (c.sliding_layers.empty() && c.sliding_window && (mt == "gemma2" || mt == "gemma3_text")) {
    // before layer_types: gemma2 alternates (even layers slide), gemma3 has one global layer per pattern
    const size_t pattern = mt == "gemma2" ? 2 : get_size(j, "sliding_window_pattern", kMaxLayers, 6);
    if (pattern == 0) throw config_error("sliding_window_pattern", "must be > 0");
    for (size_t i = 0; i < c.num_hidden_layers; ++i)
      c.sliding_layers.push_back(mt == "gemma2" ? i % 2 == 0 : (i + 1) % pattern != 0);
  }
  if (c.sliding_window && *c.sliding_window == 0) throw config_error("sliding_window", "must be > 0");
  auto bos = get_token_ids(j, "bos_token_id");
  if (!bos.empty()) c.bos_token_id = bos[0];
  c.eos_token_ids = get_token_ids(j, "eos_token_id");
  return c;
}

std::optional<size_t> LlamaConfig::layer_window(size_t layer) const {
  if (!sliding_window) return std::nullopt;
  if (!sliding_layers.empty())
    return layer < sliding_layers.size() && sliding_layers[layer] ? sliding_window : std::nullopt;
  if ((model_type == "qwen2" || model_type == "qwen3" || model_type == "qwen3_moe") &&
      layer < max_window_layers)
    return std::nullopt;
  return sliding_window;
}

constexpr double kPi = 3.14159265358979323846;

std::vector<float> rope_inv_freq(size_t head_dim, double theta, const RopeScaling& scaling) {
  const size_t half = head_dim / 2;
  const std::vector<float>* ext = nullptr;  // longrope: 1 / (factor * base ** e), in f32 as transformers
  if (scaling.kind == RopeScaling::LongRope) {
    ext = scaling.long_context ? &scaling.long_factor : &scaling.short_factor;
    if (ext->size() != half)
      throw Error(ErrorKind::InvalidArgument, "rope scaling: longrope has " + std::to_string(ext->size()) +
                                                  " factors for " + std::to_string(half) +
                                                  " rotated pairs of dims");
  }
  std::vector<float> inv(half);
  for (size_t i = 0; i < half; ++i) {
    // transformers: 1 / base ** (arange(0, dim, 2).float() / dim), in f32
    const float e = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    const float p = std::pow(static_cast<float>(theta), e);
    inv[i] = 1.0f / (ext ? (*ext)[i] * p : p);
  }
  if (scaling.kind == RopeScaling::Linear) {
    for (float& f : inv) f = static_cast<float>(f / scaling.factor);
  } else if (scaling.kind == RopeScaling::Llama3) {
    const double old_ctx = static_cast<double>(scaling.original_max_position_embeddings);
    const double low_wavelen = old_ctx / scaling.low_freq_factor;
    const double high_wavelen = old_ctx / scaling.high_freq_factor;
    for (float& f : inv) {
      const double wavelen = 2.0 * kPi / f;
      if (wavelen > low_wavelen) {
        f = static_cast<float>(f / scaling.factor);
      } else if (wavelen >= high_wavelen) {
        const double smooth = (old_ctx / wavelen - scaling.low_freq_factor) /
                              (scaling.high_freq_factor - scaling.low_freq_factor);
        f = static_cast<float>((1.0 - smooth) * f / scaling.factor + smooth * f);
      }
    }
  }
  if (scaling.kind == RopeScaling::Yarn) {
    // transformers' _compute_yarn_parameters (llama.cpp's rope_yarn): the correction range of
    // dims from beta_fast / beta_slow rotations over the original context, truncated, then a
    // linear ramp from the original frequency (below it) to the interpolated one (above it)
    const double base = theta, dim = static_cast<double>(head_dim);
    const double orig = static_cast<double>(scaling.original_max_position_embeddings);
    auto corr = [&](double rotations) {
      return dim * std::log(orig / (rotations * 2.0 * kPi)) / (2.0 * std::log(base));
    };
    double low = std::max(std::floor(corr(scaling.beta_fast)), 0.0);
    double high = std::min(std::ceil(corr(scaling.beta_slow)), dim - 1.0);
    if (low == high) high += 0.001;
    for (size_t i = 0; i < half; ++i) {
      const float ramp =
          static_cast<float>(std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0));
      const float extrapolation = 1.0f - ramp;  // the share of the original frequency
      const float f = inv[i], interpolated = static_cast<float>(f / scaling.factor);
      inv[i] = interpolated * (1.0f - extrapolation) + f * extrapolation;
    }
  }
  return inv;
}

double rope_attention_factor(const RopeScaling& scaling) {
  if (scaling.kind != RopeScaling::Yarn && scaling.kind != RopeScaling::LongRope) return 1.0;
  if (scaling.attention_factor) return *scaling.attention_factor;
  if (scaling.factor <= 1.0) return 1.0;
  if (scaling.kind == RopeScaling::Yarn) return 0.1 * std::log(scaling.factor) + 1.0;
  const double orig = static_cast<double>(std::max<size_t>(scaling.original_max_position_embeddings, 2));
  return std::sqrt(1.0 + std::log(scaling.factor) / std::log(orig));
}

Cache::Cache(const LlamaConfig& cfg, size_t max_seq_len) {
  const size_t n = max_seq_len ? max_seq_len : cfg.max_position_embeddings;
  kvs_.reserve(cfg.num_hidden_layers);
  for (size_t i = 0; i < cfg.num_hidden_layers; ++i) kvs_.emplace_back(2, n);
}

void Cache::reset() {
  for (auto& kv : kvs_) kv.reset();
}

struct Llama::Impl {
  LlamaConfig cfg;
  detail::Decoder decoder;
};

namespace {

detail::Proj linear(size_t in, size_t out, bool bias, const nn::VarBuilder& vb) {
  return detail::Proj{nn::linear_b(in, out, bias, vb), std::nullopt};
}

// rows [start, start + n) of a fused weight as a projection of its own
detail::Proj rows(const Tensor& w, size_t start, size_t n) {
  return detail::Proj{nn::Linear(w.narrow(0, start, n), std::nullopt), std::nullopt};
}

}  // namespace

Llama Llama::load(const nn::VarBuilder& vb, const LlamaConfig& cfg, std::shared_ptr<Comm> comm) {
  const size_t h = cfg.hidden_size, hd = cfg.head_dim, nh = cfg.num_attention_heads,
               nkv = cfg.num_key_value_heads;
  const detail::TpPlan tp = detail::TpPlan::make(std::move(comm), nh, nkv, vb.device());
  const bool whole = tp.world == 1;
  // a column-parallel projection: this rank's rows [start, start + n) of its `out` (and of the bias)
  auto col = [&](const nn::VarBuilder& b, size_t in, size_t out, size_t start, size_t n, bool bias) {
    if (whole) return linear(in, out, bias, b);
    return detail::Proj{
        nn::Linear(b.get_narrow({out, in}, "weight", 0, start, n),
                   bias ? std::optional<Tensor>(b.get_narrow({out}, "bias", 0, start, n)) : std::nullopt),
        std::nullopt};
  };
  // a row-parallel projection: this rank's input columns [start, start + n); the bias on rank 0 only
  // (the ranks' partial sums are added)
  auto row = [&](const nn::VarBuilder& b, size_t in, size_t out, size_t start, size_t n, bool bias) {
    if (whole) return linear(in, out, bias, b);
    return detail::Proj{
        nn::Linear(b.get_narrow({out, in}, "weight", 1, start, n),
                   bias && tp.rank == 0 ? std::optional<Tensor>(b.get({out}, "bias")) : std::nullopt),
        std::nullopt};
  };
  // rows [start, start + n) of a fused weight as a projection of its own
  auto fused = [&](const nn::VarBuilder& b, const Tensor& whole_w, size_t rows_total, size_t start,
                   size_t n) {
    if (whole) return rows(whole_w, start, n);
    return detail::Proj{nn::Linear(b.get_narrow({rows_total, h}, "weight", 0, start, n), std::nullopt),
                        std::nullopt};
  };
  // an RmsNorm weight; gemma's scale by 1 + w (initialised to 0 in a VarMap)
  auto norm = [&](const nn::VarBuilder& b, size_t n) {
    if (!cfg.norm_plus_one) return b.get_with_hints({n}, "weight", nn::init::ONE);
    return b.get_with_hints({n}, "weight", nn::init::ZERO) + 1.0;
  };
  nn::VarBuilder m = vb.pp("model");
  Tensor embed = m.pp("embed_tokens").get({cfg.vocab_size, h}, "weight");
  std::vector<detail::DecoderLayer> layers;
  layers.reserve(cfg.num_hidden_layers);
  for (size_t i = 0; i < cfg.num_hidden_layers; ++i) {
    nn::VarBuilder lb = m.pp("layers").pp(std::to_string(i));
    nn::VarBuilder at = lb.pp("self_attn"), mlp = lb.pp("mlp");
    // llama's post_attention_layernorm is the MLP's input norm; gemma2/3 name that one
    // pre_feedforward_layernorm and norm the attention output with post_attention_layernorm
    Tensor attn_norm = norm(lb.pp("input_layernorm"), h);
    Tensor ffn_norm =
        norm(lb.pp(cfg.post_norms ? "pre_feedforward_layernorm" : "post_attention_layernorm"), h);
    std::optional<detail::Proj> q, k, v, gate, up;
    if (cfg.model_type == "phi3") {
      // fused projections: qkv_proj rows are q, k, v; gate_up_proj rows are gate, up
      const size_t nqkv = (nh + 2 * nkv) * hd, ffn = cfg.intermediate_size;
      const nn::VarBuilder qb = at.pp("qkv_proj"), gb = mlp.pp("gate_up_proj");
      Tensor qkv = whole ? qb.get({nqkv, h}, "weight") : Tensor();
      q = fused(qb, qkv, nqkv, tp.q_head0 * hd, tp.heads * hd);
      k = fused(qb, qkv, nqkv, (nh + tp.kv_head0) * hd, tp.kv_heads * hd);
      v = fused(qb, qkv, nqkv, (nh + nkv + tp.kv_head0) * hd, tp.kv_heads * hd);
      const auto [f0, fn] = tp.share(ffn, "intermediate_size");
      Tensor gu = whole ? gb.get({2 * ffn, h}, "weight") : Tensor();
      gate = fused(gb, gu, 2 * ffn, f0, fn);
      up = fused(gb, gu, 2 * ffn, ffn + f0, fn);
    } else {
      q = col(at.pp("q_proj"), h, nh * hd, tp.q_head0 * hd, tp.heads * hd, cfg.qkv_bias);
      k = col(at.pp("k_proj"), h, nkv * hd, tp.kv_head0 * hd, tp.kv_heads * hd, cfg.qkv_bias);
      v = col(at.pp("v_proj"), h, nkv * hd, tp.kv_head0 * hd, tp.kv_heads * hd, cfg.qkv_bias);
    }
    const bool moe_layer = cfg.num_experts > 0 && !cfg.dense_layers[i];
    std::optional<detail::MoeMlp> moe;
    std::optional<detail::Proj> down;
    if (moe_layer) {
      const bool mixtral = cfg.model_type == "mixtral";
      nn::VarBuilder mb = mixtral ? lb.pp("block_sparse_moe") : mlp;
      const size_t mi = cfg.moe_intermediate_size;
      moe = detail::MoeMlp{linear(h, cfg.num_experts, false, mb.pp("gate")),
                           {},
                           {},
                           {},
                           cfg.num_experts_per_tok,
                           cfg.norm_topk_prob};
      const auto [m0, mn] = tp.share(mi, "the experts' intermediate size");
      for (size_t e = 0; e < cfg.num_experts; ++e) {
        nn::VarBuilder eb = mb.pp("experts").pp(std::to_string(e));
        moe->gate.push_back(col(eb.pp(mixtral ? "w1" : "gate_proj"), h, mi, m0, mn, false));
        moe->up.push_back(col(eb.pp(mixtral ? "w3" : "up_proj"), h, mi, m0, mn, false));
        moe->down.push_back(row(eb.pp(mixtral ? "w2" : "down_proj"), mi, h, m0, mn, false));
      }
    } else {
      const size_t ffn = cfg.intermediate_size;
      const auto [f0, fn] = tp.share(ffn, "intermediate_size");
      if (!gate) {
        gate = col(mlp.pp("gate_proj"), h, ffn, f0, fn, cfg.mlp_bias);
        up = col(mlp.pp("up_proj"), h, ffn, f0, fn, cfg.mlp_bias);
      }
      down = row(mlp.pp("down_proj"), ffn, h, f0, fn, cfg.mlp_bias);
    }
    detail::DecoderLayer l{attn_norm,
                           ffn_norm,
                           std::nullopt,
                           std::nullopt,
                           std::move(*q),
                           std::move(*k),
                           std::move(*v),
                           row(at.pp("o_proj"), nh * hd, h, tp.q_head0 * hd, tp.heads * hd, cfg.o_bias),
                           std::move(gate),
                           std::move(up),
                           std::move(down),
                           cfg.layer_window(i),
                           std::nullopt,
                           std::nullopt,
                           0,
                           std::move(moe),
                           std::nullopt,
                           std::nullopt};
    if (cfg.qk_norm) {
      l.q_norm = norm(at.pp("q_norm"), hd);
      l.k_norm = norm(at.pp("k_norm"), hd);
    }
    if (cfg.post_norms) {
      l.post_attn_norm = norm(lb.pp("post_attention_layernorm"), h);
      l.post_ffn_norm = norm(lb.pp("post_feedforward_layernorm"), h);
    }
    // gemma3: the sliding layers rotate with their own base
    if (cfg.rope_local_theta && l.window) l.rope_set = 1;
    layers.push_back(std::move(l));
  }
  Tensor final_norm = norm(m.pp("norm"), h);
  detail::Proj head = cfg.tie_word_embeddings && !vb.contains_tensor("lm_head.weight")
                          ? detail::Proj{nn::Linear(embed, std::nullopt), std::nullopt}
                          : linear(h, cfg.vocab_size, false, vb.pp("lm_head"));
  detail::DecoderSpec spec;
  spec.heads = tp.heads;
  spec.kv_heads = tp.kv_heads;
  spec.comm = tp.comm;
  spec.head_dim = hd;
  spec.eps = cfg.rms_norm_eps;
  spec.interleaved_rope = false;
  // transformers' int(head_dim * partial_rotary_factor) rotated dims
  spec.rope_dim = static_cast<size_t>(cfg.partial_rotary_factor * static_cast<double>(hd));
  spec.inv_freqs = {rope_inv_freq(spec.rope_dim, cfg.rope_theta, cfg.rope_scaling)};
  spec.rope_mscale = rope_attention_factor(cfg.rope_scaling);
  if (cfg.rope_local_theta)
    spec.inv_freqs.push_back(rope_inv_freq(spec.rope_dim, *cfg.rope_local_theta, RopeScaling{}));
  spec.max_seq_len = cfg.max_position_embeddings;
  if (cfg.query_pre_attn_scalar) spec.attn_scale = 1.0 / std::sqrt(*cfg.query_pre_attn_scalar);
  if (cfg.embed_scale) spec.embed_scale = std::sqrt(static_cast<double>(h));
  spec.gelu_mlp = cfg.gelu_mlp;
  spec.attn_softcap = cfg.attn_logit_softcapping;
  spec.final_softcap = cfg.final_logit_softcapping;
  auto impl = std::make_shared<Impl>(Impl{cfg, detail::Decoder(std::move(spec), embed, std::move(layers),
                                                               final_norm, std::move(head), vb.device())});
  return Llama(std::move(impl));
}

Tensor Llama::forward(const Tensor& input_ids, size_t index_pos, Cache& cache) const {
  return impl_->decoder.forward(input_ids, index_pos, &cache.layers());
}

Tensor Llama::forward_all(const Tensor& input_ids) const {
  return impl_->decoder.forward(input_ids, 0, nullptr);
}

StaticDecode Llama::start_static_decode(size_t batch, size_t capacity) const {
  return impl_->decoder.start_static_decode(batch, capacity);
}

Tensor Llama::decode_step(const Tensor& ids, StaticDecode& state) const {
  return impl_->decoder.decode_step(ids, state);
}

Tensor Llama::prefill(const Tensor& ids, StaticDecode& state, size_t pos) const {
  return impl_->decoder.prefill(ids, state, pos);
}

const LlamaConfig& Llama::config() const { return impl_->cfg; }

}  // namespace candle::models::llama
