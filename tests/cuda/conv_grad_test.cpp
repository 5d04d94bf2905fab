// Gradients of the convolution family on CUDA against the CPU's (through autograd, so each op's
// backward kernels run: conv2d_grad_kernel / _input, conv_bias_grad, conv_transpose2d's, pooling
// and resizing gradients), with cuDNN where it loads and with the project's own kernels
// (CANDLE_CUDA_CUDNN=0 in the process picks those). Skipped where cuda:0 does not open.
#include <gtest/gtest.h>

#include <string>

#include "candle/cuda.h"
#include "test_device.h"

namespace candle {
namespace {

struct Case {
  size_t b, ci, co, h, w, k, pad, stride, dil, groups;
};

// loss = sum(r * f(conv(x, w) + bias)) for a fixed random r: its gradients for x, w and bias.
std::vector<Tensor> grads(const Device& dev, const Case& c, int chain) {
  Device cpu = Device::cpu();
  cpu.set_seed(100 + chain);
  Var x = Var::from_tensor(Tensor::randn(0.0, 1.0, {c.b, c.ci, c.h, c.w}, DType::F32, cpu).to_device(dev));
  Var w = Var::from_tensor(
      Tensor::randn(0.0, 0.3, {c.co, c.ci / c.groups, c.k, c.k}, DType::F32, cpu).to_device(dev));
  Var bias = Var::from_tensor(Tensor::randn(0.0, 0.3, {c.co}, DType::F32, cpu).to_device(dev));
  Tensor y = x.as_tensor()
                 .conv2d(w.as_tensor(), c.pad, c.stride, c.dil, c.groups)
                 .broadcast_add(bias.as_tensor().reshape({1, c.co, 1, 1}));
  const size_t oh = y.dims()[2], ow = y.dims()[3];
  switch (chain) {
    case 1: y = y.max_pool2d(2); break;
    case 2: y = y.avg_pool2d(2); break;
    case 3: y = y.upsample_nearest2d(oh * 2, ow + 3); break;
    case 4: y = y.upsample_bilinear2d(oh + 5, ow * 2, false); break;
    default: break;
  }
  Tensor r = Tensor::randn(0.0, 1.0, y.dims(), DType::F32, cpu).to_device(dev);
  GradStore g = (y * r).sum_all().backward();
  return {*g.get(x.as_tensor()), *g.get(w.as_tensor()), *g.get(bias.as_tensor())};
}

TEST(CudaConvGrad, ConvPoolAndResizeGradientsMatchTheCpu) {
  std::optional<Device> dev;
  try {
    dev = Device::cuda(0);
  } catch (const Error& e) {
    GTEST_SKIP() << "no CUDA device here: " << e.what();
  }
  for (const Case& c : std::vector<Case>{{2, 3, 8, 17, 13, 3, 1, 1, 1, 1},
                                         {1, 4, 6, 20, 18, 3, 2, 2, 1, 2},
                                         {2, 2, 4, 15, 15, 5, 2, 1, 2, 1},
                                         {1, 16, 16, 32, 32, 3, 1, 1, 1, 1}}) {
    for (int chain = 0; chain <= 4; ++chain) {
      reset_backend_stats();
      cuda::reset_stats();
      auto got = grads(*dev, c, chain);
      auto s = cuda::stats();
      EXPECT_TRUE(s.round_trips.empty())
          << "round-trip: " << (s.round_trips.empty() ? "" : s.round_trips.begin()->first);
      auto want = grads(Device::cpu(), c, chain);
      const char* names[] = {"dx", "dw", "dbias"};
      for (int i = 0; i < 3; ++i) {
        std::string what = std::string(names[i]) + " k" + std::to_string(c.k) + " s" +
                           std::to_string(c.stride) + " d" + std::to_string(c.dil) + " g" +
                           std::to_string(c.groups) + " chain " + std::to_string(chain);
        test_device::expect_close(got[i], want[i], 2e-4, 2e-4, what);
      }
    }
  }
}

}  // namespace
}  // namespace candle
