// candle::nn's fused last-dim ops against their composed tensor-op versions, on one device:
//   ./nn_fused_bench vulkan --benchmark_filter=softmax      (lavapipe: CANDLE_VULKAN_ALLOW_CPU=1)
// "fused" is the op itself (the CPU kernel, or the backend's hook, e.g. Vulkan's ops_nn.cpp);
// "composed" the tensor-op version (softmax(x, -1), rms_norm_slow, layer_norm_slow, rope_slow,
// rope_i_slow) that nn falls back to. bytes_per_second: xs read once plus the output written.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <functional>
#include <string>

#include "candle/candle.h"
#include "candle/nn/ops.h"
#include "candle/nn/rotary_emb.h"

using namespace candle;

namespace {

// The device under test (argv[1] when it names one; the CPU otherwise).
Device& bench_device() {
  static Device d = Device::cpu();
  return d;
}

Tensor rnd(const Shape& s, DType dt) {
  Tensor t = Tensor::randn(0.0, 1.0, s, DType::F32, Device::cpu()).to_dtype(dt).to_device(bench_device());
  bench_device().synchronize();
  return t;
}

void run(benchmark::State& state, const Tensor& x, const std::function<Tensor()>& fn) {
  try {
    for (auto _ : state) {
      Tensor y = fn();
      benchmark::DoNotOptimize(y.storage().get());
      bench_device().synchronize();
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
  state.SetBytesProcessed(
      static_cast<int64_t>(state.iterations() * 2 * x.elem_count() * dtype_size(x.dtype())));
}

DType dt_of(int64_t a) { return a == 16 ? DType::F16 : DType::F32; }

// rows x 4096 (the arg: 16 = f16, else f32)
void BM_softmax(benchmark::State& state, bool fused) {
  Tensor x = rnd({4096, 4096}, dt_of(state.range(0)));
  run(state, x, [&] { return fused ? nn::ops::softmax_last_dim(x) : nn::ops::softmax(x, -1); });
}
void BM_rms_norm(benchmark::State& state, bool fused) {
  Tensor x = rnd({4096, 4096}, dt_of(state.range(0))), a = rnd({4096}, dt_of(state.range(0)));
  run(state, x, [&] { return fused ? nn::ops::rms_norm(x, a, 1e-5f) : nn::ops::rms_norm_slow(x, a, 1e-5f); });
}
void BM_layer_norm(benchmark::State& state, bool fused) {
  Tensor x = rnd({4096, 4096}, dt_of(state.range(0))), a = rnd({4096}, dt_of(state.range(0)));
  Tensor b = rnd({4096}, dt_of(state.range(0)));
  run(state, x,
      [&] { return fused ? nn::ops::layer_norm(x, a, b, 1e-5f) : nn::ops::layer_norm_slow(x, a, b, 1e-5f); });
}
// [b, h, t, d] = [4, 32, 1024, 128], cos/sin [1024, 64]
void BM_rope(benchmark::State& state, bool fused, bool interleaved) {
  DType dt = dt_of(state.range(0));
  Tensor x = rnd({4, 32, 1024, 128}, dt), c = rnd({1024, 64}, dt), s = rnd({1024, 64}, dt);
  run(state, x, [&] {
    if (interleaved) return fused ? nn::rotary_emb::rope_i(x, c, s) : nn::rotary_emb::rope_i_slow(x, c, s);
    return fused ? nn::rotary_emb::rope(x, c, s) : nn::rotary_emb::rope_slow(x, c, s);
  });
}

#define NN_BENCH(fn, name, ...) \
  BENCHMARK_CAPTURE(fn, name, __VA_ARGS__)->Arg(32)->Arg(16)->Unit(benchmark::kMicrosecond)->UseRealTime()

NN_BENCH(BM_softmax, fused, true);
NN_BENCH(BM_softmax, composed, false);
NN_BENCH(BM_rms_norm, fused, true);
NN_BENCH(BM_rms_norm, composed, false);
NN_BENCH(BM_layer_norm, fused, true);
NN_BENCH(BM_layer_norm, composed, false);
NN_BENCH(BM_rope, fused, true, false);
NN_BENCH(BM_rope, composed, false, false);
NN_BENCH(BM_rope, i_fused, true, true);
NN_BENCH(BM_rope, i_composed, false, true);

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && argv[1][0] != '-') {
    try {
      bench_device() = Device::from_name(argv[1]);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "nn_fused_bench: %s\n", e.what());
      return 1;
    }
    benchmark::AddCustomContext("device", argv[1]);
    for (int i = 1; i + 1 < argc; ++i) argv[i] = argv[i + 1];
    --argc;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
