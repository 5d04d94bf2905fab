// candle's CPU quantized matmul (qmatmul_cpu) on LLaMA-7B's shapes: decode (m = 1) and prefill
// (m = 128, 512), with the weights' bytes per second beside a memcpy's. The comparison with
// llama.cpp, in one process on the same weights, is bench/ggml_peer/qmatmul_vs_ggml.cpp
// (tools/bench_qmatmul_vs_llamacpp.sh).
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "candle/dtype.h"
#include "candle/quantized/ggml_dtype.h"
#include "quantized/qmatmul_cpu.h"

using namespace candle::quantized;

namespace {

// random quants; every block's leading f16 (its scale, for most types) set to 0.01, and the
// K-quants' trailing f16 scale too: the timing does not depend on the values
std::vector<uint8_t> weights(GgmlDType t, size_t n, size_t k) {
  std::mt19937 rng(3);
  const size_t ts = ggml_type_size(t), nb = n * k / ggml_block_size(t);
  std::vector<uint8_t> w(nb * ts);
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  const uint16_t d = candle::f16(0.01f).bits;
  for (size_t b = 0; b < nb; ++b) {
    std::memcpy(w.data() + b * ts, &d, 2);
    if (t == GgmlDType::Q4_1 || t == GgmlDType::Q5_1 || t == GgmlDType::Q4K || t == GgmlDType::Q5K)
      std::memcpy(w.data() + b * ts + 2, &d, 2);
    if (t == GgmlDType::Q2K || t == GgmlDType::Q3K || t == GgmlDType::Q6K) {
      std::memcpy(w.data() + b * ts + ts - 2, &d, 2);
      std::memcpy(w.data() + b * ts + ts - 4, &d, 2);
    }
  }
  return w;
}

void BM_QMatMul(benchmark::State& state, GgmlDType t) {
  const size_t n = static_cast<size_t>(state.range(0)), k = static_cast<size_t>(state.range(1)),
               m = static_cast<size_t>(state.range(2));
  auto w = weights(t, n, k);
  std::vector<float> x(m * k), y(m * n);
  std::mt19937 rng(4);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  for (auto _ : state) {
    qmatmul_cpu(t, w.data(), n, k, x.data(), m, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * w.size()));
  state.counters["GMAC/s"] = benchmark::Counter(
      double(n) * double(k) * double(m) * 1e-9 * double(state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(qmatmul_cpu_kernel_name(t));
}

void Shapes(benchmark::internal::Benchmark* b) {
  for (auto [n, k] : {std::pair{4096, 4096}, {11008, 4096}, {4096, 11008}})
    for (int m : {1, 128, 512}) b->Args({n, k, m});
  b->ArgNames({"n", "k", "m"})->Unit(benchmark::kMillisecond)->UseRealTime();
}

void BM_Memcpy(benchmark::State& state) {
  const size_t bytes = size_t{256} << 20;
  std::vector<char> a(bytes, 1), b(bytes, 2);
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), bytes);
    benchmark::DoNotOptimize(b.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

}  // namespace

BENCHMARK_CAPTURE(BM_QMatMul, q4_0, GgmlDType::Q4_0)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_QMatMul, q8_0, GgmlDType::Q8_0)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_QMatMul, q4_K, GgmlDType::Q4K)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_QMatMul, q6_K, GgmlDType::Q6K)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_QMatMul, iq4_xs, GgmlDType::IQ4_XS)->Apply(Shapes);
BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
