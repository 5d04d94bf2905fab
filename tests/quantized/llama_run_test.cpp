// candle-make-random-llama's GGUF files as llama.cpp runs them: a tiny random llama (2 layers,
// dim 256, vocab 300) in f16, q8_0, q4_0 and q4_k_m is loaded by libllama (tools/llama_run.py over
// the prebuilt peer) and evaluated to finite logits over the whole vocabulary; q8_0's logits are
// f16's within quantization error. The file itself: llama.cpp's names and metadata, the synthetic
// vocabulary, llama-quantize's per-tensor types, and the same bytes for the same seed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "candle/quantized/gguf_file.h"
#include "models/program_util.h"
#include "quantized/gguf_test_util.h"

using namespace candle::quantized;
namespace fs = std::filesystem;
using candle::test_models::program;
using candle::test_models::run;

namespace {

struct RandomLlamaFixture : ::testing::Test {
  fs::path dir;
  fs::path exe = program("candle-make-random-llama");
  void SetUp() override {
    if (exe.empty()) GTEST_SKIP() << "candle-make-random-llama is not built";
    dir = fs::temp_directory_path() / ("candle-random-llama-test-" + std::to_string(::getpid()) + "-" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir);
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir.empty()) fs::remove_all(dir, ec);
  }
  fs::path make(const std::string& type, const std::string& extra = "") {
    const fs::path out = dir / ("tiny_" + type + ".gguf");
    auto r = run(exe.string() + " '" + out.string() +
                 "' --shape custom --layers 2 --dim 256 --ffn 512 --heads 4 "
                 "--kv-heads 2 --vocab 300 --seed 7 --force --type " +
                 type + " " + extra);
    EXPECT_EQ(r.rc, 0) << r.err;
    return out;
  }
};

// the values of "key=value" fields of the RESULT line of llama_run.py's output
std::string field(const std::string& out, const std::string& key) {
  const auto line = out.rfind("RESULT ");
  if (line == std::string::npos) return {};
  std::istringstream s(out.substr(line, out.find('\n', line) - line));
  for (std::string w; s >> w;)
    if (w.rfind(key + "=", 0) == 0) return w.substr(key.size() + 1);
  return {};
}

std::vector<double> shown_logits(const std::string& out) {
  std::vector<double> v;
  const auto at = out.find("logits[0:");
  if (at == std::string::npos) return v;
  std::istringstream s(out.substr(out.find(':', at + 9) + 1, out.find('\n', at) - out.find(':', at + 9) - 1));
  for (double x; s >> x;) v.push_back(x);
  return v;
}

TEST_F(RandomLlamaFixture, TheFileHasLlamaCppsLayout) {
  const auto c = gguf_file::Content::read(make("q4_k_m").string());
  EXPECT_EQ(c.get("general.architecture").to_string(), "llama");
  EXPECT_EQ(c.get("llama.block_count").to_u32(), 2u);
  EXPECT_EQ(c.get("llama.embedding_length").to_u32(), 256u);
  EXPECT_EQ(c.get("llama.attention.head_count_kv").to_u32(), 2u);
  EXPECT_EQ(c.get("llama.rope.dimension_count").to_u32(), 64u);
  EXPECT_EQ(c.get("general.file_type").to_u32(), 15u);  // LLAMA_FTYPE_MOSTLY_Q4_K_M
  const auto& tokens = c.get("tokenizer.ggml.tokens").to_vec();
  ASSERT_EQ(tokens.size(), 300u);
  EXPECT_EQ(c.get("tokenizer.ggml.token_type").to_vec().size(), 300u);
  EXPECT_EQ(tokens[1].to_string(), "<s>");
  EXPECT_EQ(tokens[3].to_string(), "<0x00>");
  EXPECT_EQ(tokens[258].to_string(), "<0xFF>");
  EXPECT_EQ(tokens[259].to_string(),
            "\xe2\x96\x81"
            "a");
  EXPECT_EQ(tokens[260].to_string(), "a");
  EXPECT_EQ(c.get("tokenizer.ggml.token_type").to_vec()[10].to_i32(), 6);
  std::set<std::string> unique;
  for (const auto& t : tokens) unique.insert(t.to_string());
  EXPECT_EQ(unique.size(), 300u);
  EXPECT_EQ(c.tensor_infos.size(), 1 + 2 * 9 + 2u);
  // ne[] = [n_in, n_out]: candle's shape [n_out, n_in]
  EXPECT_EQ(c.tensor_infos.at("blk.1.attn_k.weight").shape.dims(), (std::vector<size_t>{128, 256}));
  EXPECT_EQ(c.tensor_infos.at("blk.0.ffn_down.weight").shape.dims(), (std::vector<size_t>{256, 512}));
  // llama-quantize's Q4_K_M choices: q4_k, and q6_k for the output and for attn_v / ffn_down of
  // the _M mix's "more bits" layers (of 2 layers: layer 1)
  EXPECT_EQ(c.tensor_infos.at("blk.0.attn_q.weight").ggml_dtype, GgmlDType::Q4K);
  EXPECT_EQ(c.tensor_infos.at("token_embd.weight").ggml_dtype, GgmlDType::Q4K);
  EXPECT_EQ(c.tensor_infos.at("blk.0.attn_v.weight").ggml_dtype, GgmlDType::Q4K);
  EXPECT_EQ(c.tensor_infos.at("blk.1.attn_v.weight").ggml_dtype, GgmlDType::Q6K);
  EXPECT_EQ(c.tensor_infos.at("blk.0.ffn_down.weight").ggml_dtype, GgmlDType::Q4K);
  EXPECT_EQ(c.tensor_infos.at("blk.1.ffn_down.weight").ggml_dtype, GgmlDType::Q6K);
  EXPECT_EQ(c.tensor_infos.at("output.weight").ggml_dtype, GgmlDType::Q6K);
  EXPECT_EQ(c.tensor_infos.at("output_norm.weight").ggml_dtype, GgmlDType::F32);
}

TEST_F(RandomLlamaFixture, TheSeedDecidesTheBytes) {
  const fs::path a = make("q8_0", "--threads 1");
  const fs::path a2 = dir / "again.gguf";
  fs::copy_file(a, a2);
  make("q8_0", "--threads 2");
  EXPECT_EQ(test::file_bytes(a.string()), test::file_bytes(a2.string()));
  const fs::path b = dir / "seed8.gguf";
  ASSERT_EQ(run(exe.string() + " '" + b.string() + "' --vocab 300 --type q8_0 --seed 8").rc, 0);
  EXPECT_NE(test::file_bytes(a.string()), test::file_bytes(b.string()));
  // an existing output is kept without --force
  EXPECT_NE(run(exe.string() + " '" + b.string() + "' --type q8_0").rc, 0);
}

TEST_F(RandomLlamaFixture, BadShapesAreRefused) {
  const std::string out = " '" + (dir / "x.gguf").string() + "'";
  for (const char* args :
       {"--heads 5", "--heads 4 --kv-heads 3", "--vocab 100", "--type q9_9", "--shape huge"}) {
    auto r = run(exe.string() + out + " " + args);
    EXPECT_NE(r.rc, 0) << args;
    EXPECT_NE(r.err.find("error:"), std::string::npos) << args << ": " << r.err;
  }
}

TEST_F(RandomLlamaFixture, LlamaCppLoadsAndRunsEachType) {
  const std::string script = test::source_path("tools/llama_run.py");
  const std::string lib = test::source_path(
      "tools/peers/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/"
      "libllama.v0.5.0.so");
  if (std::system("python3 -c 'import ctypes' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "python3 is not available";
  if (!fs::exists(lib)) GTEST_SKIP() << "llama.cpp's libllama is not installed (run tools/install-deps.sh)";
  std::vector<double> f16;
  for (const char* type : {"f16", "q8_0", "q4_0", "q4_k_m"}) {
    const fs::path f = make(type);
    auto r = run("python3 '" + script + "' '" + f.string() + "' --threads 1 --n-tokens 6", true);
    ASSERT_EQ(r.rc, 0) << type << ": " << r.out << r.err;
    EXPECT_EQ(field(r.out, "n_vocab"), "300") << type << ": " << r.out;
    EXPECT_EQ(field(r.out, "n_tokens"), "6") << type << ": " << r.out;
    EXPECT_EQ(field(r.out, "finite"), "1") << type << ": " << r.out;
    const auto logits = shown_logits(r.out);
    ASSERT_EQ(logits.size(), 8u) << type << ": " << r.out;
    if (f16.empty()) f16 = logits;
    // the same model: logits of O(0.3) move by quantization error only
    const double tol = std::string(type) == "q8_0" ? 0.02 : 0.15;
    for (size_t i = 0; i < logits.size(); ++i) EXPECT_NEAR(logits[i], f16[i], tol) << type << " logit " << i;
  }
}

TEST_F(RandomLlamaFixture, LlamaRunFailsOnARefusedFile) {
  const std::string script = test::source_path("tools/llama_run.py");
  const std::string lib = test::source_path(
      "tools/peers/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/"
      "libllama.v0.5.0.so");
  if (std::system("python3 -c 'import ctypes' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "python3 is not available";
  if (!fs::exists(lib)) GTEST_SKIP() << "llama.cpp's libllama is not installed (run tools/install-deps.sh)";
  const auto bytes = test::file_bytes(make("q4_0").string());
  const fs::path cut = dir / "cut.gguf";
  {
    std::ofstream o(cut, std::ios::binary);
    o.write(reinterpret_cast<const char*>(bytes.data()), 4000);
  }
  auto r = run("python3 '" + script + "' '" + cut.string() + "' --threads 1", true);
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("refused"), std::string::npos) << r.err;
}

}  // namespace
