// Pooling and resizing throughput on large f32 feature maps (2 threads by default; set
// CANDLE_NUM_THREADS or --threads=N). bytes_per_second counts the bytes read plus written once.
//   bin/pool_bench --benchmark_filter=...
// The PyTorch side of the comparison (torch.set_num_threads(2), same shapes):
//   F.interpolate(x, scale_factor=s, mode='nearest'), F.avg_pool2d(x, 2), F.max_pool2d(x, 2),
//   F.interpolate(x, scale_factor=2, mode='bilinear', align_corners=False)
// Output sizes: nearest x4 of 48 x 512 x 512 is 805 MB, x8 of 48 channels and x4 of 192
// channels are 3.2 GB each (the 192-channel x8 case, 12.9 GB, is left out).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <tuple>

#include "candle/candle.h"

using namespace candle;

namespace {

const Tensor& input(size_t c, size_t h, size_t w) {
  static std::map<std::tuple<size_t, size_t, size_t>, Tensor> cache;
  auto key = std::make_tuple(c, h, w);
  auto it = cache.find(key);
  if (it == cache.end()) {
    // One input at a time: the large ones take hundreds of MB.
    cache.clear();
    Device::cpu().set_seed(3);
    it = cache.emplace(key, Tensor::randn(0.f, 1.f, {1, c, h, w}, Device::cpu())).first;
  }
  return it->second;
}

void run(benchmark::State& state, const std::function<Tensor()>& fn, double bytes) {
  const char* env = std::getenv("CANDLE_NUM_THREADS");
  set_num_threads(env ? std::strtoul(env, nullptr, 10) : 2);
  for (auto _ : state) {
    Tensor r = fn();
    benchmark::DoNotOptimize(r.storage().get());
  }
  state.SetBytesProcessed(static_cast<int64_t>(static_cast<double>(state.iterations()) * bytes));
}

void BM_nearest(benchmark::State& state) {
  const size_t c = static_cast<size_t>(state.range(0)), s = static_cast<size_t>(state.range(1));
  const Tensor& x = input(c, 512, 512);
  const double in = double(c) * 512 * 512 * 4;
  run(
      state, [&] { return x.upsample_nearest2d(512 * s, 512 * s); }, in + in * double(s * s));
}
BENCHMARK(BM_nearest)
    ->Args({48, 4})
    ->Args({48, 8})
    ->Args({192, 4})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinWarmUpTime(0.5)
    ->MinTime(3.0);

void BM_avg_pool_2x2(benchmark::State& state) {
  const Tensor& x = input(64, 2048, 2048);
  const double in = 64.0 * 2048 * 2048 * 4;
  run(
      state, [&] { return x.avg_pool2d(2); }, in * 1.25);
}
BENCHMARK(BM_avg_pool_2x2)->Unit(benchmark::kMillisecond)->UseRealTime()->MinWarmUpTime(0.5)->MinTime(3.0);

void BM_max_pool_2x2(benchmark::State& state) {
  const Tensor& x = input(64, 2048, 2048);
  const double in = 64.0 * 2048 * 2048 * 4;
  run(
      state, [&] { return x.max_pool2d(2); }, in * 1.25);
}
BENCHMARK(BM_max_pool_2x2)->Unit(benchmark::kMillisecond)->UseRealTime()->MinWarmUpTime(0.5)->MinTime(3.0);

void BM_bilinear_x2(benchmark::State& state) {
  const Tensor& x = input(48, 256, 256);
  const double in = 48.0 * 256 * 256 * 4;
  run(
      state, [&] { return x.upsample_bilinear2d(512, 512, false); }, in * 5);
}
BENCHMARK(BM_bilinear_x2)->Unit(benchmark::kMillisecond)->UseRealTime()->MinWarmUpTime(0.5)->MinTime(3.0);

}  // namespace

BENCHMARK_MAIN();
