// candle-mnist-training as a user runs it: a small MNIST-format dataset written here, one epoch
// of the CNN, on the CPU and (when the Vulkan backend and a device are present) on Vulkan.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "models/program_util.h"

namespace fs = std::filesystem;
using candle::test_models::program;
using candle::test_models::run;

namespace {

void write_idx(const fs::path& p, const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data) {
  std::ofstream f(p, std::ios::binary);
  const uint8_t magic[4] = {0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  f.write(reinterpret_cast<const char*>(magic), 4);
  for (uint32_t d : dims) {
    const uint8_t be[4] = {uint8_t(d >> 24), uint8_t(d >> 16), uint8_t(d >> 8), uint8_t(d)};
    f.write(reinterpret_cast<const char*>(be), 4);
  }
  f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

// 28x28 images whose label is the brightest of 10 horizontal bands: learnable in one epoch
fs::path make_dataset() {
  fs::path dir = fs::temp_directory_path() / ("candle-mnist-program-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::mt19937 rng(7);
  for (auto [split, n] : {std::pair<const char*, uint32_t>{"train", 640}, {"t10k", 128}}) {
    std::vector<uint8_t> px(size_t{n} * 784), lab(n);
    for (uint32_t i = 0; i < n; ++i) {
      lab[i] = static_cast<uint8_t>(rng() % 10);
      for (size_t p = 0; p < 784; ++p) {
        const size_t band = (p / 28) * 10 / 28;
        px[i * 784 + p] = static_cast<uint8_t>(band == lab[i] ? 200 + rng() % 56 : rng() % 60);
      }
    }
    write_idx(dir / (std::string(split) + "-images-idx3-ubyte"), {n, 28, 28}, px);
    write_idx(dir / (std::string(split) + "-labels-idx1-ubyte"), {n}, lab);
  }
  return dir;
}

std::string mnist_cmd(const fs::path& exe, const fs::path& data, const std::string& device,
                      const std::string& model = "cnn") {
  return exe.string() + " --model " + model + " --epochs 1 --threads 2 --data " + data.string() +
         " --device " + device;
}

double accuracy_of(const std::string& out) {
  const auto at = out.find("test_acc ");
  return at == std::string::npos ? -1.0 : std::stod(out.substr(at + 9));
}

}  // namespace

TEST(MnistProgram, TrainsOneEpochOfTheCnnOnTheCpu) {
  fs::path exe = program("candle-mnist-training");
  if (exe.empty()) GTEST_SKIP() << "candle-mnist-training is not built";
  fs::path data = make_dataset();
  auto r = run(mnist_cmd(exe, data, "cpu"), true);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("epoch 1 train_loss"), std::string::npos) << r.out;
  EXPECT_GT(accuracy_of(r.out), 0.5) << r.out;  // chance is 0.1
  fs::remove_all(data);
}

TEST(MnistProgram, TrainsTheMlpOnVulkanWhenAsked) {
  fs::path exe = program("candle-mnist-training");
  if (exe.empty()) GTEST_SKIP() << "candle-mnist-training is not built";
  fs::path data = make_dataset();
  // the MLP: the CNN's convolutions take most of a minute on lavapipe
  auto r = run("CANDLE_VULKAN_ALLOW_CPU=1 " + mnist_cmd(exe, data, "vulkan", "mlp"), true);
  fs::remove_all(data);
  if (r.rc != 0 && (r.err.find("could not be loaded") != std::string::npos ||
                    r.err.find("no Vulkan") != std::string::npos))
    GTEST_SKIP() << "no Vulkan device here: " << r.err.substr(0, 300);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("training on vulkan"), std::string::npos) << r.err;
  EXPECT_GT(accuracy_of(r.out), 0.5) << r.out;
}

TEST(MnistProgram, AnUnknownDeviceIsAClearError) {
  fs::path exe = program("candle-mnist-training");
  if (exe.empty()) GTEST_SKIP() << "candle-mnist-training is not built";
  auto r = run(exe.string() + " --epochs 1 --device tpu:0 --data /nonexistent");
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("tpu"), std::string::npos) << r.err;
}
