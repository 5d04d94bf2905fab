// The two jobs the CUDA backend must carry whole: the bundled upscaler's forward (every output
// pixel within 1 of the CPU's after clamp + round) and a CNN training step (conv, max-pool, linear,
// cross-entropy, backward, AdamW: the weights within tolerance of the CPU's), both with zero CPU
// round-trips. Skipped where cuda:0 does not open.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "candle/cuda.h"
#include "candle/models/rdn.h"
#include "candle/nn/loss.h"
#include "candle/nn/optim.h"
#include "models/png_util.h"
#include "test_device.h"
#include "test_util.h"

namespace candle {
namespace {

std::optional<Device> cuda_or_reason(std::string& why) {
  try {
    return Device::cuda(0);
  } catch (const Error& e) {
    why = e.what();
    return std::nullopt;
  }
}

#define CUDA_OR_SKIP(dev)                                          \
  std::string why_;                                                \
  auto dev##_opt = cuda_or_reason(why_);                           \
  if (!dev##_opt) GTEST_SKIP() << "no CUDA device here: " << why_; \
  const Device& dev = *dev##_opt

const std::string kModels = std::string(CANDLE_TEST_DATA_DIR) + "/../../models/";

void check_upscale(const Device& dev, const std::string& model, size_t scale) {
  const std::string path = kModels + model + "/x" + std::to_string(scale) + ".safetensors";
  Tensor img = test_models::load_rgb(kModels + "esrgan-slim/fixture.png");
  Tensor want = models::Rdn::load(path, Device::cpu()).forward(img);
  models::Rdn net = models::Rdn::load(path, dev);
  Tensor in = img.to_device(dev);
  dev.synchronize();
  reset_backend_stats();
  cuda::reset_stats();
  Tensor out = net.forward(in);
  dev.synchronize();
  auto s = cuda::stats();
  EXPECT_TRUE(s.round_trips.empty()) << model << " x" << scale << " round-trip: "
                                     << (s.round_trips.empty() ? "" : s.round_trips.begin()->first);
  EXPECT_TRUE(backend_stats().empty());
  EXPECT_GT(s.launches, 12u);
  ASSERT_EQ(out.dims(), want.dims());
  const auto d = test_util::image_diff(out, want);
  EXPECT_LE(d.worst, 1.0f) << model << " x" << scale << ": " << d.differ << " of " << d.total
                           << " values differ";
}

TEST(CudaUpscale, SlimX2AndX4MatchTheCpuWithinOneWithoutRoundTrips) {
  CUDA_OR_SKIP(dev);
  check_upscale(dev, "esrgan-slim", 2);
  check_upscale(dev, "esrgan-slim", 4);
}

TEST(CudaUpscale, MediumX4MatchesTheCpuWithinOneWithoutRoundTrips) {
  CUDA_OR_SKIP(dev);
  check_upscale(dev, "esrgan-medium", 4);
}

// conv 1->8 3x3 (+bias) -> relu -> max-pool 2 -> linear 8*6*6 -> 10 -> cross-entropy, AdamW.
struct Net {
  Var cw, cb, lw, lb;
  Tensor forward(const Tensor& x) const {
    Tensor h = x.conv2d(cw.as_tensor(), 0, 1, 1, 1).broadcast_add(cb.as_tensor().reshape({1, 8, 1, 1}));
    h = h.relu().max_pool2d(2).flatten_from(1);
    return h.matmul(lw.as_tensor().t()).broadcast_add(lb.as_tensor());
  }
  std::vector<Var> vars() const { return {cw, cb, lw, lb}; }
};

Net make_net(const Device& dev) {
  Device cpu = Device::cpu();
  cpu.set_seed(11);
  auto v = [&](std::vector<size_t> s, double sd) {
    return Var::from_tensor(Tensor::randn(0.0, sd, s, DType::F32, cpu).to_device(dev));
  };
  Net n{v({8, 1, 3, 3}, 0.3), v({8}, 0.1), v({10, 288}, 0.05), v({10}, 0.1)};
  return n;
}

TEST(CudaTraining, CnnStepsMatchTheCpuWithoutRoundTrips) {
  CUDA_OR_SKIP(dev);
  Device cpu = Device::cpu();
  cpu.set_seed(5);
  Tensor x = Tensor::rand(0.0, 1.0, {16, 1, 14, 14}, DType::F32, cpu);
  Tensor y =
      Tensor::from_vec(std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5}, {16}, cpu);
  Net a = make_net(cpu), b = make_net(dev);
  nn::AdamW oa(a.vars()), ob(b.vars());
  Tensor xd = x.to_device(dev), yd = y.to_device(dev);
  dev.synchronize();
  reset_backend_stats();
  cuda::reset_stats();
  float la = 0, lb = 0;
  for (int step = 0; step < 3; ++step) {
    Tensor loss_a = nn::loss::cross_entropy(a.forward(x), y);
    Tensor loss_b = nn::loss::cross_entropy(b.forward(xd), yd);
    oa.backward_step(loss_a);
    ob.backward_step(loss_b);
    la = loss_a.to_scalar<float>();
    lb = loss_b.to_device(cpu).to_scalar<float>();
    EXPECT_NEAR(lb, la, 1e-4) << "step " << step;
  }
  auto s = cuda::stats();
  EXPECT_TRUE(s.round_trips.empty()) << "round-trip: "
                                     << (s.round_trips.empty() ? "" : s.round_trips.begin()->first);
  EXPECT_TRUE(backend_stats().empty());
  auto va = a.vars(), vb = b.vars();
  for (size_t i = 0; i < va.size(); ++i)
    test_device::expect_close(vb[i].as_tensor(), va[i].as_tensor(), 2e-5, 1e-4,
                              "weights " + std::to_string(i));
}

}  // namespace
}  // namespace candle
