// Each component with hand-written expectations: models, normalizers, pre-tokenizers, added tokens,
// post-processors, decoders, offsets.
#include <gtest/gtest.h>

#include "candle/error.h"
#include "candle/tokenizers/tokenizer.h"
#include "tokenizers/internal.h"

namespace {

using candle::tokenizers::Offsets;
using candle::tokenizers::Tokenizer;
namespace d = candle::tokenizers::detail;
using json = nlohmann::json;

// A tokenizer.json around a model, with optional components.
std::string tokenizer_json(const json& model, const json& normalizer = nullptr, const json& pre = nullptr,
                           const json& post = nullptr, const json& decoder = nullptr,
                           const json& added = json::array()) {
  return json{{"version", "1.0"},     {"added_tokens", added},  {"normalizer", normalizer},
              {"pre_tokenizer", pre}, {"post_processor", post}, {"decoder", decoder},
              {"model", model}}
      .dump();
}

json bpe(const json& vocab, const json& merges, const json& extra = json::object()) {
  json m = {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}};
  m.update(extra);
  return m;
}

std::vector<std::string> tokens(const Tokenizer& t, const std::string& text) {
  return t.encode(text, false).get_tokens();
}

std::string normalized(const json& j, const std::string& text) {
  return d::make_normalizer(j)->normalize(d::NString::original(text, 0)).s;
}

std::vector<std::string> pre_tokenized(const json& j, const std::string& text) {
  std::vector<d::NString> pieces{d::NString::original(text, 0)};
  d::make_pre_tokenizer(j)->pre_tokenize(pieces);
  std::vector<std::string> out;
  for (auto& p : pieces) out.push_back(p.s);
  return out;
}

// ---- models ---------------------------------------------------------------------------------------
TEST(Bpe, MergesByRankNotByPosition) {
  const json vocab = {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"abc", 5}};
  // "b c" ranks first, so "abc" becomes a + bc, and "a bc" is not a merge: two tokens.
  auto t = Tokenizer::from_string(tokenizer_json(bpe(vocab, {"b c", "a b", "ab c"})));
  EXPECT_EQ(tokens(t, "abc"), (std::vector<std::string>{"a", "bc"}));
  // the same merges as [a, b] pairs, with "a b" first: ab, then ab c
  auto u =
      Tokenizer::from_string(tokenizer_json(bpe(vocab, json::array({{"a", "b"}, {"b", "c"}, {"ab", "c"}}))));
  EXPECT_EQ(u.encode("abc", false).get_ids(), (std::vector<uint32_t>{5}));
}

TEST(Bpe, IgnoreMergesTakesAWholeWordFromTheVocabulary) {
  const json vocab = {{"a", 0}, {"b", 1}, {"c", 2}, {"abc", 3}};
  auto plain = Tokenizer::from_string(tokenizer_json(bpe(vocab, json::array())));
  EXPECT_EQ(plain.encode("abc", false).get_ids(), (std::vector<uint32_t>{0, 1, 2}));
  auto ignore = Tokenizer::from_string(tokenizer_json(bpe(vocab, json::array(), {{"ignore_merges", true}})));
  EXPECT_EQ(ignore.encode("abc", false).get_ids(), (std::vector<uint32_t>{3}));
}

TEST(Bpe, ByteFallbackThenFusedUnknowns) {
  const json vocab = {{"<unk>", 0}, {"a", 1}, {"<0xC3>", 2}, {"<0xA9>", 3}};
  auto t = Tokenizer::from_string(tokenizer_json(
      bpe(vocab, json::array(), {{"unk_token", "<unk>"}, {"byte_fallback", true}, {"fuse_unk", true}})));
  // é is C3 A9 (both byte tokens exist); x and y have no byte tokens: one fused <unk>
  const auto e = t.encode("a\xC3\xA9xya", false);
  EXPECT_EQ(e.get_ids(), (std::vector<uint32_t>{1, 2, 3, 0, 1}));
  EXPECT_EQ(e.get_offsets(), (std::vector<Offsets>{{0, 1}, {1, 3}, {1, 3}, {3, 5}, {5, 6}}));
  auto nofuse = Tokenizer::from_string(tokenizer_json(bpe(vocab, json::array(), {{"unk_token", "<unk>"}})));
  EXPECT_EQ(nofuse.encode("xy", false).get_ids(), (std::vector<uint32_t>{0, 0}));
  // no unk token: unknown characters are dropped
  auto drop = Tokenizer::from_string(tokenizer_json(bpe(vocab, json::array())));
  EXPECT_EQ(drop.encode("xa", false).get_ids(), (std::vector<uint32_t>{1}));
}

TEST(Bpe, SubwordPrefixAndSuffix) {
  const json vocab = {{"a", 0}, {"##b", 1}, {"##c</w>", 2}, {"##b##c</w>", 3}};
  auto t = Tokenizer::from_string(
      tokenizer_json(bpe(vocab, json::array({{"##b", "##c</w>"}}),
                         {{"continuing_subword_prefix", "##"}, {"end_of_word_suffix", "</w>"}})));
  EXPECT_EQ(t.encode("abc", false).get_ids(), (std::vector<uint32_t>{0, 3}));
}

TEST(WordPiece, GreedyLongestMatchAndUnknownWords) {
  auto make = [](int max_chars) {
    const json m = {{"type", "WordPiece"},
                    {"unk_token", "[UNK]"},
                    {"max_input_chars_per_word", max_chars},
                    {"vocab", {{"[UNK]", 0}, {"un", 1}, {"##aff", 2}, {"##able", 3}, {"unaffabl", 4}}}};
    return Tokenizer::from_string(tokenizer_json(m, nullptr, {{"type", "WhitespaceSplit"}}));
  };
  const auto t = make(100);
  EXPECT_EQ(t.encode("unaffable un", false).get_ids(), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(t.encode("unaff unable", false).get_offsets(),
            (std::vector<Offsets>{{0, 2}, {2, 5}, {6, 8}, {8, 12}}));
  // "unaffabl" is the longest first piece of "unaffable", and "##e" is missing: the whole word is
  // unknown, although un ##aff ##able would spell it (greedy, as HF)
  EXPECT_EQ(t.encode("unaffable", false).get_ids(), (std::vector<uint32_t>{0}));
  EXPECT_EQ(t.encode("unable", false).get_ids(), (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(make(5).encode("unable", false).get_ids(), (std::vector<uint32_t>{0}));  // 6 chars > 5
}

TEST(Unigram, ViterbiTakesTheBestScoringPath) {
  const json m = {
      {"type", "Unigram"},
      {"unk_id", 0},
      {"vocab",
       json::array({{"<unk>", 0.0}, {"a", -1.0}, {"b", -1.0}, {"ab", -3.0}, {"abc", -2.5}, {"c", -1.0}})}};
  auto t = Tokenizer::from_string(tokenizer_json(m));
  EXPECT_EQ(t.encode("ab", false).get_ids(), (std::vector<uint32_t>{1, 2}));       // -2 beats -3
  EXPECT_EQ(t.encode("abc", false).get_ids(), (std::vector<uint32_t>{4}));         // -2.5 beats -3
  EXPECT_EQ(t.encode("axxb", false).get_ids(), (std::vector<uint32_t>{1, 0, 2}));  // unknowns fuse
}

TEST(Unigram, ByteFallback) {
  const json m = {{"type", "Unigram"},
                  {"unk_id", 0},
                  {"byte_fallback", true},
                  {"vocab", json::array({{"<unk>", 0.0}, {"a", -1.0}, {"<0x78>", -1.0}})}};
  auto t = Tokenizer::from_string(tokenizer_json(m));
  EXPECT_EQ(t.encode("axy", false).get_ids(), (std::vector<uint32_t>{1, 2, 0}));
}

// ---- normalizers ----------------------------------------------------------------------------------
TEST(Normalizers, UnicodeForms) {
  EXPECT_EQ(normalized({{"type", "NFC"}}, "e\xCC\x81"), "\xC3\xA9");
  EXPECT_EQ(normalized({{"type", "NFD"}}, "\xC3\xA9"), "e\xCC\x81");
  EXPECT_EQ(normalized({{"type", "NFKC"}}, "\xEF\xAC\x81 \xEF\xBC\xA1"), "fi A");  // ﬁ, fullwidth A
  EXPECT_EQ(normalized({{"type", "NFKD"}}, "\xC2\xBD"),
            "1\xE2\x81\x84"
            "2");
}

TEST(Normalizers, NfcKeepsOffsetsOfTheComposedCharacter) {
  auto n = d::make_normalizer({{"type", "NFC"}})->normalize(d::NString::original("xe\xCC\x81y", 0));
  ASSERT_EQ(n.s, "x\xC3\xA9y");
  EXPECT_EQ(n.align[1].b, 1u);
  EXPECT_EQ(n.align[1].e, 4u);  // é covers e + U+0301
  EXPECT_EQ(n.align[3].b, 4u);
}

TEST(Normalizers, CaseStripReplacePrepend) {
  EXPECT_EQ(normalized({{"type", "Lowercase"}}, "HeLLo \xC3\x89"), "hello \xC3\xA9");
  EXPECT_EQ(normalized({{"type", "Strip"}, {"strip_left", true}, {"strip_right", false}}, "  a b  "),
            "a b  ");
  EXPECT_EQ(normalized({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "_"}}, "a b  c"),
            "a_b__c");
  EXPECT_EQ(normalized({{"type", "Replace"}, {"pattern", {{"Regex", "\\s+"}}}, {"content", " "}}, "a \t\n b"),
            "a b");
  EXPECT_EQ(normalized({{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}}, "hi"), "\xE2\x96\x81hi");
  EXPECT_EQ(normalized({{"type", "Prepend"}, {"prepend", "x"}}, ""), "");
  EXPECT_EQ(normalized({{"type", "Sequence"}, {"normalizers", {{{"type", "Lowercase"}}, {{"type", "NFKC"}}}}},
                       "\xEF\xBC\xA1"),
            "a");
}

TEST(Normalizers, Bert) {
  const json b = {{"type", "BertNormalizer"},
                  {"clean_text", true},
                  {"handle_chinese_chars", true},
                  {"strip_accents", nullptr},
                  {"lowercase", true}};
  EXPECT_EQ(normalized(b, "H\xC3\xA9llo\t\x01W\xE4\xB8\xAD"), "hello w \xE4\xB8\xAD ");
}

std::string base64(const std::string& bytes) {
  static const char* abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t v = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 2]);
    out += abc[(v >> 18) & 63];
    out += abc[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? abc[(v >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? abc[v & 63] : '=';
  }
  return out;
}

TEST(Normalizers, PrecompiledCharsmap) {
  // A hand-built double-array trie: 'a' -> "bb", 'c' -> "" (root offset 0; each key's node has
  // its leaf flag and offset 1024, the leaf holds the string's position).
  std::vector<uint32_t> units(1124, 0);
  units['a'] = 'a' | (1u << 8) | (1024u << 10);
  units['a' ^ 1024] = 0x80000000u | 0;
  units['c'] = 'c' | (1u << 8) | (1024u << 10);
  units['c' ^ 1024] = 0x80000000u | 3;
  std::string blob;
  auto put = [&](uint32_t v) {
    for (int k = 0; k < 4; ++k) blob.push_back(static_cast<char>((v >> (8 * k)) & 0xFF));
  };
  put(static_cast<uint32_t>(units.size() * 4));
  for (uint32_t u : units) put(u);
  blob += std::string("bb\0\0", 4);
  const json p = {{"type", "Precompiled"}, {"precompiled_charsmap", base64(blob)}};
  EXPECT_EQ(normalized(p, "xacb"), "xbbb");
  // a grapheme whose first character is a key is replaced whole, as HF's Precompiled does
  EXPECT_EQ(normalized(p,
                       "a\xCC\x81"
                       "e\xCC\x81"),
            "bbe\xCC\x81");
  // a truncated charsmap is an error
  EXPECT_THROW(
      d::make_normalizer({{"type", "Precompiled"}, {"precompiled_charsmap", base64(blob.substr(0, 100))}}),
      candle::Error);
}

// ---- pre-tokenizers -------------------------------------------------------------------------------
TEST(PreTokenizers, SplitBehaviors) {
  auto split = [](const char* behavior, bool invert = false) {
    return pre_tokenized(
        {{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}, {"invert", invert}},
        "a-b--c");
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(split("Removed"), (V{"a", "b", "c"}));
  EXPECT_EQ(split("Isolated"), (V{"a", "-", "b", "-", "-", "c"}));
  EXPECT_EQ(split("MergedWithPrevious"), (V{"a-", "b-", "-", "c"}));
  EXPECT_EQ(split("MergedWithNext"), (V{"a", "-b", "-", "-c"}));
  EXPECT_EQ(split("Contiguous"), (V{"a", "-", "b", "--", "c"}));
  EXPECT_EQ(split("Removed", true), (V{"-", "-", "-"}));
}

TEST(PreTokenizers, RegexWithUnicodeClassesAndLookahead) {
  const json s = {{"type", "Split"},
                  {"pattern", {{"Regex", "\\p{L}+|\\p{N}{1,3}|\\s+(?!\\S)|\\s+"}}},
                  {"behavior", "Isolated"}};
  EXPECT_EQ(pre_tokenized(s, "h\xC3\xA9 12345   x"),
            (std::vector<std::string>{"h\xC3\xA9", " ", "123", "45", "  ", " ", "x"}));
}

TEST(PreTokenizers, ByteLevelMapsBytesToCharacters) {
  EXPECT_EQ(pre_tokenized({{"type", "ByteLevel"}, {"add_prefix_space", true}}, "hi you"),
            (std::vector<std::string>{"\xC4\xA0hi", "\xC4\xA0you"}));  // Ġhi Ġyou
  EXPECT_EQ(
      pre_tokenized({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}, "\n\xC3\xA9"),
      (std::vector<std::string>{"\xC4\x8A\xC3\x83\xC2\xA9"}));  // Ċ Ã ©
}

TEST(PreTokenizers, MetaspaceWhitespaceDigitsPunctuation) {
  using V = std::vector<std::string>;
  const std::string m = "\xE2\x96\x81";
  EXPECT_EQ(pre_tokenized({{"type", "Metaspace"}, {"replacement", m}, {"prepend_scheme", "always"}}, "a b"),
            (V{m + "a", m + "b"}));
  EXPECT_EQ(
      pre_tokenized(
          {{"type", "Metaspace"}, {"replacement", m}, {"prepend_scheme", "never"}, {"split", false}}, "a b"),
      (V{"a" + m + "b"}));
  EXPECT_EQ(pre_tokenized({{"type", "Whitespace"}}, "Hi, you!  ok"), (V{"Hi", ",", "you", "!", "ok"}));
  EXPECT_EQ(pre_tokenized({{"type", "WhitespaceSplit"}}, " a\tb\n"), (V{"a", "b"}));
  EXPECT_EQ(pre_tokenized({{"type", "BertPreTokenizer"}}, "don't go."), (V{"don", "'", "t", "go", "."}));
  EXPECT_EQ(pre_tokenized({{"type", "Digits"}, {"individual_digits", true}}, "a12"), (V{"a", "1", "2"}));
  EXPECT_EQ(pre_tokenized({{"type", "Digits"}, {"individual_digits", false}}, "a12b"), (V{"a", "12", "b"}));
  EXPECT_EQ(pre_tokenized({{"type", "Punctuation"}}, "a.,b"), (V{"a", ".", ",", "b"}));
}

// ---- added tokens, post-processors, offsets ---------------------------------------------------------
json char_vocab() {
  json v = json::object();
  uint32_t id = 0;
  for (const char* s : {"a", "b", " ", "<x>", "[M]"}) v[s] = id++;
  return v;
}

TEST(AddedTokens, LongestFirstAndStripping) {
  const json added =
      json::array({{{"id", 10}, {"content", "<x>"}, {"special", true}, {"normalized", false}},
                   {{"id", 11}, {"content", "<x><x>"}, {"special", true}, {"normalized", false}},
                   {{"id", 12},
                    {"content", "[M]"},
                    {"special", true},
                    {"normalized", false},
                    {"lstrip", true},
                    {"rstrip", true}},
                   {{"id", 13}, {"content", "ab"}, {"special", false}, {"single_word", true}}});
  auto t = Tokenizer::from_string(
      tokenizer_json(bpe(char_vocab(), json::array()), nullptr, nullptr, nullptr, nullptr, added));
  const auto e = t.encode("a<x><x><x>b  [M] a ab", false);
  EXPECT_EQ(e.get_ids(), (std::vector<uint32_t>{0, 11, 10, 1, 12, 0, 2, 13}));
  EXPECT_EQ(e.get_offsets()[4], (Offsets{11, 17}));  // [M] takes the spaces either side
  // single_word: "ab" inside "aab" is not the added token
  EXPECT_EQ(t.encode("aab", false).get_ids(), (std::vector<uint32_t>{0, 0, 1}));
  EXPECT_EQ(t.token_to_id("<x><x>"), 11u);
  EXPECT_EQ(t.id_to_token(12), "[M]");
  EXPECT_EQ(t.decode(std::vector<uint32_t>{0, 11, 13}, true), "a ab");  // no decoder: joined with spaces
}

TEST(PostProcessors, TemplateAndBert) {
  const json tpl = {
      {"type", "TemplateProcessing"},
      {"single",
       {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {7}}, {"tokens", {"<s>"}}}}}}};
  auto t = Tokenizer::from_string(tokenizer_json(bpe(char_vocab(), json::array()), nullptr, nullptr, tpl));
  const auto e = t.encode("ab", true);
  EXPECT_EQ(e.get_ids(), (std::vector<uint32_t>{7, 0, 1}));
  EXPECT_EQ(e.get_special_tokens_mask(), (std::vector<uint32_t>{1, 0, 0}));
  EXPECT_EQ(e.get_offsets(), (std::vector<Offsets>{{0, 0}, {0, 1}, {1, 2}}));
  EXPECT_EQ(e.get_attention_mask(), (std::vector<uint32_t>{1, 1, 1}));
  EXPECT_EQ(t.encode("ab", false).get_ids(), (std::vector<uint32_t>{0, 1}));
  const json bert = {{"type", "BertProcessing"}, {"sep", {"[SEP]", 102}}, {"cls", {"[CLS]", 101}}};
  auto b = Tokenizer::from_string(tokenizer_json(bpe(char_vocab(), json::array()), nullptr, nullptr, bert));
  EXPECT_EQ(b.encode("a", true).get_ids(), (std::vector<uint32_t>{101, 0, 102}));
}

TEST(Offsets, ByteLevelOffsetsAreBytesOfTheInput) {
  // vocab: the byte characters of "é" (Ã ©) and Ġ, merged
  const json vocab = {{"\xC4\xA0", 0},
                      {"\xC3\x83", 1},
                      {"\xC2\xA9", 2},
                      {"\xC3\x83\xC2\xA9", 3},
                      {"\xC4\xA0\xC3\x83\xC2\xA9", 4}};
  const json merges = json::array({{"\xC3\x83", "\xC2\xA9"}, {"\xC4\xA0", "\xC3\x83\xC2\xA9"}});
  const json pre = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  const json post = {{"type", "ByteLevel"}, {"trim_offsets", true}};
  auto t =
      Tokenizer::from_string(tokenizer_json(bpe(vocab, merges), nullptr, pre, post, {{"type", "ByteLevel"}}));
  const auto e = t.encode("\xC3\xA9 \xC3\xA9", false);
  EXPECT_EQ(e.get_ids(), (std::vector<uint32_t>{3, 4}));
  EXPECT_EQ(e.get_offsets(), (std::vector<Offsets>{{0, 2}, {3, 5}}));  // the space trimmed off
  EXPECT_EQ(t.decode(e.get_ids(), false), "\xC3\xA9 \xC3\xA9");
  // a lone continuation byte decodes to U+FFFD
  EXPECT_EQ(t.decode(std::vector<uint32_t>{2}, false), "\xEF\xBF\xBD");
}

// ---- decoders -------------------------------------------------------------------------------------
std::string decoded(const json& dec, std::vector<std::string> toks) {
  d::make_decoder(dec)->decode_chain(toks);
  std::string out;
  for (auto& t : toks) out += t;
  return out;
}

TEST(Decoders, EachKind) {
  const std::string m = "\xE2\x96\x81";
  EXPECT_EQ(
      decoded({{"type", "Metaspace"}, {"replacement", m}, {"prepend_scheme", "always"}}, {m + "a", m + "b"}),
      "a b");
  EXPECT_EQ(decoded({{"type", "ByteFallback"}}, {"<0xC3>", "<0xA9>", "x", "<0xC3>"}),
            "\xC3\xA9x\xEF\xBF\xBD");
  EXPECT_EQ(decoded({{"type", "Fuse"}}, {"a", "b"}), "ab");
  EXPECT_EQ(decoded({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}, {"  a", " b"}), " ab");
  EXPECT_EQ(decoded({{"type", "Replace"}, {"pattern", {{"String", m}}}, {"content", " "}}, {m + "a"}), " a");
  EXPECT_EQ(
      decoded({{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}, {"un", "##aff", "##able", "."}),
      "unaffable.");
  EXPECT_EQ(decoded({{"type", "ByteLevel"}}, {"\xC4\xA0hi", "\xC4\x8A"}), " hi\n");
}

}  // namespace
