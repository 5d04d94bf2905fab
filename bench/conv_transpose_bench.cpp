// conv_transpose2d on the CPU: the U-Net upsampling shape, 64 -> 64 channels, stride 2,
// kernel 2 (padding 0) and 4 (padding 1), on a [1, 64, 256, 256] f32 input.
//   bin/conv_transpose_bench ; beside PyTorch: torch.set_num_threads(n) and
//   F.conv_transpose2d(x, w, stride=2, padding=p) on the same shapes (CANDLE_NUM_THREADS=n).
#include <benchmark/benchmark.h>

#include <string>

#include "candle/candle.h"

using namespace candle;

namespace {

void BM_conv_transpose2d_s2(benchmark::State& state) {
  const size_t k = static_cast<size_t>(state.range(0));
  const size_t pad = k == 2 ? 0 : 1;
  Device::cpu().set_seed(1);
  Tensor x = Tensor::randn(0.f, 1.f, {1, 64, 256, 256}, Device::cpu());
  Tensor w = Tensor::randn(0.f, 0.1f, {64, 64, k, k}, Device::cpu());
  for (auto _ : state) {
    Tensor y = x.conv_transpose2d(w, pad, 0, 2, 1);
    benchmark::DoNotOptimize(y.storage().get());
  }
  const double flops = 2.0 * 64 * 64 * k * k * 256 * 256;
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(blas_name());
}

}  // namespace

BENCHMARK(BM_conv_transpose2d_s2)->Arg(2)->Arg(4)->Unit(benchmark::kMillisecond)->UseRealTime();

int main(int argc, char** argv) {
  benchmark::AddCustomContext("candle_threads", std::to_string(get_num_threads()));
  benchmark::AddCustomContext("blas", blas_info());
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
