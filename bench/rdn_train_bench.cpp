// One training step of the bundled x4 upscaler (ESRGAN slim): batch 4 of 64x64 crops, L1 loss
// against a 256x256 target, AdamW over every weight (tools/bench_upscale_train_vs_torch.py runs
// the same step in PyTorch beside it).
#include <benchmark/benchmark.h>

#include <string>

#include "candle/candle.h"
#include "candle/io/safetensors.h"
#include "candle/models/rdn.h"
#include "candle/nn/nn.h"

#ifndef CANDLE_MODELS_DIR
#define CANDLE_MODELS_DIR "models"
#endif

namespace {

void BM_rdn_train_step(benchmark::State& state) {
  using namespace candle;
  const Device dev = Device::cpu();
  dev.set_seed(1);
  const std::string path = std::string(CANDLE_MODELS_DIR) + "/esrgan-slim/x4.safetensors";
  safetensors::MmapedSafetensors st(path);
  std::unordered_map<std::string, Tensor> weights;
  std::vector<Var> vars;
  for (const auto& name : st.names()) {
    Var v = Var::from_tensor(st.load(name, dev));
    vars.push_back(v);
    weights.emplace(name, v.as_tensor());
  }
  models::Rdn net(weights, st.metadata().at("topology"), dev);
  nn::AdamW opt(vars, nn::ParamsAdamW{});
  const size_t b = 4, crop = 64;
  Tensor x = Tensor::rand(0.0, 255.0, {b, 3, crop, crop}, DType::F32, dev);
  Tensor target = Tensor::rand(0.0, 255.0, {b, 3, crop * 4, crop * 4}, DType::F32, dev);
  for (auto _ : state) {
    Tensor loss = (net.forward_raw(x) - target).abs().mean_all();
    opt.backward_step(loss);
    benchmark::DoNotOptimize(loss);
  }
}
BENCHMARK(BM_rdn_train_step)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

}  // namespace

BENCHMARK_MAIN();
