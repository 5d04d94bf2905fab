// candle-llm as a user runs it: on a GGUF written by candle-make-random-llama (tiny shape, its
// synthetic SentencePiece vocabulary), and on bad input (one clear line, exit status 1).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "models/program_util.h"

namespace fs = std::filesystem;
using candle::test_models::program;
using candle::test_models::run;

namespace {

struct LlmProgram : ::testing::Test {
  fs::path llm, maker, dir;
  std::string gguf;
  void SetUp() override {
    llm = program("candle-llm");
    maker = program("candle-make-random-llama");
    if (llm.empty() || maker.empty()) GTEST_SKIP() << "candle-llm or candle-make-random-llama not built";
    dir = fs::temp_directory_path() / ("candle-llm-test-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    gguf = (dir / "tiny.gguf").string();
    auto r = run(maker.string() + " " + gguf + " --shape tiny --type q8_0 --seed 3");
    ASSERT_EQ(r.rc, 0) << r.err;
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir.empty()) fs::remove_all(dir, ec);
  }
  candle::test_models::ProgramResult llm_run(const std::string& args) {
    return run(llm.string() + " " + args, /*keep_stdout=*/true);
  }
};

TEST_F(LlmProgram, GreedyGenerationIsReproducibleAndReportsSpeed) {
  const auto a = llm_run("--model " + gguf + " --prompt 'ab ba' --temperature 0 --max-tokens 12");
  ASSERT_EQ(a.rc, 0) << a.err;
  EXPECT_EQ(a.out.rfind("ab ba", 0), 0u) << "the prompt is echoed first: " << a.out;
  EXPECT_GT(a.out.size(), std::string("ab ba").size()) << "nothing was generated";
  for (const char* what : {"prompt:", "tokens/s", "generation:", "time to first token", "peak memory"})
    EXPECT_NE(a.err.find(what), std::string::npos) << "missing '" << what << "' in:\n" << a.err;
  const auto b = llm_run("--model " + gguf + " --prompt 'ab ba' --temperature 0 --max-tokens 12");
  ASSERT_EQ(b.rc, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
}

// --decode graph (models::DecodeSession: prefill, then the recorded step, run eagerly on the CPU)
// prints what --decode cache prints, for one prompt and for a chat of two turns (the second fed
// after the first's answer); the program says which decode it took.
TEST_F(LlmProgram, GraphDecodeGivesTheCachedForwardsText) {
  for (const std::string mode : {"cache", "graph"}) {
    const auto r =
        llm_run("--model " + gguf + " --prompt 'ab ba' --temperature 0 --max-tokens 24 --decode " + mode);
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.err.find("decode: " + mode), std::string::npos) << r.err;
  }
  const std::string args = "--model " + gguf + " --prompt 'ab ba' --temperature 0 --max-tokens 24 --quiet";
  const auto cache = llm_run(args + " --decode cache"), graph = llm_run(args + " --decode graph");
  ASSERT_EQ(graph.rc, 0) << graph.err;
  EXPECT_EQ(graph.out, cache.out);
  auto chat = [&](const std::string& mode) {
    return run("printf 'ab\\nba ab\\n\\n' | " + llm.string() + " --model " + gguf +
                   " --chat --temperature 0 --max-tokens 6 --decode " + mode,
               /*keep_stdout=*/true);
  };
  const auto c1 = chat("cache"), c2 = chat("graph");
  ASSERT_EQ(c2.rc, 0) << c2.err;
  EXPECT_EQ(c2.out, c1.out);
  EXPECT_FALSE(c2.out.empty());
  EXPECT_NE(llm_run("--model " + gguf + " --decode fast").rc, 0) << "an unknown --decode is an error";
}

// --tp 2 on the CPU (two ranks, one thread each, the heads and MLP rows split, the q8_0 blocks of
// o / down by columns) writes --tp 1's greedy text; what cannot run split is refused in one line.
TEST_F(LlmProgram, TensorParallelRanksWriteTheSameText) {
  const std::string args = "--model " + gguf + " --prompt 'ab ba' --temperature 0 --max-tokens 24";
  const auto one = llm_run(args);
  ASSERT_EQ(one.rc, 0) << one.err;
  const auto two = llm_run(args + " --tp 2");
  ASSERT_EQ(two.rc, 0) << two.err;
  EXPECT_EQ(two.out, one.out);
  EXPECT_NE(two.err.find("tensor-parallel over 2 ranks"), std::string::npos) << two.err;
  for (const std::string bad : {" --tp 0", " --tp 2 --decode graph", " --tp 3"}) {
    const auto r = llm_run(args + bad);
    EXPECT_EQ(r.rc, 1) << bad;
    EXPECT_NE(r.err.find("candle-llm: error: "), std::string::npos) << bad << ": " << r.err;
  }
}

TEST_F(LlmProgram, SeededSamplingIsReproducible) {
  const std::string args = "--model " + gguf +
                           " --prompt ab --max-tokens 16 --temperature 1.5 --top-k 0 --top-p 1 "
                           "--min-p 0 --quiet --seed ";
  const auto a = llm_run(args + "7"), b = llm_run(args + "7");
  ASSERT_EQ(a.rc, 0) << a.err;
  ASSERT_EQ(b.rc, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_FALSE(a.out.empty());
  EXPECT_EQ(a.err.find("tokens/s"), std::string::npos) << "--quiet prints only the text";
}

TEST_F(LlmProgram, AStopStringEndsTheTextBeforeIt) {
  const std::string args = "--model " + gguf + " --prompt 'ab ba' --temperature 0 --max-tokens 24 --quiet";
  const auto full = llm_run(args);
  ASSERT_EQ(full.rc, 0) << full.err;
  // a stop string of two ASCII letters or digits from the greedy text, past its first bytes
  size_t at = std::string::npos;
  for (size_t i = 2; i + 1 < full.out.size(); ++i)
    if (std::isalnum(static_cast<unsigned char>(full.out[i])) &&
        std::isalnum(static_cast<unsigned char>(full.out[i + 1]))) {
      at = i;
      break;
    }
  if (at == std::string::npos) GTEST_SKIP() << "no ASCII pair in the greedy text";
  const std::string stop = full.out.substr(at, 2);
  const auto cut = llm_run(args + " --stop " + stop);
  ASSERT_EQ(cut.rc, 0) << cut.err;
  EXPECT_EQ(cut.out, full.out.substr(0, full.out.find(stop))) << "stop '" << stop << "'";
}

TEST_F(LlmProgram, MaxTokensZeroGeneratesNothing) {
  const auto r = llm_run("--model " + gguf + " --prompt ab --max-tokens 0 --quiet");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST_F(LlmProgram, ChatReadsTurnsUntilAnEmptyLine) {
  // this GGUF has no chat template: plain text turns
  const auto r = run("printf 'ab\\nba\\n\\n' | " + llm.string() + " --model " + gguf +
                         " --chat --temperature 0 --max-tokens 4",
                     /*keep_stdout=*/true);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("chat mode"), std::string::npos) << r.err;
  EXPECT_FALSE(r.out.empty());
}

TEST_F(LlmProgram, CtrlCStopsTheGenerationCleanly) {
  // a context long enough that the generation would run for minutes
  const std::string big = (dir / "long.gguf").string();
  ASSERT_EQ(run(maker.string() + " " + big + " --shape tiny --type q8_0 --seed 3 --ctx 65536").rc, 0);
  const std::string out = (dir / "out.txt").string(), err = (dir / "err.txt").string();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string cmd = "exec " + llm.string() + " --model " + big +
                            " --prompt 'ab ba' --temperature 0 --max-tokens 60000 >" + out + " 2>" + err;
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // wait until it prints generated text, then Ctrl-C
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60)) {
    std::error_code ec;
    if (fs::exists(out, ec) && fs::file_size(out, ec) > 64) break;
    usleep(20000);
  }
  ASSERT_EQ(kill(pid, SIGINT), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by the signal instead of stopping";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  std::ifstream e(err);
  const std::string err_text((std::istreambuf_iterator<char>(e)), std::istreambuf_iterator<char>());
  EXPECT_NE(err_text.find("generation:"), std::string::npos) << err_text;
  EXPECT_EQ(err_text.find("60000 tokens"), std::string::npos) << "it did not stop early: " << err_text;
}

// No arguments: the bundled default (models/llama2-c-kjv) continues the default prompt.
TEST_F(LlmProgram, WithoutAModelTheBundledDefaultGeneratesText) {
  const auto r =
      run("env -u CANDLE_LLM_MODEL -u CANDLE_MODELS_DIR " + llm.string() + " --max-tokens 24 --seed 1",
          /*keep_stdout=*/true);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.rfind("In the beginning", 0), 0u) << r.out;
  EXPECT_GT(r.out.size(), std::string("In the beginning").size() + 24) << r.out;
  EXPECT_NE(r.err.find("generation:"), std::string::npos) << r.err;
  const auto none = run("env -u CANDLE_LLM_MODEL CANDLE_MODELS_DIR=" + (dir / "none").string() + " " +
                        llm.string() + " --max-tokens 4");
  EXPECT_EQ(none.rc, 1);
  EXPECT_NE(none.err.find("bundled default"), std::string::npos) << none.err;
}

TEST_F(LlmProgram, AMissingModelIsOneClearLine) {
  const auto r = llm_run("--model " + (dir / "nope.gguf").string() + " --prompt ab");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
}

TEST_F(LlmProgram, ATruncatedGgufIsAnError) {
  const std::string cut = (dir / "cut.gguf").string();
  {
    std::ifstream in(gguf, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream out(cut, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
  }
  const auto r = llm_run("--model " + cut + " --prompt ab");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("candle-llm: error:"), std::string::npos) << r.err;
}

TEST_F(LlmProgram, AnUnknownArchitectureIsNamed) {
  const fs::path m = dir / "mamba";
  fs::create_directories(m);
  std::ofstream(m / "config.json") << R"({"model_type": "mamba", "hidden_size": 8})";
  const auto r = llm_run("--model " + m.string() + " --prompt ab");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("mamba"), std::string::npos) << r.err;
}

TEST_F(LlmProgram, AFolderWithoutTokenizerSaysSo) {
  const fs::path src = fs::path(CANDLE_TEST_DATA_DIR) / "llm" / "llama";
  if (!fs::exists(src / "config.json")) GTEST_SKIP() << "tests/data/llm/llama missing";
  const auto r = llm_run("--model " + src.string() + " --prompt ab");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("tokenizer"), std::string::npos) << r.err;
}

TEST_F(LlmProgram, BadOptionsAreRefused) {
  EXPECT_NE(llm_run("--model " + gguf + " --top-p 2").rc, 0);
  EXPECT_NE(llm_run("--model " + gguf + " --prompt a --chat").rc, 0);
  EXPECT_NE(llm_run("--model " + gguf + " --device nosuchdevice --prompt a").rc, 0);
}

}  // namespace
