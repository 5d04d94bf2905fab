// Every LLM family of the transformers fixtures (tests/data/llm/<family>, f16 weights loaded as f32)
// on every GPU device present against the CPU (issue 17: "GPU logits equal the CPU's within a stated
// tolerance for every family; greedy tokens identical to the CPU's for 32 tokens with f32 weights"):
// the prompt's last logits through the device's forward, then the greedy continuation through
// models::DecodeSession (what candle-llm decodes with: prefill, then the step recorded as a graph
// where the device records graphs), token for token the CPU's forward. Tolerance 1e-4 of the largest
// logit: both compute in f32, in another summation order (the fixtures' top-1 / top-2 margins are
// >= 0.022 of logits up to ~5, so equal tokens follow). Vulkan runs on lavapipe in CI. (In
// test_quantized, a device-test area: its ctest entries may open software Vulkan devices, which
// the model tests' program runs with --device auto must not.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "candle/candle.h"
#include "candle/models/causal_lm.h"
#include "test_device.h"

using namespace candle;

namespace {

CANDLE_GPU_DEVICE_TEST_SUITE(LlmDevice);

std::vector<float> host(const Tensor& t) {
  return t.to_device(Device::cpu()).to_dtype(DType::F32).flatten_all().to_vec1<float>();
}

uint32_t argmax(const std::vector<float>& v) {
  return static_cast<uint32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

CANDLE_DEVICE_TEST(LlmDevice, EveryFamilyGivesTheCpusLogitsAndGreedyTokens) {
  constexpr size_t kSteps = 32;
  const std::vector<uint32_t> prompt{1, 17, 42, 99, 5, 23, 64, 7};
  for (const char* family : {"llama", "llama3", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3",
                             "phi3", "mixtral", "qwen3_moe"}) {
    const std::string path = std::string(CANDLE_TEST_DATA_DIR) + "/llm/" + family;
    auto cpu = models::load_causal_lm(path, Device::cpu(), DType::F32);
    auto gpu = models::load_causal_lm(path, dev, DType::F32);
    std::vector<float> want =
        host(cpu->forward(Tensor::from_vec(prompt, {1, prompt.size()}, Device::cpu()), 0));
    models::DecodeSession sess(*gpu, dev, 16);
    std::vector<float> got = host(sess.feed(prompt));
    float scale = 0.0f, diff = 0.0f;
    std::vector<uint32_t> cpu_tokens, gpu_tokens;
    for (size_t i = 0;; ++i) {
      ASSERT_EQ(got.size(), want.size()) << family;
      for (size_t j = 0; j < want.size(); ++j) {
        scale = std::max(scale, std::fabs(want[j]));
        diff = std::max(diff, std::fabs(got[j] - want[j]));
      }
      cpu_tokens.push_back(argmax(want));
      gpu_tokens.push_back(argmax(got));
      if (i + 1 == kSteps) break;
      want =
          host(cpu->forward(Tensor::from_vec(std::vector<uint32_t>{cpu_tokens.back()}, {1, 1}, Device::cpu()),
                            prompt.size() + i));
      got = host(sess.feed({gpu_tokens.back()}));
    }
    std::printf("%s on %s: largest logit %.3g, largest difference %.3g over %zu positions\n", family,
                dev.to_string().c_str(), scale, diff, kSteps);
    EXPECT_LT(diff, 1e-4f * scale) << family << ": the largest logit difference over " << kSteps
                                   << " positions";
    EXPECT_EQ(gpu_tokens, cpu_tokens) << family << ": the greedy tokens";
  }
}

}  // namespace
