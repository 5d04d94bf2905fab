// Layers in training mode: BatchNorm (batch statistics, running averages) and Dropout.
#include <gtest/gtest.h>

#include "nn/nn_test_util.h"

using namespace candle;

namespace {

// (arange(16) ** 1.5 / 10).reshape(2, 2, 2, 2), as in the PyTorch reference below.
Tensor bn_input() {
  return Tensor::new_<float>(
             {0.000000f, 0.100000f, 0.282843f, 0.519615f, 0.800000f, 1.118034f, 1.469694f, 1.852026f,
              2.262742f, 2.700000f, 3.162278f, 3.648287f, 4.156922f, 4.687217f, 5.238320f, 5.809475f},
             Device::cpu())
      .reshape({2, 2, 2, 2});
}

void expect_near_vec(const std::vector<float>& got, const std::vector<float>& want, float tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

}  // namespace

// PyTorch 1.13: torch.nn.BatchNorm2d(2, momentum=0.1) in training mode on bn_input():
// output and running_mean [0.15844706, 0.31414610], running_var [1.12850893, 1.31385410].
TEST(NnTrainMode, BatchNormTrainMatchesPyTorch) {
  nn::VarMap vm;
  auto vb = nn::VarBuilder::from_varmap(vm, DType::F32, Device::cpu());
  nn::BatchNorm bn = nn::batch_norm(2, nn::BatchNormConfig{}, vb);
  Tensor out = bn.forward_t(bn_input(), true);
  expect_near_vec(
      out.flatten_all().to_vec1<float>(),
      {-1.120540f, -1.049820f, -0.920513f, -0.753067f, -1.230435f, -1.063308f, -0.878512f, -0.677597f,
       0.479674f, 0.788904f, 1.115828f, 1.459535f, 0.533624f, 0.812293f, 1.101897f, 1.402038f},
      2e-5f);
  expect_near_vec(bn.running_mean().to_vec1<float>(), {0.15844706f, 0.31414610f}, 1e-6f);
  expect_near_vec(bn.running_var().to_vec1<float>(), {1.12850893f, 1.31385410f}, 1e-5f);
}

TEST(NnTrainMode, BatchNormRunningStatsLiveInTheVarMap) {
  nn::VarMap vm;
  auto vb = nn::VarBuilder::from_varmap(vm, DType::F32, Device::cpu());
  nn::BatchNorm bn = nn::batch_norm(2, nn::BatchNormConfig{}, vb.pp("bn"));
  bn.forward_t(bn_input(), true);
  // the map's variables are the ones updated, so a saved checkpoint holds the statistics
  Tensor rm = vb.pp("bn").get({2}, "running_mean");
  expect_near_vec(rm.to_vec1<float>(), {0.15844706f, 0.31414610f}, 1e-6f);
}

TEST(NnTrainMode, BatchNormPlainTensorsAreCopied) {
  Tensor rm = Tensor::zeros({1}, DType::F32, Device::cpu()),
         rv = Tensor::ones({1}, DType::F32, Device::cpu());
  auto bn = nn::BatchNorm::new_no_bias(1, rm, rv, 0.0);
  bn.forward_t(Tensor::new_<float>({{1.f}, {3.f}}, Device::cpu()), true);
  EXPECT_EQ(rm.to_vec1<float>(), (std::vector<float>{0.f}));
  EXPECT_NEAR(bn.running_mean().to_vec1<float>()[0], 0.2f, 1e-6f);
}

TEST(NnTrainMode, BatchNormEvalAfterTrainUsesRunningStats) {
  auto bn = nn::BatchNorm::new_no_bias(1, Tensor::zeros({1}, DType::F32, Device::cpu()),
                                       Tensor::ones({1}, DType::F32, Device::cpu()), 0.0);
  bn.with_momentum(1.0);
  bn.forward_t(Tensor::new_<float>({{1.f}, {3.f}}, Device::cpu()), true);
  // momentum 1: running mean 2, running var 2 (unbiased)
  Tensor y = bn.forward_t(Tensor::new_<float>({{4.f}}, Device::cpu()), false);
  EXPECT_NEAR(y.flatten_all().to_vec1<float>()[0], 2.f / std::sqrt(2.f), 1e-6f);
  EXPECT_THROW(bn.with_momentum(1.5), Error);
}

// candle's remove_mean = false: x / sqrt(mean(x^2) + eps), running mean untouched.
TEST(NnTrainMode, BatchNormWithoutMeanRemoval) {
  nn::VarMap vm;
  auto vb = nn::VarBuilder::from_varmap(vm, DType::F32, Device::cpu());
  nn::BatchNormConfig cfg;
  cfg.remove_mean = false;
  cfg.affine = false;
  cfg.eps = 0.0;
  nn::BatchNorm bn = nn::batch_norm(1, cfg, vb);
  Tensor y = bn.forward_t(Tensor::new_<float>({{1.f}, {3.f}, {3.f}, {1.f}}, Device::cpu()), true);
  // mean square 5
  float s = std::sqrt(5.f);
  expect_near_vec(y.flatten_all().to_vec1<float>(), {1.f / s, 3.f / s, 3.f / s, 1.f / s}, 1e-6f);
  EXPECT_EQ(bn.running_mean().to_vec1<float>(), (std::vector<float>{0.f}));
  // 0.9 * 1 + 0.1 * 5 * 4 / 3
  EXPECT_NEAR(bn.running_var().to_vec1<float>()[0], 0.9f + 0.5f * 4.f / 3.f, 1e-6f);
}

TEST(NnTrainMode, DropoutIsAModuleTAndSeeded) {
  nn::Dropout d(0.5f);
  const nn::ModuleT& m = d;
  Tensor x = Tensor::ones({4096}, DType::F32, Device::cpu());
  Device::cpu().set_seed(42);
  auto a = m.forward_t(x, true).to_vec1<float>();
  Device::cpu().set_seed(42);
  auto b = m.forward_t(x, true).to_vec1<float>();
  EXPECT_EQ(a, b);
  size_t kept = 0;
  for (float v : a) {
    ASSERT_TRUE(v == 0.f || v == 2.f) << v;
    kept += v == 2.f;
  }
  EXPECT_NEAR(static_cast<double>(kept) / 4096.0, 0.5, 0.05);
  EXPECT_EQ(m.forward_t(x, false).to_vec1<float>(), x.to_vec1<float>());
}

TEST(NnTrainMode, DropoutRejectsBadProbability) {
  EXPECT_THROW(nn::Dropout(1.0f), Error);
  EXPECT_THROW(nn::Dropout(-0.1f), Error);
  EXPECT_EQ(nn::Dropout(0.25f).drop_p(), 0.25f);
}

TEST(NnTrainMode, DropoutZeroIsIdentityInTraining) {
  Tensor x = Tensor::new_<float>({1.f, -2.f, 3.f}, Device::cpu());
  EXPECT_EQ(nn::Dropout(0.f).forward_t(x, true).to_vec1<float>(), x.to_vec1<float>());
}
