// Quantized matmul speed on one GPU (QMatMul::forward with the weight's blocks on the device):
// Q4_0, Q8_0, Q4_K, Q6_K and, for comparison, an f16 weight as a plain matmul, at n = k = 4096 and
// the 7B model's MLP shapes (n 11008 k 4096, n 4096 k 11008). m = 1 (decode): us per call and GB/s
// of weight bytes read; m = 512 (prefill): TFLOP/s. Timed with the device's synchronize() around
// repetitions, the median of 5 runs after a warm-up.
//   gpu_qmatmul_speed [--device cuda:0]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "candle/candle.h"
#include "candle/quantized/quantized.h"
#include "gpu_timing.h"

using namespace candle;
using namespace candle::quantized;

using bench::time_ms;

int main(int argc, char** argv) {
  std::string dev_name = "cuda:0";
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--device") && i + 1 < argc) {
      dev_name = argv[++i];
    } else {
      std::fprintf(stderr, "usage: gpu_qmatmul_speed [--device cuda:0]\n");
      return 2;
    }
  }
  try {
    Device dev = Device::from_name(dev_name);
    Device cpu = Device::cpu();
    std::printf("# device %s\n", dev.to_string().c_str());
    std::printf("%-6s %6s %6s %10s %9s %10s %10s\n", "type", "n", "k", "MiB", "m=1 us", "m=1 GB/s",
                "m=512 TF/s");
    const std::pair<size_t, size_t> shapes[] = {{4096, 4096}, {11008, 4096}, {4096, 11008}};
    const GgmlDType types[] = {GgmlDType::Q4_0, GgmlDType::Q8_0, GgmlDType::Q4K, GgmlDType::Q6K,
                               GgmlDType::F16};
    for (auto [n, k] : shapes) {
      cpu.set_seed(1);
      Tensor w = Tensor::randn(0.f, 1.f, {n, k}, cpu);
      Tensor x1 = Tensor::randn(0.f, 1.f, {1, k}, cpu).to_device(dev);
      Tensor x512 = Tensor::randn(0.f, 1.f, {512, k}, cpu).to_device(dev);
      for (GgmlDType t : types) {
        std::function<Tensor(const Tensor&)> fwd;
        double bytes;
        Tensor xs1 = x1, xs512 = x512;
        if (t == GgmlDType::F16) {
          // the plain f16 matmul of an f16 model (x in f16 too)
          Tensor w16 = w.to_dtype(DType::F16).to_device(dev);
          xs1 = x1.to_dtype(DType::F16);
          xs512 = x512.to_dtype(DType::F16);
          bytes = static_cast<double>(n * k * 2);
          fwd = [w16](const Tensor& x) { return x.matmul(w16.t()); };
        } else {
          QTensor host = QTensor::quantize(w, t);
          auto owned = std::make_shared<std::vector<uint8_t>>(host.data().begin(), host.data().end());
          QTensor q = QTensor::from_bytes(owned, std::span<const uint8_t>(owned->data(), owned->size()),
                                          host.shape(), t, dev);
          bytes = static_cast<double>(q.storage_size_in_bytes());
          auto mm = std::make_shared<QMatMul>(QMatMul::from_qtensor(q));
          fwd = [mm](const Tensor& x) { return mm->forward(x); };
        }
        reset_backend_stats();
        const double ms1 = time_ms(dev, 200, [&] { fwd(xs1); });
        const double ms512 = time_ms(dev, 10, [&] { fwd(xs512); });
        size_t fallbacks = 0;
        for (const auto& [op, c] : backend_stats()) fallbacks += c;
        std::printf("%-6s %6zu %6zu %10.1f %9.1f %10.1f %10.1f%s\n", std::string(ggml_dtype_name(t)).c_str(),
                    n, k, bytes / (1 << 20), ms1 * 1e3, bytes / ms1 / 1e6,
                    2.0 * 512 * static_cast<double>(n) * static_cast<double>(k) / ms512 / 1e9,
                    fallbacks ? "  (CPU fallbacks counted!)" : "");
        std::fflush(stdout);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_qmatmul_speed: %s\n", e.what());
    return 1;
  }
  return 0;
}
