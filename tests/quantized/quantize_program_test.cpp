// candle-quantize as a user runs it: a small llama-shaped f16 safetensors model to GGUF files of
// plain types and of llama.cpp's Q4_K_M mix; the bytes are QTensor::quantize's, the output is
// kept unless --force, llama.cpp's reader accepts the file, and the memory held does not grow
// with the model.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unordered_map>

#include "candle/candle.h"
#include "candle/quantized/gguf_file.h"
#include "candle/quantized/quantized.h"
#include "core/sanitizer.h"
#include "models/program_util.h"
#include "quantized/gguf_test_util.h"

using namespace candle;
using namespace candle::quantized;
namespace fs = std::filesystem;
using candle::test_models::program;
using candle::test_models::run;

namespace {

constexpr size_t kLayers = 8, kDim = 256;

// a llama-shaped model with Hugging Face's names, f16
std::unordered_map<std::string, Tensor> tiny_llama() {
  std::unordered_map<std::string, Tensor> t;
  Device cpu = Device::cpu();
  cpu.set_seed(3);
  auto w = [&](size_t rows, size_t cols) {
    return Tensor::randn(0.f, 0.5f, {rows, cols}, cpu).to_dtype(DType::F16);
  };
  for (size_t l = 0; l < kLayers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    t.emplace(p + "self_attn.q_proj.weight", w(kDim, kDim));
    t.emplace(p + "self_attn.v_proj.weight", w(kDim / 2, kDim));
    t.emplace(p + "mlp.down_proj.weight", w(kDim, 2 * kDim));
    t.emplace(p + "input_layernorm.weight", Tensor::ones({kDim}, DType::F16, cpu));
  }
  t.emplace("model.embed_tokens.weight", w(64, kDim));
  t.emplace("lm_head.weight", w(64, kDim));
  t.emplace("model.norm.weight", Tensor::ones({kDim}, DType::F16, cpu));
  return t;
}

struct QuantizeFixture : ::testing::Test {
  fs::path dir, input;
  fs::path exe = program("candle-quantize");
  void SetUp() override {
    if (exe.empty()) GTEST_SKIP() << "candle-quantize is not built";
    dir = fs::temp_directory_path() / ("candle-quantize-test-" + std::to_string(::getpid()) + "-" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir);
    input = dir / "model.safetensors";
    safetensors::save(tiny_llama(), input.string());
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir.empty()) fs::remove_all(dir, ec);
  }
  std::string cmd(const fs::path& out, const std::string& type, const std::string& extra = "") const {
    return exe.string() + " " + input.string() + " " + out.string() + " " + type + " " + extra;
  }
};

GgmlDType type_of(const gguf_file::Content& c, const std::string& name) {
  return c.tensor_infos.at(name).ggml_dtype;
}

}  // namespace

TEST_F(QuantizeFixture, Q4KMFollowsLlamaCppsMix) {
  const fs::path out = dir / "q4km.gguf";
  auto r = run(cmd(out, "Q4_K_M"));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("[   1/"), std::string::npos) << r.err;  // progress per tensor
  auto c = gguf_file::Content::read(out.string());
  EXPECT_EQ(c.get("general.file_type").to_u32(), 15u);  // LLAMA_FTYPE_MOSTLY_Q4_K_M
  EXPECT_EQ(c.tensor_infos.size(), kLayers * 4 + 3);
  // the "more bits" layers of 8: 0 (first eighth), 3 ((3 - 1) % 3 == 2), 6, 7 (last eighth)
  for (size_t l = 0; l < kLayers; ++l) {
    const bool more = l == 0 || l == 3 || l == 6 || l == 7;
    const std::string p = "model.layers." + std::to_string(l) + ".";
    EXPECT_EQ(type_of(c, p + "self_attn.v_proj.weight"), more ? GgmlDType::Q6K : GgmlDType::Q4K) << l;
    EXPECT_EQ(type_of(c, p + "mlp.down_proj.weight"), more ? GgmlDType::Q6K : GgmlDType::Q4K) << l;
    EXPECT_EQ(type_of(c, p + "self_attn.q_proj.weight"), GgmlDType::Q4K) << l;
    EXPECT_EQ(type_of(c, p + "input_layernorm.weight"), GgmlDType::F32) << l;
  }
  EXPECT_EQ(type_of(c, "lm_head.weight"), GgmlDType::Q6K);
  EXPECT_EQ(type_of(c, "model.embed_tokens.weight"), GgmlDType::Q4K);
}

TEST_F(QuantizeFixture, BytesAreQTensorQuantizes) {
  const fs::path out = dir / "q8.gguf";
  auto r = run(cmd(out, "q8_0"));
  ASSERT_EQ(r.rc, 0) << r.err;
  auto c = gguf_file::Content::read(out.string());
  auto src = tiny_llama();
  const std::string name = "model.layers.2.mlp.down_proj.weight";
  QTensor want = QTensor::quantize(src.at(name).to_dtype(DType::F32), GgmlDType::Q8_0);
  QTensor got = c.tensor(name);
  ASSERT_EQ(got.dtype(), GgmlDType::Q8_0);
  ASSERT_EQ(got.shape(), Shape({kDim, 2 * kDim}));
  EXPECT_TRUE(std::equal(want.data().begin(), want.data().end(), got.data().begin(), got.data().end()));
  EXPECT_EQ(type_of(c, "lm_head.weight"), GgmlDType::Q8_0);  // q8_0 asked: the output stays q8_0
}

TEST_F(QuantizeFixture, AnExistingOutputIsKeptUnlessForced) {
  const fs::path out = dir / "out.gguf";
  { std::ofstream(out) << "precious"; }
  auto r = run(cmd(out, "q4_0"));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("--force"), std::string::npos) << r.err;
  EXPECT_EQ(fs::file_size(out), 8u);
  r = run(cmd(out, "q4_0", "--force"));
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_GT(fs::file_size(out), 8u);
  r = run(exe.string() + " " + input.string() + " " + input.string() + " q4_0 --force");
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("the output is the input"), std::string::npos) << r.err;
}

TEST_F(QuantizeFixture, BadArgumentsAreClearErrors) {
  auto r = run(cmd(dir / "x.gguf", "q9_9"));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("unknown type 'q9_9'"), std::string::npos) << r.err;
  r = run(exe.string() + " " + (dir / "missing.safetensors").string() + " " + (dir / "x.gguf").string() +
          " q4_0");
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("not found"), std::string::npos) << r.err;
  r = run(cmd(dir / "nodir" / "x.gguf", "q4_0"));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("directory"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "x.gguf"));
}

TEST_F(QuantizeFixture, RequantizingAGgufNeedsTheFlag) {
  const fs::path q = dir / "q.gguf", q2 = dir / "q2.gguf";
  ASSERT_EQ(run(cmd(q, "q8_0")).rc, 0);
  auto r = run(exe.string() + " " + q.string() + " " + q2.string() + " q4_0");
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("--allow-requantize"), std::string::npos) << r.err;
  r = run(exe.string() + " " + q.string() + " " + q2.string() + " q4_0 --allow-requantize");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(type_of(gguf_file::Content::read(q2.string()), "model.layers.1.mlp.down_proj.weight"),
            GgmlDType::Q4_0);
}

TEST_F(QuantizeFixture, LlamaCppReadsTheOutput) {
  const std::string script = candle::quantized::test::source_path("tools/gguf_interop.py");
  const std::string lib = candle::quantized::test::source_path(
      "tools/peers/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so");
  if (std::system("python3 -c 'import ctypes' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "python3 is not available";
  if (!fs::exists(lib))
    GTEST_SKIP() << "llama.cpp's libggml-base.so is not installed (run tools/install-deps.sh)";
  const fs::path out = dir / "q4km.gguf";
  ASSERT_EQ(run(cmd(out, "q4_k_m")).rc, 0);
  auto r = run("python3 '" + script + "' accepts '" + out.string() + "'", true);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("ok"), std::string::npos) << r.out << r.err;
}

// --imatrix with llama-imatrix's legacy .dat: per entry the name, the call count and the values
// summed over the calls; the tensor's blocks are QTensor::quantize_imatrix's with sums / calls.
TEST_F(QuantizeFixture, ImatrixDatWeightsTheQuantizer) {
  const std::string name = "model.layers.1.self_attn.q_proj.weight";
  std::vector<float> sums(kDim);
  for (size_t i = 0; i < kDim; ++i) sums[i] = i % 5 == 0 ? 40.f : 0.5f;
  const int32_t calls = 4;
  const fs::path dat = dir / "imatrix.dat";
  {
    std::ofstream f(dat, std::ios::binary);
    auto put = [&](int32_t v) { f.write(reinterpret_cast<const char*>(&v), 4); };
    put(1);
    put(static_cast<int32_t>(name.size()));
    f.write(name.data(), static_cast<std::streamsize>(name.size()));
    put(calls);
    put(static_cast<int32_t>(kDim));
    f.write(reinterpret_cast<const char*>(sums.data()), static_cast<std::streamsize>(kDim * 4));
  }
  const fs::path out = dir / "im.gguf", plain = dir / "plain.gguf";
  auto r = run(cmd(out, "q4_k", "--imatrix " + dat.string()));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("(imatrix)"), std::string::npos) << r.err;
  ASSERT_EQ(run(cmd(plain, "q4_k")).rc, 0);
  std::vector<float> mean(kDim);
  for (size_t i = 0; i < kDim; ++i) mean[i] = sums[i] / calls;
  QTensor want = QTensor::quantize_imatrix(tiny_llama().at(name).to_dtype(DType::F32), mean, GgmlDType::Q4K);
  auto c = gguf_file::Content::read(out.string());
  QTensor got = c.tensor(name);
  EXPECT_TRUE(std::equal(want.data().begin(), want.data().end(), got.data().begin(), got.data().end()));
  QTensor unweighted = gguf_file::Content::read(plain.string()).tensor(name);
  EXPECT_FALSE(std::equal(unweighted.data().begin(), unweighted.data().end(), got.data().begin()));
  // a truncated imatrix is an error naming the file
  fs::resize_file(dat, 20);
  r = run(cmd(dir / "bad.gguf", "q4_k", "--imatrix " + dat.string()));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("imatrix.dat"), std::string::npos) << r.err;
}

// An error part way (an imatrix entry of the wrong length for a tensor after the first ones were
// written) leaves neither a half file nor a temporary, and an OUTPUT replaced with --force as it was.
TEST_F(QuantizeFixture, AFailurePartWayLeavesTheOutputAsItWas) {
  const std::string name = "model.layers.3.self_attn.q_proj.weight";
  const fs::path dat = dir / "short.dat";
  {
    std::ofstream f(dat, std::ios::binary);
    auto put = [&](int32_t v) { f.write(reinterpret_cast<const char*>(&v), 4); };
    put(1);
    put(static_cast<int32_t>(name.size()));
    f.write(name.data(), static_cast<std::streamsize>(name.size()));
    put(1);
    put(static_cast<int32_t>(kDim / 2));
    const std::vector<float> v(kDim / 2, 1.f);
    f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
  }
  const fs::path out = dir / "out.gguf";
  { std::ofstream(out) << "precious"; }
  for (const char* force : {"--force", ""}) {
    SCOPED_TRACE(force);
    if (!*force) fs::remove(out);
    auto r = run(cmd(out, "q4_k", "--imatrix " + dat.string() + " " + force));
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("[   1/"), std::string::npos) << r.err;  // tensors were written before it
    EXPECT_NE(r.err.find("imatrix entry " + name + " has 128 values"), std::string::npos) << r.err;
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator(dir)) left.push_back(e.path().filename().string());
    std::sort(left.begin(), left.end());
    if (*force) {
      EXPECT_EQ(left, (std::vector<std::string>{"model.safetensors", "out.gguf", "short.dat"}));
      EXPECT_EQ(fs::file_size(out), 8u);
    } else {
      EXPECT_EQ(left, (std::vector<std::string>{"model.safetensors", "short.dat"}));
    }
  }
}

namespace {

struct Measured {
  int rc;
  long peak_rss_kib;  // the child's ru_maxrss
  std::string err;
};

// Runs args[0] with args (no shell between: wait4's peak resident memory is the program's own,
// or this process's resident memory at the fork when that is larger), stderr to `err_path`.
Measured run_measured(const std::vector<std::string>& args, const fs::path& err_path) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const int err_fd = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (err_fd < 0) return {-1, 0, "cannot create " + err_path.string()};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(err_fd, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(err_fd);
  if (pid < 0) return {-1, 0, "fork failed"};
  int status = 0;
  struct rusage ru {};
  if (::wait4(pid, &status, 0, &ru) != pid) return {-1, 0, "wait4 failed"};
  std::ifstream f(err_path);
  std::string err((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ru.ru_maxrss, err};
}

long self_rss_kib() {
  std::ifstream f("/proc/self/statm");
  long pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * (::sysconf(_SC_PAGESIZE) / 1024);
}

}  // namespace

// A 384 MiB f32 model (24 matrices of 16 MiB) to f16: the input is mapped and each tensor's
// pages are let go once it is written, and the output goes to the file tensor by tensor, so the
// peak stays near one tensor. Holding the output until the end (192 MiB here) or keeping the
// whole input resident would both exceed the bound of a third of the model plus 64 MiB.
TEST_F(QuantizeFixture, PeakMemoryDoesNotGrowWithTheModel) {
#if CANDLE_ASAN
  GTEST_SKIP() << "under AddressSanitizer (its shadow memory and quarantine of freed blocks) the peak "
                  "resident memory says nothing about the program's";
#endif
  // the input's pages leave memory through madvise(MADV_PAGEOUT) (Linux 5.4+): without it the bound
  // cannot hold, which is no fault of the program's
#ifdef MADV_PAGEOUT
  {
    const long page = ::sysconf(_SC_PAGESIZE);
    void* probe = ::mmap(nullptr, static_cast<size_t>(page), PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(probe, MAP_FAILED);
    const int rc = ::madvise(probe, static_cast<size_t>(page), MADV_PAGEOUT);
    ::munmap(probe, static_cast<size_t>(page));
    if (rc != 0) GTEST_SKIP() << "this kernel refuses MADV_PAGEOUT";
  }
#else
  GTEST_SKIP() << "no MADV_PAGEOUT on this system";
#endif
  constexpr size_t kMatrices = 24, kRows = 1024, kCols = 4096;
  constexpr long kModelKib = long(kMatrices * kRows * kCols * 4 / 1024);
  const fs::path big = dir / "big.safetensors", out = dir / "big-f16.gguf";
  {
    std::unordered_map<std::string, Tensor> t;
    Device cpu = Device::cpu();
    cpu.set_seed(5);
    Tensor w = Tensor::randn(0.f, 0.02f, {kRows, kCols}, cpu);
    const char* proj[] = {"gate_proj", "up_proj", "down_proj"};
    for (size_t i = 0; i < kMatrices; ++i)  // distinct values per matrix, without drawing them all
      t.emplace("model.layers." + std::to_string(i / 3) + ".mlp." + proj[i % 3] + ".weight",
                w.affine(1.0 + 0.01 * double(i), 0.0));
    t.emplace("model.norm.weight", Tensor::ones({kCols}, DType::F32, cpu));
    safetensors::save(t, big.string());
  }
  // this process's freed model must not count for the child (a forked child starts with the
  // parent's resident pages)
  candle::empty_cpu_cache();
  ::malloc_trim(0);
  const long parent_kib = self_rss_kib();
  const Measured m = run_measured({exe.string(), big.string(), out.string(), "f16"}, dir / "err.txt");
  ASSERT_EQ(m.rc, 0) << m.err;
  EXPECT_NE(m.err.find("[  25/  25]"), std::string::npos) << m.err;
  const long bound_kib = kModelKib / 3 + 64 * 1024;
  EXPECT_LT(m.peak_rss_kib, bound_kib)
      << "model " << kModelKib / 1024 << " MiB, peak " << m.peak_rss_kib / 1024
      << " MiB, this process at the fork " << parent_kib / 1024 << " MiB";
  std::printf("candle-quantize f32 -> f16, %ld MiB model: peak RSS %ld MiB (this process %ld MiB)\n",
              kModelKib / 1024, m.peak_rss_kib / 1024, parent_kib / 1024);
  auto c = gguf_file::Content::read(out.string());
  ASSERT_EQ(c.tensor_infos.size(), kMatrices + 1);
  QTensor q = c.tensor("model.layers.7.mlp.down_proj.weight");
  EXPECT_EQ(q.dtype(), GgmlDType::F16);
  EXPECT_EQ(q.shape(), Shape({kRows, kCols}));
}
