// models::llama, models::quantized_llama and load_causal_lm: against llama.cpp's greedy tokens
// (tests/data/llm/llamacpp_greedy.json, tools/gen_llamacpp_greedy.py) on tiny random GGUFs made by
// candle-make-random-llama, and the safetensors model against the GGUF one on the same weights.
#include "candle/models/llama.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "candle/backprop.h"
#include "candle/candle.h"
#include "candle/io/safetensors.h"
#include "candle/models/causal_lm.h"
#include "candle/models/quantized_llama.h"
#include "candle/nn/loss.h"
#include "candle/nn/var_builder.h"
#include "candle/nn/var_map.h"
#include "candle/quantized/gguf_file.h"
#include "models/decoder.h"
#include "models/program_util.h"

using namespace candle;
namespace fs = std::filesystem;
using candle::test_models::program;
using candle::test_models::run;

namespace {

// A fresh temporary folder, removed at destruction.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "candle-llama-test-XXXXXX").string();
    path = mkdtemp(t.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

nlohmann::json fixture() {
  std::ifstream f(std::string(CANDLE_TEST_DATA_DIR) + "/llm/llamacpp_greedy.json");
  return nlohmann::json::parse(f);
}

// candle-make-random-llama OUT --shape custom --type TYPE --seed SEED --std 0.25 ARGS; empty when
// the program is not built
std::string make_gguf(const fs::path& dir, const std::string& type, int seed, const std::string& args = "") {
  fs::path exe = program("candle-make-random-llama");
  if (exe.empty()) return {};
  const std::string out = (dir / ("tiny-" + type + ".gguf")).string();
  auto r = run(exe.string() + " " + out + " --shape custom --type " + type + " --seed " +
               std::to_string(seed) + " --std 0.25 --force " + args);
  EXPECT_EQ(r.rc, 0) << r.err;
  return out;
}

Tensor ids_tensor(const std::vector<uint32_t>& ids) {
  return Tensor::from_vec(ids, {1, ids.size()}, Device::cpu());
}

uint32_t argmax(const Tensor& logits) { return logits.flatten_all().argmax(0).to_scalar<uint32_t>(); }

// prompt in one batch, then `steps` greedy single-token steps; the prompt's last logits too
std::vector<uint32_t> greedy(models::CausalLM& lm, const std::vector<uint32_t>& prompt, size_t steps,
                             std::vector<float>* prompt_logits = nullptr) {
  lm.clear_kv_cache();
  std::vector<uint32_t> out = prompt;
  Tensor logits = lm.forward(ids_tensor(prompt), 0);
  if (prompt_logits) *prompt_logits = logits.flatten_all().to_vec1<float>();
  for (size_t i = 0; i < steps; ++i) {
    out.push_back(argmax(logits));
    if (i + 1 < steps) logits = lm.forward(ids_tensor({out.back()}), out.size() - 1);
  }
  return out;
}

// The HF layout of a llama GGUF's q/k rows: llama.cpp's converter interleaves each head's two
// halves (row j of a head: pair j/2, half j%2); this puts them back ([half][pair]).
Tensor unpermute_rows(const Tensor& w, size_t heads) {
  const size_t rows = w.dim(0), cols = w.dim(1), hd = rows / heads;
  return w.reshape({heads, hd / 2, 2, cols}).transpose(1, 2).contiguous().reshape({rows, cols});
}

// The f32 GGUF's weights under transformers' names, with a matching config.json, in `dir`.
void write_hf_folder(const std::string& gguf, const fs::path& dir) {
  auto ct = quantized::gguf_file::Content::read(gguf);
  auto u = [&](const char* k) { return ct.get(std::string("llama.") + k).to_u32(); };
  const size_t layers = u("block_count"), heads = u("attention.head_count"),
               kv = u("attention.head_count_kv");
  std::unordered_map<std::string, Tensor> t;
  auto w = [&](const std::string& n) { return ct.tensor(n).dequantize(Device::cpu()); };
  t["model.embed_tokens.weight"] = w("token_embd.weight");
  t["model.norm.weight"] = w("output_norm.weight");
  t["lm_head.weight"] = w("output.weight");
  for (size_t i = 0; i < layers; ++i) {
    const std::string g = "blk." + std::to_string(i) + ".", h = "model.layers." + std::to_string(i) + ".";
    t[h + "input_layernorm.weight"] = w(g + "attn_norm.weight");
    t[h + "post_attention_layernorm.weight"] = w(g + "ffn_norm.weight");
    t[h + "self_attn.q_proj.weight"] = unpermute_rows(w(g + "attn_q.weight"), heads);
    t[h + "self_attn.k_proj.weight"] = unpermute_rows(w(g + "attn_k.weight"), kv);
    t[h + "self_attn.v_proj.weight"] = w(g + "attn_v.weight");
    t[h + "self_attn.o_proj.weight"] = w(g + "attn_output.weight");
    t[h + "mlp.gate_proj.weight"] = w(g + "ffn_gate.weight");
    t[h + "mlp.up_proj.weight"] = w(g + "ffn_up.weight");
    t[h + "mlp.down_proj.weight"] = w(g + "ffn_down.weight");
  }
  safetensors::save(t, (dir / "model.safetensors").string());
  nlohmann::json cfg = {{"model_type", "llama"},
                        {"hidden_size", u("embedding_length")},
                        {"intermediate_size", u("feed_forward_length")},
                        {"vocab_size", t["lm_head.weight"].dim(0)},
                        {"num_hidden_layers", layers},
                        {"num_attention_heads", heads},
                        {"num_key_value_heads", kv},
                        {"max_position_embeddings", u("context_length")},
                        {"rms_norm_eps", ct.get("llama.attention.layer_norm_rms_epsilon").to_f32()},
                        {"rope_theta", ct.get("llama.rope.freq_base").to_f32()},
                        {"hidden_act", "silu"},
                        {"tie_word_embeddings", false}};
  std::ofstream(dir / "config.json") << cfg.dump(1);
}

}  // namespace

// llama.cpp's greedy tokens, 32 steps after an 8-token prompt, on the same GGUFs (f32 and q8_0 at
// the tiny shape, q4_k_m at dim 256 where the mix holds real q4_K / q6_K tensors), and the
// prompt's last logits within 2e-5 of llama.cpp's (measured: 6.4e-6 f32, 7e-7 q8_0, 4.8e-6
// q4_k_m; |logits| up to ~6). The reference runs attention in f32 (tools/llama_run.py --kv-f32);
// the weights have std 0.25 so that the attention matters: with the interleaved and the halves
// rope swapped the logits differ by ~6.
TEST(QuantizedLlama, GreedyTokensEqualLlamaCpp) {
  TempDir dir;
  nlohmann::json fx = fixture();
  const auto prompt = fx["prompt"].get<std::vector<uint32_t>>();
  const size_t steps = fx["steps"].get<size_t>();
  for (const auto& c : fx["cases"]) {
    const std::string type = c["type"].get<std::string>();
    const std::string path = make_gguf(dir.path, type, c["seed"].get<int>(), c["args"].get<std::string>());
    if (path.empty()) GTEST_SKIP() << "candle-make-random-llama is not built";
    auto lm = models::load_causal_lm(path, Device::cpu(), DType::F32);
    EXPECT_EQ(lm->architecture(), "llama");
    EXPECT_EQ(lm->vocab_size(), 300u);
    std::vector<float> logits;
    auto got = greedy(*lm, prompt, steps, &logits);
    EXPECT_EQ(got, c["greedy"].get<std::vector<uint32_t>>()) << type;
    auto want = c["prompt_last_logits"].get<std::vector<float>>();
    ASSERT_EQ(logits.size(), want.size());
    float worst = 0;
    for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(logits[i] - want[i]));
    EXPECT_LT(worst, 2e-5f) << type;
  }
}

// The safetensors model (halves rope, HF row order) equals the GGUF model (interleaved rope,
// llama.cpp's permuted rows) on the same f32 weights: logits within 1e-4 at every step, the same
// greedy tokens; forward_all's rows equal the cached forward's.
TEST(Llama, SafetensorsModelEqualsGgufModel) {
  TempDir dir;
  const std::string gguf = make_gguf(dir.path, "f32", 10);
  if (gguf.empty()) GTEST_SKIP() << "candle-make-random-llama is not built";
  fs::path hf = dir.path / "hf";
  fs::create_directory(hf);
  write_hf_folder(gguf, hf);
  auto q = models::load_causal_lm(gguf, Device::cpu(), DType::F32);
  auto s = models::load_causal_lm(hf.string(), Device::cpu(), DType::F32);
  EXPECT_EQ(s->architecture(), "llama");
  const std::vector<uint32_t> prompt{1, 100, 200, 42, 17, 260, 299, 5};
  std::vector<float> lq, ls;
  auto gq = greedy(*q, prompt, 16, &lq);
  auto gs = greedy(*s, prompt, 16, &ls);
  EXPECT_EQ(gq, gs);
  for (size_t i = 0; i < lq.size(); ++i) ASSERT_NEAR(lq[i], ls[i], 1e-4) << i;

  // forward_all (no cache) against the cached forward, position by position
  auto cfg = models::llama::LlamaConfig::from_json(
      std::string(std::istreambuf_iterator<char>(std::ifstream(hf / "config.json").rdbuf()), {}));
  auto vb = nn::VarBuilder::from_mmaped_safetensors({(hf / "model.safetensors").string()}, DType::F32,
                                                    Device::cpu());
  auto model = models::llama::Llama::load(vb, cfg);
  Tensor all = model.forward_all(ids_tensor(gs));
  ASSERT_EQ(all.shape(), (Shape{1, gs.size(), 300}));
  models::llama::Cache cache(cfg);
  for (size_t p = 0; p < gs.size(); ++p) {
    Tensor step = model.forward(ids_tensor({gs[p]}), p, cache);
    float d = (step - all.narrow(1, p, 1).squeeze(1)).abs().flatten_all().max(0).to_scalar<float>();
    ASSERT_LT(d, 1e-4f) << "position " << p;
  }
  // f16 weights and activations: the same tokens for the prompt's argmax, logits within 2e-2
  auto h = models::load_causal_lm(hf.string(), Device::cpu(), DType::F16);
  std::vector<float> lh;
  greedy(*h, prompt, 1, &lh);
  for (size_t i = 0; i < lh.size(); ++i) ASSERT_NEAR(lh[i], ls[i], 2e-2) << i;
}

// forward_all under autograd: a VarMap-backed model's loss has a gradient for every weight
// (qwen3: q/k norms and tied embeddings; mixtral: the router and every expert, 4 experts with 2 per
// token over 6 tokens; gemma2: the 1 + w norms and the soft-caps).
// The position-independent decode (what a CUDA graph records) gives forward()'s logits bit for bit:
// a GGUF model (q8_0) and the safetensors one, a prompt fed one token at a time, the position
// written into the state's device tensor before each step; batch 2 rows decode the same tokens.
TEST(CausalLM, StaticDecodeEqualsTheCachedForward) {
  TempDir dir;
  const std::string gguf = make_gguf(dir.path, "q8_0", 12);
  if (gguf.empty()) GTEST_SKIP() << "candle-make-random-llama is not built";
  fs::path hf = dir.path / "hf";
  fs::create_directory(hf);
  write_hf_folder(make_gguf(dir.path, "f32", 13), hf);
  for (const std::string& path : {gguf, hf.string()}) {
    auto lm = models::load_causal_lm(path, Device::cpu(), DType::F32);
    const std::vector<uint32_t> toks{1, 100, 200, 42, 17, 260, 299, 5, 77};
    models::StaticDecode st = lm->start_static_decode(2, 16);
    EXPECT_EQ(st.k.size(), st.v.size());
    lm->clear_kv_cache();
    for (size_t p = 0; p < toks.size(); ++p) {
      st.pos.slice_set(Tensor::from_vec(std::vector<uint32_t>{static_cast<uint32_t>(p)}, {1}, Device::cpu()),
                       0, 0);
      Tensor got = lm->decode_step(
          Tensor::from_vec(std::vector<uint32_t>{toks[p], toks[p]}, {2, 1}, Device::cpu()), st);
      Tensor want = lm->forward(ids_tensor({toks[p]}), p);
      ASSERT_EQ(got.dims(), (std::vector<size_t>{2, lm->vocab_size()})) << path;
      const auto w = want.flatten_all().to_vec1<float>();
      EXPECT_EQ(got.narrow(0, 0, 1).flatten_all().to_vec1<float>(), w) << path << " position " << p;
      EXPECT_EQ(got.narrow(0, 1, 1).flatten_all().to_vec1<float>(), w) << path << " position " << p;
    }
    EXPECT_THROW(lm->start_static_decode(1, lm->max_seq_len() + 1), Error);
    EXPECT_THROW(lm->decode_step(ids_tensor({1, 2}), st), Error);  // two tokens
  }
}

// models::DecodeSession (what candle-llm decodes with): the prompt by prefill, each token by the
// step recorded as a candle::Graph (run eagerly on the CPU), the state growing from 4 positions to 6,
// 12 and 24 on the way (keys and values copied over, the step recorded again): the cached forward's
// logits bit for bit, for a GGUF model (q8_0) and the safetensors one (rope over halves), a second
// turn of several tokens after decode steps included; after reset() the same again; text past the
// context length an Error that leaves the session as it was.
TEST(CausalLM, DecodeSessionEqualsTheCachedForward) {
  TempDir dir;
  const std::string gguf = make_gguf(dir.path, "q8_0", 15, "--ctx 40");
  if (gguf.empty()) GTEST_SKIP() << "candle-make-random-llama is not built";
  fs::path hf = dir.path / "hf";
  fs::create_directory(hf);
  write_hf_folder(make_gguf(dir.path, "f32", 16, "--ctx 40"), hf);
  for (const std::string& path : {gguf, hf.string()}) {
    auto lm = models::load_causal_lm(path, Device::cpu(), DType::F32);
    ASSERT_EQ(lm->max_seq_len(), 40u) << path;
    models::DecodeSession sess(*lm, Device::cpu(), 4);
    const std::vector<uint32_t> prompt{1, 100, 200, 42, 17, 260}, turn{7, 8, 9};
    auto vec = [](const Tensor& t) { return t.flatten_all().to_vec1<float>(); };
    for (int round = 0; round < 2; ++round) {
      lm->clear_kv_cache();
      Tensor got = sess.feed(prompt);
      ASSERT_EQ(got.dims(), (std::vector<size_t>{lm->vocab_size()})) << path;
      EXPECT_EQ(vec(got), vec(lm->forward(ids_tensor(prompt), 0))) << path << " prompt";
      EXPECT_EQ(sess.capacity(), round == 0 ? 6u : 24u) << path;
      size_t pos = prompt.size();
      for (size_t i = 0; i < 12; ++i, ++pos) {
        const uint32_t tok = static_cast<uint32_t>((37 * i + 11) % lm->vocab_size());
        got = sess.feed({tok});
        EXPECT_EQ(vec(got), vec(lm->forward(ids_tensor({tok}), pos))) << path << " position " << pos;
      }
      got = sess.feed(turn);
      EXPECT_EQ(vec(got), vec(lm->forward(ids_tensor(turn), pos))) << path << " second turn";
      pos += turn.size();
      got = sess.feed({5});
      EXPECT_EQ(vec(got), vec(lm->forward(ids_tensor({5}), pos))) << path << " after the second turn";
      EXPECT_EQ(sess.pos(), pos + 1);
      EXPECT_EQ(sess.capacity(), 24u) << path;
      EXPECT_FALSE(sess.recorded()) << "the CPU records no graphs";
      const std::vector<uint32_t> too_long(40 - sess.pos() + 1, 3u);
      EXPECT_THROW(sess.feed(too_long), Error);
      EXPECT_EQ(sess.pos(), pos + 1);
      sess.reset();
      EXPECT_EQ(sess.pos(), 0u);
    }
    EXPECT_THROW(sess.feed({}), Error);
  }
}

// A prompt run in chunks through the KV cache (models::detail::set_prefill_chunk: what the CPU
// does by default for prompts over 256 positions) gives the logits of one pass bit for bit, through
// forward() and through prefill() (DecodeSession), for GGUF models (q8_0, f16: the float kernel);
// the safetensors one within 1e-4 (its f32 GEMM's sums depend on the row count); the next decode
// step reads the same cache
TEST(CausalLM, ChunkedPromptEqualsOnePass) {
  TempDir dir;
  const std::string q8 = make_gguf(dir.path, "q8_0", 21, "--ctx 64");
  if (q8.empty()) GTEST_SKIP() << "candle-make-random-llama is not built";
  const std::string f16 = make_gguf(dir.path, "f16", 22, "--ctx 64");
  fs::path hf = dir.path / "hf";
  fs::create_directory(hf);
  write_hf_folder(make_gguf(dir.path, "f32", 23, "--ctx 64"), hf);
  std::vector<uint32_t> prompt;
  for (uint32_t i = 0; i < 45; ++i) prompt.push_back((i * 53 + 7) % 300);
  auto vec = [](const Tensor& t) { return t.flatten_all().to_vec1<float>(); };
  for (const std::string& path : {q8, f16, hf.string()}) {
    auto lm = models::load_causal_lm(path, Device::cpu(), DType::F32);
    std::vector<std::vector<float>> runs;
    for (long chunk : {0L, 16L, 7L, 44L}) {
      models::detail::set_prefill_chunk(chunk);
      lm->clear_kv_cache();
      std::vector<float> got = vec(lm->forward(ids_tensor(prompt), 0));
      const std::vector<float> next = vec(lm->forward(ids_tensor({9}), prompt.size()));
      got.insert(got.end(), next.begin(), next.end());
      models::DecodeSession sess(*lm, Device::cpu(), 4);
      const std::vector<float> fed = vec(sess.feed(prompt));
      got.insert(got.end(), fed.begin(), fed.end());
      runs.push_back(got);
    }
    models::detail::set_prefill_chunk(-1);
    for (size_t r = 1; r < runs.size(); ++r) {
      if (path != hf.string()) {
        EXPECT_EQ(runs[r], runs[0]) << path << " run " << r;
        continue;
      }
      // the f32 GEMM of a safetensors model sums in an order that depends on the row count
      ASSERT_EQ(runs[r].size(), runs[0].size());
      float d = 0.0f;
      for (size_t i = 0; i < runs[0].size(); ++i) d = std::max(d, std::fabs(runs[r][i] - runs[0][i]));
      EXPECT_LT(d, 1e-4f) << path << " run " << r;
    }
  }
}

// q|k|v and gate|up stacked (CANDLE_STACK_PROJECTIONS=1; GPUs do it by default) for q8_0 and
// q4_k_m weights (whose q|k|v types differ in some layers, which then stay apart): the same
// forward logits as the separate projections, and the static decode of the stacked model (one
// rope call over the q and k heads of the stacked row), two rows at once, equal to its forward bit
// for bit.
TEST(CausalLM, StackedProjectionsGiveTheSameLogits) {
  TempDir dir;
  for (const std::string type : {"q8_0", "q4_k_m"}) {
    const std::string gguf =
        make_gguf(dir.path, type, 14, type == "q8_0" ? "" : "--dim 256 --ffn 512 --heads 4 --kv-heads 2");
    if (gguf.empty()) GTEST_SKIP() << "candle-make-random-llama is not built";
    const std::vector<uint32_t> toks{1, 100, 200, 42, 17, 260};
    auto run = [&](const char* stack) {
      ::setenv("CANDLE_STACK_PROJECTIONS", stack, 1);
      auto lm = models::load_causal_lm(gguf, Device::cpu(), DType::F32);
      ::unsetenv("CANDLE_STACK_PROJECTIONS");
      std::vector<std::vector<float>> out;
      for (size_t p = 0; p < toks.size(); ++p)
        out.push_back(lm->forward(ids_tensor({toks[p]}), p).flatten_all().to_vec1<float>());
      // two rows decoding the same tokens: the stacked row block's views are strided there
      models::StaticDecode st = lm->start_static_decode(2, 16);
      for (size_t p = 0; p < toks.size(); ++p) {
        st.pos.slice_set(
            Tensor::from_vec(std::vector<uint32_t>{static_cast<uint32_t>(p)}, {1}, Device::cpu()), 0, 0);
        Tensor got = lm->decode_step(
            Tensor::from_vec(std::vector<uint32_t>{toks[p], toks[p]}, {2, 1}, Device::cpu()), st);
        for (size_t row = 0; row < 2; ++row)
          EXPECT_EQ(got.narrow(0, row, 1).flatten_all().to_vec1<float>(), out[p])
              << type << " (stack " << stack << ") position " << p << " row " << row;
      }
      return out;
    };
    const auto apart = run("0"), stacked = run("1");
    for (size_t p = 0; p < toks.size(); ++p) {
      float d = 0.0f;
      for (size_t i = 0; i < apart[p].size(); ++i) d = std::max(d, std::fabs(apart[p][i] - stacked[p][i]));
      EXPECT_LT(d, 1e-5f) << type << " position " << p;
    }
  }
}

TEST(Llama, ForwardAllTrainsWithAVarMap) {
  const char* configs[] = {
      R"({"model_type": "qwen3", "hidden_size": 32, "intermediate_size": 64, "vocab_size": 50,
          "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
          "tie_word_embeddings": true, "rms_norm_eps": 1e-6})",
      R"({"model_type": "mixtral", "hidden_size": 32, "intermediate_size": 48, "vocab_size": 50,
          "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2, "num_local_experts": 4,
          "num_experts_per_tok": 2, "rms_norm_eps": 1e-6})",
      R"({"model_type": "gemma2", "hidden_size": 32, "intermediate_size": 64, "vocab_size": 50,
          "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
          "sliding_window": 3, "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
          "query_pre_attn_scalar": 8, "tie_word_embeddings": true})"};
  const size_t want_vars[] = {1 + 2 * 11 + 1, 1 + (2 + 4 + 1 + 4 * 3) + 1 + 1, 1 + 2 * 11 + 1};
  for (size_t c = 0; c < 3; ++c) {
    auto cfg = models::llama::LlamaConfig::from_json(configs[c]);
    nn::VarMap vm;
    Device::cpu().set_seed(5);
    auto vb = nn::VarBuilder::from_varmap(vm, DType::F32, Device::cpu());
    auto model = models::llama::Llama::load(vb, cfg);
    std::vector<uint32_t> ids{1, 5, 9, 13, 2, 7};
    Tensor logits = model.forward_all(ids_tensor(ids));
    ASSERT_EQ(logits.shape(), (Shape{1, 6, 50}));
    Tensor target = Tensor::from_vec(std::vector<uint32_t>{5, 9, 13, 2, 7}, {5}, Device::cpu());
    Tensor loss = nn::loss::cross_entropy(logits.narrow(1, 0, 5).squeeze(0), target);
    auto grads = loss.backward();
    size_t with_grad = 0;
    for (const Var& v : vm.all_vars())
      if (auto g = grads.get(v.as_tensor()); g && g->abs().sum_all().to_scalar<float>() > 0) ++with_grad;
    EXPECT_EQ(vm.all_vars().size(), want_vars[c]) << cfg.model_type;
    EXPECT_EQ(with_grad, vm.all_vars().size()) << cfg.model_type;
  }
}

// transformers' llama3 frequencies (rope_theta 500000, factor 32, low 1, high 4, original 8192,
// head_dim 64), printed by PyTorch 1.13 from _compute_llama3_parameters' formula in f32.
TEST(LlamaConfig, Llama3RopeScaling) {
  auto cfg = models::llama::LlamaConfig::from_json(R"({"model_type": "llama", "hidden_size": 2048,
      "intermediate_size": 8192, "vocab_size": 128256, "num_hidden_layers": 16, "num_attention_heads": 32,
      "num_key_value_heads": 8, "rope_theta": 500000.0, "max_position_embeddings": 131072,
      "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
      "original_max_position_embeddings": 8192, "rope_type": "llama3"}, "tie_word_embeddings": true,
      "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009]})");
  EXPECT_EQ(cfg.head_dim, 64u);
  EXPECT_EQ(cfg.rope_scaling.kind, models::llama::RopeScaling::Llama3);
  EXPECT_EQ(cfg.eos_token_ids, (std::vector<uint32_t>{128001, 128008, 128009}));
  auto f = models::llama::rope_inv_freq(cfg.head_dim, cfg.rope_theta, cfg.rope_scaling);
  const std::pair<size_t, double> want[] = {{0, 1.0},
                                            {5, 0.12868738174438477},
                                            {10, 0.016560440883040428},
                                            {15, 0.0012905480107292533},
                                            {18, 1.9461638657958247e-05},
                                            {20, 8.570255886297673e-06},
                                            {25, 1.1028836297555245e-06},
                                            {31, 9.418306490260875e-08}};
  for (auto [i, v] : want) EXPECT_NEAR(f[i] / v, 1.0, 2e-6) << i;
}

// longrope as Phi-3-mini-128k's config.json has it (head_dim 96: 48 factors, original_max_position_embeddings
// at the top level, "type" rather than "rope_type"): the long factors for its 131072 positions, factor
// 32, the attention factor sqrt(1 + ln 32 / ln 4096); the short ones when the context is the original;
// wrong lists named.
TEST(LlamaConfig, LongRopeScaling) {
  auto config = [](size_t max_pos, const std::string& scaling) {
    return R"({"model_type": "phi3", "hidden_size": 3072, "intermediate_size": 8192, "vocab_size": 32064,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
        "original_max_position_embeddings": 4096, "max_position_embeddings": )" +
           std::to_string(max_pos) + R"(, "rope_theta": 10000.0, "rope_scaling": )" + scaling + "}";
  };
  std::string s, l;
  for (size_t i = 0; i < 48; ++i) {
    if (i) s += ',', l += ',';
    s += std::to_string(1.0 + 0.01 * static_cast<double>(i));
    l += std::to_string(1.0 + 0.5 * static_cast<double>(i));
  }
  const std::string su = R"({"type": "su", "short_factor": [)" + s + R"(], "long_factor": [)" + l + "]}";
  const std::string lr =
      R"({"type": "longrope", "short_factor": [)" + s + R"(], "long_factor": [)" + l + "]}";
  using models::llama::RopeScaling;
  for (const std::string& scaling : {su, lr}) {
    auto cfg = models::llama::LlamaConfig::from_json(config(131072, scaling));
    ASSERT_EQ(cfg.rope_scaling.kind, RopeScaling::LongRope);
    EXPECT_TRUE(cfg.rope_scaling.long_context);
    EXPECT_DOUBLE_EQ(cfg.rope_scaling.factor, 32.0);
    EXPECT_NEAR(models::llama::rope_attention_factor(cfg.rope_scaling), 1.1902380714238083, 1e-12);
    auto f = models::llama::rope_inv_freq(cfg.head_dim, cfg.rope_theta, cfg.rope_scaling);
    ASSERT_EQ(f.size(), 48u);
    for (size_t i : {0, 1, 20, 47}) {
      const double plain = 1.0 / std::pow(10000.0, static_cast<double>(2 * i) / 96.0);
      EXPECT_NEAR(f[i] / (plain / (1.0 + 0.5 * static_cast<double>(i))), 1.0, 1e-6) << i;
    }
  }
  auto short_ctx = models::llama::LlamaConfig::from_json(config(4096, lr));
  EXPECT_FALSE(short_ctx.rope_scaling.long_context);
  EXPECT_DOUBLE_EQ(models::llama::rope_attention_factor(short_ctx.rope_scaling), 1.0);
  auto f = models::llama::rope_inv_freq(short_ctx.head_dim, short_ctx.rope_theta, short_ctx.rope_scaling);
  EXPECT_NEAR(f[47] / (1.0 / std::pow(10000.0, 94.0 / 96.0) / 1.47), 1.0, 1e-6);
  // dynamic NTK: the original frequencies within max_position_embeddings
  auto dyn = models::llama::LlamaConfig::from_json(config(4096, R"({"type": "dynamic", "factor": 2.0})"));
  EXPECT_EQ(dyn.rope_scaling.kind, RopeScaling::None);
  auto err = [&](size_t max_pos, const std::string& scaling) {
    try {
      models::llama::LlamaConfig::from_json(config(max_pos, scaling));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(err(4096, R"({"type": "longrope", "short_factor": [1, 2], "long_factor": [1, 2]})")
                .find("2 factors for 48 rotated pairs"),
            std::string::npos);
  EXPECT_NE(err(4096, R"({"type": "longrope", "short_factor": [1, 2], "long_factor": [1]})").find("differ"),
            std::string::npos);
  EXPECT_NE(err(4096, R"({"type": "longrope", "short_factor": [1, -2], "long_factor": [1, 2]})")
                .find("rope_scaling.short_factor: expected positive finite numbers"),
            std::string::npos);
  EXPECT_NE(err(4096, R"({"type": "longrope", "short_factor": [1, 2], "long_factor": [1, 1e300]})")
                .find("rope_scaling.long_factor"),
            std::string::npos);
}

TEST(LlamaConfig, FamiliesAndErrors) {
  auto m = models::llama::LlamaConfig::from_json(R"({"model_type": "mistral", "hidden_size": 64,
      "intermediate_size": 128, "vocab_size": 10, "num_hidden_layers": 2, "num_attention_heads": 4,
      "num_key_value_heads": 2, "sliding_window": 4096})");
  EXPECT_EQ(m.layer_window(0), std::optional<size_t>(4096));
  auto q = models::llama::LlamaConfig::from_json(R"({"model_type": "qwen2", "hidden_size": 64,
      "intermediate_size": 128, "vocab_size": 10, "num_hidden_layers": 4, "num_attention_heads": 4,
      "num_key_value_heads": 2, "sliding_window": 32, "use_sliding_window": false, "max_window_layers": 2})");
  EXPECT_TRUE(q.qkv_bias);
  EXPECT_FALSE(q.o_bias);
  EXPECT_EQ(q.layer_window(3), std::nullopt);
  auto err = [](const char* json) {
    try {
      models::llama::LlamaConfig::from_json(json);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(err(R"({"model_type": "gpt2", "hidden_size": 4})").find("gpt2"), std::string::npos);
  EXPECT_NE(err(R"({"model_type": "llama", "hidden_size": "x"})").find("hidden_size"), std::string::npos);
  EXPECT_NE(err(R"({"model_type": "llama", "hidden_size": 8, "intermediate_size": 8, "vocab_size": 8,
      "num_hidden_layers": 1, "num_attention_heads": 3, "num_key_value_heads": 2})")
                .find("num_key_value_heads"),
            std::string::npos);
  EXPECT_NE(err(R"({"hidden_size": 8, "intermediate_size": 8, "vocab_size": 8, "num_hidden_layers": 1,
      "num_attention_heads": 2, "rope_scaling": {"rope_type": "longrope", "factor": 4}})")
                .find("rope_scaling.short_factor"),
            std::string::npos);
  EXPECT_NE(err(R"({"hidden_size": 8, "intermediate_size": 8, "vocab_size": 8, "num_hidden_layers": 1,
      "num_attention_heads": 2, "rope_scaling": {"rope_type": "ntk-by-parts", "factor": 4}})")
                .find("'ntk-by-parts' is not supported"),
            std::string::npos);
  EXPECT_NE(err(R"({"hidden_size": 8, "intermediate_size": 8, "vocab_size": 8, "num_hidden_layers": 1,
      "num_attention_heads": 2, "rope_scaling": {"rope_type": "yarn", "factor": 4, "beta_fast": 0}})")
                .find("beta_fast"),
            std::string::npos);
  EXPECT_NE(err("{\"model_type\": ").find("config.json"), std::string::npos);
  EXPECT_NE(err(std::string(100000, '[').c_str()).find("deeper"), std::string::npos);
}

TEST(CausalLM, ErrorsNameTheProblem) {
  TempDir dir;
  // an unknown architecture
  quantized::gguf_file::write((dir.path / "x.gguf").string(), {{"general.architecture", "mamba"}}, {});
  try {
    models::load_causal_lm((dir.path / "x.gguf").string(), Device::cpu(), DType::F32);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mamba"), std::string::npos) << e.what();
  }
  // a truncated GGUF: the reader's error
  const std::string gguf = make_gguf(dir.path, "q8_0", 1);
  if (!gguf.empty()) {
    fs::resize_file(gguf, fs::file_size(gguf) / 2);
    EXPECT_THROW(models::load_causal_lm(gguf, Device::cpu(), DType::F32), Error);
  }
  // a folder without weights
  fs::create_directory(dir.path / "hf");
  std::ofstream(dir.path / "hf" / "config.json")
      << R"({"model_type": "llama", "hidden_size": 8, "intermediate_size": 8, "vocab_size": 8,
             "num_hidden_layers": 1, "num_attention_heads": 2})";
  EXPECT_THROW(models::load_causal_lm((dir.path / "hf").string(), Device::cpu(), DType::F32), Error);
  EXPECT_THROW(models::load_causal_lm((dir.path / "missing").string(), Device::cpu(), DType::F32), Error);
}

// Sharded weights (model.safetensors.index.json naming two shards) load as the single file does;
// an index naming a path outside the folder is refused.
TEST(CausalLM, ShardedSafetensors) {
  TempDir dir;
  const std::string gguf = make_gguf(dir.path, "f32", 10);
  if (gguf.empty()) GTEST_SKIP() << "candle-make-random-llama is not built";
  fs::path one = dir.path / "one", two = dir.path / "two";
  fs::create_directory(one);
  fs::create_directory(two);
  write_hf_folder(gguf, one);
  fs::copy_file(one / "config.json", two / "config.json");
  auto all = safetensors::load((one / "model.safetensors").string(), Device::cpu());
  std::unordered_map<std::string, Tensor> a, b;
  nlohmann::json index = {{"metadata", nlohmann::json::object()}, {"weight_map", nlohmann::json::object()}};
  for (const auto& [name, t] : all) {
    const bool first = name.find("layers.0.") != std::string::npos || name.find("embed") != std::string::npos;
    (first ? a : b)[name] = t;
    index["weight_map"][name] =
        first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  safetensors::save(a, (two / "model-00001-of-00002.safetensors").string());
  safetensors::save(b, (two / "model-00002-of-00002.safetensors").string());
  std::ofstream(two / "model.safetensors.index.json") << index.dump();
  auto m1 = models::load_causal_lm(one.string(), Device::cpu(), DType::F32);
  auto m2 = models::load_causal_lm(two.string(), Device::cpu(), DType::F32);
  const std::vector<uint32_t> prompt{1, 100, 200, 42};
  auto l1 = m1->forward(ids_tensor(prompt), 0).flatten_all().to_vec1<float>();
  auto l2 = m2->forward(ids_tensor(prompt), 0).flatten_all().to_vec1<float>();
  EXPECT_EQ(l1, l2);
  index["weight_map"]["lm_head.weight"] = "../elsewhere.safetensors";
  std::ofstream(two / "model.safetensors.index.json") << index.dump();
  EXPECT_THROW(models::load_causal_lm(two.string(), Device::cpu(), DType::F32), Error);
}

// A batch of two prompts through one cache gives each prompt's own logits (prefill, then two
// decode steps), within 1e-5.
TEST(Llama, BatchedForwardEqualsSingle) {
  TempDir dir;
  const std::string gguf = make_gguf(dir.path, "f32", 10);
  if (gguf.empty()) GTEST_SKIP() << "candle-make-random-llama is not built";
  write_hf_folder(gguf, dir.path);
  auto cfg = models::llama::LlamaConfig::from_json(
      std::string(std::istreambuf_iterator<char>(std::ifstream(dir.path / "config.json").rdbuf()), {}));
  auto vb = nn::VarBuilder::from_mmaped_safetensors({(dir.path / "model.safetensors").string()}, DType::F32,
                                                    Device::cpu());
  auto model = models::llama::Llama::load(vb, cfg);
  const std::vector<std::vector<uint32_t>> seqs{{1, 100, 200, 42, 17, 3, 9}, {1, 7, 250, 8, 99, 31, 4}};
  std::vector<uint32_t> both;
  for (const auto& s : seqs) both.insert(both.end(), s.begin(), s.begin() + 5);
  models::llama::Cache batch_cache(cfg);
  std::vector<Tensor> batched{model.forward(Tensor::from_vec(both, {2, 5}, Device::cpu()), 0, batch_cache)};
  for (size_t p = 5; p < 7; ++p) {
    std::vector<uint32_t> step{seqs[0][p], seqs[1][p]};
    batched.push_back(model.forward(Tensor::from_vec(step, {2, 1}, Device::cpu()), p, batch_cache));
  }
  for (size_t i = 0; i < 2; ++i) {
    models::llama::Cache cache(cfg);
    std::vector<Tensor> single{model.forward(ids_tensor({seqs[i].begin(), seqs[i].begin() + 5}), 0, cache)};
    for (size_t p = 5; p < 7; ++p) single.push_back(model.forward(ids_tensor({seqs[i][p]}), p, cache));
    for (size_t s = 0; s < single.size(); ++s) {
      float d = (batched[s].narrow(0, i, 1) - single[s]).abs().flatten_all().max(0).to_scalar<float>();
      EXPECT_LT(d, 1e-5f) << "sequence " << i << " step " << s;
    }
  }
}

// The bundled default of candle-llm (models/llama2-c-kjv, trained by examples/llama2-c-training):
// llama.cpp's greedy tokens on the same file (tests/data/llm/kjv_greedy.json,
// tools/gen_kjv_greedy.py).
TEST(BundledKjv, GivesLlamaCppsGreedyTokens) {
  const std::string path = std::string(CANDLE_TEST_DATA_DIR) + "/../../models/llama2-c-kjv/model-q8_0.gguf";
  std::ifstream f(std::string(CANDLE_TEST_DATA_DIR) + "/llm/kjv_greedy.json");
  ASSERT_TRUE(f) << "tests/data/llm/kjv_greedy.json missing";
  const auto fx = nlohmann::json::parse(f);
  ASSERT_TRUE(fs::exists(path)) << path << " missing";
  const auto content = quantized::gguf_file::Content::read(path);
  const auto prompt = fx["prompt"].get<std::vector<uint32_t>>();  // tests/tokenizers checks our ids
  auto lm = models::load_causal_lm(content, Device::cpu());
  const auto want = fx["greedy"].get<std::vector<uint32_t>>();
  ASSERT_GT(want.size(), prompt.size());
  const auto got = greedy(*lm, prompt, want.size() - prompt.size());
  EXPECT_EQ(got, want);
}
