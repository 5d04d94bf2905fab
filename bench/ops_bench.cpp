// Elementwise, reduction and copy throughput on 16M-element f32 tensors (issue 2's set).
// Counters: bytes_per_second counts the bytes read plus written once each.
//   build-release/bin/ops_bench --benchmark_filter=... ; tools/bench_ops_vs_torch.py runs it beside PyTorch.
#include <benchmark/benchmark.h>

#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "candle/candle.h"

using namespace candle;

namespace {

constexpr size_t kRows = 4096, kCols = 4096;  // 16M elements

const Tensor& input_a() {
  static Tensor t = [] {
    Device::cpu().set_seed(1);
    return Tensor::randn(0.f, 1.f, {kRows, kCols}, Device::cpu());
  }();
  return t;
}
const Tensor& input_b() {
  static Tensor t = Tensor::randn(0.f, 1.f, {kRows, kCols}, Device::cpu());
  return t;
}
const Tensor& input_row() {
  static Tensor t = Tensor::randn(0.f, 1.f, {1, kCols}, Device::cpu());
  return t;
}

void run(benchmark::State& state, const std::function<Tensor()>& fn, double bytes_moved) {
  for (auto _ : state) {
    Tensor r = fn();
    benchmark::DoNotOptimize(r.storage().get());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes_moved));
}

const double kTensorBytes = double(kRows * kCols * 4);

// The reference: a plain memcpy of the same bytes into a reused buffer, split over the same
// number of threads as candle's kernels.
void BM_memcpy(benchmark::State& state) {
  std::vector<float> src(kRows * kCols, 1.f), dst(kRows * kCols);
  const size_t nt = get_num_threads(), n = src.size();
  for (auto _ : state) {
    std::vector<std::thread> pool;
    for (size_t t = 0; t < nt; ++t) {
      pool.emplace_back([&, t] {
        size_t b = n * t / nt, e = n * (t + 1) / nt;
        std::memcpy(dst.data() + b, src.data() + b, (e - b) * 4);
      });
    }
    for (auto& th : pool) th.join();
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * 2 * kTensorBytes));
}

}  // namespace

BENCHMARK(BM_memcpy)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(
    run, exp, [] { return input_a().exp(); }, 2 * kTensorBytes)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(
    run, gelu, [] { return input_a().gelu(); }, 2 * kTensorBytes)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(
    run, silu, [] { return input_a().silu(); }, 2 * kTensorBytes)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(
    run, add, [] { return input_a() + input_b(); }, 3 * kTensorBytes)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(
    run, broadcast_mul, [] { return input_a().broadcast_mul(input_row()); }, 2 * kTensorBytes)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(
    run, sum_last, [] { return input_a().sum_keepdim(-1); }, kTensorBytes)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(
    run, max_last, [] { return input_a().max_keepdim(-1); }, kTensorBytes)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(
    run, sum_all, [] { return input_a().sum_all(); }, kTensorBytes)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(
    run, softmax_last,
    [] {
      const Tensor& a = input_a();
      Tensor e = a.broadcast_sub(a.max_keepdim(-1)).exp();
      return e.broadcast_div(e.sum_keepdim(-1));
    },
    6 * kTensorBytes)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(
    run, transpose_contiguous, [] { return input_a().t().contiguous(); }, 2 * kTensorBytes)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

int main(int argc, char** argv) {
  // make the inputs before timing anything
  input_a();
  input_b();
  input_row();
  benchmark::AddCustomContext("candle_threads", std::to_string(get_num_threads()));
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
