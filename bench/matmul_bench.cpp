// matmul throughput: square f32 / f16 / bf16 products through Tensor::matmul, and the
// built-in GEMM directly. Threads: CANDLE_NUM_THREADS (else every core).
//   CANDLE_NUM_THREADS=2 ./matmul_bench
#include <benchmark/benchmark.h>

#include <algorithm>
#include <vector>

#include "../src/cpu/gemm.h"
#include "../src/cpu/parallel.h"
#include "candle/candle.h"

namespace {

using candle::DType;
using candle::Tensor;

void set_flops(benchmark::State& state, double n) {
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(candle::blas_name()));
}

void BM_matmul(benchmark::State& state, DType dt) {
  const size_t n = static_cast<size_t>(state.range(0));
  const auto dev = candle::Device::cpu();
  Tensor a = Tensor::rand(-1.0, 1.0, {n, n}, dt, dev);
  Tensor b = Tensor::rand(-1.0, 1.0, {n, n}, dt, dev);
  for (auto _ : state) {
    Tensor c = a.matmul(b);
    benchmark::DoNotOptimize(c.storage().get());
  }
  set_flops(state, double(n));
}

void BM_gemm_builtin_f32(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  for (auto _ : state) {
    candle::cpu::gemm_builtin(n, n, n, {a.data(), n, 1}, {b.data(), n, 1}, c.data(), n, false);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, double(n));
  state.SetLabel(std::string("builtin ") + candle::cpu::gemm_builtin_kernel_name());
}

// One conv-sized GEMM on the calling thread (conv workers each run serial GEMMs): the
// built-in kernel (what convs use) beside cpu::gemm (OpenBLAS when built in).
// Args: m (c_out), n (output positions per block), k (c_in * kh * kw), which: 0 cpu::gemm,
// 1 the built-in GEMM with A packed once (as the convolutions call it).
void BM_gemm_conv(benchmark::State& state) {
  const size_t m = size_t(state.range(0)), n = size_t(state.range(1)), k = size_t(state.range(2));
  const bool builtin = state.range(3) != 0;
  std::vector<float> a(m * k, 0.5f), b(k * n, 0.25f), c(m * n);
  const size_t threads = candle::get_num_threads();
  candle::set_num_threads(1);
  const auto packed = candle::cpu::pack_a(m, k, {a.data(), k, 1});
  for (auto _ : state) {
    if (builtin)
      candle::cpu::gemm_tile_exact(packed, n, {b.data(), n, 1}, c.data(), n, false);
    else
      candle::cpu::gemm(m, n, k, {a.data(), k, 1}, {b.data(), n, 1}, c.data(), n, false);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  candle::set_num_threads(threads);
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * double(m) * double(n) * double(k),
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(builtin ? std::string("builtin ") + candle::cpu::gemm_builtin_kernel_name()
                         : candle::blas_name());
}

// The GEMMs of one MNIST CNN training step (batch 64; tools/bench_mnist_vs_torch.py), with the
// operand layouts the convolutions pass. Args: shape (below), which (0 cpu::gemm = OpenBLAS when
// built in, 1 gemm_tile_exact = the built-in GEMM the convs call), workers: N >= 1 runs N serial
// calls at once in a parallel region, each on its own buffers (as the convs' parallel loops do;
// time per iteration = every worker's GEMM once); 0 runs one call on the calling thread with every
// thread of CANDLE_NUM_THREADS available to the GEMM's own parallel loops.
struct MnistGemm {
  const char* name;
  size_t m, n, k;
  bool a_col, b_col, packed, accumulate;  // column-major operands; A packed once; C += A B
};
constexpr MnistGemm kMnistGemms[] = {
    {"conv1 forward (8 images a block)", 32, 4608, 25, false, false, true, false},
    {"conv2 forward (2 images a block)", 64, 128, 800, false, false, true, false},
    {"conv2 kernel grad (a chunk)", 64, 800, 163, false, true, false, true},
    {"conv2 input grad (2 images a block)", 800, 128, 64, true, false, false, false},
    {"conv1 kernel grad (a chunk)", 32, 25, 2304, false, true, false, true},
};

void BM_gemm_mnist(benchmark::State& state) {
  const MnistGemm& g = kMnistGemms[state.range(0)];
  const bool builtin = state.range(1) != 0;
  const auto mode = static_cast<size_t>(state.range(2)), workers = std::max<size_t>(mode, 1);
  struct Buffers {
    std::vector<float> a, b, c;
  };
  std::vector<Buffers> bufs(workers);
  for (auto& w : bufs) {
    w.a.assign(g.m * g.k, 0.5f);
    w.b.assign(g.k * g.n, 0.25f);
    w.c.assign(g.m * g.n, 0.0f);
  }
  const candle::cpu::MatRef<float> a0{nullptr, g.a_col ? 1 : g.k, g.a_col ? g.m : 1};
  const candle::cpu::MatRef<float> b0{nullptr, g.b_col ? 1 : g.n, g.b_col ? g.k : 1};
  const auto packed = candle::cpu::pack_a(g.m, g.k, {bufs[0].a.data(), a0.rs, a0.cs});
  const size_t threads = candle::get_num_threads();
  if (mode > 0) candle::set_num_threads(workers);
  for (auto _ : state) {
    candle::cpu::parallel_for(workers, 1, [&](size_t w0, size_t w1) {
      for (size_t w = w0; w < w1; ++w) {
        Buffers& bw = bufs[w];
        const candle::cpu::MatRef<float> a{bw.a.data(), a0.rs, a0.cs}, b{bw.b.data(), b0.rs, b0.cs};
        if (!builtin)
          candle::cpu::gemm(g.m, g.n, g.k, a, b, bw.c.data(), g.n, g.accumulate);
        else if (g.packed)
          candle::cpu::gemm_tile_exact(packed, g.n, b, bw.c.data(), g.n, g.accumulate);
        else
          candle::cpu::gemm_tile_exact(g.m, g.n, g.k, a, b, bw.c.data(), g.n, g.accumulate);
      }
    });
    benchmark::ClobberMemory();
  }
  candle::set_num_threads(threads);
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * double(g.m) * double(g.n) * double(g.k) * double(workers),
                         benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(g.name) + ", " +
                 (builtin ? std::string("builtin ") + candle::cpu::gemm_builtin_kernel_name()
                          : std::string(candle::blas_name())));
}

BENCHMARK_CAPTURE(BM_matmul, f32, DType::F32)
    ->Arg(1024)
    ->Arg(2048)
    ->Arg(4096)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_matmul, f16, DType::F16)
    ->Arg(1024)
    ->Arg(2048)
    ->Arg(4096)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_matmul, bf16, DType::BF16)
    ->Arg(1024)
    ->Arg(2048)
    ->Arg(4096)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_gemm_builtin_f32)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();
// im2col 3x3 64->64 and 5x5 64->64 blocks, Winograd 64->64 and 192->64 blocks, 1x1 256->64 and 68->64
BENCHMARK(BM_gemm_conv)
    ->ArgsProduct({{64}, {227}, {576}, {0, 1}})
    ->ArgsProduct({{64}, {128}, {1600}, {0, 1}})
    ->ArgsProduct({{64}, {512}, {64}, {0, 1}})
    ->ArgsProduct({{64}, {256}, {192}, {0, 1}})
    ->ArgsProduct({{64}, {1024}, {256}, {0, 1}})
    ->ArgsProduct({{64}, {1024}, {68}, {0, 1}})
    ->ArgsProduct({{192}, {512}, {288}, {0, 1}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

BENCHMARK(BM_gemm_mnist)
    ->ArgsProduct({{0, 1, 2, 3, 4}, {0, 1}, {1, 16, 0}})
    ->Unit(benchmark::kMicrosecond)
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
