// Each family's real tokenizer.json (from the npm peers in tools/peers) gives the ids and decoded text of
// Hugging Face's JavaScript tokenizers on tests/data/tokenizers/corpus.json (tools/tokenizer_reference.mjs).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "candle/error.h"
#include "candle/tokenizers/tokenizer.h"
#include "candle/utils.h"

namespace {

using candle::tokenizers::Tokenizer;
using nlohmann::json;
const std::filesystem::path kData = std::filesystem::path(CANDLE_TEST_DATA_DIR) / "tokenizers";
const std::filesystem::path kRoot = std::filesystem::path(CANDLE_TEST_DATA_DIR).parent_path().parent_path();

json read_json(const std::filesystem::path& p) {
  std::ifstream f(p);
  return json::parse(f);
}

class Family : public ::testing::TestWithParam<std::string> {};

TEST_P(Family, MatchesTheJavaScriptReference) {
  const json expected = read_json(kData / ("expected_" + GetParam() + ".json"));
  const json corpus = read_json(kData / "corpus.json");
  const auto path = kRoot / expected["tokenizer"].get<std::string>();
  if (!std::filesystem::exists(path))
    GTEST_SKIP() << path << " is missing: run tools/install-deps.sh, then node tools/tokenizer_reference.mjs";
  const Tokenizer tok = Tokenizer::from_file(path.string());
  const auto& lines = expected["lines"];
  ASSERT_EQ(lines.size(), corpus.size());
  size_t ok = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string text = corpus[i].get<std::string>();
    const auto ids = lines[i]["ids"].get<std::vector<uint32_t>>();
    const auto plain = lines[i]["ids_plain"].get<std::vector<uint32_t>>();
    const auto got = tok.encode(text, true).get_ids();
    const auto got_plain = tok.encode(text, false).get_ids();
    const std::string dec = tok.decode(ids, false), dec_skip = tok.decode(ids, true);
    EXPECT_EQ(got, ids) << GetParam() << " line " << i;
    EXPECT_EQ(got_plain, plain) << GetParam() << " line " << i;
    EXPECT_EQ(dec, lines[i]["decoded"].get<std::string>()) << GetParam() << " line " << i;
    EXPECT_EQ(dec_skip, lines[i]["decoded_skip"].get<std::string>()) << GetParam() << " line " << i;
    ok += got == ids && got_plain == plain && dec == lines[i]["decoded"] &&
          dec_skip == lines[i]["decoded_skip"];
  }
  std::printf("%s: %zu / %zu corpus lines identical\n", GetParam().c_str(), ok, lines.size());
}

// encode_batch on several threads (the corpus four times over: threads share the BPE cache) gives
// encode's ids, tokens and offsets for every text, and a batch with an invalid text throws encode's
// error after the other threads are done.
TEST_P(Family, EncodeBatchOnSeveralThreadsEqualsEncode) {
  const json expected = read_json(kData / ("expected_" + GetParam() + ".json"));
  const json corpus = read_json(kData / "corpus.json");
  const auto path = kRoot / expected["tokenizer"].get<std::string>();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is missing: run tools/install-deps.sh";
  const Tokenizer tok = Tokenizer::from_file(path.string());
  std::vector<std::string> texts;
  for (int rep = 0; rep < 4; ++rep)
    for (const auto& c : corpus) texts.push_back(c.get<std::string>());
  candle::set_num_threads(4);
  const auto batch = tok.encode_batch(texts, true);
  ASSERT_EQ(batch.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto one = tok.encode(texts[i], true);
    EXPECT_EQ(batch[i].get_ids(), one.get_ids()) << GetParam() << " text " << i;
    EXPECT_EQ(batch[i].get_tokens(), one.get_tokens()) << GetParam() << " text " << i;
    EXPECT_EQ(batch[i].get_offsets(), one.get_offsets()) << GetParam() << " text " << i;
  }
  texts[texts.size() / 2] = "bad \xff utf-8";
  try {
    (void)tok.encode_batch(texts, false);
    ADD_FAILURE() << "no error for invalid UTF-8 in a batch";
  } catch (const candle::Error& e) {
    EXPECT_EQ(e.kind(), candle::ErrorKind::InvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find("not valid UTF-8"), std::string::npos) << e.what();
  }
  candle::set_num_threads(0);
}

// The BPE word caches are per thread and per tokenizer: one thread encoding with every family's
// tokenizer in turn (more tokenizers than a thread keeps caches for), and tokenizers destroyed and
// rebuilt in the same storage, still give each one's reference ids.
TEST(Tokenizers, OneThreadWithManyTokenizersKeepsTheirCachesApart) {
  const json corpus = read_json(kData / "corpus.json");
  std::vector<std::vector<json>> want;
  std::vector<std::filesystem::path> paths;
  for (const char* f : {"gpt2", "llama2", "llama3", "qwen3", "gemma3", "deepseek_v3", "gptoss"}) {
    const json expected = read_json(kData / (std::string("expected_") + f + ".json"));
    const auto path = kRoot / expected["tokenizer"].get<std::string>();
    if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is missing: run tools/install-deps.sh";
    paths.push_back(path);
    want.emplace_back(expected["lines"].begin(), expected["lines"].end());
  }
  std::vector<Tokenizer> toks;
  for (const auto& p : paths) toks.push_back(Tokenizer::from_file(p.string()));
  for (int round = 0; round < 2; ++round)
    for (size_t i = 0; i < corpus.size(); ++i)
      for (size_t t = 0; t < toks.size(); ++t)
        ASSERT_EQ(toks[t].encode(corpus[i].get<std::string>(), false).get_ids(),
                  want[t][i]["ids_plain"].get<std::vector<uint32_t>>())
            << paths[t] << " line " << i << " round " << round;
  for (int round = 0; round < 3; ++round) {
    const size_t t = round % 2;  // gpt2, llama2, gpt2, each in a fresh tokenizer
    std::optional<Tokenizer> one;
    one.emplace(Tokenizer::from_file(paths[t].string()));
    for (size_t i = 0; i < corpus.size(); ++i)
      ASSERT_EQ(one->encode(corpus[i].get<std::string>(), false).get_ids(),
                want[t][i]["ids_plain"].get<std::vector<uint32_t>>())
          << paths[t] << " line " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, Family,
                         ::testing::Values("gpt2", "llama2", "llama3", "llama3_1", "qwen3", "gemma3",
                                           "deepseek_v3", "gptoss", "tiny_wordpiece", "tiny_unigram"));

}  // namespace
