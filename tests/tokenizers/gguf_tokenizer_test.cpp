// The tokenizers GGUF files carry (tokenizer.ggml.*): each real tokenizer.json -> gguf_tokenizer_metadata
// -> a GGUF file (no tensors) -> Content::read -> Tokenizer::from_gguf gives the ids of the tokenizer.json
// and of Hugging Face (tests/data/tokenizers/expected_*.json), and those of llama.cpp on the same file
// (expected_llamacpp_*.json, tools/gguf_tokenizer_reference.py) where llama.cpp agrees with Hugging Face.
// Then hand-made vocabularies with known ids, and hostile metadata.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "candle/error.h"
#include "candle/quantized/gguf_file.h"
#include "candle/tokenizers/gguf.h"
#include "candle/tokenizers/tokenizer.h"

namespace {

using candle::Error;
using candle::ErrorKind;
using candle::tokenizers::Tokenizer;
using nlohmann::json;
namespace gf = candle::quantized::gguf_file;
namespace fs = std::filesystem;

const fs::path kData = fs::path(CANDLE_TEST_DATA_DIR) / "tokenizers";
const fs::path kRoot = fs::path(CANDLE_TEST_DATA_DIR).parent_path().parent_path();

json read_json(const fs::path& p) {
  std::ifstream f(p);
  return json::parse(f);
}

gf::Content content_of(const gf::MetadataList& md) {
  std::ostringstream os;
  gf::write(os, md, {});
  const std::string s = os.str();
  return gf::Content::read_buffer(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
}

const gf::Value* find(const gf::MetadataList& md, const std::string& key) {
  for (const auto& [k, v] : md)
    if (k == key) return &v;
  return nullptr;
}

// A family's tokenizer.json, and the tokenizer from_gguf reads from the GGUF file written for it
// (through a file on disk, as a converter's output would be), built once per family.
struct Loaded {
  fs::path path;
  std::optional<Tokenizer> json_tok, gguf_tok;
  gf::MetadataList md;
};

Loaded& load(const std::string& family) {
  static std::map<std::string, Loaded> cache;
  auto it = cache.find(family);
  if (it != cache.end()) return it->second;
  Loaded& l = cache[family];
  const json expected = read_json(kData / ("expected_" + family + ".json"));
  l.path = kRoot / expected["tokenizer"].get<std::string>();
  if (!fs::exists(l.path)) return l;
  l.json_tok = Tokenizer::from_file(l.path.string());
  l.md = candle::tokenizers::gguf_tokenizer_metadata_from_file(l.path.string());
  // a name of its own: ctest runs the tests of one family in parallel processes
  const fs::path file = fs::temp_directory_path() / ("candle_gguf_tok_" + family + "_" +
                                                     std::to_string(std::random_device{}()) + ".gguf");
  gf::write(file.string(), l.md, {});
  const gf::Content c = gf::Content::read(file.string());
  l.gguf_tok = Tokenizer::from_gguf(c);
  fs::remove(file);
  return l;
}

class GgufFamily : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufFamily, SameIdsAndTextAsTheTokenizerJson) {
  const std::string family = GetParam();
  Loaded& l = load(family);
  if (!l.gguf_tok) GTEST_SKIP() << l.path << " is missing: run tools/install-deps.sh";
  const json expected = read_json(kData / ("expected_" + family + ".json"));
  const json corpus = read_json(kData / "corpus.json");
  const auto& lines = expected["lines"];
  ASSERT_EQ(lines.size(), corpus.size());
  size_t ok = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string text = corpus[i].get<std::string>();
    const auto ids = lines[i]["ids"].get<std::vector<uint32_t>>();
    const auto plain = lines[i]["ids_plain"].get<std::vector<uint32_t>>();
    const auto got = l.gguf_tok->encode(text, true).get_ids();
    const auto got_plain = l.gguf_tok->encode(text, false).get_ids();
    EXPECT_EQ(got, ids) << family << " line " << i;
    EXPECT_EQ(got_plain, plain) << family << " line " << i;
    EXPECT_EQ(got, l.json_tok->encode(text, true).get_ids()) << family << " line " << i;
    EXPECT_EQ(got_plain, l.json_tok->encode(text, false).get_ids()) << family << " line " << i;
    const std::string dec = l.gguf_tok->decode(ids, false), dec_skip = l.gguf_tok->decode(ids, true);
    EXPECT_EQ(dec, lines[i]["decoded"].get<std::string>()) << family << " line " << i;
    EXPECT_EQ(dec_skip, lines[i]["decoded_skip"].get<std::string>()) << family << " line " << i;
    ok += got == ids && got_plain == plain && dec == lines[i]["decoded"] &&
          dec_skip == lines[i]["decoded_skip"];
  }
  std::printf("%s through GGUF: %zu / %zu corpus lines identical\n", family.c_str(), ok, lines.size());
}

TEST_P(GgufFamily, SameTokensAndVocabulary) {
  Loaded& l = load(GetParam());
  if (!l.gguf_tok) GTEST_SKIP() << l.path << " is missing: run tools/install-deps.sh";
  EXPECT_EQ(l.gguf_tok->get_vocab_size(true), l.json_tok->get_vocab_size(true));
  for (uint32_t id = 0; id < l.json_tok->get_vocab_size(true); id += 97)
    EXPECT_EQ(l.gguf_tok->id_to_token(id), l.json_tok->id_to_token(id)) << "id " << id;
  for (const auto& a : l.json_tok->get_added_tokens()) {
    EXPECT_EQ(l.gguf_tok->token_to_id(a.content), a.id) << a.content;
    // special added tokens are control tokens, the others user-defined (not skipped by decode)
    const std::vector<uint32_t> one{a.id};
    EXPECT_EQ(l.gguf_tok->decode(one, true).empty(), a.special) << a.content;
  }
}

// llama.cpp on the GGUF file our writer makes (tools/gguf_tokenizer_reference.py): our ids are its ids,
// except on the lines where llama.cpp itself differs from Hugging Face (listed in the fixture and in
// tests/data/tokenizers/README.md), where ours are Hugging Face's.
TEST_P(GgufFamily, MatchesLlamaCppWhereLlamaCppMatchesHuggingFace) {
  const std::string family = GetParam();
  Loaded& l = load(family);
  if (!l.gguf_tok) GTEST_SKIP() << l.path << " is missing: run tools/install-deps.sh";
  const fs::path ref = kData / ("expected_llamacpp_" + family + ".json");
  ASSERT_TRUE(fs::exists(ref)) << ref << ": run tools/gguf_tokenizer_reference.py";
  const json lc = read_json(ref);
  const json corpus = read_json(kData / "corpus.json");
  const json hf = read_json(kData / ("expected_" + family + ".json"))["lines"];
  ASSERT_EQ(lc["lines"].size(), corpus.size());
  size_t same = 0, documented = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const std::string text = corpus[i].get<std::string>();
    for (const char* key : {"ids", "ids_plain"}) {
      const bool special = std::string(key) == "ids";
      const auto want = lc["lines"][i][key].get<std::vector<uint32_t>>();
      const auto got = l.gguf_tok->encode(text, special).get_ids();
      const bool differs = want != hf[i][key].get<std::vector<uint32_t>>();
      bool listed = false;
      for (const auto& d : lc["differs_from_hf"])
        listed |= d["line"].get<size_t>() == i && d["key"].get<std::string>() == key;
      EXPECT_EQ(differs, listed) << family << " line " << i << " " << key << ": the fixture's list is stale";
      if (differs) {
        EXPECT_NE(got, want) << family << " line " << i << " " << key;
        ++documented;
      } else {
        EXPECT_EQ(got, want) << family << " line " << i << " " << key;
        same += got == want;
      }
    }
  }
  std::printf("%s: llama.cpp's ids on %zu of %zu encodings; %zu where llama.cpp differs from HF\n",
              family.c_str(), same, 2 * corpus.size(), documented);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, GgufFamily,
                         ::testing::Values("gpt2", "llama2", "llama3", "llama3_1", "qwen3", "gemma3",
                                           "deepseek_v3", "gptoss"));

TEST(GgufTokenizerMetadata, WhatEachFamilyBecomes) {
  struct Want {
    const char* family;
    const char* model;
    const char* pre;
    bool add_bos;
  };
  for (const Want& w :
       {Want{"gpt2", "gpt2", "gpt-2", false}, Want{"llama2", "llama", nullptr, true},
        Want{"llama3", "gpt2", "llama-bpe", false}, Want{"llama3_1", "gpt2", "llama-bpe", true},
        Want{"qwen3", "gpt2", "qwen2", false}, Want{"gemma3", "llama", nullptr, true},
        Want{"deepseek_v3", "gpt2", "deepseek-v3", false}, Want{"gptoss", "gpt2", "gpt-4o", false}}) {
    Loaded& l = load(w.family);
    if (!l.gguf_tok) continue;
    SCOPED_TRACE(w.family);
    EXPECT_EQ(find(l.md, "tokenizer.ggml.model")->to_string(), w.model);
    const gf::Value* pre = find(l.md, "tokenizer.ggml.pre");
    if (w.pre)
      EXPECT_EQ(pre ? pre->to_string() : "", w.pre);
    else
      EXPECT_EQ(pre, nullptr);
    EXPECT_EQ(find(l.md, "tokenizer.ggml.add_bos_token")->to_bool(), w.add_bos);
    const size_t n = find(l.md, "tokenizer.ggml.tokens")->to_vec().size();
    EXPECT_EQ(n, l.json_tok->get_vocab_size(true));
    EXPECT_EQ(find(l.md, "tokenizer.ggml.token_type")->to_vec().size(), n);
    EXPECT_EQ(find(l.md, "tokenizer.ggml.scores") != nullptr, std::string(w.model) == "llama");
    EXPECT_EQ(find(l.md, "tokenizer.ggml.merges") != nullptr, std::string(w.model) == "gpt2");
  }
  Loaded& l = load("llama2");
  if (!l.gguf_tok) GTEST_SKIP() << "llama2's tokenizer.json is missing";
  const auto& types = find(l.md, "tokenizer.ggml.token_type")->to_vec();
  EXPECT_EQ(types[0].to_i32(), 2);  // <unk>
  EXPECT_EQ(types[1].to_i32(), 3);  // <s>
  EXPECT_EQ(types[3].to_i32(), 6);  // <0x00>
  EXPECT_EQ(types[300].to_i32(), 1);
  EXPECT_EQ(find(l.md, "tokenizer.ggml.add_space_prefix")->to_bool(), true);
  EXPECT_EQ(find(l.md, "tokenizer.ggml.bos_token_id")->to_u32(), 1u);
  EXPECT_EQ(find(l.md, "tokenizer.ggml.unknown_token_id")->to_u32(), 0u);
}

// tokenizer_config.json: token names, add_bos_token (deepseek's tokenizer.json adds no BOS, its config
// says to, as transformers does) and the chat template
TEST(GgufTokenizerMetadata, TokenizerConfig) {
  Loaded& l = load("deepseek_v3");
  if (!l.gguf_tok) GTEST_SKIP() << l.path << " is missing";
  const fs::path config = l.path.parent_path() / "tokenizer_config.json";
  const auto md = candle::tokenizers::gguf_tokenizer_metadata_from_file(l.path.string(), config.string());
  EXPECT_EQ(find(md, "tokenizer.ggml.add_bos_token")->to_bool(), true);
  EXPECT_EQ(find(md, "tokenizer.ggml.bos_token_id")->to_u32(), 0u);
  EXPECT_EQ(find(md, "tokenizer.ggml.eos_token_id")->to_u32(), 1u);
  EXPECT_EQ(find(md, "tokenizer.ggml.padding_token_id")->to_u32(), 1u);
  const json conf = read_json(config);
  EXPECT_EQ(find(md, "tokenizer.chat_template")->to_string(), conf["chat_template"].get<std::string>());
  const Tokenizer tok = Tokenizer::from_gguf(content_of(md));
  std::vector<uint32_t> want{0};
  const auto plain = l.json_tok->encode("Hello world", false).get_ids();
  want.insert(want.end(), plain.begin(), plain.end());
  EXPECT_EQ(tok.encode("Hello world", true).get_ids(), want);
  EXPECT_EQ(tok.encode("Hello world", false).get_ids(), l.json_tok->encode("Hello world", false).get_ids());
}

// ---- hand-made vocabularies (no peers needed) ---------------------------------------------------

gf::Value strings(std::vector<std::string> v) {
  std::vector<gf::Value> out(v.begin(), v.end());
  return gf::Value::array(gf::ValueType::String, std::move(out));
}
template <class T>
gf::Value numbers(gf::ValueType t, std::vector<T> v) {
  std::vector<gf::Value> out(v.begin(), v.end());
  return gf::Value::array(t, std::move(out));
}

// <unk> <s> </s> <0x41> <0xC3> <0xA9> ▁ a b ▁a ab ▁ab ba
gf::MetadataList tiny_spm() {
  gf::MetadataList md;
  md.emplace_back("tokenizer.ggml.model", "llama");
  md.emplace_back("tokenizer.ggml.tokens",
                  strings({"<unk>", "<s>", "</s>", "<0x41>", "<0xC3>", "<0xA9>", "\xE2\x96\x81", "a", "b",
                           "\xE2\x96\x81"
                           "a",
                           "ab",
                           "\xE2\x96\x81"
                           "ab",
                           "ba"}));
  md.emplace_back("tokenizer.ggml.scores", numbers<float>(gf::ValueType::F32, {0, 0, 0, 0, 0, 0, -100, -100,
                                                                               -100, -3, -1, -2, -0.5f}));
  md.emplace_back("tokenizer.ggml.token_type",
                  numbers<int32_t>(gf::ValueType::I32, {2, 3, 3, 6, 6, 6, 1, 1, 1, 1, 1, 1, 1}));
  md.emplace_back("tokenizer.ggml.bos_token_id", uint32_t{1});
  md.emplace_back("tokenizer.ggml.eos_token_id", uint32_t{2});
  md.emplace_back("tokenizer.ggml.unknown_token_id", uint32_t{0});
  return md;
}

TEST(GgufSpm, MergesTheHighestScoreFirstWithByteFallback) {
  const Tokenizer tok = Tokenizer::from_gguf(content_of(tiny_spm()));
  // "▁aba": ▁ a b a -> "ba" (-0.5) beats "ab" (-1): ▁ a ba; then "▁a" (-3): ▁a ba
  EXPECT_EQ(tok.encode("aba", false).get_ids(), (std::vector<uint32_t>{9, 12}));
  // "▁ab": ab (-1) first, then ▁ab (-2)
  EXPECT_EQ(tok.encode("ab", true).get_ids(), (std::vector<uint32_t>{1, 11}));
  // A is <0x41>; é is <0xC3> <0xA9>; z has no byte token: <unk>
  EXPECT_EQ(tok.encode("aA\xC3\xA9z", false).get_ids(), (std::vector<uint32_t>{9, 3, 4, 5, 0}));
  EXPECT_EQ(tok.decode(std::vector<uint32_t>{1, 9, 12, 6, 11, 3, 4, 5}, true),
            "aba  ab"
            "A\xC3\xA9");
  // </s> in the text is the control token; decode skips it
  EXPECT_EQ(tok.encode("a</s>", false).get_ids(), (std::vector<uint32_t>{9, 2}));
  EXPECT_EQ(tok.decode(std::vector<uint32_t>{9, 2}, true), "a");
}

TEST(GgufSpm, AddSpacePrefixAndEos) {
  gf::MetadataList md = tiny_spm();
  md.emplace_back("tokenizer.ggml.add_space_prefix", false);
  md.emplace_back("tokenizer.ggml.add_bos_token", false);
  md.emplace_back("tokenizer.ggml.add_eos_token", true);
  const Tokenizer tok = Tokenizer::from_gguf(content_of(md));
  EXPECT_EQ(tok.encode("ab a", true).get_ids(), (std::vector<uint32_t>{10, 9, 2}));
  EXPECT_EQ(tok.decode(std::vector<uint32_t>{10, 9}, false), "ab a");
}

// byte-level: "Ġ" is the space; "ab" merges before "Ġa"
gf::MetadataList tiny_bpe() {
  gf::MetadataList md;
  md.emplace_back("tokenizer.ggml.model", "gpt2");
  md.emplace_back("tokenizer.ggml.pre", "gpt-2");
  md.emplace_back("tokenizer.ggml.tokens", strings({"a", "b", "\xC4\xA0", "ab",
                                                    "\xC4\xA0"
                                                    "a",
                                                    "\xC4\xA0"
                                                    "ab",
                                                    "<|end|>", "<|user|>"}));
  md.emplace_back("tokenizer.ggml.token_type",
                  numbers<int32_t>(gf::ValueType::I32, {1, 1, 1, 1, 1, 1, 3, 4}));
  md.emplace_back("tokenizer.ggml.merges", strings({"a b", "\xC4\xA0 a", "\xC4\xA0 ab"}));
  md.emplace_back("tokenizer.ggml.eos_token_id", uint32_t{6});
  return md;
}

TEST(GgufBpe, MergesByRankAndAddedTokens) {
  const Tokenizer tok = Tokenizer::from_gguf(content_of(tiny_bpe()));
  EXPECT_EQ(tok.encode("ab ab a<|end|>b<|user|>", true).get_ids(), (std::vector<uint32_t>{3, 5, 4, 6, 1, 7}));
  EXPECT_EQ(tok.decode(std::vector<uint32_t>{3, 5, 4, 6, 1, 7}, true), "ab ab ab<|user|>");
  EXPECT_EQ(tok.decode(std::vector<uint32_t>{3, 5, 4, 6, 1, 7}, false), "ab ab a<|end|>b<|user|>");
}

// ---- hostile metadata ---------------------------------------------------------------------------

std::string error_of(const gf::MetadataList& md, ErrorKind* kind = nullptr) {
  try {
    (void)Tokenizer::from_gguf(content_of(md));
  } catch (const Error& e) {
    if (kind) *kind = e.kind();
    return e.what();
  }
  return "no error";
}

gf::MetadataList with(gf::MetadataList md, const std::string& key, gf::Value v) {
  for (auto& [k, val] : md)
    if (k == key) {
      val = std::move(v);
      return md;
    }
  md.emplace_back(key, std::move(v));
  return md;
}

gf::MetadataList without(gf::MetadataList md, const std::string& key) {
  std::erase_if(md, [&](const auto& kv) { return kv.first == key; });
  return md;
}

#define EXPECT_ERROR(md, text)                                          \
  do {                                                                  \
    const std::string msg = error_of(md);                               \
    EXPECT_NE(msg.find(text), std::string::npos) << "message: " << msg; \
  } while (0)

TEST(GgufHostile, WrongValueTypesNameTheKey) {
  const auto spm = tiny_spm();
  EXPECT_ERROR(with(spm, "tokenizer.ggml.model", uint32_t{1}),
               "tokenizer.ggml.model has type u32, not string");
  EXPECT_ERROR(with(spm, "tokenizer.ggml.tokens", "abc"), "tokenizer.ggml.tokens has type string, not array");
  EXPECT_ERROR(with(spm, "tokenizer.ggml.tokens", numbers<uint32_t>(gf::ValueType::U32, {1, 2})),
               "tokenizer.ggml.tokens is an array of u32");
  EXPECT_ERROR(
      with(spm, "tokenizer.ggml.scores", numbers<int32_t>(gf::ValueType::I32, std::vector<int32_t>(13))),
      "tokenizer.ggml.scores is an array of i32");
  EXPECT_ERROR(
      with(spm, "tokenizer.ggml.token_type", numbers<float>(gf::ValueType::F32, std::vector<float>(13))),
      "tokenizer.ggml.token_type is an array of f32");
  EXPECT_ERROR(with(spm, "tokenizer.ggml.bos_token_id", "1"),
               "tokenizer.ggml.bos_token_id has type string, not an integer type");
  EXPECT_ERROR(with(spm, "tokenizer.ggml.add_bos_token", uint8_t{1}),
               "tokenizer.ggml.add_bos_token has type u8, not bool");
  EXPECT_ERROR(with(spm, "tokenizer.chat_template", 3.0f), "tokenizer.chat_template has type f32");
  EXPECT_ERROR(with(tiny_bpe(), "tokenizer.ggml.merges", numbers<uint8_t>(gf::ValueType::U8, {1})),
               "tokenizer.ggml.merges is an array of u8");
  EXPECT_ERROR(with(tiny_bpe(), "tokenizer.ggml.pre", int32_t{2}), "tokenizer.ggml.pre has type i32");
}

TEST(GgufHostile, LengthsAndIds) {
  const auto spm = tiny_spm();
  EXPECT_ERROR(with(spm, "tokenizer.ggml.scores", numbers<float>(gf::ValueType::F32, {0, 1})),
               "tokenizer.ggml.scores has 2 entries where tokenizer.ggml.tokens has 13");
  EXPECT_ERROR(with(spm, "tokenizer.ggml.token_type",
                    numbers<int32_t>(gf::ValueType::I32, std::vector<int32_t>(14, 1))),
               "tokenizer.ggml.token_type has 14 entries");
  EXPECT_ERROR(with(spm, "tokenizer.ggml.tokens", strings({})), "tokenizer.ggml.tokens is empty");
  EXPECT_ERROR(without(spm, "tokenizer.ggml.tokens"), "tokenizer.ggml.tokens is missing");
  EXPECT_ERROR(with(spm, "tokenizer.ggml.bos_token_id", uint32_t{13}),
               "tokenizer.ggml.bos_token_id is 13, not a token id");
  EXPECT_ERROR(with(spm, "tokenizer.ggml.eos_token_id", int32_t{-1}), "tokenizer.ggml.eos_token_id is -1");
  EXPECT_ERROR(with(spm, "tokenizer.ggml.eos_token_id", int8_t{-5}), "tokenizer.ggml.eos_token_id is -5");
  // any integer type that holds a token id is one
  EXPECT_EQ(Tokenizer::from_gguf(content_of(with(spm, "tokenizer.ggml.bos_token_id", int8_t{2})))
                .encode("a", true)
                .get_ids(),
            (std::vector<uint32_t>{2, 9}));
  EXPECT_ERROR(with(spm, "tokenizer.ggml.unknown_token_id", std::numeric_limits<uint64_t>::max()),
               "tokenizer.ggml.unknown_token_id is above 2^63");
  EXPECT_ERROR(with(spm, "tokenizer.ggml.padding_token_id", int64_t{1} << 40),
               "tokenizer.ggml.padding_token_id is");
  EXPECT_ERROR(with(without(spm, "tokenizer.ggml.bos_token_id"), "tokenizer.ggml.add_bos_token", true),
               "tokenizer.ggml.add_bos_token is true but tokenizer.ggml.bos_token_id is missing");
  EXPECT_ERROR(with(spm, "tokenizer.ggml.token_type",
                    numbers<int32_t>(gf::ValueType::I32, std::vector<int32_t>(13, 7))),
               "tokenizer.ggml.token_type entry 0 is 7");
  std::vector<float> nan(13, 0.f);
  nan[5] = std::nanf("");
  EXPECT_ERROR(with(spm, "tokenizer.ggml.scores", numbers<float>(gf::ValueType::F32, nan)),
               "tokenizer.ggml.scores entry 5 is not finite");
}

TEST(GgufHostile, ModelsMergesAndPreTokenizers) {
  ErrorKind k{};
  EXPECT_NE(error_of(with(tiny_spm(), "tokenizer.ggml.model", "t5"), &k)
                .find("tokenizer.ggml.model 't5' is not supported"),
            std::string::npos);
  EXPECT_EQ(k, ErrorKind::UnsupportedOp);
  EXPECT_ERROR(without(tiny_spm(), "tokenizer.ggml.model"), "tokenizer.ggml.model is missing");
  const auto bpe = tiny_bpe();
  EXPECT_NE(
      error_of(with(bpe, "tokenizer.ggml.pre", std::string(500, 'x')), &k).find("tokenizer.ggml.pre 'xxxx"),
      std::string::npos);
  EXPECT_EQ(k, ErrorKind::UnsupportedOp);
  EXPECT_LT(error_of(with(bpe, "tokenizer.ggml.pre", std::string(500, 'x'))).size(), 300u);  // truncated
  EXPECT_ERROR(without(bpe, "tokenizer.ggml.pre"), "tokenizer.ggml.pre is missing");
  EXPECT_ERROR(without(bpe, "tokenizer.ggml.merges"), "tokenizer.ggml.merges is missing");
  EXPECT_ERROR(with(bpe, "tokenizer.ggml.merges", strings({"ab"})),
               "tokenizer.ggml.merges entry 0 'ab' is not 'a b'");
  EXPECT_ERROR(with(bpe, "tokenizer.ggml.merges", strings({"a "})), "entry 0 'a ' is not 'a b'");
  EXPECT_ERROR(with(bpe, "tokenizer.ggml.merges", strings({"b a"})),
               "tokenizer.ggml.merges: merge 0 'b a' uses a token");
  // a token given twice maps to its last id; both ids decode to it
  const Tokenizer dup =
      Tokenizer::from_gguf(content_of(with(without(bpe, "tokenizer.ggml.token_type"), "tokenizer.ggml.tokens",
                                           strings({"a", "b", "\xC4\xA0", "ab",
                                                    "\xC4\xA0"
                                                    "a",
                                                    "\xC4\xA0"
                                                    "ab",
                                                    "<|end|>", "a"}))));
  EXPECT_EQ(dup.token_to_id("a"), 7u);
  EXPECT_EQ(dup.decode(std::vector<uint32_t>{0, 7}, false), "aa");
}

// a control token that is not valid UTF-8 (a lone continuation byte) is not matched inside a character
TEST(GgufHostile, ControlTokensThatAreNotUtf8AreNotAdded) {
  gf::MetadataList md = tiny_spm();
  md = with(md, "tokenizer.ggml.tokens",
            strings({"<unk>", "\xA9", "</s>", "<0x41>", "<0xC3>", "<0xA9>", "\xE2\x96\x81", "a", "b",
                     "\xE2\x96\x81"
                     "a",
                     "ab",
                     "\xE2\x96\x81"
                     "ab",
                     "ba"}));
  md = without(md, "tokenizer.ggml.bos_token_id");
  md = with(md, "tokenizer.ggml.add_bos_token", false);
  const Tokenizer tok = Tokenizer::from_gguf(content_of(md));
  EXPECT_EQ(tok.encode("a\xC3\xA9", true).get_ids(), (std::vector<uint32_t>{9, 4, 5}));
}

TEST(GgufHostile, AHugeVocabularyIsBoundedByTheFile) {
  // a million (empty) tokens and a merge of tokens not among them: read, then rejected with a message
  gf::MetadataList md = tiny_bpe();
  md = with(md, "tokenizer.ggml.tokens", strings(std::vector<std::string>(1 << 20)));
  md = without(md, "tokenizer.ggml.token_type");
  md = without(md, "tokenizer.ggml.eos_token_id");
  EXPECT_ERROR(md, "uses a token missing");
}

// the fuzzer's seeds (tools/make-gguf-tokenizer-seeds.py): valid-* load and tokenize, hostile-* are refused
TEST(GgufHostile, FuzzSeeds) {
  const fs::path dir = kRoot / "tests" / "fuzz" / "corpus" / "gguf_tokenizer";
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    SCOPED_TRACE(name);
    const gf::Content c = gf::Content::read(e.path().string());
    if (name.rfind("valid-", 0) == 0) {
      const Tokenizer tok = Tokenizer::from_gguf(c);
      EXPECT_FALSE(tok.encode("ab ab", true).get_ids().empty());
    } else {
      EXPECT_THROW((void)Tokenizer::from_gguf(c), Error);
    }
    ++n;
  }
  EXPECT_GE(n, 11u);
}

TEST(GgufTokenizerMetadata, UnsupportedTokenizersAreNamed) {
  ErrorKind k{};
  auto err = [&](const std::string& text) {
    try {
      (void)candle::tokenizers::gguf_tokenizer_metadata(text);
    } catch (const Error& e) {
      k = e.kind();
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(err(R"({"model":{"type":"Unigram","vocab":[["a",0.0]]}})").find("model type 'Unigram'"),
            std::string::npos);
  EXPECT_EQ(k, ErrorKind::UnsupportedOp);
  EXPECT_NE(
      err(R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"pre_tokenizer":{"type":"Whitespace"}})")
          .find("none of the GGUF pre-tokenizers"),
      std::string::npos);
  EXPECT_NE(err(R"({"model":{"type":"BPE","vocab":{"a":400000000},"merges":[]},"pre_tokenizer":)"
                R"({"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true}})")
                .find("sparse"),
            std::string::npos);
  const std::string gpt2_like =
      R"({"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]},)"
      R"("pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,)"
      R"("use_regex":true}})";
  auto err_config = [&](const std::string& config) {
    try {
      (void)candle::tokenizers::gguf_tokenizer_metadata(gpt2_like, config);
    } catch (const Error& e) {
      k = e.kind();
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(err_config(R"({"bos_token": "a", "add_bos_token": true})"), "no error");
  EXPECT_NE(
      err_config(R"({"bos_token": "<s>"})").find("tokenizer_config.json: bos_token '<s>' is not a token"),
      std::string::npos);
  EXPECT_EQ(k, ErrorKind::Parse);
  EXPECT_NE(err_config(R"({"add_bos_token": true})").find("add_bos_token is true but there is no bos_token"),
            std::string::npos);
  EXPECT_NE(
      err_config(R"({"add_eos_token": 1})").find("tokenizer_config.json: add_eos_token is not a boolean"),
      std::string::npos);
  EXPECT_NE(err_config(R"({"eos_token": 5})").find("eos_token is neither a string nor a token object"),
            std::string::npos);
  EXPECT_NE(err_config("[1]").find("tokenizer_config.json: the top level is not an object"),
            std::string::npos);
  EXPECT_NE(err("{").find("not valid JSON"), std::string::npos);
  EXPECT_EQ(k, ErrorKind::Parse);
}

}  // namespace

namespace {

// The bundled default model's tokenizer (GPT-2's cut to the King James Bible, in the GGUF):
// llama.cpp's ids for the prompt of tests/data/llm/kjv_greedy.json, and its greedy
// continuation decoded to text.
TEST(BundledKjvTokenizer, GivesLlamaCppsPromptIds) {
  const fs::path model = kRoot / "models" / "llama2-c-kjv" / "model-q8_0.gguf";
  ASSERT_TRUE(fs::exists(model)) << model << " missing";
  const json fx = read_json(fs::path(CANDLE_TEST_DATA_DIR) / "llm" / "kjv_greedy.json");
  const Tokenizer tok = Tokenizer::from_gguf(gf::Content::read(model.string()));
  const auto prompt = fx["prompt"].get<std::vector<uint32_t>>();
  EXPECT_EQ(tok.encode(fx["prompt_text"].get<std::string>(), true).get_ids(), prompt);
  const std::string text = tok.decode(fx["greedy"].get<std::vector<uint32_t>>(), false);
  EXPECT_EQ(text.rfind(fx["prompt_text"].get<std::string>(), 0), 0u) << text;
  EXPECT_GT(text.size(), 64u) << text;
}

}  // namespace
