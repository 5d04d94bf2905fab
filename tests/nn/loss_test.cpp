// Losses: candle-nn/tests/loss.rs and PyTorch 1.13's torch.nn.functional values.
#include "candle/nn/loss.h"

#include <gtest/gtest.h>

#include "nn/nn_test_util.h"

using namespace candle;

namespace {

Tensor ce_input() {
  return Tensor::new_<float>({{1.1050f, 0.3013f, -1.5394f, -2.1528f, -0.8634f},
                              {1.0730f, -0.9419f, -0.1670f, -0.6582f, 0.5061f},
                              {0.8318f, 1.1154f, -0.3610f, 0.5351f, 1.0830f}},
                             Device::cpu());
}

// [[0.5, -1.2, 3.0], [2.2, 0.1, -0.4]] against [[0, 0.3, 1], [-1, 0.2, -0.4]].
Tensor reg_a() { return Tensor::new_<float>({{0.5f, -1.2f, 3.0f}, {2.2f, 0.1f, -0.4f}}, Device::cpu()); }
Tensor reg_b() { return Tensor::new_<float>({{0.0f, 0.3f, 1.0f}, {-1.0f, 0.2f, -0.4f}}, Device::cpu()); }

}  // namespace

// candle: nll(log_softmax(input)) and cross_entropy(input) round to 1.1312; PyTorch's
// F.cross_entropy gives 1.1312334537506104.
TEST(NnLoss, CandleNllAndCrossEntropy) {
  Tensor target = Tensor::new_<uint32_t>({1, 0, 4}, Device::cpu());
  Tensor nll = nn::loss::nll(nn::ops::log_softmax(ce_input(), 1), target);
  EXPECT_EQ(nll.rank(), 0u);
  EXPECT_NEAR(nll.to_scalar<float>(), 1.1312334f, 1e-6f);
  EXPECT_NEAR(nn::loss::cross_entropy(ce_input(), target).to_scalar<float>(), 1.1312334f, 1e-6f);
}

TEST(NnLoss, NllAcceptsU8AndI64Targets) {
  Tensor ls = nn::ops::log_softmax(ce_input(), 1);
  float u32 = nn::loss::nll(ls, Tensor::new_<uint32_t>({1, 0, 4}, Device::cpu())).to_scalar<float>();
  EXPECT_EQ(nn::loss::nll(ls, Tensor::new_<uint8_t>({1, 0, 4}, Device::cpu())).to_scalar<float>(), u32);
  EXPECT_EQ(nn::loss::nll(ls, Tensor::new_<int64_t>({1, 0, 4}, Device::cpu())).to_scalar<float>(), u32);
}

TEST(NnLoss, NllIsMinusMeanOfPickedEntries) {
  Tensor inp = Tensor::new_<float>({{-1.f, -2.f}, {-3.f, -4.f}}, Device::cpu());
  // -(-2 + -3) / 2
  EXPECT_EQ(nn::loss::nll(inp, Tensor::new_<uint32_t>({1, 0}, Device::cpu())).to_scalar<float>(), 2.5f);
}

TEST(NnLoss, NllRejectsBadShapes) {
  Tensor ls = nn::ops::log_softmax(ce_input(), 1);
  EXPECT_THROW(nn::loss::nll(ls, Tensor::new_<uint32_t>({1, 0}, Device::cpu())), Error);
  EXPECT_THROW(nn::loss::nll(ls, Tensor::new_<uint32_t>({{1, 0, 4}}, Device::cpu())), Error);
  EXPECT_THROW(nn::loss::nll(ls.flatten_all(), Tensor::new_<uint32_t>({1}, Device::cpu())), Error);
  EXPECT_THROW(nn::loss::nll(ls, Tensor::new_<float>({1.f, 0.f, 4.f}, Device::cpu())), Error);
  EXPECT_THROW(nn::loss::cross_entropy(ce_input().flatten_all(), Tensor::new_<uint32_t>({1}, Device::cpu())),
               Error);
  // a class id out of range is an error from gather, not a read past the row
  EXPECT_THROW(nn::loss::nll(ls, Tensor::new_<uint32_t>({1, 0, 5}, Device::cpu())), Error);
}

// candle-nn/tests/loss.rs: rounds to 0.8224 (PyTorch's F.binary_cross_entropy_with_logits).
TEST(NnLoss, CandleBinaryCrossEntropyWithLogit) {
  Tensor inp = Tensor::new_<float>({{2.3611f, -0.8813f, -0.5006f, -0.2178f},
                                    {0.0419f, 0.0763f, -1.0457f, -1.6692f},
                                    {-1.0494f, 0.8111f, 1.5723f, 1.2315f},
                                    {1.3081f, 0.6641f, 1.1802f, -0.2547f},
                                    {0.5292f, 0.7636f, 0.3692f, -0.8318f}},
                                   Device::cpu());
  Tensor target = Tensor::new_<float>({{0.f, 1.f, 0.f, 0.f},
                                       {0.f, 1.f, 0.f, 0.f},
                                       {0.f, 0.f, 0.f, 1.f},
                                       {1.f, 0.f, 0.f, 0.f},
                                       {0.f, 0.f, 1.f, 0.f}},
                                      Device::cpu());
  EXPECT_NEAR(nn::loss::binary_cross_entropy_with_logit(inp, target).to_scalar<float>(), 0.8224f, 5e-5f);
}

// Large logits: PyTorch gives 17.76250457763672 for x = [30, -40, 0.5, -0.25],
// t = [0, 1, 1, 0]; candle's log(sigmoid(x)) form gives inf here.
TEST(NnLoss, BinaryCrossEntropyWithLogitIsStableForLargeLogits) {
  Tensor x = Tensor::new_<float>({30.f, -40.f, 0.5f, -0.25f}, Device::cpu());
  Tensor t = Tensor::new_<float>({0.f, 1.f, 1.f, 0.f}, Device::cpu());
  EXPECT_NEAR(nn::loss::binary_cross_entropy_with_logit(x, t).to_scalar<float>(), 17.7625046f, 1e-5f);
}

// PyTorch: F.mse_loss = 2.7916667461395264, F.l1_loss = 1.2166666984558105.
TEST(NnLoss, MseMatchesPyTorch) {
  EXPECT_NEAR(nn::loss::mse(reg_a(), reg_b()).to_scalar<float>(), 2.7916667f, 1e-6f);
}

TEST(NnLoss, L1MatchesPyTorch) {
  EXPECT_NEAR(nn::loss::l1(reg_a(), reg_b()).to_scalar<float>(), 1.2166667f, 1e-6f);
}

// PyTorch F.huber_loss: delta 1 -> 0.8883333206176758, 0.5 -> 0.5174999833106995,
// 2 -> 1.2758333683013916.
TEST(NnLoss, HuberMatchesPyTorch) {
  EXPECT_NEAR(nn::loss::huber(reg_a(), reg_b(), 1.0).to_scalar<float>(), 0.88833332f, 1e-6f);
  EXPECT_NEAR(nn::loss::huber(reg_a(), reg_b(), 0.5).to_scalar<float>(), 0.51749998f, 1e-6f);
  EXPECT_NEAR(nn::loss::huber(reg_a(), reg_b(), 2.0).to_scalar<float>(), 1.27583337f, 1e-6f);
}

TEST(NnLoss, HuberAtDeltaIsContinuous) {
  Tensor a = Tensor::new_<float>({1.f}, Device::cpu()), b = Tensor::new_<float>({0.f}, Device::cpu());
  // |d| == delta: 0.5 * 1 == 1 * (1 - 0.5)
  EXPECT_EQ(nn::loss::huber(a, b, 1.0).to_scalar<float>(), 0.5f);
}

TEST(NnLoss, ElementwiseLossesRejectShapeMismatchAndBadDelta) {
  Tensor a = reg_a(), b3 = Tensor::zeros({3}, DType::F32, Device::cpu());
  EXPECT_THROW(nn::loss::mse(a, b3), Error);
  EXPECT_THROW(nn::loss::l1(a, b3), Error);
  EXPECT_THROW(nn::loss::huber(a, b3, 1.0), Error);
  EXPECT_THROW(nn::loss::binary_cross_entropy_with_logit(a, b3), Error);
  EXPECT_THROW(nn::loss::huber(a, reg_b(), 0.0), Error);
  EXPECT_THROW(nn::loss::huber(a, reg_b(), -1.0), Error);
}

TEST(NnLoss, LossesWorkInF64) {
  Tensor a = reg_a().to_dtype(DType::F64), b = reg_b().to_dtype(DType::F64);
  EXPECT_NEAR(nn::loss::mse(a, b).to_scalar<double>(), 2.7916666666666665, 1e-6);
  EXPECT_NEAR(nn::loss::huber(a, b, 1.0).to_scalar<double>(), 0.8883333333333333, 1e-6);
}
