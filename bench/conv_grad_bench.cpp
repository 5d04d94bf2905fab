// The backward passes of a small CNN's layers (f32), timed per gradient: the mnist CNN at
// batch 64 (conv 1->32 5x5 on 28x28, conv 32->64 5x5 on 12x12, max_pool 2 of 32x24x24 and
// 64x8x8) and a 3x3 64->64 conv at 64x64, batch 4. Threads: CANDLE_NUM_THREADS (else every core).
//   CANDLE_NUM_THREADS=2 ./conv_grad_bench
// tools/bench_convgrad_vs_torch.py runs it beside PyTorch. Names: BM_convgrad/<layer>/<part>,
// part = kernel | input | bias | backward (every gradient the layer needs in training:
// the first conv has no input gradient).
#include <benchmark/benchmark.h>

#include <string>

#include "candle/backend/cpu_storage.h"
#include "candle/candle.h"
#include "ops/conv_grad.h"

namespace {

using candle::DType;
using candle::Shape;
using candle::Tensor;
namespace g = candle::ops::grad;

Tensor rnd(const Shape& s) { return Tensor::randn(0.0, 1.0, s, DType::F32, candle::Device::cpu()); }

struct ConvLayer {
  Shape x, w;
  size_t pad;
  bool first;  // no input gradient in training
};

void BM_conv(benchmark::State& state, ConvLayer L, std::string part) {
  Tensor x = rnd(L.x), w = rnd(L.w);
  const candle::ParamsConv2D p = g::make_conv2d_params(x, w, L.pad, 1, 1, 1);
  Tensor gy = rnd(Shape{p.b_size, p.c_out, p.out_h(), p.out_w()});
  for (auto _ : state) {
    if (part == "kernel" || part == "backward")
      benchmark::DoNotOptimize(g::conv2d_grad_kernel(x, gy, p).storage().get());
    if (part == "input" || (part == "backward" && !L.first))
      benchmark::DoNotOptimize(g::conv2d_grad_input(gy, w, p).storage().get());
    if (part == "bias" || part == "backward") benchmark::DoNotOptimize(g::conv_bias_grad(gy).storage().get());
  }
  const double macs = double(p.b_size * p.out_h() * p.out_w()) * double(p.c_out * L.w[1] * p.k_h * p.k_w);
  if (part == "kernel" || part == "input")
    state.counters["FLOP/s"] = benchmark::Counter(2 * macs, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_maxpool(benchmark::State& state, Shape xs) {
  Tensor x = rnd(xs);
  Tensor gy = rnd(Shape{xs[0], xs[1], xs[2] / 2, xs[3] / 2});
  for (auto _ : state) benchmark::DoNotOptimize(g::max_pool2d_grad(x, gy, {2, 2}, {2, 2}).storage().get());
}

const ConvLayer kC1{Shape{64, 1, 28, 28}, Shape{32, 1, 5, 5}, 0, true};
const ConvLayer kC2{Shape{64, 32, 12, 12}, Shape{64, 32, 5, 5}, 0, false};
const ConvLayer kC3{Shape{4, 64, 64, 64}, Shape{64, 64, 3, 3}, 1, false};

#define CONV_CASES(name, layer)                                  \
  BENCHMARK_CAPTURE(BM_conv, name##_kernel, layer, "kernel")     \
      ->Name("BM_convgrad/" #name "/kernel")                     \
      ->MeasureProcessCPUTime()                                  \
      ->UseRealTime();                                           \
  BENCHMARK_CAPTURE(BM_conv, name##_input, layer, "input")       \
      ->Name("BM_convgrad/" #name "/input")                      \
      ->MeasureProcessCPUTime()                                  \
      ->UseRealTime();                                           \
  BENCHMARK_CAPTURE(BM_conv, name##_bias, layer, "bias")         \
      ->Name("BM_convgrad/" #name "/bias")                       \
      ->MeasureProcessCPUTime()                                  \
      ->UseRealTime();                                           \
  BENCHMARK_CAPTURE(BM_conv, name##_backward, layer, "backward") \
      ->Name("BM_convgrad/" #name "/backward")                   \
      ->MeasureProcessCPUTime()                                  \
      ->UseRealTime();

CONV_CASES(mnist_conv1, kC1)
CONV_CASES(mnist_conv2, kC2)
CONV_CASES(conv3x3_64_b4, kC3)
BENCHMARK_CAPTURE(BM_maxpool, p1, Shape{64, 32, 24, 24})
    ->Name("BM_convgrad/mnist_pool1/input")
    ->MeasureProcessCPUTime()
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_maxpool, p2, Shape{64, 64, 8, 8})
    ->Name("BM_convgrad/mnist_pool2/input")
    ->MeasureProcessCPUTime()
    ->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  benchmark::AddCustomContext("blas", candle::blas_info());
  benchmark::AddCustomContext("candle_threads", std::to_string(candle::get_num_threads()));
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
