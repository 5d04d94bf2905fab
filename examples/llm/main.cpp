// candle-llm: run a language model (a GGUF file, or a folder with config.json, tokenizer.json and
// safetensors) with its own tokenizer and chat template, streaming the text as it is generated.
//
//   candle-llm [--model PATH] [--prompt TEXT | --chat] [--system TEXT] [--max-tokens N]
//              [--temperature T] [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R]
//              [--repeat-last-n N] [--seed S] [--stop STR]... [--threads N] [--device NAME]
//              [--dtype f32|f16|bf16] [--tokenizer FILE] [--no-template] [--quiet]
//              [--decode auto|cache|graph] [--ignore-eos] [--tp N]
//
// Sampling defaults are llama.cpp's (temperature 0.8, top-k 40, top-p 0.95, min-p 0.05, repeat
// penalty 1.0 over the last 64 tokens); --temperature 0 is greedy. At the end it prints, on
// stderr, prompt and generation tokens/s, the time to the first token and the peak memory.
// Ctrl-C stops the generation (in --chat: the current answer; twice: the program).
// --decode graph feeds the text through models::DecodeSession: each token's step recorded once as a
// candle::Graph and replayed (one launch per token on CUDA); --decode cache through forward() and
// its KV cache; auto (the default) takes graph where the device records graphs (CUDA).
// Speed on random tokens, as llama-bench measures it: bench/llm_speed.cpp.
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "candle/candle.h"
#include "candle/generation/chat_template.h"
#include "candle/generation/logits_processor.h"
#include "candle/generation/stream.h"
#include "candle/models/causal_lm.h"
#include "candle/quantized/gguf_file.h"
#include "candle/tokenizers/tokenizer.h"
#include "common/models_dir.h"

using candle::Device;
using candle::DType;
using candle::Error;
using candle::ErrorKind;
using candle::Tensor;
namespace gen = candle::generation;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

std::atomic<int> g_interrupts{0};
// the first Ctrl-C stops the answer being generated; a second one before it is noticed (a long
// prompt being processed) ends the program as Ctrl-C does by default
extern "C" void on_sigint(int) {
  if (g_interrupts.fetch_add(1) >= 1) {
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
  }
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double peak_rss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;  // KiB on Linux
}

bool is_gguf(const std::string& path) { return fs::is_regular_file(path); }

// The model's tokenizer: --tokenizer, else the GGUF's embedded one, else the folder's tokenizer.json.
candle::tokenizers::Tokenizer load_tokenizer(const std::string& model, const std::string& tokenizer_file,
                                             const candle::quantized::gguf_file::Content* gguf) {
  if (!tokenizer_file.empty()) return candle::tokenizers::Tokenizer::from_file(tokenizer_file);
  if (gguf) return candle::tokenizers::Tokenizer::from_gguf(*gguf);
  const fs::path p = fs::path(model) / "tokenizer.json";
  if (!fs::exists(p))
    throw Error(ErrorKind::Io, "no tokenizer: " + p.string() + " does not exist (give one with --tokenizer)");
  return candle::tokenizers::Tokenizer::from_file(p.string());
}

// The chat template: the GGUF's tokenizer.chat_template, or the folder's tokenizer_config.json.
std::optional<gen::ChatTemplate> load_template(const std::string& model,
                                               const candle::quantized::gguf_file::Content* gguf) {
  if (gguf) {
    if (!gguf->metadata.count("tokenizer.chat_template")) return std::nullopt;
    return gen::ChatTemplate::from_gguf(*gguf);
  }
  const fs::path p = fs::path(model) / "tokenizer_config.json";
  if (!fs::exists(p)) return std::nullopt;
  return gen::ChatTemplate::from_tokenizer_config(p.string());
}

// The model's end-of-sequence ids: the GGUF's tokenizer.ggml.eos_token_id, or config.json's
// (and generation_config.json's) eos_token_id, a number or a list.
std::vector<uint32_t> eos_ids(const std::string& model, const candle::quantized::gguf_file::Content* gguf) {
  std::vector<uint32_t> out;
  if (gguf) {
    auto it = gguf->metadata.find("tokenizer.ggml.eos_token_id");
    if (it != gguf->metadata.end()) {
      try {
        out.push_back(it->second.to_u32());
      } catch (const Error&) {
      }
    }
    return out;
  }
  for (const char* name : {"config.json", "generation_config.json"}) {
    std::ifstream f(fs::path(model) / name);
    if (!f) continue;
    const auto j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("eos_token_id")) continue;
    const auto& e = j["eos_token_id"];
    for (const auto& v : e.is_array() ? e : nlohmann::json::array({e}))
      if (v.is_number_unsigned()) out.push_back(v.get<uint32_t>());
  }
  return out;
}

struct Options {
  std::string model, prompt, system, tokenizer_file, device = "cpu", dtype = "f32", decode = "auto";
  bool chat = false, no_template = false, quiet = false, ignore_eos = false;
  int64_t max_tokens = 256;
  double temperature = 0.8, top_p = 0.95, min_p = 0.05, repeat_penalty = 1.0;
  int64_t top_k = 40, repeat_last_n = 64;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  int64_t threads = 0;
  int64_t tp = 1;
};

// llama.cpp's chain: top-k, then top-p, then min-p (applied to the logits first: a token is kept
// when its probability is at least min-p times the best one's, that is when its logit is within
// temperature * log(1 / min-p) of the largest), then the temperature.
gen::Sampling sampling_of(const Options& o, size_t vocab) {
  if (o.temperature <= 0) return gen::sampling::ArgMax{};
  const size_t k = o.top_k > 0 ? std::min(static_cast<size_t>(o.top_k), vocab) : vocab;
  return gen::sampling::TopKThenTopP{k, o.top_p, o.temperature};
}

void apply_min_p(std::vector<float>& logits, double min_p, double temperature) {
  if (min_p <= 0 || temperature <= 0 || logits.empty()) return;
  const float best = *std::max_element(logits.begin(), logits.end());
  const float floor = best + static_cast<float>(temperature * std::log(min_p));
  for (float& l : logits)
    if (l < floor) l = -std::numeric_limits<float>::infinity();
}

struct Stats {
  size_t prompt_tokens = 0, generated = 0;
  double prompt_s = 0, gen_s = 0, first_token_s = 0;
};

class Session {
 public:
  Session(const Options& o, candle::models::CausalLM& model, const candle::tokenizers::Tokenizer& tok,
          const Device& device, std::vector<uint32_t> eos)
      : o_(o),
        model_(model),
        tok_(tok),
        device_(device),
        lp_(gen::LogitsProcessor::from_sampling(o.seed ? *o.seed : std::random_device{}(),
                                                sampling_of(o, model.vocab_size()))),
        eos_(std::move(eos)) {
    const bool graph = o.decode == "graph" || (o.decode == "auto" && device.records_graphs() && o.tp == 1);
    if (graph) {
      const size_t want = 512 + static_cast<size_t>(std::max<int64_t>(o.max_tokens, 0));
      decode_.emplace(model, device, std::min(want, model.max_seq_len()));
    }
    // the end-of-turn tokens of the common chat formats, where the vocabulary has them
    for (const char* name : {"</s>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "<|im_end|>",
                             "<end_of_turn>", "<|end|>", "<|return|>", "<|end▁of▁sentence|>"})
      if (auto id = tok_.token_to_id(name)) eos_.push_back(*id);
  }

  // Feeds `text` (already templated when chatting) after what the cache holds, then samples until
  // an end token, a stop string, --max-tokens, the context length or Ctrl-C. Returns the answer.
  std::string generate(const std::string& text, bool add_special, Stats& st) {
    const auto enc = tok_.encode(text, add_special);
    std::vector<uint32_t> ids = enc.get_ids();
    if (ids.empty()) throw Error(ErrorKind::InvalidArgument, "the prompt encodes to no tokens");
    if (pos_ + ids.size() >= model_.max_seq_len())
      throw Error(ErrorKind::InvalidArgument, "the prompt (" + std::to_string(ids.size()) +
                                                  " tokens) does not fit the context of " +
                                                  std::to_string(model_.max_seq_len()) + " tokens");
    gen::TokenOutputStream out(tok_);
    gen::StopStrings stops(o_.stop);
    std::string answer;
    const auto t0 = Clock::now();
    Tensor logits = feed(ids);
    history_.insert(history_.end(), ids.begin(), ids.end());
    st.prompt_tokens += ids.size();
    st.prompt_s += seconds_since(t0);
    const auto t1 = Clock::now();
    const int start_interrupts = g_interrupts.load();
    for (int64_t i = 0; i < o_.max_tokens; ++i) {
      std::vector<float> row = logits.to_dtype(DType::F32).to_vec1<float>();
      if (o_.repeat_penalty != 1.0) {
        const size_t n =
            std::min<size_t>(history_.size(), static_cast<size_t>(std::max<int64_t>(0, o_.repeat_last_n)));
        gen::apply_repeat_penalty(std::span<float>(row), static_cast<float>(o_.repeat_penalty),
                                  std::span<const uint32_t>(history_.data() + history_.size() - n, n));
      }
      apply_min_p(row, o_.min_p, o_.temperature);
      const uint32_t next = lp_.sample_f32(row);
      if (i == 0) st.first_token_s += st.prompt_s + seconds_since(t1);
      ++st.generated;
      history_.push_back(next);
      if (!o_.ignore_eos && std::find(eos_.begin(), eos_.end(), next) != eos_.end()) break;
      bool stop_hit = false;
      if (auto piece = out.next_token(next)) stop_hit = emit(stops, *piece, answer);
      if (stop_hit || g_interrupts.load() != start_interrupts || pos_ + 1 >= model_.max_seq_len()) break;
      logits = feed({next});
    }
    if (auto rest = out.decode_rest()) emit(stops, *rest, answer);
    const std::string tail = stops.flush();
    print(tail);
    answer += tail;
    st.gen_s += seconds_since(t1);
    return answer;
  }

  bool graph_decode() const { return decode_.has_value(); }
  void reset() {
    model_.clear_kv_cache();
    if (decode_) decode_->reset();
    pos_ = 0;
    history_.clear();
  }

 private:
  // the next tokens after what the model holds: the last one's logits [vocab]
  Tensor feed(const std::vector<uint32_t>& ids) {
    Tensor logits;
    if (decode_) {
      logits = decode_->feed(ids);
    } else {
      logits = model_.forward(Tensor::from_vec(ids, {1, ids.size()}, device_), pos_).squeeze(0);
    }
    pos_ += ids.size();
    return logits;
  }
  bool emit(gen::StopStrings& stops, const std::string& piece, std::string& answer) {
    auto r = stops.feed(piece);
    print(r.text);
    answer += r.text;
    return r.stopped;
  }
  void print(const std::string& s) {
    if (s.empty()) return;
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
  }

  const Options& o_;
  candle::models::CausalLM& model_;
  const candle::tokenizers::Tokenizer& tok_;
  Device device_;
  gen::LogitsProcessor lp_;
  std::vector<uint32_t> eos_, history_;
  std::optional<candle::models::DecodeSession> decode_;
  size_t pos_ = 0;
};

void print_stats(const Stats& st) {
  std::fprintf(stderr,
               "\n\nprompt: %zu tokens in %.3f s (%.1f tokens/s) | generation: %zu tokens in %.3f s "
               "(%.1f tokens/s) | time to first token %.3f s | peak memory %.0f MiB\n",
               st.prompt_tokens, st.prompt_s, st.prompt_s > 0 ? st.prompt_tokens / st.prompt_s : 0.0,
               st.generated, st.gen_s, st.gen_s > 0 ? st.generated / st.gen_s : 0.0, st.first_token_s,
               peak_rss_mib());
}

// --stop "\n\n": the escapes \n, \t and \\ as in llama.cpp's prompts
std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && (s[i + 1] == 'n' || s[i + 1] == 't' || s[i + 1] == '\\')) {
      out += s[i + 1] == 'n' ? '\n' : s[i + 1] == 't' ? '\t' : '\\';
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

DType parse_dtype(const std::string& s) {
  if (s == "f32") return DType::F32;
  if (s == "f16") return DType::F16;
  if (s == "bf16") return DType::BF16;
  throw Error(ErrorKind::InvalidArgument, "unknown --dtype '" + s.substr(0, 20) + "' (f32, f16, bf16)");
}

// The bundled default: a llama2.c-shaped model trained on the King James Bible by
// examples/llama2-c-training (models/llama2-c-kjv/README.md), or $CANDLE_LLM_MODEL.
std::string default_model() {
  if (const char* env = std::getenv("CANDLE_LLM_MODEL")) return env;
  const fs::path bundled = candle_examples::models_dir() / "llama2-c-kjv" / "model-q8_0.gguf";
  if (fs::exists(bundled)) return bundled.string();
  throw Error(ErrorKind::InvalidArgument,
              "no --model given and the bundled default " + bundled.string() + " was not found");
}

// --tp N: the devices of the N ranks (N CPU ranks, or N CUDA GPUs from the one --device names on)
std::vector<Device> tp_devices(const Device& first, const Options& o) {
  if (o.tp < 1 || o.tp > 64) throw Error(ErrorKind::InvalidArgument, "--tp must be in 1..64");
  if (o.tp == 1) return {first};
  if (o.decode == "graph")
    throw Error(ErrorKind::InvalidArgument, "--decode graph does not run tensor-parallel (--tp): use cache");
  std::vector<Device> devs;
  for (int64_t r = 0; r < o.tp; ++r) {
    if (first.kind() == candle::DeviceKind::Cpu) {
      devs.push_back(first);
    } else if (first.kind() == candle::DeviceKind::Cuda) {
      devs.push_back(Device::cuda(first.ordinal() + static_cast<size_t>(r)));
    } else {
      throw Error(ErrorKind::InvalidArgument, "--tp runs on cpu or cuda devices, not " + first.to_string());
    }
  }
  return devs;
}

int run(const Options& o) {
  if (o.threads > 0) candle::set_num_threads(static_cast<size_t>(o.threads));
  if (!o.prompt.empty() && o.chat)
    throw Error(ErrorKind::InvalidArgument, "--prompt and --chat exclude each other");
  const std::string path = o.model.empty() ? default_model() : o.model;
  if (!fs::exists(path)) throw Error(ErrorKind::Io, "model " + path + " does not exist");
  const Device device = Device::from_name(o.device);
  const DType dtype = parse_dtype(o.dtype);
  const std::vector<Device> devices = tp_devices(device, o);

  const auto t_load = Clock::now();
  std::optional<candle::quantized::gguf_file::Content> gguf;
  if (is_gguf(path)) gguf = candle::quantized::gguf_file::Content::read(path);
  auto model = devices.size() > 1 ? candle::models::load_causal_lm_parallel(path, devices, dtype)
               : gguf             ? candle::models::load_causal_lm(*gguf, device)
                                  : candle::models::load_causal_lm(path, device, dtype);
  const auto tok = load_tokenizer(path, o.tokenizer_file, gguf ? &*gguf : nullptr);
  std::optional<gen::ChatTemplate> tmpl;
  if (!o.no_template) tmpl = load_template(path, gguf ? &*gguf : nullptr);
  if (!o.quiet)
    std::fprintf(stderr, "candle-llm: %s (%s, vocab %zu, context %zu) loaded in %.2f s on %s%s\n",
                 path.c_str(), model->architecture().c_str(), model->vocab_size(), model->max_seq_len(),
                 seconds_since(t_load), o.device.c_str(),
                 devices.size() > 1
                     ? (", tensor-parallel over " + std::to_string(devices.size()) + " ranks").c_str()
                     : "");

  std::signal(SIGINT, on_sigint);
  Session session(o, *model, tok, device, eos_ids(path, gguf ? &*gguf : nullptr));
  if (!o.quiet)
    std::fprintf(stderr, "candle-llm: decode: %s\n",
                 session.graph_decode()
                     ? (device.records_graphs() ? "graph (each step recorded once, replayed)"
                                                : "graph (the step run eagerly: this device "
                                                  "records no graphs)")
                     : "cache (forward with a KV cache)");
  Stats st;
  gen::ChatTemplateOptions topt;
  topt.add_generation_prompt = true;

  if (!o.chat) {
    const std::string prompt = o.prompt.empty() ? std::string("In the beginning") : o.prompt;
    if (!o.quiet) std::fwrite(prompt.data(), 1, prompt.size(), stdout);
    session.generate(prompt, true, st);
    if (!o.quiet) print_stats(st);
    return 0;
  }
  // --chat: the whole conversation is re-rendered by the template each turn; what the cache already
  // holds is the rendered prefix, so only the new text is fed (re-feeding everything when a template
  // rewrites earlier turns).
  std::vector<gen::ChatMessage> messages;
  if (!o.system.empty()) messages.push_back({"system", o.system});
  std::string fed;
  std::fprintf(stderr, "chat mode: an empty line or Ctrl-D ends; Ctrl-C stops an answer\n");
  for (;;) {
    std::fprintf(stderr, "\n> ");
    std::string line;
    g_interrupts.store(0);
    if (!std::getline(std::cin, line) || line.empty()) break;
    messages.push_back({"user", line});
    std::string rendered;
    if (tmpl) {
      rendered = tmpl->apply(messages, topt);
    } else {
      rendered = fed + line + "\n";
    }
    std::string delta;
    bool add_special = false;
    if (rendered.starts_with(fed)) {
      delta = rendered.substr(fed.size());
    } else {
      session.reset();
      delta = rendered;
    }
    // a template renders the BOS text itself: encode without adding it again
    add_special = !tmpl && fed.empty();
    const std::string answer = session.generate(delta, add_special, st);
    messages.push_back({"assistant", answer});
    fed = tmpl ? tmpl->apply(messages,
                             [&] {
                               auto t = topt;
                               t.add_generation_prompt = false;
                               return t;
                             }())
               : rendered + answer;
  }
  if (!o.quiet) print_stats(st);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"candle-llm: generate text with a language model (GGUF, or config.json + safetensors)"};
  Options o;
  uint64_t seed = 0;
  app.add_option("--model,-m", o.model,
                 "a .gguf file or a folder with config.json, tokenizer.json and safetensors");
  app.add_option("--prompt,-p", o.prompt, "text to continue (default: \"In the beginning\")");
  app.add_flag("--chat", o.chat, "an interactive conversation through the model's chat template");
  app.add_option("--system", o.system, "the system message of --chat");
  app.add_option("--max-tokens,-n", o.max_tokens, "tokens to generate at most (default 256)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--temperature", o.temperature, "sampling temperature; 0 = greedy (default 0.8)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--top-k", o.top_k, "keep the K most likely tokens; 0 = all (default 40)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--top-p", o.top_p, "nucleus sampling mass; 1 = off (default 0.95)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--min-p", o.min_p,
                 "drop tokens below P x the best one's probability; 0 = off (default 0.05)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--repeat-penalty", o.repeat_penalty, "penalty of recent tokens; 1 = off (default 1.0)")
      ->check(CLI::PositiveNumber);
  app.add_option("--repeat-last-n", o.repeat_last_n, "how many recent tokens the penalty sees (default 64)")
      ->check(CLI::NonNegativeNumber);
  auto* seed_opt = app.add_option("--seed", seed, "sampling seed (default: random)");
  app.add_option("--stop", o.stop,
                 "stop when the text contains this string (repeatable; \\n and \\t are escapes)");
  app.add_option("--threads,-t", o.threads, "CPU threads (default: CANDLE_NUM_THREADS or all cores)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--device", o.device, "cpu (default), auto, cuda, cuda:N, vulkan, vulkan:N");
  app.add_option("--dtype", o.dtype, "weights of a safetensors model: f32 (default), f16, bf16");
  app.add_option(
      "--tp", o.tp,
      "tensor parallelism over N ranks, one thread each: N CUDA GPUs from --device's on (NCCL), or "
      "N CPU ranks (default 1)");
  app.add_option("--tokenizer", o.tokenizer_file, "a tokenizer.json instead of the model's own");
  app.add_flag("--no-template", o.no_template, "--chat without the model's chat template (plain text turns)");
  app.add_flag("--quiet,-q", o.quiet, "print only the generated text");
  app.add_flag("--ignore-eos", o.ignore_eos,
               "go on past end-of-sequence tokens (for timing, as llama.cpp's)");
  app.add_option("--decode", o.decode,
                 "auto (default: graph where the device records graphs, i.e. CUDA), graph (each token's "
                 "step recorded once and replayed), cache (forward with a KV cache)")
      ->check(CLI::IsMember({"auto", "graph", "cache"}));
  CLI11_PARSE(app, argc, argv);
  if (*seed_opt) o.seed = seed;
  for (auto& s : o.stop) s = unescape(s);
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "\ncandle-llm: error: %s\n", e.what());
    return 1;
  }
}
