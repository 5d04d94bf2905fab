// The building blocks of a super-resolution net, timed per op (f32, batch 1):
// conv2d shapes at 512x512 and 2048x2048, nearest upsampling, channel cat,
// conv_transpose2d and pooling. Threads: CANDLE_NUM_THREADS (else every core).
//   CANDLE_NUM_THREADS=2 ./conv_bench --benchmark_filter=/512
// A first argument naming a device runs the same cases there (inputs made on the device
// beforehand; each iteration ends with the device synchronized):
//   ./conv_bench vulkan --benchmark_filter=/512      (lavapipe: CANDLE_VULKAN_ALLOW_CPU=1)
// tools/bench_conv_vs_torch.py runs it beside PyTorch. Names: BM_<op>/<case>/<size>.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>

#include "candle/candle.h"

namespace {

using candle::DType;
using candle::Tensor;

// An op another part of the family has not implemented yet is reported, not fatal.
#define TRY_OP try {
#define CATCH_OP                    \
  }                                 \
  catch (const std::exception& e) { \
    state.SkipWithError(e.what());  \
    break;                          \
  }

// The device under test (argv[1] when it names one; the CPU otherwise).
candle::Device& bench_device() {
  static candle::Device d = candle::Device::cpu();
  return d;
}

Tensor rnd(const candle::Shape& s) {
  Tensor t = Tensor::randn(0.0, 1.0, s, DType::F32, candle::Device::cpu()).to_device(bench_device());
  bench_device().synchronize();
  return t;
}

// Keeps the result alive until the device has finished computing it.
void done(const Tensor& y) {
  benchmark::DoNotOptimize(y.storage().get());
  bench_device().synchronize();
}

void BM_conv2d(benchmark::State& state, size_t c_in, size_t c_out, size_t k) {
  const size_t n = static_cast<size_t>(state.range(0));
  Tensor x = rnd({1, c_in, n, n});
  Tensor w = rnd({c_out, c_in, k, k});
  for (auto _ : state) {
    TRY_OP Tensor y = x.conv2d(w, k / 2, 1, 1, 1);
    done(y);
    CATCH_OP
  }
  const double flops = 2.0 * double(n * n) * double(c_in * c_out * k * k);
  state.counters["FLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_upsample_nearest(benchmark::State& state, size_t c, size_t scale) {
  const size_t n = static_cast<size_t>(state.range(0));
  Tensor x = rnd({1, c, n, n});
  for (auto _ : state) {
    TRY_OP Tensor y = x.upsample_nearest2d(n * scale, n * scale);
    done(y);
    CATCH_OP
  }
}

void BM_cat(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  Tensor a = rnd({1, 4, n, n}), b = rnd({1, 64, n, n});
  for (auto _ : state) {
    TRY_OP Tensor y = Tensor::cat({a, b}, 1);
    done(y);
    CATCH_OP
  }
}

void BM_conv_transpose2d(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  Tensor x = rnd({1, 64, n, n});
  Tensor w = rnd({64, 64, 2, 2});
  for (auto _ : state) {
    TRY_OP Tensor y = x.conv_transpose2d(w, 0, 0, 2, 1);
    done(y);
    CATCH_OP
  }
}

void BM_pool(benchmark::State& state, bool max) {
  const size_t n = static_cast<size_t>(state.range(0));
  Tensor x = rnd({1, 64, n, n});
  for (auto _ : state) {
    TRY_OP Tensor y = max ? x.max_pool2d(2) : x.avg_pool2d(2);
    done(y);
    CATCH_OP
  }
}

#define CONV(name, ci, co, k)                   \
  BENCHMARK_CAPTURE(BM_conv2d, name, ci, co, k) \
      ->Arg(512)                                \
      ->Arg(2048)                               \
      ->Unit(benchmark::kMillisecond)           \
      ->UseRealTime()

CONV(3x3_3_64, 3, 64, 3);
CONV(3x3_64_64, 64, 64, 3);
CONV(3x3_64_4, 64, 4, 3);
CONV(3x3_64_32, 64, 32, 3);
CONV(3x3_32_48, 32, 48, 3);
CONV(3x3_48_3, 48, 3, 3);
CONV(3x3_32_192, 32, 192, 3);
CONV(5x5_64_64, 64, 64, 5);
CONV(1x1_68_64, 68, 64, 1);
CONV(1x1_256_64, 256, 64, 1);

BENCHMARK_CAPTURE(BM_upsample_nearest, x4_48, 48, 4)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_upsample_nearest, x8_48, 48, 8)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_upsample_nearest, x4_192, 192, 4)
    ->Arg(512)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_upsample_nearest, x8_192, 192, 8)
    ->Arg(512)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_cat)->Name("BM_cat/4_64")->Arg(512)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_conv_transpose2d)
    ->Name("BM_conv_transpose2d/64_64_s2")
    ->Arg(512)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_pool, avg2x2, false)->Arg(512)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_pool, max2x2, true)->Arg(512)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && argv[1][0] != '-') {
    try {
      bench_device() = candle::Device::from_name(argv[1]);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "conv_bench: %s\n", e.what());
      return 1;
    }
    benchmark::AddCustomContext("device", argv[1]);
    for (int i = 1; i + 1 < argc; ++i) argv[i] = argv[i + 1];
    --argc;
  }
  benchmark::AddCustomContext("blas", candle::blas_info());
  benchmark::AddCustomContext("candle_threads", std::to_string(candle::get_num_threads()));
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
