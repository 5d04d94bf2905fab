// candle's gradient tests (candle-core/tests/grad_tests.rs and conv_tests.rs), with their
// expected numbers. candle backpropagates from non-scalar roots with a ones gradient; here
// the root must be a single element, so those tests call sum_all() first (same gradients).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "candle/backprop.h"
#include "candle/candle.h"
#include "candle/var.h"

using namespace candle;

namespace {

const Device& cpu() {
  static Device d = Device::cpu();
  return d;
}

Var var1(std::vector<float> v) { return Var::from_tensor(Tensor::from_vec(v, Shape{v.size()}, cpu())); }

Tensor grad_of(const GradStore& gs, const Tensor& t) {
  auto g = gs.get(t);
  EXPECT_TRUE(g.has_value());
  return g ? *g : Tensor::zeros(t.shape(), t.dtype(), t.device());
}

// candle's to_vec1_round(t, d) == want: within half a unit of the d-th decimal (+1e-6).
void expect_round(const Tensor& t, const std::vector<float>& want, int digits) {
  std::vector<float> got = t.flatten_all().to_vec1<float>();
  ASSERT_EQ(got.size(), want.size());
  const double tol = 0.5 * std::pow(10.0, -digits) + 1e-6;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

void expect_exact(const Tensor& t, const std::vector<float>& want) {
  EXPECT_EQ(t.flatten_all().to_vec1<float>(), want);
}

}  // namespace

TEST(CandleGrad, SimpleGrad) {
  Var xv = var1({3.f, 1.f, 4.f});
  const Tensor& x = xv;
  Tensor y = x.mul(x).add(x * 5.0) + 4.0;
  GradStore gs = y.sum_all().backward();
  expect_exact(y, {28.f, 10.f, 40.f});
  expect_exact(grad_of(gs, x), {11.f, 7.f, 13.f});  // 2x + 5
}

TEST(CandleGrad, SumGrad) {
  Var xv = var1({3.f, 1.f, 4.f});
  const Tensor& x = xv;
  Tensor y = x.sqr().sum_keepdim(0) * 2.0;
  expect_exact(y, {52.f});
  expect_exact(grad_of(y.backward(), x), {12.f, 4.f, 16.f});
  Tensor y2 = (x.sqr().sum_keepdim(0) * 2.0).squeeze(0);
  EXPECT_EQ(y2.to_scalar<float>(), 52.f);
  expect_exact(grad_of(y2.backward(), x), {12.f, 4.f, 16.f});
}

TEST(CandleGrad, ExpandGrad) {
  std::vector<float> data(24);
  for (size_t i = 0; i < 24; ++i) data[i] = static_cast<float>(i);
  Var xv = Var::from_tensor(Tensor::from_vec(data, {1, 1, 4, 6}, cpu()));
  Tensor e = xv.as_tensor().unsqueeze(2).expand({1, 1, 3, 4, 6});
  Tensor loss = e.sqr().sum_all() * 0.5;
  std::vector<float> want(24);
  for (size_t i = 0; i < 24; ++i) want[i] = 3.f * static_cast<float>(i);
  expect_exact(grad_of(loss.backward(), xv), want);
}

TEST(CandleGrad, MatmulGrad) {
  std::vector<float> data(12);
  for (size_t i = 0; i < 12; ++i) data[i] = static_cast<float>(i);
  Var x = Var::from_tensor(Tensor::from_vec(data, {2, 2, 3}, cpu()));
  Var y = Var::from_tensor(Tensor::from_vec(data, {2, 3, 2}, cpu()));
  GradStore gs = x.as_tensor().matmul(y).sum_all().backward();
  Tensor gx = grad_of(gs, x), gy = grad_of(gs, y);
  EXPECT_EQ(gx.shape(), Shape({2, 2, 3}));
  EXPECT_EQ(gy.shape(), Shape({2, 3, 2}));
  expect_exact(gx, {1, 5, 9, 1, 5, 9, 13, 17, 21, 13, 17, 21});
  expect_exact(gy, {3, 3, 5, 5, 7, 7, 15, 15, 17, 17, 19, 19});
}

TEST(CandleGrad, ZeroMatmulGrad) {
  struct Case {
    Shape l, r, o;
  };
  std::vector<Case> cases = {{{2, 0}, {0, 3}, {2, 3}},
                             {{0, 2}, {2, 3}, {0, 3}},
                             {{2, 3}, {3, 0}, {2, 0}},
                             {{0, 2, 3}, {0, 3, 4}, {0, 2, 4}},
                             {{2, 3, 0}, {2, 0, 4}, {2, 3, 4}}};
  for (const Case& c : cases) {
    Var l = Var::zeros(c.l, DType::F32, cpu());
    Var r = Var::zeros(c.r, DType::F32, cpu());
    Tensor out = l.as_tensor().matmul(r);
    ASSERT_EQ(out.shape(), c.o);
    GradStore gs = out.sum_all().backward();
    Tensor gl = grad_of(gs, l), gr = grad_of(gs, r);
    EXPECT_EQ(gl.shape(), c.l);
    EXPECT_EQ(gr.shape(), c.r);
    expect_exact(gl, std::vector<float>(gl.elem_count(), 0.f));
    expect_exact(gr, std::vector<float>(gr.elem_count(), 0.f));
  }
}

TEST(CandleGrad, GradDescent) {
  Var x = Var::zeros({}, DType::F32, cpu());
  for (int step = 0; step < 100; ++step) {
    const Tensor& xt = x;
    Tensor c = (xt - 4.2) * (xt - 4.2);
    Tensor g = grad_of(c.backward(), xt);
    x.set(xt - g * 0.1);
  }
  EXPECT_NEAR(x.as_tensor().to_scalar<float>(), 4.199999f, 2e-6f);
}

TEST(CandleGrad, UnaryGrad) {
  Var xv = var1({3.f, 1.f, 4.f, 0.15f});
  const Tensor& x = xv;
  auto grad = [&](const Tensor& y) { return grad_of(y.sum_all().backward(), x); };
  Tensor y = x.log() + 1.0;
  expect_round(y, {2.0986f, 1.0f, 2.3863f, -0.8971f}, 4);
  expect_round(grad(y), {0.3333f, 1.0f, 0.25f, 6.6667f}, 4);
  y = x.exp();
  expect_round(y, {20.0855f, 2.7183f, 54.5982f, 1.1618f}, 4);
  expect_round(grad(y), {20.0855f, 2.7183f, 54.5982f, 1.1618f}, 4);
  y = x.exp().sqr();
  expect_round(y, {403.429f, 7.389f, 2980.958f, 1.35f}, 3);
  expect_round(grad(y), {806.86f, 14.78f, 5961.92f, 2.7f}, 2);
  y = x.sin();
  expect_round(y, {0.1411f, 0.8415f, -0.7568f, 0.1494f}, 4);
  expect_round(grad(y), {-0.99f, 0.5403f, -0.6536f, 0.9888f}, 4);
  y = x.cos();
  expect_round(y, {-0.99f, 0.5403f, -0.6536f, 0.9888f}, 4);
  expect_round(grad(y), {-0.1411f, -0.8415f, 0.7568f, -0.1494f}, 4);
  y = x.sqr();
  expect_exact(y, {9.0f, 1.0f, 16.0f, 0.0225f});
  expect_exact(grad(y), {6.0f, 2.0f, 8.0f, 0.3f});
  y = x.sqr().sqrt();
  expect_exact(y, {3.0f, 1.0f, 4.0f, 0.15f});
  expect_round(grad(y), {1.0f, 1.0f, 1.0f, 1.0f}, 4);
  y = x.neg();
  expect_exact(y, {-3.0f, -1.0f, -4.0f, -0.15f});
  expect_exact(grad(y), {-1.0f, -1.0f, -1.0f, -1.0f});
  y = x.affine(0.2, 1.0);
  expect_exact(y, {1.6f, 1.2f, 1.8f, 1.03f});
  expect_exact(grad(y), {0.2f, 0.2f, 0.2f, 0.2f});
  y = Tensor::new_(1.f, cpu()).broadcast_div(x);
  expect_round(y, {0.3333f, 1.0f, 0.25f, 6.6667f}, 4);
  expect_round(grad(y), {-0.11111111f, -1.0f, -0.0625f, -44.444443f}, 5);
  y = x.broadcast_div(Tensor::new_(0.5f, cpu()));
  expect_exact(y, {6.f, 2.f, 8.f, 0.3f});
  expect_exact(grad(y), {2.f, 2.f, 2.f, 2.f});
  y = x.powf(2.5);
  expect_round(y, {15.59f, 1.0f, 32.0f, 0.01f}, 2);
  expect_round(grad(y), {12.99f, 2.5f, 20.0f, 0.15f}, 2);
  y = x.tanh();
  expect_round(y, {1.0f, 0.76f, 1.0f, 0.15f}, 2);
  expect_round(grad(y), {0.01f, 0.42f, 0.0f, 0.98f}, 2);
  y = x.gelu();
  expect_round(y, {2.9964f, 0.8412f, 3.9999f, 0.0839f}, 4);
  expect_round(grad(y), {1.0116f, 1.0830f, 1.0003f, 0.6188f}, 4);
  y = x.erf();
  expect_round(y, {1.0f, 0.8427f, 1.0f, 0.168f}, 4);
  expect_round(grad(y), {0.0001f, 0.4151f, 0.0f, 1.1033f}, 4);
  y = x.gelu_erf();
  expect_round(y, {2.9960f, 0.8413f, 3.9999f, 0.0839f}, 4);
  expect_round(grad(y), {1.0119f, 1.0833f, 1.0005f, 0.6188f}, 4);
  y = x.silu();
  expect_round(y, {2.8577f, 0.7311f, 3.9281f, 0.0806f}, 4);
  expect_round(grad(y), {1.0881f, 0.9277f, 1.0527f, 0.5747f}, 4);
}

TEST(CandleGrad, EluGrad) {
  Var xv = var1({-1.0f, 0.f, -2.f, 3.f});
  Tensor y = xv.as_tensor().elu(2.0);
  expect_round(y, {-1.2642f, 0.0f, -1.7293f, 3.0f}, 4);
  expect_round(grad_of(y.sum_all().backward(), xv), {0.7358f, 2.0f, 0.2707f, 1.0f}, 4);
}

TEST(CandleGrad, Interpolate1dGrad) {
  Var x = Var::from_tensor(Tensor::new_({{{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}, {7.f, 8.f, 9.f}}}, cpu()));
  Tensor y = x.as_tensor().interpolate1d(12).reshape({36});
  Tensor z = Tensor::arange<float>(1.f, 37.f, cpu());
  Tensor loss = y.unsqueeze(1).transpose(0, 1).matmul(z.unsqueeze(1));
  expect_round(grad_of(loss.sum_all().backward(), x), {10, 26, 42, 58, 74, 90, 106, 122, 138}, 4);
}

TEST(CandleGrad, Interpolate2dGrad) {
  Tensor z36 = Tensor::arange<float>(1.f, 37.f, cpu());
  auto loss_of = [](const Tensor& y, const Tensor& z) {
    return y.unsqueeze(1).transpose(0, 1).matmul(z.unsqueeze(1)).sum_all();
  };
  Var x = Var::from_tensor(
      Tensor::new_({{{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}, {7.f, 8.f, 9.f}}}, cpu()).unsqueeze(0));
  expect_round(grad_of(loss_of(x.as_tensor().interpolate2d(6, 6).reshape({36}), z36).backward(), x),
               {18, 26, 34, 66, 74, 82, 114, 122, 130}, 4);
  Var x2 = Var::from_tensor(Tensor::new_({{{1.f, 2.f}, {4.f, 5.f}}}, cpu()).unsqueeze(0));
  expect_round(grad_of(loss_of(x2.as_tensor().interpolate2d(6, 6).reshape({36}), z36).backward(), x2),
               {72, 99, 234, 261}, 4);
  Tensor z32 = Tensor::arange<float>(1.f, 33.f, cpu());
  Var x3 = Var::from_tensor(
      Tensor::new_({{{1.f, 2.f}, {4.f, 5.f}}, {{6.f, 7.f}, {8.f, 9.f}}}, cpu()).unsqueeze(0));
  expect_round(grad_of(loss_of(x3.as_tensor().interpolate2d(4, 4).reshape({32}), z32).backward(), x3),
               {14, 22, 46, 54, 78, 86, 110, 118}, 4);
  Var x4 = Var::from_tensor(
      Tensor::new_({{{1.f, 2.f}, {4.f, 5.f}}, {{6.f, 7.f}, {8.f, 9.f}}}, cpu()).unsqueeze(1));
  expect_round(grad_of(loss_of(x4.as_tensor().interpolate2d(4, 4).reshape({32}), z32).backward(), x4),
               {14, 22, 46, 54, 78, 86, 110, 118}, 4);
}

TEST(CandleGrad, BinaryGrad) {
  Var xv = var1({3.f, 1.f, -4.f, -1.f});
  const Tensor& x = xv;
  auto grad = [&](const Tensor& y) { return grad_of(y.sum_all().backward(), x); };
  Tensor y = x.maximum(x * 0.1);  // leaky relu
  expect_exact(y, {3.f, 1.f, -0.4f, -0.1f});
  expect_exact(grad(y), {1.f, 1.f, 0.1f, 0.1f});
  y = x.minimum(x * 0.1);
  expect_exact(y, {0.3f, 0.1f, -4.f, -1.f});
  expect_exact(grad(y), {0.1f, 0.1f, 1.f, 1.f});
  y = x.minimum(x);  // the identity: gradient one
  expect_exact(y, {3.f, 1.f, -4.f, -1.f});
  expect_exact(grad(y), {1.f, 1.f, 1.f, 1.f});
}

TEST(CandleGrad, SliceScatterGrad) {
  Var xv = var1({3.f, 1.f, -4.f, -1.f, 5.f, 9.f});
  Var yv = var1({2.f, 7.f, 1.f});
  Tensor ss = xv.as_tensor().reshape({2, 3}).slice_scatter0(yv.as_tensor().reshape({1, 3}), 1).sqr();
  GradStore gs = ss.sum_all().backward();
  expect_exact(ss, {9.f, 1.f, 16.f, 4.f, 49.f, 1.f});
  expect_exact(grad_of(gs, xv), {6.f, 2.f, -8.f, 0.f, 0.f, 0.f});
  expect_exact(grad_of(gs, yv), {4.f, 14.f, 2.f});
}

TEST(CandleGrad, FlipBackprop) {
  Var x = Var::ones({2, 2}, DType::F64, cpu());
  Tensor w = Tensor::arange<double>(1.0, 5.0, cpu()).reshape({2, 2});
  Tensor y = x.as_tensor().matmul(w);
  EXPECT_EQ(y.flatten_all().to_vec1<double>(), (std::vector<double>{4, 6, 4, 6}));
  Tensor z = y.flip({1});
  EXPECT_EQ(z.flatten_all().to_vec1<double>(), (std::vector<double>{6, 4, 6, 4}));
  Tensor gx = grad_of(z.sum_all().backward(), x);
  Tensor want = Tensor::ones({2, 2}, DType::F64, cpu()).matmul(w.flip({1}).t());
  EXPECT_EQ(gx.flatten_all().to_vec1<double>(), want.flatten_all().to_vec1<double>());
}

TEST(CandleGrad, OmitUnnecessaryGradients) {
  Var xv = Var::ones({2, 2}, DType::F64, cpu());
  const Tensor& x = xv;
  Tensor a = x.ones_like(), b = x.ones_like(), c = x.ones_like();
  Tensor r1 = x * x + a;
  Tensor r2 = r1 * r1 + b;
  Tensor y = r2 * r2 + c;
  GradStore gs = y.sum_all().backward();
  auto gx = gs.get(x);
  ASSERT_TRUE(gx.has_value());
  EXPECT_FALSE(gs.get(a).has_value());
  EXPECT_FALSE(gs.get(b).has_value());
  EXPECT_FALSE(gs.get(c).has_value());
  EXPECT_FALSE(gx->track_op());
}

TEST(CandleGrad, Conv2dGrad) {
  std::vector<float> t_data = {
      0.4056f,  -0.8689f, -0.0773f, -1.5630f, -2.8012f, -1.5059f, 0.3972f,  1.0852f,  0.4997f,  3.0616f,
      1.6541f,  0.0964f,  -0.8338f, -1.6523f, -0.8323f, -0.1699f, 0.0823f,  0.3526f,  0.6843f,  0.2395f,
      1.2279f,  -0.9287f, -1.7030f, 0.1370f,  0.6047f,  0.3770f,  -0.6266f, 0.3529f,  2.2013f,  -0.6836f,
      0.2477f,  1.3127f,  -0.2260f, 0.2622f,  -1.2974f, -0.8140f, -0.8404f, -0.3490f, 0.0130f,  1.3123f,
      1.7569f,  -0.3956f, -1.8255f, 0.1727f,  -0.3538f, 2.6941f,  1.0529f,  0.4219f,  -0.2071f, 1.1586f,
      0.4717f,  0.3865f,  -0.5690f, -0.5010f, -0.1310f, 0.7796f,  0.6630f,  -0.2021f, 2.6090f,  0.2049f,
      0.6466f,  -0.5042f, -0.0603f, -1.6538f, -1.2429f, 1.8357f,  1.6052f,  -1.3844f, 0.3323f,  -1.3712f,
      0.9634f,  -0.4799f, -0.6451f, -0.0840f, -1.4247f, 0.5512f,  -0.1747f, -0.5509f, -0.3742f, 0.3790f,
      -0.4431f, -0.4720f, -0.7890f, 0.2620f,  0.7875f,  0.5377f,  -0.6779f, -0.8088f, 1.9098f,  1.2006f,
      -0.8000f, -0.4983f, 1.5480f,  0.8265f,  -0.1025f, 0.5138f,  0.5748f,  0.3821f,  -0.4607f, 0.0085f};
  std::vector<float> w_data = {-0.9325f, 0.6451f,  -0.8537f, 0.2378f,  0.8764f,  -0.1832f, 0.2987f,  -0.6488f,
                               -0.2273f, -2.4184f, -0.1192f, -0.4821f, -0.5079f, -0.5766f, -2.4729f, 1.6734f,
                               0.4558f,  0.2851f,  1.1514f,  -0.9013f, 1.0662f,  -0.1817f, -0.0259f, 0.1709f,
                               0.5367f,  0.7513f,  0.8086f,  -2.2586f, -0.5027f, 0.9141f,  -1.3086f, -1.3343f,
                               -1.5669f, -0.1657f, 0.7958f,  0.1432f,  0.3896f,  -0.4501f, 0.1667f,  0.0714f,
                               -0.0952f, 1.2970f,  -0.1674f, -0.3178f, 1.0677f,  0.3060f,  0.7080f,  0.1914f,
                               1.1679f,  -0.3602f, 1.9265f,  -1.8626f, -0.5112f, -0.0982f, 0.2621f,  0.6565f,
                               0.5908f,  1.0089f,  -0.1646f, 1.8032f,  -0.6286f, 0.2016f,  -0.3370f, 1.2555f,
                               0.8009f,  -0.6488f, -0.4652f, -1.5685f, 1.5860f,  0.5583f,  0.4623f,  0.6026f};
  Var t = Var::from_tensor(Tensor::from_vec(t_data, {1, 4, 5, 5}, cpu()));
  Var w = Var::from_tensor(Tensor::from_vec(w_data, {2, 4, 3, 3}, cpu()));
  Tensor loss = t.as_tensor().conv2d(w, 0, 1, 1, 1).sqr().sum_all();
  expect_round(loss, {741.12f}, 2);
  GradStore gs = loss.backward();
  Tensor gt = grad_of(gs, t), gw = grad_of(gs, w);
  EXPECT_EQ(gt.shape(), Shape({1, 4, 5, 5}));
  EXPECT_EQ(gw.shape(), Shape({2, 4, 3, 3}));
  expect_round(
      gt, {9.2868f,   -2.8352f,  -5.7117f,  3.3817f,   -7.7094f,  -19.1549f, 7.016f,     29.1037f,  9.3411f,
           34.7339f,  -22.8726f, 24.3502f,  -39.88f,   -14.007f,  21.076f,   9.9419f,    13.6333f,  -34.6796f,
           11.2073f,  -6.2617f,  7.7209f,   -6.3224f,  -16.6373f, -1.0837f,  -20.2215f,  21.7302f,  -0.3744f,
           -4.0573f,  5.8163f,   -3.6529f,  -30.7319f, 14.5468f,  87.699f,   31.6035f,   4.5304f,   -89.785f,
           -75.3709f, -57.4327f, -7.5602f,  92.9585f,  18.791f,   -4.6311f,  -159.7521f, -42.4656f, -47.2644f,
           52.8768f,  37.3172f,  48.9978f,  12.8192f,  2.014f,    -8.9826f,  20.1759f,   16.621f,   12.0599f,
           15.3849f,  19.9979f,  2.5725f,   -15.2197f, 72.6244f,  -10.7496f, 2.2541f,    -31.2003f, 3.753f,
           -0.2049f,  9.7574f,   -0.6824f,  5.2107f,   -40.4361f, -22.5891f, -61.6085f,  17.2837f,  20.4149f,
           37.5454f,  5.2262f,   6.8126f,   23.5361f,  23.6173f,  -9.9866f,  -9.1324f,   4.8664f,   -35.0617f,
           -26.1023f, 63.4757f,  25.8144f,  -39.2069f, -70.6834f, -46.9565f, 2.3252f,    41.8093f,  82.4205f,
           -28.626f,  -11.7812f, -35.3284f, -10.2771f, -28.5694f, -9.1258f,  7.213f,     -9.0459f,  -9.6222f,
           -11.2544f},
      3);
  expect_round(
      gw, {-28.9232f, -22.8833f, -141.2296f, 73.3462f,  61.074f,   47.8125f,  -20.0013f, -73.7086f, -41.8217f,
           -13.5919f, 21.501f,   28.7179f,   28.5683f,  -46.8486f, -90.1874f, 143.6107f, 16.6764f,  7.4259f,
           18.8794f,  -90.8122f, -20.2865f,  54.7909f,  82.6287f,  22.943f,   77.8084f,  -16.3928f, -13.1977f,
           9.3442f,   -40.3869f, -26.6153f,  5.3344f,   -60.9081f, 9.0869f,   -59.368f,  7.081f,    58.6391f,
           5.5476f,   20.5152f,  2.4985f,    -17.2466f, -6.802f,   22.2146f,  30.1511f,  -7.5179f,  -37.4588f,
           5.6654f,   22.5832f,  9.0316f,    47.0547f,  17.6123f,  37.3121f,  -98.1295f, -14.6141f, -4.7958f,
           -6.3597f,  44.6949f,  23.3418f,   8.3728f,   -13.52f,   80.0522f,  -34.2403f, -16.3648f, -12.3139f,
           1.9195f,   -33.6244f, -14.102f,   -49.2305f, -7.3853f,  11.4995f,  -9.9826f,  9.6588f,   29.6042f},
      3);
}
