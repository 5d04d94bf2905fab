// candle-make-random-llama: a llama-architecture GGUF model of random weights, in the layout
// llama.cpp's llama loader reads (tensor names, metadata, a synthetic SentencePiece vocabulary),
// for running and benchmarking model shapes without downloading weights.
//
//   candle-make-random-llama OUTPUT [--shape tiny|tinyllama|llama7b|custom] [--type TYPE]
//       [--layers N] [--dim N] [--ffn N] [--heads N] [--kv-heads N] [--vocab N] [--ctx N]
//       [--seed S] [--std X] [--threads N] [--force] [--tokenizer tokenizer.json [--tokenizer-config CONFIG]]
//
// TYPE is a candle-quantize type (f32 f16 bf16 q4_0 q8_0 q4_k_m ...; include/candle/quantized/
// ftype_mix.h): the per-tensor mix is llama-quantize's, norms stay f32. Weights are normal with
// std 0.02 (--std; norms 1), drawn from a counter-seeded generator: the same seed and shape give the
// same file whatever the thread count. The vocabulary is <unk> <s> </s>, the 256 byte tokens
// <0x00>..<0xFF>, then unique pieces "▁a" "a" "▁b" ... "▁ab" "ab" ... up to --vocab; --tokenizer
// writes that tokenizer.json's tokenizer instead (include/candle/tokenizers/gguf.h; and the chat
// template, BOS / EOS of a tokenizer_config.json) and its vocabulary size is the model's.
//
// Memory: tensors are generated and quantized one at a time (the f32 values of one tensor at a
// time), but the GGUF writer takes all quantized tensors at once, so the whole output is held in
// memory until it is written: a LLaMA-7B shape takes ~3.6 GiB at q4_0, ~3.9 GiB at q4_k_m,
// ~6.7 GiB at q8_0, ~12.6 GiB at f16 (f32 would need ~25 GiB). The file is written under a
// temporary name and renamed.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "candle/candle.h"
#include "candle/quantized/ftype_mix.h"
#include "candle/quantized/gguf_file.h"
#include "candle/quantized/quantized.h"
#ifdef CANDLE_HAVE_TOKENIZERS
#include "candle/tokenizers/gguf.h"
#endif

using candle::Error;
using candle::ErrorKind;
using candle::Shape;
using candle::Tensor;
using namespace candle::quantized;
namespace fs = std::filesystem;

namespace {

struct LlamaShape {
  std::string name;
  size_t layers, dim, ffn, heads, kv_heads, vocab, ctx;
  float rms_eps = 1e-5f;
  float rope_base = 10000.f;
};

LlamaShape preset(const std::string& s) {
  if (s == "tiny" || s == "custom") return {"tiny", 2, 64, 128, 4, 2, 300, 256};
  if (s == "tinyllama") return {"tinyllama-1.1b", 22, 2048, 5632, 32, 4, 32000, 2048};
  if (s == "llama7b") return {"llama-7b", 32, 4096, 11008, 32, 32, 32000, 4096};
  throw Error(ErrorKind::InvalidArgument,
              "unknown --shape '" + s.substr(0, 40) + "' (known: tiny tinyllama llama7b custom)");
}

// splitmix64: a counter-based stream, so every row chunk has its own reproducible generator
uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// `n` normal values of std `scale` (Box-Muller) from the stream of `key`
void fill_normal(float* out, size_t n, uint64_t key, float scale) {
  uint64_t s = key;
  constexpr double kTwoPi = 6.283185307179586;
  for (size_t i = 0; i < n; i += 2) {
    const double u1 = (static_cast<double>(splitmix(s) >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
    const double u2 = static_cast<double>(splitmix(s) >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    out[i] = static_cast<float>(r * std::cos(kTwoPi * u2)) * scale;
    if (i + 1 < n) out[i + 1] = static_cast<float>(r * std::sin(kTwoPi * u2)) * scale;
  }
}

// a [rows, cols] matrix of normal values; rows are generated in chunks of 16 on `threads` threads
std::vector<float> random_matrix(size_t rows, size_t cols, uint64_t seed, uint64_t tensor_index,
                                 size_t threads, float std_dev) {
  std::vector<float> v(rows * cols);
  constexpr size_t kChunk = 16;
  const size_t n_chunks = (rows + kChunk - 1) / kChunk;
  auto work = [&](size_t t) {
    for (size_t c = t; c < n_chunks; c += threads) {
      const size_t r0 = c * kChunk, r1 = std::min(rows, r0 + kChunk);
      uint64_t key = seed * 0x100000001b3ULL ^ (tensor_index << 40) ^ c;
      key = splitmix(key);
      fill_normal(v.data() + r0 * cols, (r1 - r0) * cols, key, std_dev);
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (auto& th : pool) th.join();
  return v;
}

// the synthetic SentencePiece vocabulary
struct Vocab {
  std::vector<candle::quantized::gguf_file::Value> tokens, scores, types;
};

Vocab make_vocab(size_t n) {
  constexpr size_t kBase = 3 + 256;
  if (n < kBase + 1)
    throw Error(ErrorKind::InvalidArgument, "--vocab must be at least " + std::to_string(kBase + 1) +
                                                " (<unk> <s> </s>, 256 byte tokens and a piece)");
  // llama.cpp's token types: 1 normal, 2 unknown, 3 control, 6 byte
  Vocab v;
  auto add = [&](std::string s, float score, int32_t type) {
    v.tokens.emplace_back(std::move(s));
    v.scores.emplace_back(score);
    v.types.emplace_back(type);
  };
  add("<unk>", 0.f, 2);
  add("<s>", 0.f, 3);
  add("</s>", 0.f, 3);
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    add(buf, 0.f, 6);
  }
  // pieces over a-z by length, each with and without the word-start mark U+2581
  static const char kSpace[] = "\xe2\x96\x81";
  std::vector<int> digits{0};  // the current letter string, least significant first
  while (v.tokens.size() < n) {
    std::string piece;
    for (auto it = digits.rbegin(); it != digits.rend(); ++it) piece += static_cast<char>('a' + *it);
    const float score = -static_cast<float>(v.tokens.size() - kBase);
    add(kSpace + piece, score, 1);
    if (v.tokens.size() < n) add(piece, score - 0.5f, 1);
    size_t i = 0;  // next string: increment, growing a letter after "zz..z"
    while (i < digits.size() && ++digits[i] == 26) digits[i++] = 0;
    if (i == digits.size()) digits.push_back(0);
  }
  return v;
}

std::string dims_str(const Shape& s) {
  std::string d;
  for (size_t x : s.dims()) d += (d.empty() ? "" : ", ") + std::to_string(x);
  return d;
}

// tokenizer: the tokenizer.* metadata to write; empty for the synthetic vocabulary
int run(const std::string& output, const LlamaShape& sh, const FileType& ft, uint64_t seed, float std_dev,
        bool force, candle::quantized::gguf_file::MetadataList tokenizer) {
  if (!(std_dev > 0.0f && std_dev <= 10.0f))
    throw Error(ErrorKind::InvalidArgument, "--std must be in (0, 10]");
  if (sh.layers == 0 || sh.dim == 0 || sh.ffn == 0 || sh.heads == 0 || sh.kv_heads == 0 || sh.ctx == 0)
    throw Error(ErrorKind::InvalidArgument,
                "--layers, --dim, --ffn, --heads, --kv-heads and --ctx must be > 0");
  if (sh.dim % sh.heads != 0)
    throw Error(ErrorKind::InvalidArgument, "--dim " + std::to_string(sh.dim) +
                                                " is not a multiple of --heads " + std::to_string(sh.heads));
  if (sh.heads % sh.kv_heads != 0)
    throw Error(ErrorKind::InvalidArgument, "--heads " + std::to_string(sh.heads) +
                                                " is not a multiple of --kv-heads " +
                                                std::to_string(sh.kv_heads));
  if (sh.dim > (1u << 20) || sh.ffn > (1u << 20) || sh.vocab > (1u << 22) || sh.layers > 4096)
    throw Error(ErrorKind::InvalidArgument, "shape too large");
  const size_t head_dim = sh.dim / sh.heads;
  if (head_dim % 2 != 0) throw Error(ErrorKind::InvalidArgument, "the head dim (dim / heads) must be even");
  const size_t kv_dim = head_dim * sh.kv_heads;
  std::error_code ec;
  if (fs::exists(output, ec) && !force)
    throw Error(ErrorKind::Io, "output " + output + " exists (--force replaces it)");
  const fs::path out_dir = fs::absolute(output).parent_path();
  if (!fs::is_directory(out_dir, ec))
    throw Error(ErrorKind::Io, "output directory " + out_dir.string() + " not found");

  // the tensors, in llama.cpp's order, with candle's shapes ([n_out, n_in]; GGUF's ne[] reversed)
  std::vector<std::pair<std::string, Shape>> plan;
  plan.emplace_back("token_embd.weight", Shape{sh.vocab, sh.dim});
  for (size_t l = 0; l < sh.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    plan.emplace_back(p + "attn_norm.weight", Shape{sh.dim});
    plan.emplace_back(p + "attn_q.weight", Shape{sh.dim, sh.dim});
    plan.emplace_back(p + "attn_k.weight", Shape{kv_dim, sh.dim});
    plan.emplace_back(p + "attn_v.weight", Shape{kv_dim, sh.dim});
    plan.emplace_back(p + "attn_output.weight", Shape{sh.dim, sh.dim});
    plan.emplace_back(p + "ffn_norm.weight", Shape{sh.dim});
    plan.emplace_back(p + "ffn_gate.weight", Shape{sh.ffn, sh.dim});
    plan.emplace_back(p + "ffn_up.weight", Shape{sh.ffn, sh.dim});
    plan.emplace_back(p + "ffn_down.weight", Shape{sh.dim, sh.ffn});
  }
  plan.emplace_back("output_norm.weight", Shape{sh.dim});
  plan.emplace_back("output.weight", Shape{sh.vocab, sh.dim});

  size_t n_params = 0, out_bytes = 0;
  for (const auto& [name, shape] : plan) {
    n_params += shape.elem_count();
    out_bytes +=
        ggml_row_bytes(tensor_type_for(name, shape, ft, static_cast<long>(sh.layers)), shape.dims().back()) *
        (shape.elem_count() / shape.dims().back());
  }
  std::fprintf(
      stderr,
      "%s: llama %s, %zu layers, dim %zu, ffn %zu, heads %zu/%zu, vocab %zu, ctx %zu: %.1f M params, "
      "%s, ~%.2f GiB\n",
      output.c_str(), sh.name.c_str(), sh.layers, sh.dim, sh.ffn, sh.heads, sh.kv_heads, sh.vocab, sh.ctx,
      static_cast<double>(n_params) * 1e-6, ft.name.c_str(), static_cast<double>(out_bytes) / (1ull << 30));

  using gguf_file::Value;
  using gguf_file::ValueType;
  gguf_file::MetadataList meta;
  meta.emplace_back("general.architecture", "llama");
  meta.emplace_back("general.name", "candle random " + sh.name);
  meta.emplace_back("llama.context_length", static_cast<uint32_t>(sh.ctx));
  meta.emplace_back("llama.embedding_length", static_cast<uint32_t>(sh.dim));
  meta.emplace_back("llama.block_count", static_cast<uint32_t>(sh.layers));
  meta.emplace_back("llama.feed_forward_length", static_cast<uint32_t>(sh.ffn));
  meta.emplace_back("llama.attention.head_count", static_cast<uint32_t>(sh.heads));
  meta.emplace_back("llama.attention.head_count_kv", static_cast<uint32_t>(sh.kv_heads));
  meta.emplace_back("llama.rope.dimension_count", static_cast<uint32_t>(head_dim));
  meta.emplace_back("llama.attention.layer_norm_rms_epsilon", sh.rms_eps);
  meta.emplace_back("llama.rope.freq_base", sh.rope_base);
  meta.emplace_back("llama.vocab_size", static_cast<uint32_t>(sh.vocab));
  meta.emplace_back("general.file_type", ft.file_type);
  meta.emplace_back("general.quantization_version", uint32_t{2});
  if (tokenizer.empty()) {
    Vocab vocab = make_vocab(sh.vocab);
    meta.emplace_back("tokenizer.ggml.model", "llama");
    meta.emplace_back("tokenizer.ggml.tokens", Value::array(ValueType::String, std::move(vocab.tokens)));
    meta.emplace_back("tokenizer.ggml.scores", Value::array(ValueType::F32, std::move(vocab.scores)));
    meta.emplace_back("tokenizer.ggml.token_type", Value::array(ValueType::I32, std::move(vocab.types)));
    meta.emplace_back("tokenizer.ggml.unknown_token_id", uint32_t{0});
    meta.emplace_back("tokenizer.ggml.bos_token_id", uint32_t{1});
    meta.emplace_back("tokenizer.ggml.eos_token_id", uint32_t{2});
    meta.emplace_back("tokenizer.ggml.add_bos_token", true);
    meta.emplace_back("tokenizer.ggml.add_eos_token", false);
  } else {
    for (auto& kv : tokenizer) meta.push_back(std::move(kv));
  }

  const size_t threads = std::max<size_t>(1, candle::get_num_threads());
  // written tensor by tensor (a temporary file renamed into place by finish(); nothing is left on
  // an error): one tensor in memory at a time
  std::vector<gguf_file::TensorSpec> specs;
  for (const auto& [name, shape] : plan)
    specs.push_back({name, shape, tensor_type_for(name, shape, ft, static_cast<long>(sh.layers))});
  gguf_file::Writer writer(output, meta, std::move(specs));
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < plan.size(); ++i) {
    const auto& [name, shape] = plan[i];
    const GgmlDType t = tensor_type_for(name, shape, ft, static_cast<long>(sh.layers));
    Tensor x =
        shape.rank() == 1
            ? Tensor::ones(shape, candle::DType::F32, candle::Device::cpu())
            : Tensor::from_vec(random_matrix(shape.dims()[0], shape.dims()[1], seed, i, threads, std_dev),
                               shape, candle::Device::cpu());
    QTensor q = QTensor::quantize(x, t);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "[%4zu/%4zu] %-28s [%s] %s, %.2f MiB, %.1f s\n", i + 1, plan.size(), name.c_str(),
                 dims_str(shape).c_str(), std::string(ggml_dtype_name(t)).c_str(),
                 static_cast<double>(q.storage_size_in_bytes()) / (1 << 20), secs);
    writer.write_tensor(q);
  }
  writer.finish();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "wrote %s: %.2f MiB, %.1f s\n", output.c_str(),
               static_cast<double>(out_bytes) / (1 << 20), secs);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"candle-make-random-llama: a llama-architecture GGUF model of random weights"};
  std::string output, shape_name = "tiny", type = "f16", tokenizer_path, tokenizer_config;
  size_t layers = 0, dim = 0, ffn = 0, heads = 0, kv_heads = 0, vocab = 0, ctx = 0, threads = 0;
  uint64_t seed = 0;
  float std_dev = 0.02f;
  bool force = false;
  app.add_option("output", output, "the GGUF file to write")->required();
  app.add_option("--shape", shape_name,
                 "tiny (2 layers, dim 64, vocab 300), tinyllama (1.1B), llama7b, custom (tiny + overrides)");
  app.add_option("--type", type,
                 "f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q2_k ... q6_k iq4_nl iq4_xs, q4_k_m q5_k_m");
  app.add_option("--layers", layers, "override: block count");
  app.add_option("--dim", dim, "override: embedding length");
  app.add_option("--ffn", ffn, "override: feed-forward length");
  app.add_option("--heads", heads, "override: attention heads");
  app.add_option("--kv-heads", kv_heads, "override: key/value heads");
  app.add_option("--vocab", vocab, "override: vocabulary size (>= 260)");
  app.add_option("--ctx", ctx, "override: context length");
  app.add_option("--seed", seed, "random seed (default 0)");
  app.add_option("--std", std_dev, "standard deviation of the weights (default 0.02)");
  app.add_option("--threads", threads, "CPU threads (default: CANDLE_NUM_THREADS or all cores)");
  app.add_flag("--force", force, "replace OUTPUT when it exists");
  app.add_option("--tokenizer", tokenizer_path,
                 "a tokenizer.json to carry (its vocabulary size is the model's)");
  app.add_option("--tokenizer-config", tokenizer_config,
                 "its tokenizer_config.json (chat template, BOS / EOS)");
  CLI11_PARSE(app, argc, argv);
  try {
    if (threads) candle::set_num_threads(threads);
    LlamaShape sh = preset(shape_name);
    if (layers) sh.layers = layers;
    if (dim) sh.dim = dim;
    if (ffn) sh.ffn = ffn;
    if (heads) sh.heads = heads;
    if (kv_heads) sh.kv_heads = kv_heads;
    if (vocab) sh.vocab = vocab;
    if (ctx) sh.ctx = ctx;
    if (shape_name == "custom") sh.name = "custom";
    candle::quantized::gguf_file::MetadataList tokenizer;
    if (!tokenizer_path.empty()) {
#ifdef CANDLE_HAVE_TOKENIZERS
      tokenizer = candle::tokenizers::gguf_tokenizer_metadata_from_file(tokenizer_path, tokenizer_config);
      for (const auto& [k, v] : tokenizer)
        if (k == "tokenizer.ggml.tokens") sh.vocab = v.to_vec().size();
      if (vocab && vocab != sh.vocab)
        throw Error(ErrorKind::InvalidArgument, "--vocab " + std::to_string(vocab) + " differs from the " +
                                                    std::to_string(sh.vocab) + " tokens of --tokenizer");
#else
      throw Error(ErrorKind::UnsupportedOp, "--tokenizer: this build has no candle::tokenizers");
#endif
    } else if (!tokenizer_config.empty()) {
      throw Error(ErrorKind::InvalidArgument, "--tokenizer-config needs --tokenizer");
    }
    return run(output, sh, parse_file_type(type), seed, std_dev, force, std::move(tokenizer));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "candle-make-random-llama: error: %s\n", e.what());
    return 1;
  }
}
