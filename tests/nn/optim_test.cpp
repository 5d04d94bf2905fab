// Optimizers: candle-nn's tests (candle-nn/tests/optim.rs, which need autograd) and the step
// formulas on hand-made gradient stores.
#include "candle/nn/optim.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "candle/backprop.h"
#include "nn/nn_test_util.h"
#include "nn/optim_detail.h"

using namespace candle;

namespace {

Var var_of(std::initializer_list<float> v) { return Var::from_tensor(Tensor::new_<float>(v, Device::cpu())); }

void expect_near_vec(const std::vector<float>& got, const std::vector<float>& want, float tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

// y = 3 x1 + x2 - 2 on candle's four samples.
struct Regression {
  Tensor xs, ys;
  Regression() {
    Device dev = Device::cpu();
    xs = Tensor::new_<float>({{2.f, 1.f}, {7.f, 4.f}, {-4.f, 12.f}, {5.f, 8.f}}, dev);
    nn::Linear gen(Tensor::new_<float>({{3.f, 1.f}}, dev), Tensor::new_<float>(-2.f, dev));
    ys = gen.forward(xs);
  }
};

}  // namespace

// ---- candle-nn/tests/optim.rs (autograd) ----------------------------------------------------

TEST(NnOptim, CandleSgdOptim) {
  Var x = Var::from_tensor(Tensor::new_<float>(0.f, Device::cpu()));
  nn::SGD sgd({x}, 0.1);
  const Tensor& xt = x.as_tensor();
  for (int step = 0; step < 100; ++step) {
    Tensor loss = (xt - 4.2) * (xt - 4.2);
    sgd.backward_step(loss);
  }
  EXPECT_EQ(xt.to_scalar<float>(), 4.199999f);
}

TEST(NnOptim, CandleSgdLinearRegression) {
  Regression r;
  Device dev = Device::cpu();
  Var w = Var::zeros({1, 2}, DType::F32, dev);
  Var b = Var::zeros({}, DType::F32, dev);
  nn::SGD sgd({w, b}, 0.004);
  nn::Linear lin(w.as_tensor(), b.as_tensor());
  for (int step = 0; step < 1000; ++step) {
    Tensor loss = lin.forward(r.xs).sub(r.ys).sqr().sum_all();
    sgd.backward_step(loss);
  }
  // candle asserts these exact f32 values; the last bits depend on the order of the sums
  expect_near_vec(w.as_tensor().flatten_all().to_vec1<float>(), {2.9983196f, 0.99790204f}, 1e-5f);
  EXPECT_NEAR(b.as_tensor().to_scalar<float>(), -1.9796902f, 1e-5f);
}

TEST(NnOptim, CandleAdamWLinearRegression) {
  Regression r;
  Device dev = Device::cpu();
  Var w = Var::zeros({1, 2}, DType::F32, dev);
  Var b = Var::zeros({}, DType::F32, dev);
  nn::ParamsAdamW p;
  p.lr = 0.1;
  nn::AdamW opt({w, b}, p);
  nn::Linear lin(w.as_tensor(), b.as_tensor());
  for (int step = 0; step < 100; ++step) {
    Tensor loss = lin.forward(r.xs).sub(r.ys).sqr().sum_all();
    opt.backward_step(loss);
  }
  // candle rounds to 4 decimals: [[2.7257, 0.7097]], 0.7873
  expect_near_vec(w.as_tensor().flatten_all().to_vec1<float>(), {2.7257f, 0.7097f}, 5e-5f);
  EXPECT_NEAR(b.as_tensor().to_scalar<float>(), 0.7873f, 5e-5f);
}

// ---- step formulas with hand-made gradients -------------------------------------------------

TEST(NnOptim, SgdStepSubtractsScaledGradient) {
  Var w = var_of({1.f, -2.f, 0.5f});
  GradStore g;
  g.insert(w.as_tensor(), Tensor::new_<float>({1.f, -2.f, 4.f}, Device::cpu()));
  nn::SGD sgd({w}, 0.25);
  sgd.step(g);
  EXPECT_EQ(w.as_tensor().to_vec1<float>(), (std::vector<float>{0.75f, -1.5f, -0.5f}));
  EXPECT_EQ(sgd.learning_rate(), 0.25);
  sgd.set_learning_rate(0.5);
  sgd.step(g);
  EXPECT_EQ(w.as_tensor().to_vec1<float>(), (std::vector<float>{0.25f, -0.5f, -2.5f}));
}

TEST(NnOptim, SgdSkipsVarsWithoutGradient) {
  Var a = var_of({1.f, 2.f}), b = var_of({3.f});
  GradStore g;
  g.insert(a.as_tensor(), Tensor::new_<float>({1.f, 1.f}, Device::cpu()));
  nn::SGD sgd({a, b}, 1.0);
  sgd.step(g);
  EXPECT_EQ(a.as_tensor().to_vec1<float>(), (std::vector<float>{0.f, 1.f}));
  EXPECT_EQ(b.as_tensor().to_vec1<float>(), (std::vector<float>{3.f}));
}

TEST(NnOptim, OptimizersDropNonFloatVars) {
  Var f = var_of({1.f});
  Var u = Var::zeros({2}, DType::U32, Device::cpu());
  nn::SGD sgd({f, u}, 0.1);
  EXPECT_EQ(sgd.vars().size(), 1u);
  nn::AdamW adam({f, u});
  EXPECT_EQ(adam.state().first_moments.size(), 1u);
}

// PyTorch: torch.optim.SGD([w], lr=0.1, momentum=0.9), w = [1, -2], gradients [1, -2],
// [0.5, 0.5], [-1, 0] -> [0.9, -1.8], [0.76, -1.67], [0.734, -1.553].
TEST(NnOptim, SgdMomentumMatchesPyTorch) {
  Var w = var_of({1.f, -2.f});
  nn::SGD sgd({w}, 0.1, 0.9);
  const std::vector<std::vector<float>> grads{{1.f, -2.f}, {0.5f, 0.5f}, {-1.f, 0.f}};
  const std::vector<std::vector<float>> want{{0.9f, -1.8f}, {0.76f, -1.67f}, {0.734f, -1.553f}};
  for (size_t s = 0; s < grads.size(); ++s) {
    GradStore g;
    g.insert(w.as_tensor(), Tensor::from_vec(grads[s], {2}, Device::cpu()));
    sgd.step(g);
    expect_near_vec(w.as_tensor().to_vec1<float>(), want[s], 1e-6f);
  }
}

TEST(NnOptim, SgdRejectsBadArguments) {
  EXPECT_THROW(nn::SGD({var_of({1.f})}, 0.1, -0.5), Error);
  EXPECT_THROW(nn::SGD({var_of({1.f})}, std::nan("")), Error);
}

// PyTorch: torch.optim.AdamW([w], lr=0.1) (betas 0.9/0.999, eps 1e-8, weight decay 0.01),
// w = [1, -2, 3, 0.5], gradients [0.5, -1, 2, 0] then [0.1, 0.2, -0.3, 1].
TEST(NnOptim, AdamWTwoStepsMatchPyTorch) {
  Var w = var_of({1.f, -2.f, 3.f, 0.5f});
  nn::AdamW opt = nn::AdamW::new_lr({w}, 0.1);
  GradStore g1, g2;
  g1.insert(w.as_tensor(), Tensor::new_<float>({0.5f, -1.f, 2.f, 0.f}, Device::cpu()));
  g2.insert(w.as_tensor(), Tensor::new_<float>({0.1f, 0.2f, -0.3f, 1.f}, Device::cpu()));
  opt.step(g1);
  expect_near_vec(w.as_tensor().to_vec1<float>(), {0.89900005f, -1.898f, 2.89700007f, 0.49950001f}, 2e-6f);
  opt.step(g2);
  expect_near_vec(w.as_tensor().to_vec1<float>(), {0.81779695f, -1.84499943f, 2.83888316f, 0.42458683f},
                  2e-6f);
  EXPECT_EQ(opt.step_count(), 2u);
}

TEST(NnOptim, AdamWSkipsVarsWithoutGradient) {
  Var a = var_of({1.f}), b = var_of({2.f});
  nn::AdamW opt({a, b});
  GradStore g;
  g.insert(a.as_tensor(), Tensor::new_<float>({1.f}, Device::cpu()));
  opt.step(g);
  EXPECT_NE(a.as_tensor().to_vec1<float>()[0], 1.f);
  EXPECT_EQ(b.as_tensor().to_vec1<float>(), (std::vector<float>{2.f}));
  // b's moments stay zero
  EXPECT_EQ(opt.state().first_moments[1].to_vec1<float>(), (std::vector<float>{0.f}));
}

TEST(NnOptim, AdamWLearningRateAccessors) {
  nn::AdamW opt({var_of({1.f})});
  EXPECT_EQ(opt.learning_rate(), 0.001);
  EXPECT_EQ(opt.params().weight_decay, 0.01);
  opt.set_learning_rate(0.5);
  EXPECT_EQ(opt.params().lr, 0.5);
  nn::ParamsAdamW bad;
  bad.beta1 = 1.0;
  EXPECT_THROW(nn::AdamW({var_of({1.f})}, bad), Error);
}

namespace {

// Runs three AdamW steps on a var of n values (dtype dt) with either kernel; returns theta.
template <typename T>
std::vector<T> adamw_three_steps(DType dt, size_t n, bool fused) {
  Tensor init = nn_test::rand_f32({n}, 11).affine(2.0, -1.0).to_dtype(dt);
  Var theta = Var::from_tensor(init), m = Var::zeros({n}, dt, Device::cpu()),
      v = Var::zeros({n}, dt, Device::cpu());
  for (int t = 1; t <= 3; ++t) {
    Tensor g = nn_test::rand_f32({n}, 100 + t).affine(4.0, -2.0).to_dtype(dt);
    nn::detail::AdamWCoeffs c{0.01,
                              0.9,
                              0.999,
                              1e-8,
                              1.0 - 0.01 * 0.01,
                              1.0 / (1.0 - std::pow(0.9, t)),
                              1.0 / (1.0 - std::pow(0.999, t))};
    if (fused) {
      EXPECT_TRUE(nn::detail::adamw_step_fused(theta, m, v, g, c));
    } else {
      nn::detail::adamw_step_composed(theta, m, v, g, c);
    }
  }
  return theta.as_tensor().to_vec1<T>();
}

}  // namespace

TEST(NnOptim, AdamWFusedMatchesComposedF32) {
  auto fused = adamw_three_steps<float>(DType::F32, 100003, true);
  auto composed = adamw_three_steps<float>(DType::F32, 100003, false);
  ASSERT_EQ(fused.size(), composed.size());
  for (size_t i = 0; i < fused.size(); ++i) ASSERT_NEAR(fused[i], composed[i], 1e-6f) << "at " << i;
}

TEST(NnOptim, AdamWFusedMatchesComposedF64) {
  auto fused = adamw_three_steps<double>(DType::F64, 70001, true);
  auto composed = adamw_three_steps<double>(DType::F64, 70001, false);
  for (size_t i = 0; i < fused.size(); ++i) ASSERT_NEAR(fused[i], composed[i], 1e-12) << "at " << i;
}

TEST(NnOptim, AdamWFusedIsThreadCountIndependent) {
  std::vector<std::vector<float>> runs;
  for (size_t threads : {1, 2, 3}) {
    set_num_threads(threads);
    runs.push_back(adamw_three_steps<float>(DType::F32, 200001, true));
  }
  set_num_threads(0);
  EXPECT_EQ(std::memcmp(runs[0].data(), runs[1].data(), runs[0].size() * 4), 0);
  EXPECT_EQ(std::memcmp(runs[0].data(), runs[2].data(), runs[0].size() * 4), 0);
}

TEST(NnOptim, AdamWFusedNotUsedForHalfOrNonContiguousGrad) {
  Var h = Var::zeros({4}, DType::F16, Device::cpu());
  Var m = Var::zeros({4}, DType::F16, Device::cpu()), v = Var::zeros({4}, DType::F16, Device::cpu());
  EXPECT_FALSE(nn::detail::adamw_step_fused(h, m, v, Tensor::zeros({4}, DType::F16, Device::cpu()),
                                            nn::detail::AdamWCoeffs{1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0}));
  // a transposed gradient still takes the fused path (it is copied contiguous first)
  Var w = Var::zeros({2, 3}, DType::F32, Device::cpu());
  Var wm = Var::zeros({2, 3}, DType::F32, Device::cpu()), wv = Var::zeros({2, 3}, DType::F32, Device::cpu());
  Tensor gt = Tensor::new_<float>({{1.f, 2.f}, {3.f, 4.f}, {5.f, 6.f}}, Device::cpu()).t();
  nn::detail::AdamWCoeffs c{1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0};
  EXPECT_TRUE(nn::detail::adamw_step_fused(w, wm, wv, gt, c));
  // beta 0, eps 0, lr 1: theta -= g / |g| = -sign(g); m = g
  EXPECT_EQ(wm.as_tensor().flatten_all().to_vec1<float>(), (std::vector<float>{1, 3, 5, 2, 4, 6}));
  EXPECT_EQ(w.as_tensor().flatten_all().to_vec1<float>(), (std::vector<float>{-1, -1, -1, -1, -1, -1}));
}

TEST(NnOptim, AdamWHalfVarTakesComposedPath) {
  Var w = Var::from_tensor(Tensor::new_<float>({1.f, -1.f}, Device::cpu()).to_dtype(DType::BF16));
  nn::ParamsAdamW p;
  p.lr = 0.5;
  p.weight_decay = 0.0;
  nn::AdamW opt({w}, p);
  GradStore g;
  g.insert(w.as_tensor(), Tensor::new_<float>({2.f, -3.f}, Device::cpu()).to_dtype(DType::BF16));
  opt.step(g);
  // first step: m_hat / sqrt(v_hat) = sign(g), so theta -= 0.5 * sign(g)
  expect_near_vec(w.as_tensor().to_dtype(DType::F32).to_vec1<float>(), {0.5f, -0.5f}, 1e-2f);
}

TEST(NnOptim, AdamWStateRoundTrip) {
  Var a = var_of({1.f, 2.f});
  nn::AdamW opt({a});
  GradStore g;
  g.insert(a.as_tensor(), Tensor::new_<float>({0.5f, -0.5f}, Device::cpu()));
  opt.step(g);
  nn::AdamW::State s = opt.state();
  Var b = var_of({1.f, 2.f});
  nn::AdamW opt2({b});
  opt2.set_state(s);
  // both continue identically from the same weights
  b.set(a.as_tensor());
  GradStore g2;
  g2.insert(b.as_tensor(), Tensor::new_<float>({0.5f, -0.5f}, Device::cpu()));
  opt.step(g);
  opt2.step(g2);
  EXPECT_EQ(opt2.step_count(), 2u);
  EXPECT_EQ(a.as_tensor().to_vec1<float>(), b.as_tensor().to_vec1<float>());
  nn::AdamW::State bad = s;
  bad.first_moments[0] = Tensor::zeros({3}, DType::F32, Device::cpu());
  EXPECT_THROW(opt2.set_state(bad), Error);
}
