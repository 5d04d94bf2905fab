// GGUF tokenizers (tokenizer.ggml.*): Tokenizer::from_gguf's pipeline and the metadata a converter
// writes for a tokenizer.json. Both sides go through one table of byte-level BPE families, so what
// gguf_tokenizer_metadata writes, from_gguf rebuilds into the same tokenizer.json pipeline.
#include "candle/tokenizers/gguf.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include "candle/io/json_limits.h"
#include "internal.h"

namespace candle::tokenizers {

using namespace detail;
namespace gf = quantized::gguf_file;

namespace {

constexpr const char* kModel = "tokenizer.ggml.model";
constexpr const char* kPre = "tokenizer.ggml.pre";
constexpr const char* kTokens = "tokenizer.ggml.tokens";
constexpr const char* kScores = "tokenizer.ggml.scores";
constexpr const char* kTypes = "tokenizer.ggml.token_type";
constexpr const char* kMerges = "tokenizer.ggml.merges";
constexpr const char* kBos = "tokenizer.ggml.bos_token_id";
constexpr const char* kEos = "tokenizer.ggml.eos_token_id";
constexpr const char* kUnk = "tokenizer.ggml.unknown_token_id";
constexpr const char* kPad = "tokenizer.ggml.padding_token_id";
constexpr const char* kAddBos = "tokenizer.ggml.add_bos_token";
constexpr const char* kAddEos = "tokenizer.ggml.add_eos_token";
constexpr const char* kAddSpacePrefix = "tokenizer.ggml.add_space_prefix";
constexpr const char* kChatTemplate = "tokenizer.chat_template";

// llama.cpp's token types
enum TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// A byte-level BPE family: its tokenizer.ggml.pre name and the pipeline of its tokenizer.json (the
// post-processor without the BOS / EOS template, which the GGUF flags add).
struct Family {
  const char* pre;
  const char* normalizer;
  const char* pre_tokenizer;
  const char* post_processor;
  const char* decoder;
  bool ignore_merges;
};

const Family kFamilies[] = {
    // gpt2
    {"gpt-2", R"json(null)json",
     R"json({"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true})json",
     R"json({"type":"ByteLevel","add_prefix_space":true,"trim_offsets":false,"use_regex":true})json",
     R"json({"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true})json", false},
    // llama3, llama3_1
    {"llama-bpe", R"json(null)json",
     R"json({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}]})json",
     R"json({"type":"ByteLevel","add_prefix_space":true,"trim_offsets":false,"use_regex":true})json",
     R"json({"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true})json", true},
    // qwen3
    {"qwen2", R"json({"type":"NFC"})json",
     R"json({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":false}]})json",
     R"json({"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":false})json",
     R"json({"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":false})json",
     false},
    // deepseek_v3
    {"deepseek-v3", R"json(null)json",
     R"json({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"\\p{N}{1,3}"},"behavior":"Isolated","invert":false},{"type":"Split","pattern":{"Regex":"[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"},"behavior":"Isolated","invert":false},{"type":"Split","pattern":{"Regex":"[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}]})json",
     R"json({"type":"ByteLevel","add_prefix_space":true,"trim_offsets":false,"use_regex":true})json",
     R"json({"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true})json", false},
    // gptoss
    {"gpt-4o", R"json(null)json",
     R"json({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}]})json",
     R"json({"type":"ByteLevel","add_prefix_space":true,"trim_offsets":false,"use_regex":true})json",
     R"json({"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true})json", true},
};

const Family* family_named(std::string_view pre) {
  for (const Family& f : kFamilies)
    if (pre == f.pre) return &f;
  return nullptr;
}

const char* kWordStart = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// the SentencePiece pipeline: normalizer (Prepend U+2581 when add_space_prefix, spaces to U+2581)
// and decoder (U+2581 to spaces, <0xXX> to bytes, the prefix space stripped)
json spm_normalizer(bool add_space_prefix) {
  json replace = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kWordStart}};
  if (!add_space_prefix) return replace;
  return {{"type", "Sequence"},
          {"normalizers", json::array({json{{"type", "Prepend"}, {"prepend", kWordStart}}, replace})}};
}

json spm_decoder(bool add_space_prefix) {
  json items =
      json::array({json{{"type", "Replace"}, {"pattern", {{"String", kWordStart}}}, {"content", " "}},
                   json{{"type", "ByteFallback"}}, json{{"type", "Fuse"}}});
  if (add_space_prefix) items.push_back(json{{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  return {{"type", "Sequence"}, {"decoders", items}};
}

// gemma's pre-tokenizer: a split on spaces, which the normalizer has already replaced (a no-op)
const json& spm_space_split() {
  static const json j = json::parse(
      R"({"type":"Split","pattern":{"String":" "},"behavior":"MergedWithPrevious","invert":false})");
  return j;
}

bool is_byte_token(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return false;
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  return hex(t[3]) && hex(t[4]);
}

// ---- reading ------------------------------------------------------------------------------------

[[noreturn]] void bad_key(const std::string& key, const std::string& what) {
  throw Error(ErrorKind::Parse, "GGUF tokenizer: " + key + " " + what);
}

std::string type_str(gf::ValueType t) { return std::string(gf::value_type_name(t)); }

const gf::Value* find_typed(const gf::Content& c, const char* key, gf::ValueType t) {
  const gf::Value* v = c.find(key);
  if (v && v->value_type() != t)
    bad_key(key, "has type " + type_str(v->value_type()) + ", not " + type_str(t));
  return v;
}

// The array at `key` of elements of type `elem` and, unless n is npos, of n elements.
const std::vector<gf::Value>* find_array(const gf::Content& c, const char* key, gf::ValueType elem,
                                         size_t n = std::string::npos) {
  const gf::Value* v = find_typed(c, key, gf::ValueType::Array);
  if (!v) return nullptr;
  if (v->array_type() != elem)
    bad_key(key, "is an array of " + type_str(v->array_type()) + ", not of " + type_str(elem));
  const auto& items = v->to_vec();
  if (n != std::string::npos && items.size() != n)
    bad_key(key, "has " + std::to_string(items.size()) + " entries where " + kTokens + " has " +
                     std::to_string(n));
  return &items;
}

// A token id: any integer type, within [0, n).
std::optional<uint32_t> find_id(const gf::Content& c, const char* key, size_t n) {
  const gf::Value* v = c.find(key);
  if (!v) return std::nullopt;
  int64_t id = -1;
  bool big = false;
  switch (v->value_type()) {
    case gf::ValueType::U8: id = v->to_u8(); break;
    case gf::ValueType::U16: id = v->to_u16(); break;
    case gf::ValueType::U32: id = v->to_u32(); break;
    case gf::ValueType::U64:
      big = v->to_u64() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
      id = big ? -1 : static_cast<int64_t>(v->to_u64());
      break;
    case gf::ValueType::I8: {  // through its byte (clang-tidy's signed-char check)
      const auto u = static_cast<uint8_t>(v->to_i8());
      id = u < 128 ? int64_t{u} : int64_t{u} - 256;
      break;
    }
    case gf::ValueType::I16: id = v->to_i16(); break;
    case gf::ValueType::I32: id = v->to_i32(); break;
    case gf::ValueType::I64: id = v->to_i64(); break;
    default: bad_key(key, "has type " + type_str(v->value_type()) + ", not an integer type");
  }
  if (big || id < 0 || static_cast<uint64_t>(id) >= n)
    bad_key(key, "is " + (big ? std::string("above 2^63") : std::to_string(id)) +
                     ", not a token id (there are " + std::to_string(n) + " tokens)");
  return static_cast<uint32_t>(id);
}

std::optional<bool> find_bool(const gf::Content& c, const char* key) {
  const gf::Value* v = find_typed(c, key, gf::ValueType::Bool);
  if (!v) return std::nullopt;
  return v->to_bool();
}

// A TemplateProcessing that puts BOS before and EOS after the sequence (each when given).
json bos_eos_template(std::optional<uint32_t> bos, std::optional<uint32_t> eos,
                      const std::vector<std::string>& tokens) {
  json single = json::array(), specials = json::object();
  auto special = [&](uint32_t id) {
    const std::string& name = tokens[id];
    specials[name] = {{"id", name}, {"ids", json::array({id})}, {"tokens", json::array({name})}};
    single.push_back({{"SpecialToken", {{"id", name}, {"type_id", 0}}}});
  };
  if (bos) special(*bos);
  single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  if (eos) special(*eos);
  return {{"type", "TemplateProcessing"}, {"single", single}, {"special_tokens", specials}};
}

}  // namespace

std::vector<std::string> gguf_pre_tokenizer_names() {
  std::vector<std::string> out;
  for (const Family& f : kFamilies) out.emplace_back(f.pre);
  return out;
}

GgufPipeline detail::gguf_pipeline(const gf::Content& c) {
  const gf::Value* mv = find_typed(c, kModel, gf::ValueType::String);
  if (!mv) bad_key(kModel, "is missing (the file carries no tokenizer)");
  const std::string& model = mv->to_string();
  const bool spm = model == "llama";
  if (!spm && model != "gpt2")
    throw Error(ErrorKind::UnsupportedOp, "GGUF tokenizer: " + std::string(kModel) + " '" + excerpt(model) +
                                              "' is not supported (llama, gpt2)");
  const Family* family = nullptr;
  if (!spm) {
    const gf::Value* pv = find_typed(c, kPre, gf::ValueType::String);
    if (!pv)
      throw Error(ErrorKind::UnsupportedOp, "GGUF tokenizer: " + std::string(kPre) +
                                                " is missing (llama.cpp's 'default' pre-tokenizer is not "
                                                "supported)");
    family = family_named(pv->to_string());
    if (!family) {
      std::string known;
      for (const Family& f : kFamilies) known += (known.empty() ? "" : ", ") + std::string(f.pre);
      throw Error(ErrorKind::UnsupportedOp, "GGUF tokenizer: " + std::string(kPre) + " '" +
                                                excerpt(pv->to_string()) + "' is not supported (" + known +
                                                ")");
    }
  }

  const auto* tok_values = find_array(c, kTokens, gf::ValueType::String);
  if (!tok_values) bad_key(kTokens, "is missing");
  const size_t n = tok_values->size();
  if (n == 0) bad_key(kTokens, "is empty");
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    bad_key(kTokens, "has more than 2^31 tokens");
  std::vector<std::string> tokens;
  tokens.reserve(n);
  for (const gf::Value& v : *tok_values) tokens.push_back(v.to_string());

  std::vector<int32_t> types(n, kNormal);
  if (const auto* tv = find_array(c, kTypes, gf::ValueType::I32, n))
    for (size_t i = 0; i < n; ++i) {
      const int32_t t = (*tv)[i].to_i32();
      if (t < kUndefined || t > kByte)
        bad_key(kTypes,
                "entry " + std::to_string(i) + " is " + std::to_string(t) + ", not a token type (0..6)");
      types[i] = t;
    }
  std::vector<float> scores;
  if (const auto* sv = find_array(c, kScores, gf::ValueType::F32, n)) {
    scores.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      scores.push_back((*sv)[i].to_f32());
      if (!std::isfinite(scores.back())) bad_key(kScores, "entry " + std::to_string(i) + " is not finite");
    }
  }
  std::vector<std::pair<std::string, std::string>> merges;
  if (const auto* mv2 = find_array(c, kMerges, gf::ValueType::String)) {
    merges.reserve(mv2->size());
    for (size_t i = 0; i < mv2->size(); ++i) {
      const std::string& s = (*mv2)[i].to_string();
      // the separator is the first space after the first byte (a token may start with a space)
      const size_t sp = s.size() > 1 ? s.find(' ', 1) : std::string::npos;
      if (sp == std::string::npos || sp + 1 == s.size())
        bad_key(kMerges, "entry " + std::to_string(i) + " '" + excerpt(s) + "' is not 'a b'");
      merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    }
  } else if (!spm) {
    bad_key(kMerges, "is missing (a gpt2 tokenizer needs its merges)");
  }
  const auto bos = find_id(c, kBos, n), eos = find_id(c, kEos, n);
  auto unk = find_id(c, kUnk, n);
  (void)find_id(c, kPad, n);
  const auto add_bos_flag = find_bool(c, kAddBos), add_eos_flag = find_bool(c, kAddEos);
  const bool add_space_prefix = find_bool(c, kAddSpacePrefix).value_or(true);
  (void)find_typed(c, kChatTemplate, gf::ValueType::String);
  // llama.cpp's defaults: a SentencePiece vocabulary adds BOS, a byte-level one nothing
  const bool add_bos = add_bos_flag.value_or(spm && bos), add_eos = add_eos_flag.value_or(false);
  if (add_bos && !bos) bad_key(kAddBos, "is true but " + std::string(kBos) + " is missing");
  if (add_eos && !eos) bad_key(kAddEos, "is true but " + std::string(kEos) + " is missing");

  GgufPipeline p;
  json& doc = p.doc;
  doc = json::object();
  json post;
  if (spm) {
    if (!unk)
      for (size_t i = 0; i < n && !unk; ++i)
        if (types[i] == kUnknown) unk = static_cast<uint32_t>(i);
    if (scores.empty()) scores.assign(n, 0.f);
    std::vector<bool> mergeable(n);
    for (size_t i = 0; i < n; ++i)
      mergeable[i] =
          types[i] == kNormal || types[i] == kUserDefined || types[i] == kUnused || types[i] == kUndefined;
    p.model = make_gguf_spm(tokens, scores, mergeable, unk);
    doc["normalizer"] = spm_normalizer(add_space_prefix);
    doc["decoder"] = spm_decoder(add_space_prefix);
  } else {
    p.model = make_gguf_bpe(tokens, merges, family->ignore_merges, kMerges);
    doc["normalizer"] = json::parse(family->normalizer);
    doc["pre_tokenizer"] = json::parse(family->pre_tokenizer);
    post = json::parse(family->post_processor);
    doc["decoder"] = json::parse(family->decoder);
  }
  if (add_bos || add_eos) {
    json tpl = bos_eos_template(add_bos ? bos : std::nullopt, add_eos ? eos : std::nullopt, tokens);
    post = post.is_null() ? tpl : json{{"type", "Sequence"}, {"processors", json::array({post, tpl})}};
  }
  doc["post_processor"] = post;
  // control and user-defined tokens are the added tokens (matched in the raw text); control and
  // unknown ones are special (skipped by decode(skip_special_tokens)). One that is empty or not
  // valid UTF-8 stays a plain vocabulary token: matched in text it would split a character.
  json added = json::array();
  for (size_t i = 0; i < n; ++i) {
    const int32_t t = types[i];
    if ((t != kControl && t != kUserDefined && t != kUnknown) || tokens[i].empty() ||
        utf8_first_invalid(tokens[i]) != std::string::npos)
      continue;
    added.push_back(
        {{"id", i}, {"content", tokens[i]}, {"special", t != kUserDefined}, {"normalized", false}});
  }
  doc["added_tokens"] = std::move(added);
  return p;
}

// ---- writing ------------------------------------------------------------------------------------
namespace {

[[noreturn]] void unsupported(const std::string& what) {
  throw Error(ErrorKind::UnsupportedOp, "GGUF tokenizer metadata: " + what);
}

[[noreturn]] void bad_config(const std::string& what) {
  throw Error(ErrorKind::Parse, "tokenizer_config.json: " + what);
}

json parse_doc(std::string_view text, const char* what) {
  io::check_json_depth(text, 64, what);
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    throw Error(ErrorKind::Parse, std::string(what) + ": not valid JSON: " + excerpt(e.what(), 200));
  }
}

// null for an empty Sequence normalizer (it does nothing)
json canonical_normalizer(const json& j) {
  if (j.is_object() && j.value("type", "") == "Sequence" && j.contains("normalizers") &&
      j["normalizers"].is_array() && j["normalizers"].empty())
    return nullptr;
  return j;
}

// The tokenizer_config.json token name at key: a string or an AddedToken object; nullopt if absent.
std::optional<std::string> config_token(const json& conf, const char* key) {
  if (!conf.is_object() || !conf.contains(key) || conf[key].is_null()) return std::nullopt;
  const json& v = conf[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  bad_config(std::string(key) + " is neither a string nor a token object");
}

// The BOS / EOS ids a TemplateProcessing's single template puts around $A (in a Sequence too).
void template_bos_eos(const json& post, std::optional<uint32_t>& bos, std::optional<uint32_t>& eos) {
  if (!post.is_object()) return;
  const std::string type = post.value("type", "");
  if (type == "Sequence" && post.contains("processors") && post["processors"].is_array()) {
    for (const json& p : post["processors"]) template_bos_eos(p, bos, eos);
    return;
  }
  if (type != "TemplateProcessing") return;
  const json& single = field(post, "single", "post_processor");
  const json& specials = field(post, "special_tokens", "post_processor");
  if (!single.is_array() || !specials.is_object()) bad("post_processor TemplateProcessing is malformed");
  bool seen_a = false;
  for (const json& piece : single) {
    if (piece.is_object() && piece.contains("Sequence")) {
      if (seen_a) unsupported("a template with two sequences");
      seen_a = true;
      continue;
    }
    if (!piece.is_object() || !piece.contains("SpecialToken"))
      bad("post_processor TemplateProcessing: a piece is neither SpecialToken nor Sequence");
    const std::string name =
        get_string(piece["SpecialToken"], "id", "TemplateProcessing SpecialToken", {}, true);
    const json& s = field(specials, name.c_str(), "post_processor special_tokens");
    const json& ids = field(s, "ids", "post_processor special token");
    if (!ids.is_array() || ids.size() != 1)
      unsupported("the template's special token '" + excerpt(name) + "' is not one id");
    auto& slot = seen_a ? eos : bos;
    if (slot)
      unsupported("the template adds more than one token " + std::string(seen_a ? "after" : "before") +
                  " the sequence");
    slot = get_u32(ids[0], "post_processor special token id");
  }
}

std::vector<std::pair<std::string, std::string>> read_merges(const json& m) {
  const json& merges = field(m, "merges", "model BPE");
  if (!merges.is_array()) bad("model BPE: 'merges' is not an array");
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(merges.size());
  for (const json& mj : merges) {
    if (mj.is_string()) {
      const std::string& s = mj.get_ref<const std::string&>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        bad("model BPE: merge " + std::to_string(out.size()) + " '" + excerpt(s) + "' is not 'a b'");
      out.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else if (mj.is_array() && mj.size() == 2 && mj[0].is_string() && mj[1].is_string()) {
      out.emplace_back(mj[0].get<std::string>(), mj[1].get<std::string>());
    } else {
      bad("model BPE: merge " + std::to_string(out.size()) + " is neither 'a b' nor [a, b]");
    }
  }
  return out;
}

gf::Value string_array(std::vector<std::string> items) {
  std::vector<gf::Value> v;
  v.reserve(items.size());
  for (auto& s : items) v.emplace_back(std::move(s));
  return gf::Value::array(gf::ValueType::String, std::move(v));
}

}  // namespace

gf::MetadataList gguf_tokenizer_metadata(std::string_view tokenizer_json, std::string_view tokenizer_config) {
  const json j = parse_doc(tokenizer_json, "tokenizer.json");
  const json conf = tokenizer_config.empty() ? json() : parse_doc(tokenizer_config, "tokenizer_config.json");
  if (!j.is_object()) bad("the top level is not an object");
  if (!conf.is_null() && !conf.is_object()) bad_config("the top level is not an object");
  const json& m = field(j, "model", "tokenizer.json");
  if (!m.is_object()) bad("model is not an object");
  const std::string mtype = get_string(m, "type", "model", m.contains("merges") ? "BPE" : "");
  if (mtype != "BPE") unsupported("model type '" + excerpt(mtype) + "' has no GGUF form here (BPE only)");
  auto opt = [&](const char* k) -> json {
    auto it = j.find(k);
    return it == j.end() ? json() : *it;
  };
  const json normalizer = canonical_normalizer(opt("normalizer")), pre = opt("pre_tokenizer");
  const bool byte_fallback = get_bool(m, "byte_fallback", "model BPE", false);
  const bool ignore_merges = get_bool(m, "ignore_merges", "model BPE", false);
  if (!get_string(m, "continuing_subword_prefix", "model BPE").empty() ||
      !get_string(m, "end_of_word_suffix", "model BPE").empty())
    unsupported("a BPE with a continuing_subword_prefix or end_of_word_suffix has no GGUF form");

  // the family: SentencePiece ("llama") or one of the byte-level pre-tokenizers ("gpt2")
  std::optional<bool> spm_prefix;
  for (bool prefix : {true, false})
    if (normalizer == spm_normalizer(prefix) && (pre.is_null() || pre == spm_space_split()))
      spm_prefix = prefix;
  const Family* family = nullptr;
  if (spm_prefix) {
    if (!byte_fallback || ignore_merges)
      unsupported("a SentencePiece BPE without byte_fallback or with ignore_merges");
    if (opt("decoder") != spm_decoder(*spm_prefix))
      unsupported("a SentencePiece BPE whose decoder is not Replace, ByteFallback, Fuse" +
                  std::string(*spm_prefix ? ", Strip" : ""));
  } else {
    for (const Family& f : kFamilies)
      if (normalizer == canonical_normalizer(json::parse(f.normalizer)) &&
          pre == json::parse(f.pre_tokenizer))
        family = &f;
    if (!family)
      unsupported("the normalizer and pre_tokenizer are none of the GGUF pre-tokenizers known here (" +
                  excerpt(pre.dump(), 80) + ")");
    if (byte_fallback || family->ignore_merges != ignore_merges)
      unsupported("the model's byte_fallback / ignore_merges differ from those of tokenizer.ggml.pre '" +
                  std::string(family->pre) + "'");
  }

  // tokens: the vocabulary and the added tokens, by id (holes are unused [PAD<id>] tokens)
  const json& vocab = field(m, "vocab", "model BPE");
  if (!vocab.is_object()) bad("model BPE: 'vocab' is not an object");
  const json added = opt("added_tokens").is_null() ? json::array() : opt("added_tokens");
  if (!added.is_array()) bad("'added_tokens' is not an array");
  uint64_t max_id = 0;
  for (auto it = vocab.begin(); it != vocab.end(); ++it)
    max_id = std::max<uint64_t>(max_id, get_u32(it.value(), "model BPE vocab"));
  for (const json& a : added)
    max_id = std::max<uint64_t>(max_id, get_u32(field(a, "id", "added_tokens entry"), "added_tokens id"));
  if (max_id >= 2 * (vocab.size() + added.size()) + 1024)
    bad("token ids are sparse (up to " + std::to_string(max_id) + " for " +
        std::to_string(vocab.size() + added.size()) + " tokens)");
  const size_t n = static_cast<size_t>(max_id) + 1;
  std::vector<std::string> tokens(n);
  std::vector<int32_t> types(n, -1);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const uint32_t id = get_u32(it.value(), "model BPE vocab");
    if (types[id] >= 0) bad("model BPE: id " + std::to_string(id) + " given twice");
    tokens[id] = it.key();
    types[id] = spm_prefix && is_byte_token(it.key()) ? kByte : kNormal;
  }
  const std::optional<std::string> unk_name = get_opt_string(m, "unk_token", "model BPE");
  std::optional<uint32_t> unk;
  for (const json& a : added) {
    const uint32_t id = get_u32(field(a, "id", "added_tokens entry"), "added_tokens id");
    const std::string content = get_string(a, "content", "added_tokens entry", {}, true);
    if (types[id] >= 0 && tokens[id] != content)
      bad("added token " + std::to_string(id) + " '" + excerpt(content) + "' has the id of '" +
          excerpt(tokens[id]) + "'");
    tokens[id] = content;
    types[id] = get_bool(a, "special", "added_tokens entry", false) ? kControl : kUserDefined;
  }
  for (size_t i = 0; i < n; ++i)
    if (types[i] < 0) {
      tokens[i] = "[PAD" + std::to_string(i) + "]";
      types[i] = kUnused;
    }
  std::unordered_map<std::string, uint32_t> by_text;
  for (size_t i = 0; i < n; ++i) by_text.insert_or_assign(tokens[i], static_cast<uint32_t>(i));
  auto id_of = [&](const std::string& t, const char* what, bool config) {
    auto it = by_text.find(t);
    if (it == by_text.end()) {
      const std::string msg = std::string(what) + " '" + excerpt(t) + "' is not a token";
      if (config) bad_config(msg);
      bad(msg);
    }
    return it->second;
  };
  if (unk_name) {
    unk = id_of(*unk_name, "model BPE: unk_token", false);
    types[*unk] = kUnknown;
  }

  const auto merges = read_merges(m);
  std::vector<float> scores;
  if (spm_prefix) {
    // a token's score: minus the rank of the first merge that makes it; tokens no merge makes
    // (characters, bytes, special tokens) never merge, their score does not matter
    scores.assign(n, 0.f);
    std::vector<bool> scored(n);
    const float kLowest = -static_cast<float>(merges.size() + 1);
    for (size_t i = 0; i < n; ++i)
      if (types[i] == kNormal || types[i] == kUserDefined || types[i] == kUnused) scores[i] = kLowest;
    for (size_t r = 0; r < merges.size(); ++r) {
      auto it = by_text.find(merges[r].first + merges[r].second);
      if (it == by_text.end())
        bad("model BPE: merge " + std::to_string(r) + " makes a token missing from the vocabulary");
      if (!scored[it->second]) scores[it->second] = -static_cast<float>(r), scored[it->second] = true;
    }
    if (merges.size() >= (1u << 24))
      unsupported("more than 2^24 merges (their ranks are not exact as f32 scores)");
  }

  std::optional<uint32_t> bos, eos, pad;
  template_bos_eos(opt("post_processor"), bos, eos);
  bool add_bos = bos.has_value(), add_eos = eos.has_value();
  if (auto b = config_token(conf, "bos_token")) bos = id_of(*b, "bos_token", true);
  if (auto e = config_token(conf, "eos_token")) eos = id_of(*e, "eos_token", true);
  if (auto p = config_token(conf, "pad_token")) pad = id_of(*p, "pad_token", true);
  // transformers rebuilds the template from these flags when it loads the tokenizer
  auto config_flag = [&](const char* key, bool& flag) {
    if (!conf.is_object() || !conf.contains(key) || conf[key].is_null()) return;
    if (!conf[key].is_boolean()) bad_config(std::string(key) + " is not a boolean");
    flag = conf[key].get<bool>();
  };
  config_flag("add_bos_token", add_bos);
  config_flag("add_eos_token", add_eos);
  if (add_bos && !bos) bad_config("add_bos_token is true but there is no bos_token");
  if (add_eos && !eos) bad_config("add_eos_token is true but there is no eos_token");
  std::optional<std::string> chat_template;
  if (conf.is_object() && conf.contains("chat_template")) {
    const json& t = conf["chat_template"];
    if (t.is_string()) {
      chat_template = t.get<std::string>();
    } else if (t.is_array()) {  // named templates: the "default" one
      for (const json& e : t)
        if (e.is_object() && e.value("name", "") == "default" && e.contains("template") &&
            e["template"].is_string())
          chat_template = e["template"].get<std::string>();
    } else if (!t.is_null()) {
      bad_config("chat_template is neither a string nor a list of named templates");
    }
  }

  gf::MetadataList md;
  md.emplace_back(kModel, spm_prefix ? "llama" : "gpt2");
  if (family) md.emplace_back(kPre, family->pre);
  md.emplace_back(kTokens, string_array(tokens));
  if (spm_prefix) {
    std::vector<gf::Value> sv(scores.begin(), scores.end());
    md.emplace_back(kScores, gf::Value::array(gf::ValueType::F32, std::move(sv)));
  }
  std::vector<gf::Value> tv(types.begin(), types.end());
  md.emplace_back(kTypes, gf::Value::array(gf::ValueType::I32, std::move(tv)));
  if (!spm_prefix) {
    std::vector<std::string> ms;
    ms.reserve(merges.size());
    for (const auto& [a, b] : merges) {
      // read back as "a b" split at the first space after a's first byte
      if (a.empty() || b.empty() || a.find(' ', 1) != std::string::npos)
        unsupported("merge '" + excerpt(a) + "' + '" + excerpt(b) + "' cannot be written as 'a b'");
      ms.push_back(a + " " + b);
    }
    md.emplace_back(kMerges, string_array(std::move(ms)));
  }
  if (bos) md.emplace_back(kBos, *bos);
  if (eos) md.emplace_back(kEos, *eos);
  if (unk) md.emplace_back(kUnk, *unk);
  if (pad) md.emplace_back(kPad, *pad);
  md.emplace_back(kAddBos, add_bos);
  md.emplace_back(kAddEos, add_eos);
  if (spm_prefix) md.emplace_back(kAddSpacePrefix, *spm_prefix);
  if (chat_template) md.emplace_back(kChatTemplate, *chat_template);
  return md;
}

namespace {
std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(ErrorKind::Io, "tokenizers: cannot open '" + excerpt(path, 200) + "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) throw Error(ErrorKind::Io, "tokenizers: cannot read '" + excerpt(path, 200) + "'");
  return ss.str();
}
}  // namespace

gf::MetadataList gguf_tokenizer_metadata_from_file(const std::string& tokenizer_json_path,
                                                   const std::string& config_path) {
  const std::string tj = read_text(tokenizer_json_path);
  const std::string cj = config_path.empty() ? std::string() : read_text(config_path);
  return with_context("converting " + excerpt(tokenizer_json_path, 200),
                      [&] { return gguf_tokenizer_metadata(tj, cj); });
}

}  // namespace candle::tokenizers
