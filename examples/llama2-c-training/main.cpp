// candle-llama2-c-training: candle's llama2-c example's training side. Trains a llama2.c-shaped
// llama (dim 288, 6 layers, 6 heads, hidden 768: llama2.c's "15M" shape) on a text with AdamW,
// then writes the model three ways: safetensors + config.json + tokenizer.json (a folder that
// candle-llm loads), and a Q8_0 GGUF with the tokenizer inside (that candle-llm and llama.cpp
// load).
//
//   candle-llama2-c-training --text FILE --out DIR [--tokenizer GPT2_TOKENIZER_JSON] [--steps N]
//       [--batch B] [--seq T] [--lr X] [--warmup N] [--dim N] [--layers N] [--heads N]
//       [--hidden N] [--eval-every N] [--seed S] [--threads N] [--device NAME] [--force]
//
// The tokenizer: GPT-2's byte-level BPE (MIT), cut down to the tokens the text uses (and the
// merges that build them, and the 256 byte tokens): the same tokens as GPT-2's on that text with
// a vocabulary of a few thousand instead of 50257, so the embeddings do not dominate a 15M model.
// Progress: one line per --log-every steps (loss, learning rate, tokens/s), the validation loss
// (the last 5% of the text) every --eval-every steps; DIR/loss.csv keeps both.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "candle/candle.h"
#include "candle/models/llama.h"
#include "candle/nn/loss.h"
#include "candle/nn/optim.h"
#include "candle/nn/var_builder.h"
#include "candle/nn/var_map.h"
#include "candle/quantized/gguf_file.h"
#include "candle/quantized/quantized.h"
#if CANDLE_LLAMA2C_TOKENIZERS
#include "candle/tokenizers/gguf.h"
#include "candle/tokenizers/tokenizer.h"
#endif

using candle::Device;
using candle::DType;
using candle::Error;
using candle::ErrorKind;
using candle::Shape;
using candle::Tensor;
namespace fs = std::filesystem;
namespace nn = candle::nn;
namespace llama = candle::models::llama;
namespace q = candle::quantized;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(ErrorKind::Io, "cannot read " + path);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f) throw Error(ErrorKind::Io, "cannot write " + path.string());
}

#if CANDLE_LLAMA2C_TOKENIZERS
// The text's lines in pieces of whole lines of about 64 KiB (the tokenizer sees no text across
// a piece boundary but a newline).
std::vector<std::string> pieces_of(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = std::min(text.size(), at + (size_t{64} << 10));
    if (end < text.size()) {
      const size_t nl = text.find('\n', end);
      end = nl == std::string::npos ? text.size() : nl + 1;
    }
    out.push_back(text.substr(at, end - at));
    at = end;
  }
  return out;
}

std::vector<uint32_t> encode_all(const candle::tokenizers::Tokenizer& tok,
                                 const std::vector<std::string>& pieces) {
  std::vector<uint32_t> ids;
  for (const auto& p : pieces) {
    const auto enc = tok.encode(p, false);
    ids.insert(ids.end(), enc.get_ids().begin(), enc.get_ids().end());
  }
  return ids;
}

// GPT-2's tokenizer.json cut down to the tokens `text` uses, the merges that build them and the
// 256 byte tokens (ids 0..255 in GPT-2's vocabulary), renumbered in GPT-2's order. Every merge
// BPE applies to this text builds a kept token, so the cut tokenizer gives the same tokens.
std::string shrink_tokenizer(const std::string& gpt2_json, const candle::tokenizers::Tokenizer& full,
                             const std::vector<std::string>& pieces) {
  json j = json::parse(gpt2_json);
  auto& model = j.at("model");
  if (model.at("type") != "BPE") throw Error(ErrorKind::InvalidArgument, "--tokenizer: not a BPE tokenizer");
  std::unordered_map<std::string, uint32_t> vocab;
  for (auto& [tok, id] : model.at("vocab").items()) vocab[tok] = id.get<uint32_t>();
  std::vector<std::pair<std::string, std::string>> merges;
  for (const auto& m : model.at("merges")) {
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos) throw Error(ErrorKind::Parse, "--tokenizer: a merge without a space");
      merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else {
      merges.emplace_back(m.at(0).get<std::string>(), m.at(1).get<std::string>());
    }
  }
  std::unordered_map<std::string, std::vector<size_t>> built_by;  // token -> the merges that make it
  for (size_t i = 0; i < merges.size(); ++i) built_by[merges[i].first + merges[i].second].push_back(i);

  std::set<uint32_t> used;
  for (uint32_t id : encode_all(full, pieces)) used.insert(id);
  std::vector<std::string> id_to_tok(vocab.size());
  for (const auto& [tok, id] : vocab)
    if (id < id_to_tok.size()) id_to_tok[id] = tok;
  std::set<std::string> keep;
  std::vector<std::string> todo;
  for (uint32_t id = 0; id < 256 && id < id_to_tok.size(); ++id) keep.insert(id_to_tok[id]);
  for (uint32_t id : used) todo.push_back(id_to_tok.at(id));
  while (!todo.empty()) {
    std::string t = std::move(todo.back());
    todo.pop_back();
    if (!keep.insert(t).second) continue;
    auto it = built_by.find(t);
    if (it != built_by.end())
      for (size_t m : it->second) {
        todo.push_back(merges[m].first);
        todo.push_back(merges[m].second);
      }
  }
  std::vector<std::pair<uint32_t, std::string>> kept;
  for (const auto& t : keep) kept.emplace_back(vocab.at(t), t);
  std::vector<uint32_t> special;
  for (const auto& a : j.at("added_tokens")) special.push_back(a.at("id").get<uint32_t>());
  for (uint32_t id : special)
    if (id < id_to_tok.size() && !keep.count(id_to_tok[id])) kept.emplace_back(id, id_to_tok[id]);
  std::sort(kept.begin(), kept.end());
  json new_vocab = json::object();
  std::unordered_map<uint32_t, uint32_t> remap;
  for (size_t i = 0; i < kept.size(); ++i) {
    new_vocab[kept[i].second] = i;
    remap[kept[i].first] = static_cast<uint32_t>(i);
  }
  json new_merges = json::array();
  for (const auto& [a, b] : merges)
    if (keep.count(a + b) && keep.count(a) && keep.count(b)) new_merges.push_back(a + " " + b);
  model["vocab"] = new_vocab;
  model["merges"] = new_merges;
  for (auto& a : j.at("added_tokens")) a["id"] = remap.at(a.at("id").get<uint32_t>());
  return j.dump();
}

#endif  // CANDLE_LLAMA2C_TOKENIZERS

struct Shape15M {
  size_t dim = 288, layers = 6, heads = 6, hidden = 768;
};

json hf_config(const Shape15M& s, size_t vocab, size_t seq, uint32_t eos) {
  return json{{"architectures", {"LlamaForCausalLM"}},
              {"model_type", "llama"},
              {"hidden_size", s.dim},
              {"intermediate_size", s.hidden},
              {"num_hidden_layers", s.layers},
              {"num_attention_heads", s.heads},
              {"num_key_value_heads", s.heads},
              {"vocab_size", vocab},
              {"max_position_embeddings", seq},
              {"rms_norm_eps", 1e-5},
              {"rope_theta", 10000.0},
              {"tie_word_embeddings", false},
              {"hidden_act", "silu"},
              {"bos_token_id", eos},
              {"eos_token_id", eos},
              {"torch_dtype", "float32"}};
}

// llama.cpp's llama GGUFs rotate interleaved pairs: the rows of q and k go from the halves
// layout of Hugging Face's checkpoints ([head][2][hd/2]) to [head][hd/2][2].
Tensor to_interleaved_rows(const Tensor& w, size_t heads) {
  const size_t rows = w.dims()[0], cols = w.dims()[1], hd = rows / heads;
  return w.reshape({heads, 2, hd / 2, cols}).transpose(1, 2).contiguous().reshape({rows, cols});
}

void write_gguf(const nn::VarMap& vm, const Shape15M& s, size_t vocab, size_t seq,
                const q::gguf_file::MetadataList& tokenizer_meta, const fs::path& out) {
  std::map<std::string, Tensor> vars;
  for (const auto& [name, var] : vm.named_vars())
    vars.emplace(name, var.as_tensor().to_dtype(DType::F32).to_device(Device::cpu()).detach());
  auto get = [&](const std::string& name) {
    auto it = vars.find(name);
    if (it == vars.end()) throw Error(ErrorKind::InvalidArgument, "no variable " + name);
    return it->second;
  };
  q::gguf_file::MetadataList meta;
  meta.emplace_back("general.architecture", "llama");
  meta.emplace_back("general.name", "candle llama2-c kjv");
  meta.emplace_back("llama.context_length", static_cast<uint32_t>(seq));
  meta.emplace_back("llama.embedding_length", static_cast<uint32_t>(s.dim));
  meta.emplace_back("llama.block_count", static_cast<uint32_t>(s.layers));
  meta.emplace_back("llama.feed_forward_length", static_cast<uint32_t>(s.hidden));
  meta.emplace_back("llama.attention.head_count", static_cast<uint32_t>(s.heads));
  meta.emplace_back("llama.attention.head_count_kv", static_cast<uint32_t>(s.heads));
  meta.emplace_back("llama.rope.dimension_count", static_cast<uint32_t>(s.dim / s.heads));
  meta.emplace_back("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  meta.emplace_back("llama.rope.freq_base", 10000.f);
  meta.emplace_back("llama.vocab_size", static_cast<uint32_t>(vocab));
  meta.emplace_back("general.file_type", uint32_t{7});  // mostly Q8_0
  meta.emplace_back("general.quantization_version", uint32_t{2});
  for (const auto& kv : tokenizer_meta) meta.push_back(kv);
  q::gguf_file::TensorList tensors;
  auto add = [&](const std::string& gguf_name, const Tensor& t) {
    const q::GgmlDType type = t.rank() == 1 ? q::GgmlDType::F32 : q::GgmlDType::Q8_0;
    tensors.emplace_back(gguf_name, q::QTensor::quantize(t, type));
  };
  add("token_embd.weight", get("model.embed_tokens.weight"));
  for (size_t l = 0; l < s.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".", g = "blk." + std::to_string(l) + ".";
    add(g + "attn_norm.weight", get(p + "input_layernorm.weight"));
    add(g + "attn_q.weight", to_interleaved_rows(get(p + "self_attn.q_proj.weight"), s.heads));
    add(g + "attn_k.weight", to_interleaved_rows(get(p + "self_attn.k_proj.weight"), s.heads));
    add(g + "attn_v.weight", get(p + "self_attn.v_proj.weight"));
    add(g + "attn_output.weight", get(p + "self_attn.o_proj.weight"));
    add(g + "ffn_norm.weight", get(p + "post_attention_layernorm.weight"));
    add(g + "ffn_gate.weight", get(p + "mlp.gate_proj.weight"));
    add(g + "ffn_up.weight", get(p + "mlp.up_proj.weight"));
    add(g + "ffn_down.weight", get(p + "mlp.down_proj.weight"));
  }
  add("output_norm.weight", get("model.norm.weight"));
  add("output.weight", get("lm_head.weight"));
  q::gguf_file::write(out.string(), meta, tensors);
}

// The weights llama2.c starts from: normal(0, 0.02), the residual projections (o_proj,
// down_proj) scaled by 1/sqrt(2 * layers), norms at 1.
void init_weights(const nn::VarBuilder& vb, const Shape15M& s, size_t vocab) {
  const double std0 = 0.02, std_res = 0.02 / std::sqrt(2.0 * static_cast<double>(s.layers));
  auto normal = [&](const Shape& shape, const std::string& name, double std) {
    vb.get_with_hints(shape, name, nn::Init(nn::Init::Randn{0.0, std}));
  };
  auto ones = [&](const Shape& shape, const std::string& name) {
    vb.get_with_hints(shape, name, nn::Init(nn::Init::Const{1.0}));
  };
  normal({vocab, s.dim}, "model.embed_tokens.weight", std0);
  for (size_t l = 0; l < s.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    for (const char* n : {"q_proj", "k_proj", "v_proj"})
      normal({s.dim, s.dim}, p + "self_attn." + n + ".weight", std0);
    normal({s.dim, s.dim}, p + "self_attn.o_proj.weight", std_res);
    normal({s.hidden, s.dim}, p + "mlp.gate_proj.weight", std0);
    normal({s.hidden, s.dim}, p + "mlp.up_proj.weight", std0);
    normal({s.dim, s.hidden}, p + "mlp.down_proj.weight", std_res);
    ones({s.dim}, p + "input_layernorm.weight");
    ones({s.dim}, p + "post_attention_layernorm.weight");
  }
  ones({s.dim}, "model.norm.weight");
  normal({vocab, s.dim}, "lm_head.weight", std0);
}

struct Options {
  std::string text, out, tokenizer, prepared, device = "cpu";
  int64_t steps = 2000, batch = 32, seq = 256, warmup = 100, eval_every = 100, log_every = 10, threads = 0;
  double lr = 5e-4, min_lr_ratio = 0.1, weight_decay = 0.1, time_budget = 0;
  bool steps_given = false;
  uint64_t seed = 1;
  bool force = false, prepare_only = false;
  Shape15M shape;
};

#if CANDLE_LLAMA2C_TOKENIZERS
std::string default_gpt2_tokenizer() {
  const std::string rel = "tools/peers/node_modules/.candle/gpt2/tokenizer.json";
  if (fs::exists(rel)) return rel;
  const std::string src = std::string(CANDLE_SOURCE_DIR) + "/" + rel;
  if (fs::exists(src)) return src;
  throw Error(
      ErrorKind::InvalidArgument,
      "no --tokenizer given and GPT-2's tokenizer.json was not found (tools/install-deps.sh makes it)");
}
#endif

// What training needs of the text: its token ids, the tokenizer (tokenizer.json) and the
// tokenizer as GGUF metadata. --prepare-only writes it to a folder that --prepared reads, so that
// a build without candle::tokenizers (no PCRE2 or ICU) can train.
struct Prepared {
  std::vector<uint32_t> ids;
  std::string tokenizer_json;
  q::gguf_file::MetadataList gguf_meta;
  size_t vocab = 0;
  uint32_t eos = 0;
};

// The vocabulary size (the highest id + 1, added tokens included) and the id of
// <|endoftext|> (0 when absent) of a tokenizer.json.
void vocab_of(Prepared& p) {
  const json j = json::parse(p.tokenizer_json);
  size_t n = 0;
  for (const auto& [tok, id] : j.at("model").at("vocab").items())
    n = std::max<size_t>(n, id.get<size_t>() + 1);
  for (const auto& a : j.at("added_tokens")) {
    n = std::max<size_t>(n, a.at("id").get<size_t>() + 1);
    if (a.at("content") == "<|endoftext|>") p.eos = a.at("id").get<uint32_t>();
  }
  p.vocab = n;
}

void write_prepared(const Prepared& p, const fs::path& dir) {
  std::string bytes(p.ids.size() * 4, '\0');
  for (size_t i = 0; i < p.ids.size(); ++i)
    for (int b = 0; b < 4; ++b) bytes[i * 4 + b] = static_cast<char>((p.ids[i] >> (8 * b)) & 0xff);
  write_file(dir / "tokens.bin", bytes);
  q::gguf_file::write((dir / "tokenizer.gguf").string(), p.gguf_meta, {});
}

Prepared load_prepared(const fs::path& dir) {
  Prepared p;
  p.tokenizer_json = read_file((dir / "tokenizer.json").string());
  vocab_of(p);
  const std::string bytes = read_file((dir / "tokens.bin").string());
  if (bytes.size() % 4 != 0)
    throw Error(ErrorKind::Parse, (dir / "tokens.bin").string() + ": not a whole number of u32 token ids");
  p.ids.resize(bytes.size() / 4);
  for (size_t i = 0; i < p.ids.size(); ++i) {
    uint32_t v = 0;
    for (int b = 0; b < 4; ++b) v |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[i * 4 + b])) << (8 * b);
    if (v >= p.vocab)
      throw Error(ErrorKind::Parse, (dir / "tokens.bin").string() + ": token id " + std::to_string(v) +
                                        " is outside the vocabulary of " + std::to_string(p.vocab));
    p.ids[i] = v;
  }
  const auto content = q::gguf_file::Content::read((dir / "tokenizer.gguf").string());
  for (const auto& kv : content.metadata)
    if (kv.first.rfind("tokenizer.", 0) == 0) p.gguf_meta.emplace_back(kv.first, kv.second);
  return p;
}

#if CANDLE_LLAMA2C_TOKENIZERS
// The text tokenized by GPT-2's tokenizer cut down to it.
Prepared prepare_text(const Options& o) {
  const std::string text = read_file(o.text);
  if (text.size() < 1024) throw Error(ErrorKind::InvalidArgument, "--text: fewer than 1024 bytes");
  const auto pieces = pieces_of(text);
  const std::string tok_path = o.tokenizer.empty() ? default_gpt2_tokenizer() : o.tokenizer;
  const auto full = candle::tokenizers::Tokenizer::from_file(tok_path);
  Prepared p;
  p.tokenizer_json = shrink_tokenizer(read_file(tok_path), full, pieces);
  const auto tok = candle::tokenizers::Tokenizer::from_string(p.tokenizer_json);
  p.ids = encode_all(tok, pieces);
  vocab_of(p);
  p.gguf_meta = candle::tokenizers::gguf_tokenizer_metadata(p.tokenizer_json);
  std::fprintf(stderr, "text: %zu bytes, %zu tokens, vocabulary %zu (GPT-2's cut to this text)\n",
               text.size(), p.ids.size(), p.vocab);
  return p;
}
#endif

int run(const Options& o) {
  if (o.threads > 0) candle::set_num_threads(static_cast<size_t>(o.threads));
  const fs::path out(o.out);
  if (fs::exists(out / "model.safetensors") && !o.force)
    throw Error(ErrorKind::Io, out.string() + "/model.safetensors exists (--force replaces it)");
  fs::create_directories(out);
  const Device device = Device::from_name(o.device);
#if CANDLE_LLAMA2C_TOKENIZERS
  const Prepared data = o.prepared.empty() ? prepare_text(o) : load_prepared(o.prepared);
#else
  if (o.prepared.empty())
    throw Error(ErrorKind::InvalidArgument,
                "this build has no candle::tokenizers: give --prepared DIR (written by a build with it, "
                "--prepare-only)");
  const Prepared data = load_prepared(o.prepared);
#endif
  const std::vector<uint32_t>& ids = data.ids;
  const size_t vocab = data.vocab;
  const uint32_t eos = data.eos;
  write_file(out / "tokenizer.json", data.tokenizer_json);
  if (o.prepare_only) {
    write_prepared(data, out);
    std::fprintf(stderr, "wrote %s/{tokenizer.json, tokens.bin, tokenizer.gguf}\n", out.string().c_str());
    return 0;
  }
  const size_t seq = static_cast<size_t>(o.seq), batch = static_cast<size_t>(o.batch);
  const size_t n_val = ids.size() / 20, n_train = ids.size() - n_val;
  if (n_train < seq + 2 || n_val < seq + 2)
    throw Error(ErrorKind::InvalidArgument, "--text is too short for --seq " + std::to_string(seq));

  // the model
  write_file(out / "config.json", hf_config(o.shape, vocab, seq, eos).dump(2));
  const auto cfg = llama::LlamaConfig::from_json(read_file((out / "config.json").string()));
  device.set_seed(o.seed);
  nn::VarMap vm;
  const auto vb = nn::VarBuilder::from_varmap(vm, DType::F32, device);
  init_weights(vb, o.shape, vocab);
  const auto model = llama::Llama::load(vb, cfg);
  size_t n_params = 0;
  for (const auto& v : vm.all_vars()) n_params += v.as_tensor().elem_count();
  std::fprintf(stderr, "model: dim %zu, %zu layers, %zu heads, hidden %zu: %.2f M parameters\n", o.shape.dim,
               o.shape.layers, o.shape.heads, o.shape.hidden, static_cast<double>(n_params) * 1e-6);

  nn::ParamsAdamW params;
  params.lr = o.lr;
  params.beta1 = 0.9;
  params.beta2 = 0.95;
  params.weight_decay = o.weight_decay;
  nn::AdamW opt(vm.all_vars(), params);
  std::mt19937_64 rng(o.seed);
  auto make_batch = [&](size_t begin, size_t end) {
    std::uniform_int_distribution<size_t> pick(begin, end - seq - 1);
    std::vector<uint32_t> x(batch * seq), y(batch * seq);
    for (size_t b = 0; b < batch; ++b) {
      const size_t at = pick(rng);
      std::copy(ids.begin() + at, ids.begin() + at + seq, x.begin() + b * seq);
      std::copy(ids.begin() + at + 1, ids.begin() + at + seq + 1, y.begin() + b * seq);
    }
    return std::make_pair(Tensor::from_vec(x, {batch, seq}, device),
                          Tensor::from_vec(y, {batch * seq}, device));
  };
  auto loss_of = [&](const Tensor& x, const Tensor& y) {
    return nn::loss::cross_entropy(model.forward_all(x).reshape({batch * seq, vocab}), y);
  };
  std::ofstream csv(out / "loss.csv");
  csv << "step,train_loss,val_loss,lr,elapsed_s\n";
  const auto t0 = Clock::now();
  auto t_log = t0;
  double run_loss = 0;
  int run_n = 0;
  // --time-budget: the steps that fit, from the time of steps 3 to 8 (the first ones allocate)
  constexpr int64_t kTimedFrom = 2, kTimedTo = 8;
  int64_t total = o.time_budget > 0 && !o.steps_given ? std::numeric_limits<int64_t>::max() : o.steps;
  auto t_timed = t0;
  for (int64_t step = 1; step <= total; ++step) {
    if (o.time_budget > 0 && step == kTimedTo + 1) {
      const double per_step = std::chrono::duration<double>(Clock::now() - t_timed).count() /
                              static_cast<double>(kTimedTo - kTimedFrom);
      // a validation pass is 4 forward batches, about 1.4 steps
      const double cost = per_step * (1 + 1.4 / static_cast<double>(o.eval_every));
      const double left = o.time_budget - std::chrono::duration<double>(Clock::now() - t0).count();
      const auto fit = static_cast<int64_t>(std::max(0.0, 0.97 * left / cost)) + kTimedTo;
      total = std::max(std::min(total, fit), std::max<int64_t>(kTimedTo, o.warmup + 1));
      std::fprintf(stderr, "%.2f s a step: %lld steps fit in --time-budget %.0f s\n", per_step,
                   static_cast<long long>(total), o.time_budget);
    }
    // linear warm-up, then a cosine down to min_lr_ratio of the peak
    double lr = o.lr;
    if (step <= o.warmup) {
      lr = o.lr * static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, o.warmup));
    } else {
      const double p =
          static_cast<double>(step - o.warmup) / static_cast<double>(std::max<int64_t>(1, total - o.warmup));
      lr = o.lr * (o.min_lr_ratio + (1 - o.min_lr_ratio) * 0.5 * (1 + std::cos(M_PI * p)));
    }
    if (step == kTimedFrom + 1) t_timed = Clock::now();
    opt.set_learning_rate(lr);
    auto [x, y] = make_batch(0, n_train);
    const Tensor loss = loss_of(x, y);
    opt.backward_step(loss);
    const float lv = loss.to_dtype(DType::F32).to_vec0<float>();
    if (!std::isfinite(lv))
      throw Error(ErrorKind::InvalidArgument, "the loss is not finite at step " + std::to_string(step));
    run_loss += lv;
    ++run_n;
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    std::string val_str;
    if (step % o.eval_every == 0 || step == total) {
      double vl = 0;
      for (int i = 0; i < 4; ++i) {
        auto [vx, vy] = make_batch(n_train, ids.size());
        vl += loss_of(vx, vy).to_dtype(DType::F32).to_vec0<float>();
      }
      vl /= 4;
      val_str = std::to_string(vl);
      std::fprintf(stderr, "step %5lld  validation loss %.4f\n", static_cast<long long>(step), vl);
    }
    csv << step << "," << lv << "," << val_str << "," << lr << "," << elapsed << "\n";
    if (step % o.log_every == 0 || step == total) {
      const double dt = std::chrono::duration<double>(Clock::now() - t_log).count();
      std::fprintf(stderr, "step %5lld/%lld  loss %.4f  lr %.2e  %.0f tokens/s  %.0f s\n",
                   static_cast<long long>(step), static_cast<long long>(total), run_loss / run_n, lr,
                   static_cast<double>(run_n * batch * seq) / dt, elapsed);
      csv.flush();
      t_log = Clock::now();
      run_loss = 0;
      run_n = 0;
    }
  }
  vm.save((out / "model.safetensors").string());
  write_gguf(vm, o.shape, vocab, seq, data.gguf_meta, out / "model-q8_0.gguf");
  std::fprintf(stderr,
               "wrote %s/{model.safetensors, config.json, tokenizer.json, model-q8_0.gguf, loss.csv}\n",
               out.string().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"candle-llama2-c-training: train a llama2.c-shaped llama on a text"};
  Options o;
  app.add_option("--text", o.text, "the training text (UTF-8)");
  app.add_option("--prepared", o.prepared,
                 "a folder of --prepare-only (tokens.bin, tokenizer.json, tokenizer.gguf) instead of --text");
  app.add_flag("--prepare-only", o.prepare_only,
               "tokenize --text, write tokens.bin, tokenizer.json and tokenizer.gguf to --out, and stop");
  app.add_option("--out", o.out, "the output folder")->required();
  app.add_option("--tokenizer", o.tokenizer, "GPT-2's tokenizer.json (default: tools/peers' copy)");
  app.add_option("--steps", o.steps, "optimizer steps (default 2000; with --time-budget, at most this many)")
      ->check(CLI::PositiveNumber);
  app.add_option("--time-budget", o.time_budget,
                 "seconds of training: the steps that fit, timed on steps 3-8 (the schedule follows them)")
      ->check(CLI::PositiveNumber);
  app.add_option("--batch", o.batch, "sequences per step (default 32)")->check(CLI::PositiveNumber);
  app.add_option("--seq", o.seq, "tokens per sequence (default 256)")->check(CLI::PositiveNumber);
  app.add_option("--lr", o.lr, "peak learning rate (default 5e-4)")->check(CLI::PositiveNumber);
  app.add_option("--warmup", o.warmup, "warm-up steps (default 100)")->check(CLI::NonNegativeNumber);
  app.add_option("--dim", o.shape.dim, "model width (default 288)")->check(CLI::PositiveNumber);
  app.add_option("--layers", o.shape.layers, "layers (default 6)")->check(CLI::PositiveNumber);
  app.add_option("--heads", o.shape.heads, "attention heads (default 6)")->check(CLI::PositiveNumber);
  app.add_option("--hidden", o.shape.hidden, "MLP width (default 768)")->check(CLI::PositiveNumber);
  app.add_option("--eval-every", o.eval_every, "steps between validation losses (default 100)")
      ->check(CLI::PositiveNumber);
  app.add_option("--log-every", o.log_every, "steps between progress lines (default 10)")
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", o.seed, "seed of the weights and the batches (default 1)");
  app.add_option("--threads", o.threads, "CPU threads (default: all cores)")->check(CLI::NonNegativeNumber);
  app.add_option("--device", o.device, "cpu (default), vulkan, cuda, auto");
  app.add_flag("--force", o.force, "replace the outputs in --out");
  CLI11_PARSE(app, argc, argv);
  o.steps_given = app.count("--steps") > 0;
  if (o.text.empty() == o.prepared.empty()) {
    std::fprintf(stderr, "candle-llama2-c-training: error: give one of --text and --prepared\n");
    return 1;
  }
  if (o.shape.dim % o.shape.heads != 0 || (o.shape.dim / o.shape.heads) % 2 != 0) {
    std::fprintf(stderr, "candle-llama2-c-training: error: --dim must be a multiple of 2 x --heads\n");
    return 1;
  }
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "candle-llama2-c-training: error: %s\n", e.what());
    return 1;
  }
}
