// Hostile tokenizer.json files and input text: clear errors naming what is wrong, never a crash.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "candle/error.h"
#include "candle/tokenizers/tokenizer.h"

namespace {

using candle::Error;
using candle::ErrorKind;
using candle::tokenizers::Tokenizer;
using json = nlohmann::json;

std::string error_of(const std::string& text, ErrorKind* kind = nullptr) {
  try {
    (void)Tokenizer::from_string(text);
  } catch (const Error& e) {
    if (kind) *kind = e.kind();
    return e.what();
  }
  return "no error";
}

json minimal() {
  return {{"model", {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}, {"ab", 2}}}, {"merges", {"a b"}}}}};
}

TEST(Hostile, MalformedJson) {
  ErrorKind k{};
  EXPECT_NE(error_of("{\"model\": ", &k).find("not valid JSON"), std::string::npos);
  EXPECT_EQ(k, ErrorKind::Parse);
  EXPECT_NE(error_of("[1, 2]").find("top level"), std::string::npos);
  EXPECT_NE(error_of(std::string(100000, '[')).find("deeper"), std::string::npos);
  EXPECT_NE(error_of("{}").find("missing field 'model'"), std::string::npos);
}

TEST(Hostile, UnknownTypesAreNamed) {
  ErrorKind k{};
  for (const char* part : {"normalizer", "pre_tokenizer", "post_processor", "decoder", "model"}) {
    json j = minimal();
    j[part] = {{"type", "Frobnicate"}};
    const std::string e = error_of(j.dump(), &k);
    EXPECT_NE(e.find(std::string(part) + " type 'Frobnicate'"), std::string::npos) << e;
    EXPECT_EQ(k, ErrorKind::UnsupportedOp);
  }
}

TEST(Hostile, BadFields) {
  json j = minimal();
  j["model"]["merges"] = {"a c"};
  EXPECT_NE(error_of(j.dump()).find("missing from the vocabulary"), std::string::npos);
  j = minimal();
  j["model"]["merges"] = {"abc"};
  EXPECT_NE(error_of(j.dump()).find("is not 'a b'"), std::string::npos);
  j = minimal();
  j["model"]["vocab"]["a"] = -1;
  EXPECT_NE(error_of(j.dump()).find("non-negative"), std::string::npos);
  j = minimal();
  j["model"]["vocab"]["b"] = 0;
  EXPECT_NE(error_of(j.dump()).find("given twice"), std::string::npos);
  j = minimal();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  EXPECT_NE(error_of(j.dump()).find("bad regex '(unclosed'"), std::string::npos);
  j = minimal();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", "x"}}}, {"behavior", "Sideways"}};
  EXPECT_NE(error_of(j.dump()).find("unknown behavior 'Sideways'"), std::string::npos);
  j = minimal();
  j["added_tokens"] = {{{"content", 5}, {"id", 1}}};
  EXPECT_NE(error_of(j.dump()).find("'content' is not a string"), std::string::npos);
  j = minimal();
  j["model"]["unk_token"] = "<unk>";
  EXPECT_NE(error_of(j.dump()).find("unk_token '<unk>' is not in the vocabulary"), std::string::npos);
  j = minimal();
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", 3}};
  EXPECT_NE(error_of(j.dump()).find("not an array"), std::string::npos);
}

TEST(Hostile, UntrustedNamesAreTruncated) {
  json j = minimal();
  j["decoder"] = {{"type", std::string(10000, 'x')}};
  EXPECT_LT(error_of(j.dump()).size(), 200u);
}

TEST(Hostile, InvalidUtf8TextIsRejected) {
  const auto t = Tokenizer::from_string(minimal().dump());
  try {
    (void)t.encode(std::string("ab\xC3(", 4), false);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("not valid UTF-8 (at byte 2)"), std::string::npos);
  }
  EXPECT_THROW((void)t.encode("\xED\xA0\x80", false), Error);  // a surrogate
  EXPECT_THROW((void)t.encode("\xC0\xAF", false), Error);      // overlong
  // ids outside the vocabulary decode to nothing
  EXPECT_EQ(t.decode(std::vector<uint32_t>{2, 999999, 0}, false), "ab a");
}

TEST(Hostile, HugeInputs) {
  json j = minimal();
  j["pre_tokenizer"] = {
      {"type", "Split"}, {"pattern", {{"Regex", "\\s+(?!\\S)|\\s+|[^\\s]+"}}}, {"behavior", "Isolated"}};
  const auto t = Tokenizer::from_string(j.dump());
  // 4 MB with no split point: one piece merged by the BPE heap, not quadratically
  const auto t0 = std::chrono::steady_clock::now();
  const auto e = t.encode(std::string(4 << 20, 'a') + "b", false);
  EXPECT_EQ(e.len(), (4u << 20) - 1 + 1);  // a...a then ab
  EXPECT_EQ(e.get_ids().back(), 2u);
  const auto spaces = t.encode(std::string(1 << 20, ' '), false);
  EXPECT_EQ(spaces.len(), 0u);  // no space in the vocabulary, no unk token
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 60.0);
}

TEST(Hostile, LongWordsInWordPieceAndUnigramAreNotQuadratic) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string word(1 << 20, 'a');
  const json wp = {{"model",
                    {{"type", "WordPiece"},
                     {"unk_token", "[UNK]"},
                     {"max_input_chars_per_word", 2000000000},
                     {"vocab", {{"[UNK]", 0}, {"a", 1}, {"##a", 2}, {"##" + std::string(300, 'a'), 3}}}}}};
  const auto w = Tokenizer::from_string(wp.dump()).encode(word, false);
  EXPECT_EQ(w.get_ids()[0], 1u);
  EXPECT_EQ(w.get_ids()[1], 3u);
  const json ug = {
      {"model",
       {{"type", "Unigram"},
        {"unk_id", 0},
        {"vocab", json::array({{"<unk>", 0.0}, {"a", -1.0}, {std::string(200, 'a') + "b", -1.0}})}}}};
  const auto u = Tokenizer::from_string(ug.dump()).encode(word, false);
  EXPECT_EQ(u.len(), word.size());
  // pieces longer than 2048 bytes are refused: the walk from each position is bounded by them
  const json long_piece = {{"model",
                            {{"type", "Unigram"},
                             {"unk_id", 0},
                             {"vocab", json::array({{"<unk>", 0.0}, {std::string(3000, 'a'), -1.0}})}}}};
  EXPECT_NE(error_of(long_piece.dump()).find("longer than 2048 bytes"), std::string::npos);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 60.0);
}

}  // namespace
