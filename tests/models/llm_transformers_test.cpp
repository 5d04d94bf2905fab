// models::llama against transformers: tests/data/llm/<family>/ (tools/gen_llm_fixtures.py, run by
// the lead with torch 2.11 / transformers 5.17: tiny random models, f16 weights; the reference
// logits computed in f32 from those weights with eager attention, the greedy continuation by full
// recomputation at every step).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "candle/candle.h"
#include "candle/io/safetensors.h"
#include "candle/models/causal_lm.h"
#include "candle/quantized/gguf_file.h"
#include "candle/quantized/quantized.h"
#include "models/program_util.h"
#include "quantized/gguf_test_util.h"

using namespace candle;

namespace {

std::string dir(const std::string& family) { return std::string(CANDLE_TEST_DATA_DIR) + "/llm/" + family; }

struct Expected {
  std::vector<uint32_t> prompt, greedy;
  Tensor logits;  // [1, T, V]
};

Expected expected(const std::string& family) {
  auto t = safetensors::load(dir(family) + "/expected.safetensors", Device::cpu());
  Expected e;
  for (int64_t x : t.at("input_ids").flatten_all().to_vec1<int64_t>())
    e.prompt.push_back(static_cast<uint32_t>(x));
  for (int64_t x : t.at("greedy").to_vec1<int64_t>()) e.greedy.push_back(static_cast<uint32_t>(x));
  e.logits = t.at("logits");
  return e;
}

Tensor ids(const std::vector<uint32_t>& v) { return Tensor::from_vec(v, {1, v.size()}, Device::cpu()); }

struct Family {
  const char* name;
  float tol;  // on the logits
};

class Transformers : public ::testing::TestWithParam<Family> {};

}  // namespace

// Each prompt position's logits: the model fed one token at a time through its KV cache (so the
// cache, the decode attention and the rope offsets are all exercised) against transformers' batch
// forward; the prompt fed in one batch against its last position; and the 32 greedy tokens, which
// must be transformers' exactly (the fixtures' top-1/top-2 margins are >= 0.022).
// Tolerances on |logits| up to ~5: 2e-5 where the reference computes what candle does (measured:
// gemma, gemma2, gemma3, phi3, mixtral, qwen3_moe within 4.8e-6); 5e-3 for llama, llama3, mistral,
// qwen2 and qwen3 (measured 7e-4 .. 3.0e-3), whose reference's rotary frequencies behave as if
// rounded to f16: with inv_freq rounded to f16 those five equal it within 6.4e-6 too. (tools/
// gen_llm_fixtures.py builds the reference in f32 and checks that its inv_freq buffers are not
// f16-rounded; the cause inside transformers 5.17 is not found yet.) Here they are f32.
TEST_P(Transformers, LogitsAndGreedyTokens) {
  const std::string family = GetParam().name;
  const float tol = GetParam().tol;
  Expected e = expected(family);
  auto lm = models::load_causal_lm(dir(family), Device::cpu(), DType::F32);
  const size_t t = e.prompt.size(), v = lm->vocab_size();
  ASSERT_EQ(e.logits.shape(), (Shape{1, t, v}));
  float worst = 0;
  for (size_t p = 0; p < t; ++p) {
    Tensor got = lm->forward(ids({e.prompt[p]}), p);
    Tensor want = e.logits.narrow(1, p, 1).squeeze(1);
    worst = std::max(worst, (got - want).abs().flatten_all().max(0).to_scalar<float>());
  }
  EXPECT_LT(worst, tol) << family << ": token-by-token logits";
  lm->clear_kv_cache();
  Tensor last = lm->forward(ids(e.prompt), 0);
  float d = (last - e.logits.narrow(1, t - 1, 1).squeeze(1)).abs().flatten_all().max(0).to_scalar<float>();
  EXPECT_LT(d, tol) << family << ": batched prompt";

  std::vector<uint32_t> seq = e.prompt;
  for (size_t i = 0; i + t < e.greedy.size(); ++i) {
    seq.push_back(last.flatten_all().argmax(0).to_scalar<uint32_t>());
    last = lm->forward(ids({seq.back()}), seq.size() - 1);
  }
  EXPECT_EQ(seq, e.greedy) << family;
}

// CANDLE_STACK_PROJECTIONS set for the scope (unset after)
struct StackProjections {
  explicit StackProjections(const char* v) { ::setenv("CANDLE_STACK_PROJECTIONS", v, 1); }
  ~StackProjections() { ::unsetenv("CANDLE_STACK_PROJECTIONS"); }
};

// q|k|v and gate|up stacked into one matmul each (what GPUs do by default), here forced on the CPU:
// the same logits as the separate projections, token by token and for the batched prompt, in every
// family (qwen2's biases, qwen3's q/k norms, gemma's gelu, the MoE layers that keep their experts).
TEST_P(Transformers, StackedProjectionsGiveTheSameLogits) {
  const std::string family = GetParam().name;
  Expected e = expected(family);
  auto logits = [&](const char* stack) {
    StackProjections env(stack);
    auto lm = models::load_causal_lm(dir(family), Device::cpu(), DType::F32);
    std::vector<Tensor> out;
    for (size_t p = 0; p < e.prompt.size(); ++p) out.push_back(lm->forward(ids({e.prompt[p]}), p));
    lm->clear_kv_cache();
    out.push_back(lm->forward(ids(e.prompt), 0));
    return out;
  };
  const std::vector<Tensor> apart = logits("0"), stacked = logits("1");
  ASSERT_EQ(apart.size(), stacked.size());
  for (size_t i = 0; i < apart.size(); ++i)
    EXPECT_LT((apart[i] - stacked[i]).abs().flatten_all().max(0).to_scalar<float>(), 1e-5f)
        << family << (i + 1 == apart.size() ? ": batched prompt" : ": position " + std::to_string(i));
}

// The MoE families routed on the device (what a recorded decode step does, forced here on the CPU
// by CANDLE_MOE_DEVICE_ROUTING=1: every expert on every token, masked): the host-routed logits,
// token by token bit for bit (one row: the same matmuls, the chosen terms added in the same order)
// and for the batched prompt within 1e-5.
TEST(MoeRouting, OnTheDeviceGivesTheHostRoutedLogits) {
  for (const std::string family : {"mixtral", "qwen3_moe"}) {
    Expected e = expected(family);
    auto logits = [&](bool on_device) {
      if (on_device) ::setenv("CANDLE_MOE_DEVICE_ROUTING", "1", 1);
      auto lm = models::load_causal_lm(dir(family), Device::cpu(), DType::F32);
      std::vector<Tensor> out;
      for (size_t p = 0; p < e.prompt.size(); ++p) out.push_back(lm->forward(ids({e.prompt[p]}), p));
      lm->clear_kv_cache();
      out.push_back(lm->forward(ids(e.prompt), 0));
      ::unsetenv("CANDLE_MOE_DEVICE_ROUTING");
      return out;
    };
    const std::vector<Tensor> host = logits(false), device = logits(true);
    ASSERT_EQ(host.size(), device.size());
    for (size_t i = 0; i < host.size(); ++i) {
      const float d = (host[i] - device[i]).abs().flatten_all().max(0).to_scalar<float>();
      if (i + 1 < host.size())
        EXPECT_EQ(d, 0.0f) << family << ": position " << i;
      else
        EXPECT_LT(d, 1e-5f) << family << ": batched prompt";
    }
  }
}

constexpr float kExact = 2e-5f, kF16Rope = 5e-3f;
// phi3_longrope: cos / sin scaled by 1.53 and logits up to 6.3; the kernels forced to AVX2 give 2.5e-5
constexpr float kLongRope = 1e-4f;

// A model loaded from a GGUF written from `family`'s fixture: transformers' logits after the prompt
// (within tol) and its greedy continuation, token by token through the KV cache
void expect_transformers(models::CausalLM& lm, const std::string& family, float tol) {
  Expected e = expected(family);
  Tensor last = lm.forward(ids(e.prompt), 0);
  const size_t t = e.prompt.size();
  float d = (last - e.logits.narrow(1, t - 1, 1).squeeze(1)).abs().flatten_all().max(0).to_scalar<float>();
  EXPECT_LT(d, tol) << family;
  std::vector<uint32_t> seq = e.prompt;
  for (size_t i = 0; i + t < e.greedy.size(); ++i) {
    seq.push_back(last.flatten_all().argmax(0).to_scalar<uint32_t>());
    last = lm.forward(ids({seq.back()}), seq.size() - 1);
  }
  EXPECT_EQ(seq, e.greedy) << family;
}

INSTANTIATE_TEST_SUITE_P(Llm, Transformers,
                         ::testing::Values(Family{"llama", kF16Rope}, Family{"llama3", kF16Rope},
                                           Family{"mistral", kF16Rope}, Family{"qwen2", kF16Rope},
                                           Family{"qwen3", kF16Rope}, Family{"gemma", kExact},
                                           Family{"gemma2", kExact}, Family{"gemma3", kExact},
                                           Family{"phi3", kExact}, Family{"phi3_longrope", kLongRope},
                                           Family{"llama_dynamic", kF16Rope}, Family{"mixtral", kExact},
                                           Family{"qwen3_moe", kExact}),
                         [](const auto& info) { return std::string(info.param.name); });

namespace {

namespace gg = quantized::gguf_file;

// The fixture `family` as an f32 GGUF at `path` under llama.cpp's names and conventions (see the
// test below), with a stand-in vocabulary and `extra` metadata; returns general.architecture.
std::string write_fixture_gguf(const std::string& family, const std::string& path,
                               const gg::MetadataList& extra = {}) {
  auto w = safetensors::load(dir(family) + "/model.safetensors", Device::cpu());
  auto cfg = nlohmann::json::parse(std::ifstream(dir(family) + "/config.json"));
  const bool gemma = family.rfind("gemma", 0) == 0, post = family == "gemma2" || family == "gemma3";
  const bool phi3 = family.rfind("phi3", 0) == 0;
  const size_t heads = cfg["num_attention_heads"].get<size_t>(),
               kv = cfg["num_key_value_heads"].get<size_t>();
  const size_t hidden = cfg["hidden_size"].get<size_t>(), layers = cfg["num_hidden_layers"].get<size_t>();
  const size_t hd = cfg.contains("head_dim") && cfg["head_dim"].is_number() ? cfg["head_dim"].get<size_t>()
                                                                            : hidden / heads;
  const size_t experts = cfg.value("num_local_experts", size_t{0});
  gg::TensorList tensors;
  auto put_t = [&](const std::string& name, const Tensor& t) {
    tensors.emplace_back(name,
                         quantized::QTensor::quantize(t.to_dtype(DType::F32), quantized::GgmlDType::F32));
  };
  auto put = [&](const std::string& name, const std::string& hf) { put_t(name, w.at(hf)); };
  auto put_norm = [&](const std::string& name, const std::string& hf) {
    put_t(name, gemma ? w.at(hf).to_dtype(DType::F32) + 1.0 : w.at(hf));
  };
  // llama.cpp's permutation of q / k rows for general.architecture llama
  auto permuted = [&](const std::string& hf, size_t n) {
    Tensor t = w.at(hf);
    return t.reshape({n, 2, hd / 2, hidden}).transpose(1, 2).contiguous().reshape({n * hd, hidden});
  };
  auto stacked = [&](const std::string& pre, const std::string& post_name) {
    std::vector<Tensor> parts;
    for (size_t e = 0; e < experts; ++e)
      parts.push_back(w.at(pre + std::to_string(e) + post_name).unsqueeze(0));
    return Tensor::cat(parts, 0);
  };
  put("token_embd.weight", "model.embed_tokens.weight");
  put_norm("output_norm.weight", "model.norm.weight");
  if (w.count("lm_head.weight")) put("output.weight", "lm_head.weight");
  for (size_t i = 0; i < layers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".", h = "model.layers." + std::to_string(i) + ".";
    put_norm(b + "attn_norm.weight", h + "input_layernorm.weight");
    put_norm(b + "ffn_norm.weight",
             h + (post ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight"));
    if (post) {
      put_norm(b + "post_attention_norm.weight", h + "post_attention_layernorm.weight");
      put_norm(b + "post_ffw_norm.weight", h + "post_feedforward_layernorm.weight");
    }
    if (phi3) {
      put(b + "attn_qkv.weight", h + "self_attn.qkv_proj.weight");
    } else if (family == "mixtral") {
      put_t(b + "attn_q.weight", permuted(h + "self_attn.q_proj.weight", heads));
      put_t(b + "attn_k.weight", permuted(h + "self_attn.k_proj.weight", kv));
      put(b + "attn_v.weight", h + "self_attn.v_proj.weight");
    } else {
      for (const char* p : {"q", "k", "v"}) {
        put(b + "attn_" + p + ".weight", h + "self_attn." + p + "_proj.weight");
        if (family == "qwen2") put(b + "attn_" + p + ".bias", h + "self_attn." + p + "_proj.bias");
      }
    }
    put(b + "attn_output.weight", h + "self_attn.o_proj.weight");
    if (family == "gemma3" || family == "qwen3" || family == "qwen3_moe") {
      put_norm(b + "attn_q_norm.weight", h + "self_attn.q_norm.weight");
      put_norm(b + "attn_k_norm.weight", h + "self_attn.k_norm.weight");
    }
    if (phi3) {
      put(b + "ffn_up.weight", h + "mlp.gate_up_proj.weight");
      put(b + "ffn_down.weight", h + "mlp.down_proj.weight");
    } else if (family == "mixtral") {
      const std::string m = h + "block_sparse_moe.";
      put(b + "ffn_gate_inp.weight", m + "gate.weight");
      put_t(b + "ffn_gate_exps.weight", stacked(m + "experts.", ".w1.weight"));
      put_t(b + "ffn_up_exps.weight", stacked(m + "experts.", ".w3.weight"));
      put_t(b + "ffn_down_exps.weight", stacked(m + "experts.", ".w2.weight"));
    } else if (family == "qwen3_moe") {
      put(b + "ffn_gate_inp.weight", h + "mlp.gate.weight");
      put_t(b + "ffn_gate_exps.weight", stacked(h + "mlp.experts.", ".gate_proj.weight"));
      put_t(b + "ffn_up_exps.weight", stacked(h + "mlp.experts.", ".up_proj.weight"));
      put_t(b + "ffn_down_exps.weight", stacked(h + "mlp.experts.", ".down_proj.weight"));
    } else {
      for (const char* p : {"gate", "up", "down"})
        put(b + "ffn_" + p + ".weight", h + "mlp." + p + "_proj.weight");
    }
  }
  const std::string arch = family == "mixtral"     ? "llama"
                           : family == "qwen3_moe" ? "qwen3moe"
                           : phi3                  ? "phi3"
                                                   : family;
  const std::string a = arch + ".";
  const auto& rope = cfg["rope_parameters"];
  const float theta =
      (rope.contains("full_attention") ? rope["full_attention"] : rope)["rope_theta"].get<float>();
  gg::MetadataList meta{
      {"general.architecture", arch},
      {a + "context_length", cfg["max_position_embeddings"].get<uint32_t>()},
      {a + "embedding_length", static_cast<uint32_t>(hidden)},
      {a + "block_count", static_cast<uint32_t>(layers)},
      {a + "feed_forward_length", cfg["intermediate_size"].get<uint32_t>()},
      {a + "attention.head_count", static_cast<uint32_t>(heads)},
      {a + "attention.head_count_kv", static_cast<uint32_t>(kv)},
      {a + "attention.key_length", static_cast<uint32_t>(hd)},
      {a + "attention.value_length", static_cast<uint32_t>(hd)},
      {a + "attention.layer_norm_rms_epsilon", cfg["rms_norm_eps"].get<float>()},
      {a + "rope.freq_base", theta},
  };
  if (family == "gemma2" || family == "gemma3")
    meta.emplace_back(a + "attention.sliding_window", cfg["sliding_window"].get<uint32_t>());
  if (family == "gemma2") {
    meta.emplace_back(a + "attn_logit_softcapping", cfg["attn_logit_softcapping"].get<float>());
    meta.emplace_back(a + "final_logit_softcapping", cfg["final_logit_softcapping"].get<float>());
  }
  if (family == "gemma3") {
    meta.emplace_back(a + "attention.sliding_window_pattern", cfg["sliding_window_pattern"].get<uint32_t>());
    meta.emplace_back(a + "rope.freq_base_swa", rope["sliding_attention"]["rope_theta"].get<float>());
  }
  if (rope.value("rope_type", "") == "longrope") {
    // llama.cpp's converter: the rotated dims, both factor lists as tensors, the original context
    // and the attention factor sqrt(1 + ln(ctx / original) / ln(original))
    const auto dims =
        static_cast<uint32_t>(static_cast<double>(hd) * rope.value("partial_rotary_factor", 1.0));
    const double ctx = cfg["max_position_embeddings"].get<double>();
    const double orig = rope["original_max_position_embeddings"].get<double>();
    meta.emplace_back(a + "rope.dimension_count", dims);
    meta.emplace_back(a + "rope.scaling.original_context_length", static_cast<uint32_t>(orig));
    meta.emplace_back(a + "rope.scaling.attn_factor",
                      static_cast<float>(std::sqrt(1.0 + std::log(ctx / orig) / std::log(orig))));
    for (const char* which : {"long", "short"}) {
      const auto f = rope[std::string(which) + "_factor"].get<std::vector<float>>();
      put_t(std::string("rope_factors_") + which + ".weight", Tensor::from_vec(f, {f.size()}, Device::cpu()));
    }
  }
  if (experts) {
    meta.emplace_back(a + "expert_count", static_cast<uint32_t>(experts));
    meta.emplace_back(a + "expert_used_count", cfg["num_experts_per_tok"].get<uint32_t>());
    if (cfg.contains("moe_intermediate_size"))
      meta.emplace_back(a + "expert_feed_forward_length", cfg["moe_intermediate_size"].get<uint32_t>());
  }
  // a stand-in vocabulary (llama.cpp loads no model without one; the loader here ignores it)
  const size_t vocab = cfg["vocab_size"].get<size_t>();
  std::vector<gg::Value> tok, score, type;
  for (size_t i = 0; i < vocab; ++i) {
    tok.emplace_back(i == 0   ? std::string("<unk>")
                     : i == 1 ? "<s>"
                     : i == 2 ? "</s>"
                              : "t" + std::to_string(i));
    score.emplace_back(0.0f);
    type.emplace_back(static_cast<int32_t>(i == 0 ? 2 : i < 3 ? 3 : 1));
  }
  meta.emplace_back("tokenizer.ggml.model", "llama");
  meta.emplace_back("tokenizer.ggml.tokens", gg::Value::array(gg::ValueType::String, tok));
  meta.emplace_back("tokenizer.ggml.scores", gg::Value::array(gg::ValueType::F32, score));
  meta.emplace_back("tokenizer.ggml.token_type", gg::Value::array(gg::ValueType::I32, type));
  for (auto& kv : extra) meta.push_back(kv);
  gg::write(path, meta, tensors);
  return arch;
}

bool llama_cpp_available() {
  return std::system("python3 -c 'import ctypes' >/dev/null 2>&1") == 0 &&
         std::filesystem::exists(quantized::test::source_path(
             "tools/peers/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libllama.v0.5.0.so"));
}

// llama.cpp's greedy decoding of the GGUF at `path` (tools/llama_run.py --greedy, attention in f32):
// the prompt then `n` tokens, and the logits after the prompt
std::pair<std::vector<uint32_t>, std::vector<float>> llama_cpp_greedy(const std::string& path,
                                                                      const std::vector<uint32_t>& prompt,
                                                                      size_t n) {
  std::string toks;
  for (uint32_t x : prompt) {
    if (!toks.empty()) toks += ',';
    toks += std::to_string(x);
  }
  auto r = test_models::run("python3 '" + quantized::test::source_path("tools/llama_run.py") + "' '" + path +
                                "' --threads 1 --kv-f32 --greedy " + std::to_string(n) + " --tokens " + toks,
                            true);
  const auto at = r.out.rfind("GREEDY ");
  EXPECT_TRUE(r.rc == 0 && at != std::string::npos) << path << ": " << r.out << r.err;
  if (r.rc != 0 || at == std::string::npos) return {};
  const auto g = nlohmann::json::parse(r.out.substr(at + 7, r.out.find('\n', at) - at - 7));
  return {g["greedy"].get<std::vector<uint32_t>>(), g["prompt_last_logits"].get<std::vector<float>>()};
}

std::string temp_gguf(const std::string& what) {
  return (std::filesystem::temp_directory_path() /
          ("candle-test-" + what + "-" + std::to_string(::getpid()) + ".gguf"))
      .string();
}

}  // namespace

// The GGUF path of qwen2 (q/k/v biases) and qwen3 (q/k norms, head_dim 24 != hidden / heads): the
// fixtures' weights written as an f32 GGUF under llama.cpp's names (qwen GGUFs keep HF's row order:
// the NEOX rope), loaded by quantized_llama, against transformers' logits and greedy tokens
// (tolerance as for the safetensors models of these two families).
TEST(QuantizedLlama, QwenGgufEqualsTransformers) {
  for (const std::string family : {"qwen2", "qwen3"}) {
    const std::string path = temp_gguf(family);
    write_fixture_gguf(family, path);
    auto lm = models::load_causal_lm(path, Device::cpu(), DType::F32);
    std::filesystem::remove(path);
    EXPECT_EQ(lm->architecture(), family);
    expect_transformers(*lm, family, kF16Rope);
  }
}

// The GGUF path of the other families: the fixtures' weights written as an f32 GGUF under
// llama.cpp's names and conventions (its converter's): gemma's norms stored as 1 + w, gemma2 /
// gemma3's post norms (post_attention_norm, post_ffw_norm) and gemma3's local rope base
// (rope.freq_base_swa) and sliding-window pattern, phi3's fused attn_qkv and ffn_up (gate | up) and
// longrope's factor tensors (rope_factors_long / _short, with partial rotary dims),
// the experts of mixtral (general.architecture llama: q / k rows permuted for the interleaved
// rope) and qwen3moe as one [experts, ffn, dim] tensor each; loaded by quantized_llama, against
// transformers' logits and greedy tokens, and run by llama.cpp to the same greedy tokens.
TEST(QuantizedLlama, GemmaPhi3AndMoeGgufEqualTransformers) {
  const bool llama_cpp = llama_cpp_available();
  if (!llama_cpp) std::printf("llama.cpp's libllama or python3 is missing: only transformers is compared\n");
  for (const std::string family :
       {"gemma", "gemma2", "gemma3", "phi3", "phi3_longrope", "mixtral", "qwen3_moe"}) {
    const std::string path = temp_gguf(family);
    const std::string arch = write_fixture_gguf(family, path);
    auto lm = models::load_causal_lm(path, Device::cpu(), DType::F32);
    Expected e = expected(family);
    // llama.cpp on the same file: transformers' greedy tokens too, which shows the file follows
    // llama.cpp's conventions
    if (llama_cpp) {
      EXPECT_EQ(llama_cpp_greedy(path, e.prompt, e.greedy.size() - e.prompt.size()).first, e.greedy)
          << family << " in llama.cpp";
    }
    std::filesystem::remove(path);
    EXPECT_EQ(lm->architecture(), arch);
    expect_transformers(*lm, family, family == "phi3_longrope" ? kLongRope : kExact);
  }
}

namespace {

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float d = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

// The phi3 fixture changed two ways: `meta` added to its GGUF, its config.json edited by `edit`.
// llama.cpp is the reference on the GGUF (transformers' fixtures have no such model): the logits
// after the prompt within 1e-4 and 24 greedy tokens; they differ from the unchanged model's (the
// change shows), and the safetensors form gives the GGUF's logits (1e-5).
void check_phi3_variant(const std::string& what, const gg::MetadataList& meta,
                        const std::function<void(nlohmann::json&)>& edit) {
  Expected e = expected("phi3");
  const std::string path = temp_gguf("phi3-" + what), plain = temp_gguf("phi3-plain");
  write_fixture_gguf("phi3", path, meta);
  write_fixture_gguf("phi3", plain);
  auto lm = models::load_causal_lm(path, Device::cpu(), DType::F32);
  Tensor last = lm->forward(ids(e.prompt), 0);
  const std::vector<float> prompt_logits = last.flatten_all().to_vec1<float>();
  std::vector<uint32_t> seq = e.prompt;
  for (size_t i = 0; i < 24; ++i) {
    seq.push_back(last.flatten_all().argmax(0).to_scalar<uint32_t>());
    last = lm->forward(ids({seq.back()}), seq.size() - 1);
  }
  auto unchanged = models::load_causal_lm(plain, Device::cpu(), DType::F32);
  EXPECT_GT(max_diff(unchanged->forward(ids(e.prompt), 0).flatten_all().to_vec1<float>(), prompt_logits),
            1e-2f)
      << what << " changed nothing";
  if (llama_cpp_available()) {
    auto [greedy, logits] = llama_cpp_greedy(path, e.prompt, 24);
    EXPECT_EQ(greedy, seq) << what << " in llama.cpp";
    EXPECT_LT(max_diff(logits, prompt_logits), 1e-4f) << what << " in llama.cpp";
  } else {
    std::printf("llama.cpp's libllama or python3 is missing: not compared with llama.cpp\n");
  }
  std::filesystem::remove(path);
  std::filesystem::remove(plain);
  auto cfg = nlohmann::json::parse(std::ifstream(dir("phi3") + "/config.json"));
  const auto folder = std::filesystem::temp_directory_path() /
                      ("candle-test-phi3-" + what + "-" + std::to_string(::getpid()));
  std::filesystem::create_directories(folder);
  std::filesystem::copy_file(dir("phi3") + "/model.safetensors", folder / "model.safetensors");
  edit(cfg);
  std::ofstream(folder / "config.json") << cfg.dump();
  auto hf = models::load_causal_lm(folder.string(), Device::cpu(), DType::F32);
  EXPECT_LT(max_diff(hf->forward(ids(e.prompt), 0).flatten_all().to_vec1<float>(), prompt_logits), 1e-5f)
      << what << ": the safetensors form against the GGUF";
  std::filesystem::remove_all(folder);
}

}  // namespace

// Partial rotary embeddings (phi4-mini's partial_rotary_factor 0.75; GGUF rope.dimension_count
// below the head size): half of each head rotated. An odd number of rotated dims is refused.
TEST(QuantizedLlama, PartialRotaryGivesLlamaCppsTokens) {
  auto set_factor = [](nlohmann::json& cfg, double f) {
    cfg["partial_rotary_factor"] = f;
    if (cfg.contains("rope_parameters")) cfg["rope_parameters"]["partial_rotary_factor"] = f;
  };
  check_phi3_variant("partial", {{"phi3.rope.dimension_count", uint32_t{8}}},
                     [&](nlohmann::json& cfg) { set_factor(cfg, 0.5); });
  auto cfg = nlohmann::json::parse(std::ifstream(dir("phi3") + "/config.json"));
  set_factor(cfg, 0.2);  // int(16 * 0.2) = 3 dims
  const auto folder =
      std::filesystem::temp_directory_path() / ("candle-test-phi3-odd-" + std::to_string(::getpid()));
  std::filesystem::create_directories(folder);
  std::filesystem::copy_file(dir("phi3") + "/model.safetensors", folder / "model.safetensors");
  std::ofstream(folder / "config.json") << cfg.dump();
  EXPECT_THROW(models::load_causal_lm(folder.string(), Device::cpu(), DType::F32), Error);
  std::filesystem::remove_all(folder);
}

// YaRN rope scaling (GGUF rope.scaling.type yarn; config.json rope_type yarn): factor 4 over an
// original context of 32 (its ramp then spans dims 0..2 of 8, and the prompt plus 24 tokens reach
// past 32).
TEST(QuantizedLlama, YarnGivesLlamaCppsTokens) {
  check_phi3_variant("yarn",
                     {{"phi3.rope.scaling.type", "yarn"},
                      {"phi3.rope.scaling.factor", 4.0f},
                      {"phi3.rope.scaling.original_context_length", uint32_t{32}}},
                     [](nlohmann::json& cfg) {
                       cfg["rope_parameters"] = {{"rope_type", "yarn"},
                                                 {"factor", 4.0},
                                                 {"original_max_position_embeddings", 32},
                                                 {"rope_theta", 10000.0},
                                                 {"partial_rotary_factor", 1.0}};
                     });
}

namespace {

// body(rank, comm) on one thread per rank of a CPU group of `world`; a rank's error is a test
// failure naming it (and aborts the group, so that the others do not wait for it)
void on_cpu_ranks(size_t world, const std::function<void(size_t, std::shared_ptr<Comm>)>& body) {
  auto comms = Comm::create_group(std::vector<Device>(world, Device::cpu()));
  std::vector<std::string> errors(world);
  std::vector<std::thread> threads;
  for (size_t r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r, comms[r]);
      } catch (const std::exception& e) {
        errors[r] = e.what();
        comms[r]->abort(e.what());
      }
    });
  for (auto& t : threads) t.join();
  for (size_t r = 0; r < world; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

}  // namespace

// Tensor parallelism over 2 CPU ranks (a group in memory, one thread each): each rank holds half of
// the heads (the fixtures' one kv head repeated on both) and of the MLP rows (of every expert in the
// MoE families), the partial sums of o and down added by the group. Every rank's logits equal the
// one-rank model's within 1e-4, and its greedy continuation through the KV cache is transformers'
// 32 tokens, from safetensors and (the families llama.cpp names) from the f32 GGUF of the same weights.
TEST(TensorParallel, TwoCpuRanksGiveTheWholeModel) {
  for (const std::string family : {"llama", "mistral", "qwen2", "qwen3", "phi3", "phi3_longrope", "gemma2",
                                   "gemma3", "mixtral", "qwen3_moe"}) {
    Expected e = expected(family);
    const bool has_gguf = family != "llama" && family != "mistral";
    for (bool gguf : {false, true}) {
      if (gguf && !has_gguf) continue;
      const std::string what = family + (gguf ? " (GGUF)" : " (safetensors)");
      const std::string path = gguf ? temp_gguf("tp-" + family) : dir(family);
      if (gguf) write_fixture_gguf(family, path);
      const std::vector<float> want = models::load_causal_lm(path, Device::cpu(), DType::F32)
                                          ->forward(ids(e.prompt), 0)
                                          .flatten_all()
                                          .to_vec1<float>();
      std::vector<float> diff(2, -1.0f);
      std::vector<std::vector<uint32_t>> seqs(2);
      on_cpu_ranks(2, [&](size_t r, std::shared_ptr<Comm> comm) {
        auto lm = models::load_causal_lm(path, Device::cpu(), DType::F32, comm);
        Tensor last = lm->forward(ids(e.prompt), 0);
        diff[r] = max_diff(last.flatten_all().to_vec1<float>(), want);
        std::vector<uint32_t> seq = e.prompt;
        for (size_t i = 0; i + e.prompt.size() < e.greedy.size(); ++i) {
          seq.push_back(last.flatten_all().argmax(0).to_scalar<uint32_t>());
          last = lm->forward(ids({seq.back()}), seq.size() - 1);
        }
        seqs[r] = seq;
      });
      for (size_t r = 0; r < 2; ++r) {
        EXPECT_GE(diff[r], 0.0f) << what << " rank " << r;
        EXPECT_LT(diff[r], 1e-4f) << what << " rank " << r;  // 1.1e-5 with the kernels forced to AVX2
        EXPECT_EQ(seqs[r], e.greedy) << what << " rank " << r;
      }
      if (gguf) std::filesystem::remove(path);
    }
  }
}

// What a split cannot do is refused on every rank, naming it: 2 heads over 3 ranks.
TEST(TensorParallel, HeadsThatDoNotDivideAreRefused) {
  std::vector<std::string> errors(3);
  auto comms = Comm::create_group(std::vector<Device>(3, Device::cpu()));
  std::vector<std::thread> threads;
  for (size_t r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      try {
        models::load_causal_lm(dir("qwen2"), Device::cpu(), DType::F32, comms[r]);
      } catch (const Error& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& e : errors)
    EXPECT_NE(e.find("tensor parallelism over 3 ranks: the heads do not divide evenly (2 heads, 1 kv heads)"),
              std::string::npos)
        << e;
}
