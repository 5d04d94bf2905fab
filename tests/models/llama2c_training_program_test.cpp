// candle-llama2-c-training as a user runs it, on a tiny shape: --prepare-only, --prepared,
// --time-budget, and bad input (one clear line, exit status 1).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "candle/quantized/gguf_file.h"
#include "models/program_util.h"

namespace fs = std::filesystem;
using candle::test_models::lines;
using candle::test_models::program;
using candle::test_models::run;

namespace {

const fs::path kGpt2 = fs::path(CANDLE_TEST_DATA_DIR).parent_path().parent_path() /
                       "tools/peers/node_modules/.candle/gpt2/tokenizer.json";
const std::string kTiny =
    " --dim 32 --layers 1 --heads 2 --hidden 64 --batch 2 --seq 16 --warmup 2 --threads 1";

struct TrainingProgram : ::testing::Test {
  fs::path exe, dir;
  void SetUp() override {
    exe = program("candle-llama2-c-training");
    if (exe.empty()) GTEST_SKIP() << "candle-llama2-c-training not built";
    dir = fs::temp_directory_path() / ("candle-l2c-test-" + std::to_string(::getpid()));
    fs::create_directories(dir);
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir.empty()) fs::remove_all(dir, ec);
  }
  // a small text and its prepared folder (needs a build with candle::tokenizers and GPT-2's file)
  fs::path prepare() {
    if (!fs::exists(kGpt2)) return {};
    std::ofstream t(dir / "text.txt");
    for (int i = 0; i < 200; ++i)
      t << "In the beginning God created the heaven and the earth. Verse " << i << ".\n";
    t.close();
    auto r = run(exe.string() + " --text " + (dir / "text.txt").string() + " --tokenizer " + kGpt2.string() +
                 " --out " + (dir / "prep").string() + " --prepare-only");
    if (r.rc != 0 && r.err.find("no candle::tokenizers") != std::string::npos) return {};
    EXPECT_EQ(r.rc, 0) << r.err;
    return dir / "prep";
  }
};

TEST_F(TrainingProgram, PrepareOnlyWritesTheTokensAndTokenizer) {
  const fs::path prep = prepare();
  if (prep.empty()) GTEST_SKIP() << "no GPT-2 tokenizer.json or no candle::tokenizers in this build";
  ASSERT_TRUE(fs::exists(prep / "tokens.bin"));
  EXPECT_GT(fs::file_size(prep / "tokens.bin"), 1000u);
  EXPECT_EQ(fs::file_size(prep / "tokens.bin") % 4, 0u);
  EXPECT_TRUE(fs::exists(prep / "tokenizer.json"));
  EXPECT_FALSE(fs::exists(prep / "model.safetensors")) << "--prepare-only trained";
  const auto tok = candle::quantized::gguf_file::Content::read((prep / "tokenizer.gguf").string());
  EXPECT_EQ(tok.get("tokenizer.ggml.model").to_string(), "gpt2");
  EXPECT_TRUE(tok.tensor_infos.empty());
}

TEST_F(TrainingProgram, TrainsOnAPreparedFolderAndWritesTheGguf) {
  const fs::path prep = prepare();
  if (prep.empty()) GTEST_SKIP() << "no GPT-2 tokenizer.json or no candle::tokenizers in this build";
  const fs::path out = dir / "model";
  auto r =
      run(exe.string() + " --prepared " + prep.string() + " --out " + out.string() + " --steps 3" + kTiny);
  ASSERT_EQ(r.rc, 0) << r.err;
  std::ifstream csv(out / "loss.csv");
  std::string all((std::istreambuf_iterator<char>(csv)), std::istreambuf_iterator<char>());
  EXPECT_EQ(lines(all), 4u) << all;  // a header and 3 steps
  const auto model = candle::quantized::gguf_file::Content::read((out / "model-q8_0.gguf").string());
  const auto tok = candle::quantized::gguf_file::Content::read((prep / "tokenizer.gguf").string());
  EXPECT_TRUE(model.get("tokenizer.ggml.tokens") == tok.get("tokenizer.ggml.tokens"));
  EXPECT_TRUE(model.get("tokenizer.ggml.merges") == tok.get("tokenizer.ggml.merges"));
  EXPECT_EQ(model.get("general.architecture").to_string(), "llama");
  const auto again =
      run(exe.string() + " --prepared " + prep.string() + " --out " + out.string() + " --steps 1" + kTiny);
  EXPECT_EQ(again.rc, 1) << "replaced an existing model without --force";
  EXPECT_NE(again.err.find("--force"), std::string::npos) << again.err;
}

TEST_F(TrainingProgram, TimeBudgetFixesTheStepsThatFit) {
  const fs::path prep = prepare();
  if (prep.empty()) GTEST_SKIP() << "no GPT-2 tokenizer.json or no candle::tokenizers in this build";
  const fs::path out = dir / "timed";
  auto r = run(exe.string() + " --prepared " + prep.string() + " --out " + out.string() +
               " --time-budget 2 --eval-every 1000" + kTiny);
  ASSERT_EQ(r.rc, 0) << r.err;
  const size_t at = r.err.find(" steps fit in --time-budget");
  ASSERT_NE(at, std::string::npos) << r.err;
  const size_t begin = r.err.rfind(' ', at - 1) + 1;
  const long steps = std::stol(r.err.substr(begin, at - begin));
  EXPECT_GE(steps, 8);
  std::ifstream csv(out / "loss.csv");
  std::string all((std::istreambuf_iterator<char>(csv)), std::istreambuf_iterator<char>());
  EXPECT_EQ(lines(all), static_cast<size_t>(steps) + 1) << "the steps announced are the steps run";
  // --steps caps the steps that fit
  auto capped = run(exe.string() + " --prepared " + prep.string() + " --out " + (dir / "capped").string() +
                    " --time-budget 100 --steps 9 --eval-every 1000" + kTiny);
  ASSERT_EQ(capped.rc, 0) << capped.err;
  EXPECT_NE(capped.err.find(" 9 steps fit"), std::string::npos) << capped.err;
}

TEST_F(TrainingProgram, BadInputIsOneClearLine) {
  auto none = run(exe.string() + " --out " + (dir / "x").string());
  EXPECT_EQ(none.rc, 1);
  EXPECT_NE(none.err.find("one of --text and --prepared"), std::string::npos) << none.err;
  const fs::path prep = prepare();
  if (prep.empty()) GTEST_SKIP() << "no GPT-2 tokenizer.json or no candle::tokenizers in this build";
  {
    std::ofstream f(prep / "tokens.bin", std::ios::binary | std::ios::app);
    const char big[4] = {'\xff', '\xff', '\xff', '\x7f'};  // an id far past the vocabulary
    f.write(big, 4);
  }
  auto bad = run(exe.string() + " --prepared " + prep.string() + " --out " + (dir / "y").string() +
                 " --steps 1" + kTiny);
  EXPECT_EQ(bad.rc, 1);
  EXPECT_NE(bad.err.find("outside the vocabulary"), std::string::npos) << bad.err;
  {
    std::ofstream f(prep / "tokens.bin", std::ios::binary | std::ios::app);
    f.write("x", 1);
  }
  auto odd = run(exe.string() + " --prepared " + prep.string() + " --out " + (dir / "z").string() +
                 " --steps 1" + kTiny);
  EXPECT_EQ(odd.rc, 1);
  EXPECT_NE(odd.err.find("whole number"), std::string::npos) << odd.err;
}

}  // namespace
