// GPU op speed: element-wise ops, casts, reductions and matmuls on one device, timed with the
// device's synchronize() around repetitions (the median of 5 runs of `reps` calls after a warm-up).
// tools/bench_cuda_vs_torch.py runs it beside PyTorch on the same card.
//   gpu_ops_speed [--device cuda:0] [--only NAME]
// Prints one line per case: name, dtype, shape, ms per call, GB/s (bytes read + written) or TFLOP/s.
// CANDLE_CUDA_CUDNN=0 times the conv2d cases on the backend's own kernels instead of cuDNN.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "candle/backend/backend.h"
#include "candle/candle.h"
#include "gpu_timing.h"
#if CANDLE_GPU_OPS_SPEED_CUDA
#include "candle/cuda.h"
#endif
#if CANDLE_GPU_OPS_SPEED_MODELS
#include <unordered_map>

#include "candle/io/safetensors.h"
#include "candle/models/rdn.h"
#include "candle/nn/nn.h"
#endif

using namespace candle;

namespace {

using bench::time_ms;

std::string shape_str(const std::vector<size_t>& d) {
  std::string s;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i) s += 'x';
    s += std::to_string(d[i]);
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dev_name = "cuda:0", only;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--device") && i + 1 < argc)
      dev_name = argv[++i];
    else if (!std::strcmp(argv[i], "--only") && i + 1 < argc)
      only = argv[++i];
    else {
      std::fprintf(stderr, "usage: gpu_ops_speed [--device cuda:0] [--only NAME]\n");
      return 2;
    }
  }
  try {
    Device dev = Device::from_name(dev_name);
    std::printf("# device %s (%s)\n", dev.to_string().c_str(), dev.backend().name().c_str());
#if CANDLE_GPU_OPS_SPEED_CUDA
    cuda::Stats last = cuda::stats();
#endif
    auto want = [&](const std::string& n) { return only.empty() || n.find(only) != std::string::npos; };
    auto report_bw = [&](const char* name, DType dt, const std::vector<size_t>& shape, double ms,
                         double bytes) {
      std::printf("%-22s %-5s %-16s %9.4f ms %8.1f GB/s", name, std::string(dtype_name(dt)).c_str(),
                  shape_str(shape).c_str(), ms, bytes / ms / 1e6);
#if CANDLE_GPU_OPS_SPEED_CUDA
      // launches and cache misses per call of the last timed case (1 + 5 x 20 calls, and the case's setup)
      auto st = cuda::stats();
      std::printf("  [%.1f launches, %.1f allocs, %zu round-trips]", (st.launches - last.launches) / 101.0,
                  (st.allocations - last.allocations) / 101.0, st.round_trips.size());
      last = st;
#endif
      std::printf("\n");
      std::fflush(stdout);
    };
    if (want("tiny_op")) {
      // the host's cost of one small op (what a decode step of an LLM is made of): a 2048-element
      // f32 add issued 2000 times; "enqueue" is the host time before the synchronisation, "total"
      // includes the GPU finishing the queue (its per-kernel latency)
      Tensor a = Tensor::randn(0.0, 1.0, {2048}, DType::F32, dev), b = a.affine(0.5, 1.0);
      for (int i = 0; i < 200; ++i) (void)(a + b);
      dev.synchronize();
      constexpr int kOps = 2000;
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < kOps; ++i) (void)(a + b);
      const auto t1 = std::chrono::steady_clock::now();
      dev.synchronize();
      const auto t2 = std::chrono::steady_clock::now();
      std::printf("%-22s %-5s %-16s %9.4f ms %8.2f us/op enqueue, %.2f us/op total\n", "tiny_op", "f32",
                  "2048", std::chrono::duration<double, std::milli>(t2 - t0).count() / kOps,
                  std::chrono::duration<double, std::micro>(t1 - t0).count() / kOps,
                  std::chrono::duration<double, std::micro>(t2 - t0).count() / kOps);
      std::fflush(stdout);
#if CANDLE_GPU_OPS_SPEED_CUDA
      if (dev.is_cuda()) {
        // the same adds recorded as one CUDA graph (cuda::Graph) and replayed
        constexpr int kChain = 500;
        Tensor y;
        cuda::Graph g = cuda::Graph::capture(dev, [&] {
          y = a;
          for (int i = 0; i < kChain; ++i) y = y + b;
        });
        const double ms = time_ms(dev, 5, [&] { g.replay(); });
        std::printf("%-22s %-5s %-16s %9.4f ms %8.2f us/op in a graph of %zu nodes\n", "tiny_op_graph", "f32",
                    "2048", ms / kChain, ms * 1e3 / kChain, g.nodes());
      }
#endif
    }
    const std::vector<size_t> big = {8192, 8192};  // 64 M elements
    const double nb = 8192.0 * 8192.0;
    for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
      const double es = static_cast<double>(dtype_size(dt));
      Tensor x = Tensor::randn(0.0, 1.0, big, dt, dev), y = Tensor::randn(0.0, 1.0, big, dt, dev);
      Tensor row = Tensor::randn(0.0, 1.0, {8192}, dt, dev);
      if (want("copy")) report_bw("copy", dt, big, time_ms(dev, 20, [&] { (void)x.copy(); }), 2 * nb * es);
      if (want("exp")) report_bw("exp", dt, big, time_ms(dev, 20, [&] { (void)x.exp(); }), 2 * nb * es);
      if (want("gelu")) report_bw("gelu", dt, big, time_ms(dev, 20, [&] { (void)x.gelu(); }), 2 * nb * es);
      if (want("add")) report_bw("add", dt, big, time_ms(dev, 20, [&] { (void)(x + y); }), 3 * nb * es);
      if (want("add_bcast"))
        report_bw("add_bcast_row", dt, big, time_ms(dev, 20, [&] { (void)x.broadcast_add(row); }),
                  2 * nb * es);
      if (want("affine"))
        report_bw("affine", dt, big, time_ms(dev, 20, [&] { (void)x.affine(2.0, 1.0); }), 2 * nb * es);
      if (want("transpose"))
        report_bw("transpose_copy", dt, big, time_ms(dev, 20, [&] { (void)x.t().contiguous(); }),
                  2 * nb * es);
      if (want("cast") && dt == DType::F32)
        report_bw("cast_f32_f16", dt, big, time_ms(dev, 20, [&] { (void)x.to_dtype(DType::F16); }), nb * 6);
      if (want("sum")) report_bw("sum_all", dt, big, time_ms(dev, 20, [&] { (void)x.sum_all(); }), nb * es);
      if (want("sum_rows"))
        report_bw("sum_last_dim", dt, big, time_ms(dev, 20, [&] { (void)x.sum_keepdim(1); }), nb * es);
      if (want("sum_cols"))
        report_bw("sum_first_dim", dt, big, time_ms(dev, 20, [&] { (void)x.sum_keepdim(0); }), nb * es);
      if (want("max_rows"))
        report_bw("max_last_dim", dt, big, time_ms(dev, 20, [&] { (void)x.max_keepdim(1); }), nb * es);
    }
    for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
      for (size_t n : {1024, 2048, 4096, 8192}) {
        if (!want("matmul")) break;
        Tensor a = Tensor::randn(0.0, 1.0, {n, n}, dt, dev), b = Tensor::randn(0.0, 1.0, {n, n}, dt, dev);
        const int reps = n <= 2048 ? 20 : n == 4096 ? 5 : 2;
        double ms = time_ms(dev, reps, [&] { (void)a.matmul(b); });
        std::printf("%-22s %-5s %-16s %9.4f ms %8.1f TFLOP/s\n", "matmul",
                    std::string(dtype_name(dt)).c_str(), shape_str({n, n, n}).c_str(), ms,
                    2.0 * n * n * n / ms / 1e9);
        std::fflush(stdout);
#if CANDLE_GPU_OPS_SPEED_CUDA
        if (dt == DType::F32) {
          cuda::set_gemm_reduced_precision_f32(true);
          ms = time_ms(dev, reps, [&] { (void)a.matmul(b); });
          cuda::set_gemm_reduced_precision_f32(false);
          std::printf("%-22s %-5s %-16s %9.4f ms %8.1f TFLOP/s\n", "matmul_tf32", "f32",
                      shape_str({n, n, n}).c_str(), ms, 2.0 * n * n * n / ms / 1e9);
        }
#endif
      }
    }
    // attention-shaped batched products: [b*h, t, d] x [b*h, d, t]
    for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
      if (!want("bmm")) break;
      Tensor q = Tensor::randn(0.0, 1.0, {32, 2048, 128}, dt, dev),
             k = Tensor::randn(0.0, 1.0, {32, 2048, 128}, dt, dev);
      Tensor kt = k.transpose(1, 2);
      double ms = time_ms(dev, 10, [&] { (void)q.matmul(kt); });
      std::printf("%-22s %-5s %-16s %9.4f ms %8.1f TFLOP/s\n", "bmm_qkT", std::string(dtype_name(dt)).c_str(),
                  "32x2048x128x2048", ms, 2.0 * 32 * 2048 * 2048 * 128 / ms / 1e9);
    }
    // the upscaler's convolutions: b1, 64 -> 64 channels, 3x3, padding 1, 512x512, plain and with
    // bias + relu fused; through cuDNN where it loads, the backend's own kernels with
    // CANDLE_CUDA_CUDNN=0 (tensor cores for f16 / bf16; f32 on CUDA cores, then TF32 tensor cores)
    for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
      if (!want("conv2d")) break;
      Tensor x = Tensor::randn(0.0, 1.0, {1, 64, 512, 512}, dt, dev);
      Tensor w = Tensor::randn(0.0, 0.1, {64, 64, 3, 3}, dt, dev),
             bias = Tensor::randn(0.0, 0.1, {64}, dt, dev);
      const double flop = 2.0 * 64 * 64 * 9 * 512 * 512;
      auto report = [&](const char* name, const char* dname, double ms) {
        std::printf("%-22s %-5s %-16s %9.4f ms %8.1f TFLOP/s\n", name, dname, "1x64x512x512_k3", ms,
                    flop / ms / 1e9);
        std::fflush(stdout);
      };
      const std::string dname(dtype_name(dt));
      report("conv2d", dname.c_str(), time_ms(dev, 10, [&] { (void)x.conv2d(w, 1, 1, 1, 1); }));
      report("conv2d_bias_relu", dname.c_str(),
             time_ms(dev, 10, [&] { (void)x.conv2d_fused(w, bias, 1, 1, 1, 1, UnaryOp::Relu); }));
#if CANDLE_GPU_OPS_SPEED_CUDA
      if (dt == DType::F32) {
        cuda::set_gemm_reduced_precision_f32(true);
        report("conv2d_tf32", "f32", time_ms(dev, 10, [&] { (void)x.conv2d(w, 1, 1, 1, 1); }));
        cuda::set_gemm_reduced_precision_f32(false);
      }
#endif
    }
#if CANDLE_GPU_OPS_SPEED_MODELS
    // one training step of the bundled x4 upscaler: batch 4 of 64x64 crops, L1 against 256x256,
    // AdamW over every weight (tools/bench_upscale_train_vs_torch.py's step)
    if (want("rdn_train")) {
      const std::string path = std::string(CANDLE_GPU_OPS_SPEED_MODELS_DIR) + "/esrgan-slim/x4.safetensors";
      safetensors::MmapedSafetensors st(path);
      std::unordered_map<std::string, Tensor> weights;
      std::vector<Var> vars;
      for (const auto& name : st.names()) {
        Var v = Var::from_tensor(st.load(name, dev));
        vars.push_back(v);
        weights.emplace(name, v.as_tensor());
      }
      models::Rdn net(weights, st.metadata().at("topology"), dev);
      nn::AdamW opt(vars, nn::ParamsAdamW{});
      dev.set_seed(1);
      Tensor x = Tensor::rand(0.0, 255.0, {4, 3, 64, 64}, DType::F32, dev);
      Tensor target = Tensor::rand(0.0, 255.0, {4, 3, 256, 256}, DType::F32, dev);
      double ms = time_ms(dev, 5, [&] { opt.backward_step((net.forward_raw(x) - target).abs().mean_all()); });
      std::printf("%-22s %-5s %-16s %9.4f ms", "rdn_train_step", "f32", "4x3x64x64", ms);
#if CANDLE_GPU_OPS_SPEED_CUDA
      std::printf("  [%zu round-trips]", cuda::stats().round_trips.size());
#endif
      std::printf("\n");
    }
#endif
  } catch (const Error& e) {
    std::fprintf(stderr, "gpu_ops_speed: %s\n", e.what());
    return 1;
  }
  return 0;
}
