// One training step of candle's mnist-training CNN (conv 1->32 5x5, max-pool 2, conv 32->64
// 5x5, max-pool 2, linear 1024->1024, relu, dropout 0.5, linear 1024->10; cross-entropy;
// AdamW lr 1e-3) on a random batch of 64 28x28 images: the step candle-mnist-training times
// per epoch, without the dataset (tools/mnist_step_torch.py runs the same step in PyTorch).
// Per phase as well: forward + loss, backward, optimizer step.
#include <benchmark/benchmark.h>

#include "candle/candle.h"
#include "candle/nn/nn.h"

namespace {

using namespace candle;

struct Net {
  nn::VarMap vm;
  nn::Conv2d c1, c2;
  nn::Linear fc1, fc2;
  nn::Dropout drop{0.5f};
  explicit Net(const nn::VarBuilder& vb)
      : c1(nn::conv2d(1, 32, 5, {}, vb.pp("c1"))),
        c2(nn::conv2d(32, 64, 5, {}, vb.pp("c2"))),
        fc1(nn::linear(1024, 1024, vb.pp("fc1"))),
        fc2(nn::linear(1024, 10, vb.pp("fc2"))) {}
  Tensor forward(const Tensor& x) const {
    Tensor h = c1.forward(x.reshape({x.dim(0), 1, 28, 28})).max_pool2d(2);
    h = c2.forward(h).max_pool2d(2).flatten_from(1);
    h = fc1.forward(h).relu();
    return fc2.forward(drop.forward_t(h, true));
  }
};

void BM_mnist_cnn_step(benchmark::State& state) {
  const Device dev = Device::cpu();
  dev.set_seed(1);
  nn::VarMap vm;
  Net net(nn::VarBuilder::from_varmap(vm, DType::F32, dev));
  nn::AdamW opt(vm.all_vars(), nn::ParamsAdamW{});
  const Tensor x = Tensor::rand(0.0, 1.0, {64, 784}, DType::F32, dev);
  const Tensor y = Tensor::rand(0.0, 10.0, {64}, DType::F32, dev).to_dtype(DType::U32);
  const int phase = static_cast<int>(state.range(0));  // 0 whole step, 1 forward, 2 backward, 3 optimizer
  for (auto _ : state) {
    if (phase == 0) {
      opt.backward_step(nn::loss::cross_entropy(net.forward(x), y));
      continue;
    }
    state.PauseTiming();
    Tensor loss;
    if (phase != 1) loss = nn::loss::cross_entropy(net.forward(x), y);
    std::optional<GradStore> grads;
    if (phase == 3) grads = loss.backward();
    state.ResumeTiming();
    if (phase == 1) loss = nn::loss::cross_entropy(net.forward(x), y);
    if (phase == 2) grads = loss.backward();
    if (phase == 3) opt.step(*grads);
    benchmark::DoNotOptimize(loss);
  }
}
BENCHMARK(BM_mnist_cnn_step)
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Arg(3)
    ->ArgName("phase")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(2.0);

}  // namespace

BENCHMARK_MAIN();
