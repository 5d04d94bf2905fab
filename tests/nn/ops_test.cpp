// candle-nn's tests/ops.rs and the fused kernels against the composed ops.
#include <cmath>
#include <cstring>

#include "nn_test_util.h"

using namespace candle;
using namespace candle::nn_test;
using candle::test_util::expect_near_vec;

// candle's expected values are rounded to 4 decimals: a tolerance of 1e-4 covers that rounding.
constexpr float kRound4 = 1e-4f;

TEST(NnOps, SoftmaxEachDim) {
  Tensor t = ops_data().log();
  expect_near_vec(
      f32_values(nn::ops::softmax(t, 0)),
      {0.6f, 0.5f, 0.3636f, 0.1111f, 0.7143f, 0.5294f, 0.4f, 0.5f, 0.6364f, 0.8889f, 0.2857f, 0.4706f},
      kRound4);
  expect_near_vec(
      f32_values(nn::ops::softmax(t, 1)),
      {0.75f, 0.1667f, 0.3077f, 0.25f, 0.8333f, 0.6923f, 0.2f, 0.3333f, 0.4667f, 0.8f, 0.6667f, 0.5333f},
      kRound4);
  expect_near_vec(f32_values(nn::ops::softmax(t, 2)),
                  {0.375f, 0.125f, 0.5f, 0.0667f, 0.3333f, 0.6f, 0.2f, 0.1f, 0.7f, 0.4444f, 0.1111f, 0.4444f},
                  kRound4);
}

TEST(NnOps, SoftmaxLastDim) {
  Tensor t = ops_data().log();
  expect_near_vec(f32_values(nn::ops::softmax_last_dim(t)),
                  {0.375f, 0.125f, 0.5f, 0.0667f, 0.3333f, 0.6f, 0.2f, 0.1f, 0.7f, 0.4444f, 0.1111f, 0.4444f},
                  kRound4);
}

TEST(NnOps, SoftmaxNumericalStability) {
  Tensor xs = Tensor::new_<float>({1234.f, 0.f}, Device::cpu());
  EXPECT_EQ(nn::ops::softmax(xs, 0).to_vec1<float>(), (std::vector<float>{1.f, 0.f}));
  EXPECT_EQ(nn::ops::softmax_last_dim(xs).to_vec1<float>(), (std::vector<float>{1.f, 0.f}));
}

TEST(NnOps, LogSoftmax) {
  // log_softmax(log x) = log(x / sum x)
  Tensor t = ops_data().log();
  expect_near_vec(f32_values(nn::ops::log_softmax(t, 2)),
                  {std::log(3.f / 8), std::log(1.f / 8), std::log(4.f / 8), std::log(1.f / 15),
                   std::log(5.f / 15), std::log(9.f / 15), std::log(2.f / 10), std::log(1.f / 10),
                   std::log(7.f / 10), std::log(8.f / 18), std::log(2.f / 18), std::log(8.f / 18)},
                  1e-6f);
  expect_near_vec(f32_values(nn::ops::log_softmax(t, 0)),
                  {std::log(0.6f), std::log(0.5f), std::log(4.f / 11), std::log(1.f / 9), std::log(5.f / 7),
                   std::log(9.f / 17), std::log(0.4f), std::log(0.5f), std::log(7.f / 11), std::log(8.f / 9),
                   std::log(2.f / 7), std::log(8.f / 17)},
                  1e-6f);
}

TEST(NnOps, RmsNorm) {
  Tensor t = ops_data();
  Tensor alpha = Tensor::new_<float>({1.f, 2.f, 3.f}, Device::cpu());
  std::vector<float> want = {1.019f,  0.6794f, 4.0762f, 0.1674f, 1.6744f, 4.521f,
                             0.4714f, 0.4714f, 4.9497f, 1.206f,  0.603f,  3.6181f};
  Tensor fused = nn::ops::rms_norm(t, alpha, 1e-5f);
  Tensor slow = nn::ops::rms_norm_slow(t, alpha, 1e-5f);
  expect_near_vec(f32_values(fused), want, kRound4);
  expect_near_vec(f32_values(slow), want, kRound4);
  EXPECT_LT((fused - slow).abs().sum_all().to_scalar<float>(), 1e-5f);
}

TEST(NnOps, RmsNormLargeMatchesSlow) {
  Tensor t = rand_f32({24, 70, 64}, 299792458);
  Tensor alpha = Tensor::ones({64}, DType::F32, Device::cpu());
  Tensor diff = (nn::ops::rms_norm(t, alpha, 1e-5f) - nn::ops::rms_norm_slow(t, alpha, 1e-5f)).abs();
  EXPECT_LT(diff.flatten_all().max(0).to_scalar<float>(), 1e-5f);
}

TEST(NnOps, RmsNormLargeMagnitudeStaysFinite) {
  size_t rows = 4, hidden = 6912;
  std::vector<float> data(rows * hidden);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = (i % 2 == 0 ? 1.f : -1.f) * std::fabs(std::sin(static_cast<float>(i) * 0.17f)) * 7e9f;
  Tensor t = Tensor::from_vec(data, {rows, hidden}, Device::cpu());
  Tensor alpha = Tensor::ones({hidden}, DType::F32, Device::cpu());
  auto fused = f32_values(nn::ops::rms_norm(t, alpha, 1e-5f));
  auto slow = f32_values(nn::ops::rms_norm_slow(t, alpha, 1e-5f));
  for (float v : fused) ASSERT_TRUE(std::isfinite(v));
  expect_near_vec(fused, slow, 5e-3f);
}

TEST(NnOps, LayerNorm) {
  Tensor t = ops_data();
  Tensor alpha = Tensor::new_<float>({1.f, 2.f, 3.f}, Device::cpu());
  Tensor beta = Tensor::new_<float>({0.5f, 0.f, -0.2f}, Device::cpu());
  std::vector<float> want = {0.7673f, -2.6726f, 3.0071f, -0.7247f, 0.0f,     3.4742f,
                             -0.008f, -1.778f,  3.991f,  1.2071f,  -2.8284f, 1.9213f};
  Tensor fused = nn::ops::layer_norm(t, alpha, beta, 1e-5f);
  Tensor slow = nn::ops::layer_norm_slow(t, alpha, beta, 1e-5f);
  expect_near_vec(f32_values(fused), want, kRound4);
  expect_near_vec(f32_values(slow), want, kRound4);
  EXPECT_LT((fused - slow).abs().sum_all().to_scalar<float>(), 1e-5f);
}

TEST(NnOps, LayerNormLargeMatchesSlow) {
  Tensor t = rand_f32({24, 70, 64}, 299792458);
  Tensor alpha = Tensor::ones({64}, DType::F32, Device::cpu());
  Tensor beta = Tensor::zeros({64}, DType::F32, Device::cpu());
  Tensor diff =
      (nn::ops::layer_norm(t, alpha, beta, 1e-5f) - nn::ops::layer_norm_slow(t, alpha, beta, 1e-5f)).abs();
  EXPECT_LT(diff.flatten_all().max(0).to_scalar<float>(), 1e-5f);
}

TEST(NnOps, NormMixedDtypeKeepsInputDtype) {
  // an f32 weight with f16 activations (a GGUF norm weight) is aligned, not rejected
  Tensor xs = ops_data().to_dtype(DType::F16);
  Tensor alpha = Tensor::new_<float>({1.f, 2.f, 3.f}, Device::cpu());
  Tensor beta = Tensor::new_<float>({0.5f, -0.5f, 1.f}, Device::cpu());
  Tensor rms = nn::ops::rms_norm(xs, alpha, 1e-5f);
  EXPECT_EQ(rms.dtype(), DType::F16);
  expect_near_vec(f32_values(rms), f32_values(nn::ops::rms_norm_slow(xs, alpha, 1e-5f)), 5e-3f);
  Tensor ln = nn::ops::layer_norm(xs, alpha, beta, 1e-5f);
  EXPECT_EQ(ln.dtype(), DType::F16);
  expect_near_vec(f32_values(ln), f32_values(nn::ops::layer_norm_slow(xs, alpha, beta, 1e-5f)), 5e-3f);
}

TEST(NnOps, FusedKernelsHalfAndDoubleMatchComposed) {
  Tensor x32 = rand_f32({16, 40}, 7) * 4.0 - 2.0;
  Tensor alpha = rand_f32({40}, 8);
  Tensor beta = rand_f32({40}, 9);
  for (DType dt : {DType::F64, DType::BF16, DType::F16}) {
    Tensor x = x32.to_dtype(dt);
    float tol = dt == DType::F64 ? 1e-6f : (dt == DType::BF16 ? 3e-2f : 4e-3f);
    EXPECT_EQ(nn::ops::softmax_last_dim(x).dtype(), dt);
    expect_near_vec(f32_values(nn::ops::softmax_last_dim(x)), f32_values(nn::ops::softmax(x, -1)), tol);
    expect_near_vec(f32_values(nn::ops::rms_norm(x, alpha, 1e-5f)),
                    f32_values(nn::ops::rms_norm_slow(x, alpha, 1e-5f)), tol);
    expect_near_vec(f32_values(nn::ops::layer_norm(x, alpha, beta, 1e-5f)),
                    f32_values(nn::ops::layer_norm_slow(x, alpha, beta, 1e-5f)), tol);
  }
}

TEST(NnOps, FusedKernelsOnStridedLayouts) {
  Tensor base = rand_f32({12, 10}, 11);
  Tensor alpha = rand_f32({12}, 12);
  Tensor beta = rand_f32({12}, 13);
  Tensor transposed = base.t();                                     // [10, 12], strided
  Tensor narrowed = test_util::offset_view(base.t().contiguous());  // offset start
  Tensor broadcast = base.narrow(0, 0, 1).broadcast_as({5, 12, 10}).transpose(1, 2);
  for (const Tensor& x : {transposed, narrowed, broadcast}) {
    Tensor c = x.contiguous();
    EXPECT_EQ(f32_values(nn::ops::softmax_last_dim(x)), f32_values(nn::ops::softmax_last_dim(c)));
    EXPECT_EQ(f32_values(nn::ops::rms_norm(x, alpha, 1e-5f)), f32_values(nn::ops::rms_norm(c, alpha, 1e-5f)));
    EXPECT_EQ(f32_values(nn::ops::layer_norm(x, alpha, beta, 1e-5f)),
              f32_values(nn::ops::layer_norm(c, alpha, beta, 1e-5f)));
    expect_near_vec(f32_values(nn::ops::softmax_last_dim(x)), f32_values(nn::ops::softmax(c, -1)), 1e-6f);
  }
}

TEST(NnOps, FusedKernelsRejectIntegersAndBadAlpha) {
  Tensor xi = Tensor::new_<int64_t>({1, 2, 3}, Device::cpu());
  Tensor alpha = Tensor::ones({3}, DType::F32, Device::cpu());
  try {
    nn::ops::softmax_last_dim(xi);
    FAIL() << "integer softmax accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::UnsupportedOp);
  }
  EXPECT_THROW(nn::ops::rms_norm(xi, alpha, 1e-5f), Error);
  std::string msg =
      error_text([&] { nn::ops::rms_norm(ops_data(), Tensor::ones({4}, DType::F32, Device::cpu()), 1e-5f); });
  EXPECT_NE(msg.find("rms_norm"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[2, 2, 3]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[4]"), std::string::npos) << msg;
}

TEST(NnOps, FusedKernelsIdenticalBytesForAnyThreadCount) {
  Tensor x = rand_f32({256, 512}, 21) * 6.0 - 3.0;  // 131072 elements: several chunks
  Tensor alpha = rand_f32({512}, 22);
  Tensor beta = rand_f32({512}, 23);
  Tensor x4 = x.reshape({2, 4, 32, 512});
  Tensor cs = rand_f32({32, 256}, 24), sn = rand_f32({32, 256}, 25);
  std::vector<std::vector<float>> ref;
  for (size_t n : {1, 2, 3}) {
    set_num_threads(n);
    std::vector<std::vector<float>> got = {f32_values(nn::ops::softmax_last_dim(x)),
                                           f32_values(nn::ops::rms_norm(x, alpha, 1e-5f)),
                                           f32_values(nn::ops::layer_norm(x, alpha, beta, 1e-5f)),
                                           f32_values(nn::rotary_emb::rope(x4, cs, sn)),
                                           f32_values(nn::rotary_emb::rope_i(x4, cs, sn)),
                                           f32_values(nn::rotary_emb::rope_thd(x4, cs, sn))};
    if (ref.empty()) {
      ref = got;
    } else {
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_EQ(0, std::memcmp(got[i].data(), ref[i].data(), got[i].size() * sizeof(float)))
            << "kernel " << i << " with " << n << " threads";
    }
  }
  set_num_threads(0);
}

TEST(NnOps, Sigmoid) {
  Tensor t = ops_data();
  Tensor s1 = nn::ops::sigmoid(t);
  Tensor s2 = 1.0 / (1.0 + t.neg().exp());
  expect_near_vec(f32_values(s1), f32_values(s2), 1e-7f);
  EXPECT_NEAR(f32_values(s1)[0], 0.95257413f, 1e-7f);  // sigmoid(3)
}

namespace {

struct RopeInputs {
  Tensor src, cos, sin, cos2, sin2;
};

RopeInputs rope_inputs() {
  size_t b = 2, h = 5, t = 10, d = 16;
  return {rand_f32({b, h, t, d}, 299792458), rand_f32({t, d / 2}, 1), rand_f32({t, d / 2}, 2),
          rand_f32({t, d / 2}, 3), rand_f32({t, d / 2}, 4)};
}

float abs_sum(const Tensor& a, const Tensor& b) { return (a - b).abs().sum_all().to_scalar<float>(); }

}  // namespace

TEST(NnRope, RopeEqualsSlow) {
  auto in = rope_inputs();
  EXPECT_EQ(abs_sum(nn::rotary_emb::rope(in.src, in.cos, in.sin),
                    nn::rotary_emb::rope_slow(in.src, in.cos, in.sin)),
            0.f);
}

TEST(NnRope, RopeBatchedCosSin) {
  auto in = rope_inputs();
  Tensor r1 = nn::rotary_emb::rope(in.src.narrow(0, 0, 1), in.cos, in.sin);
  Tensor r2 = nn::rotary_emb::rope(in.src.narrow(0, 1, 1), in.cos2, in.sin2);
  Tensor both =
      nn::rotary_emb::rope(in.src, Tensor::stack({in.cos, in.cos2}, 0), Tensor::stack({in.sin, in.sin2}, 0));
  EXPECT_EQ(abs_sum(both, Tensor::cat({r1, r2}, 0)), 0.f);
}

TEST(NnRope, RopeIEqualsSlow) {
  auto in = rope_inputs();
  EXPECT_EQ(abs_sum(nn::rotary_emb::rope_i(in.src, in.cos, in.sin),
                    nn::rotary_emb::rope_i_slow(in.src, in.cos, in.sin)),
            0.f);
}

TEST(NnRope, RopeIBatchedCosSin) {
  auto in = rope_inputs();
  Tensor r1 = nn::rotary_emb::rope_i(in.src.narrow(0, 0, 1), in.cos, in.sin);
  Tensor r2 = nn::rotary_emb::rope_i(in.src.narrow(0, 1, 1), in.cos2, in.sin2);
  Tensor both = nn::rotary_emb::rope_i(in.src, Tensor::stack({in.cos, in.cos2}, 0),
                                       Tensor::stack({in.sin, in.sin2}, 0));
  EXPECT_EQ(abs_sum(both, Tensor::cat({r1, r2}, 0)), 0.f);
}

TEST(NnRope, RopeThdEqualsSlow) {
  auto in = rope_inputs();
  Tensor thd = in.src.transpose(1, 2).contiguous();
  Tensor r1 = nn::rotary_emb::rope_thd(thd, in.cos, in.sin).transpose(1, 2);
  EXPECT_EQ(abs_sum(r1, nn::rotary_emb::rope_slow(in.src, in.cos, in.sin)), 0.f);
  // batched cos/sin
  Tensor a = nn::rotary_emb::rope_thd(thd.narrow(0, 0, 1), in.cos, in.sin);
  Tensor b = nn::rotary_emb::rope_thd(thd.narrow(0, 1, 1), in.cos2, in.sin2);
  Tensor both =
      nn::rotary_emb::rope_thd(thd, Tensor::stack({in.cos, in.cos2}, 0), Tensor::stack({in.sin, in.sin2}, 0));
  EXPECT_EQ(abs_sum(both, Tensor::cat({a, b}, 0)), 0.f);
}

TEST(NnRope, HandValues) {
  // one position, d = 4: pairs (x0, x2), (x1, x3) for rope; (x0, x1), (x2, x3) for rope_i
  Tensor x = Tensor::new_<float>({1.f, 2.f, 3.f, 4.f}, Device::cpu()).reshape({1, 1, 1, 4});
  Tensor c = Tensor::new_<float>({{0.5f, 0.f}}, Device::cpu());
  Tensor s = Tensor::new_<float>({{2.f, 1.f}}, Device::cpu());
  // y0 = x0 c - x1 s, y1 = x0 s + x1 c
  EXPECT_EQ(
      nn::rotary_emb::rope(x, c, s).flatten_all().to_vec1<float>(),
      (std::vector<float>{1 * 0.5f - 3 * 2.f, 2 * 0.f - 4 * 1.f, 1 * 2.f + 3 * 0.5f, 2 * 1.f + 4 * 0.f}));
  EXPECT_EQ(
      nn::rotary_emb::rope_i(x, c, s).flatten_all().to_vec1<float>(),
      (std::vector<float>{1 * 0.5f - 2 * 2.f, 1 * 2.f + 2 * 0.5f, 3 * 0.f - 4 * 1.f, 3 * 1.f + 4 * 0.f}));
}

TEST(NnRope, UsesFirstRowsOfLongerCosSin) {
  auto in = rope_inputs();
  Tensor long_cos = Tensor::cat({in.cos, in.cos2}, 0), long_sin = Tensor::cat({in.sin, in.sin2}, 0);
  EXPECT_EQ(
      abs_sum(nn::rotary_emb::rope(in.src, long_cos, long_sin), nn::rotary_emb::rope(in.src, in.cos, in.sin)),
      0.f);
}

TEST(NnRope, ShapeErrorsNameShapes) {
  auto in = rope_inputs();
  std::string msg =
      error_text([&] { nn::rotary_emb::rope(in.src, in.cos.narrow(1, 0, 4), in.sin.narrow(1, 0, 4)); });
  EXPECT_NE(msg.find("[2, 5, 10, 16]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[10, 4]"), std::string::npos) << msg;
}

TEST(NnOps, PixelShuffleAndUnshuffle) {
  Tensor x = Tensor::arange<float>(0.f, 16.f, Device::cpu()).reshape({1, 4, 2, 2});
  Tensor y = nn::ops::pixel_shuffle(x, 2);
  EXPECT_EQ(y.dims(), (std::vector<size_t>{1, 1, 4, 4}));
  // out[h*2 + i, w*2 + j] = in[channel i*2 + j][h, w]
  EXPECT_EQ(y.flatten_all().to_vec1<float>(),
            (std::vector<float>{0, 4, 1, 5, 8, 12, 9, 13, 2, 6, 3, 7, 10, 14, 11, 15}));
  Tensor back = nn::ops::pixel_unshuffle(y, 2);
  EXPECT_EQ(back.dims(), (std::vector<size_t>{1, 4, 2, 2}));
  EXPECT_EQ(back.flatten_all().to_vec1<float>(), x.flatten_all().to_vec1<float>());
  EXPECT_THROW(nn::ops::pixel_shuffle(Tensor::zeros({1, 3, 2, 2}, DType::F32, Device::cpu()), 2), Error);
}

TEST(NnOps, ReplicationPad2d) {
  Tensor x = Tensor::new_<float>({{1.f, 2.f}, {3.f, 4.f}}, Device::cpu()).reshape({1, 1, 2, 2});
  Tensor y = nn::ops::replication_pad2d(x, 1);
  EXPECT_EQ(y.dims(), (std::vector<size_t>{1, 1, 4, 4}));
  EXPECT_EQ(y.flatten_all().to_vec1<float>(),
            (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
  EXPECT_EQ(nn::ops::replication_pad2d(x, 0).flatten_all().to_vec1<float>(),
            (std::vector<float>{1, 2, 3, 4}));
}

TEST(NnOps, DropoutScalesKeptValuesAndIsSeeded) {
  Tensor x = Tensor::ones({10000}, DType::F32, Device::cpu());
  Device::cpu().set_seed(5);
  auto a = nn::ops::dropout(x, 0.25f).to_vec1<float>();
  Device::cpu().set_seed(5);
  auto b = nn::ops::dropout(x, 0.25f).to_vec1<float>();
  EXPECT_EQ(a, b);
  size_t zeros = 0;
  for (float v : a) {
    if (v == 0.f)
      ++zeros;
    else
      EXPECT_FLOAT_EQ(v, 1.f / 0.75f);
  }
  EXPECT_NEAR(static_cast<double>(zeros) / 10000.0, 0.25, 0.03);
  EXPECT_THROW(nn::ops::dropout(x, 1.0f), Error);
  EXPECT_THROW(nn::ops::dropout(x, -0.1f), Error);
  EXPECT_EQ(nn::Dropout(0.5f).forward_t(x, false).to_vec1<float>(), x.to_vec1<float>());
}

// The CPU's fused silu_mul and add_rms_norm (src/cpu/unary.cpp, nn_fused.cpp) give the composed ops'
// bits in every float dtype: operands in place (a stacked projection's halves, rows 2 f apart), a
// transposed operand (rows that do not fold into one stride: copied or composed), f16 / bf16
// rounding the silu and the sum to the dtype first as the composed ops do.
TEST(NnOps, CpuFusedSiluMulAndAddRmsNormGiveTheComposedBits) {
  Device cpu = Device::cpu();
  cpu.set_seed(5);
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    // 300 columns: vector bodies and tails; 2 x 37 rows: several threads' chunks where rows are many
    Tensor gu = (Tensor::randn(0.f, 3.f, {2, 37, 600}, cpu)).to_dtype(dt);
    Tensor g = gu.narrow(2, 0, 300), u = gu.narrow(2, 300, 300);
    auto bits = [](const Tensor& t) { return t.flatten_all().to_dtype(DType::F64).to_vec1<double>(); };
    EXPECT_EQ(bits(nn::ops::silu_mul(g, u)), bits(g.silu() * u));
    Tensor gt = Tensor::randn(0.f, 3.f, {300, 74}, cpu).to_dtype(dt).t();  // [74, 300], columns apart
    Tensor ut = u.reshape({74, 300});
    EXPECT_EQ(bits(nn::ops::silu_mul(gt, ut)), bits(gt.silu() * ut));
    Tensor x = Tensor::randn(0.f, 2.f, {2, 37, 300}, cpu).to_dtype(dt);
    Tensor alpha = Tensor::randn(1.f, 0.2f, {300}, cpu).to_dtype(dt);
    for (const Tensor& h : {u, Tensor::randn(0.f, 1.f, {300, 74}, cpu).to_dtype(dt).t().reshape({2, 37, 300}),
                            gt.reshape({2, 37, 300})}) {
      auto [s, n] = nn::ops::add_rms_norm(x, h, alpha, 1e-5f);
      EXPECT_EQ(bits(s), bits(x + h));
      EXPECT_EQ(bits(n), bits(nn::ops::rms_norm(x + h, alpha, 1e-5f)));
    }
  }
}

TEST(NnOps, SwigluAndLeakyRelu) {
  Tensor x = Tensor::new_<float>({1.f, -2.f, 3.f, 4.f}, Device::cpu());
  // silu(1) * 3, silu(-2) * 4
  expect_near_vec(nn::ops::swiglu(x).to_vec1<float>(), {0.7310586f * 3.f, -0.23840584f * 4.f}, 1e-6f);
  EXPECT_EQ(nn::ops::leaky_relu(x, 0.1).to_vec1<float>(), (std::vector<float>{1.f, -0.2f, 3.f, 4.f}));
  EXPECT_THROW(nn::ops::swiglu(Tensor::ones({3}, DType::F32, Device::cpu())), Error);
}

// add_rms_norm: {x + h, rms_norm(x + h)} bit for bit on the CPU (its one-pass kernel against the
// composed ops), with h a strided view and x of 3 dims; under autograd the gradient of a loss on both
// outputs reaches x, h and alpha as the composed ops give it; mismatched shapes are an Error.
TEST(NnOps, AddRmsNormIsTheAddThenTheNorm) {
  Device cpu = Device::cpu();
  cpu.set_seed(21);
  Tensor x = Tensor::randn(0.f, 2.f, {2, 3, 16}, cpu), hh = Tensor::randn(0.f, 1.f, {2, 3, 32}, cpu);
  Tensor h = hh.narrow(2, 8, 16), alpha = Tensor::randn(1.f, 0.2f, {16}, cpu);
  auto [s, n] = nn::ops::add_rms_norm(x, h, alpha, 1e-5f);
  EXPECT_EQ(s.dims(), x.dims());
  EXPECT_EQ(s.flatten_all().to_vec1<float>(), (x + h).flatten_all().to_vec1<float>());
  EXPECT_EQ(n.flatten_all().to_vec1<float>(),
            nn::ops::rms_norm(x + h, alpha, 1e-5f).flatten_all().to_vec1<float>());
  Var vx = Var::from_tensor(x), vh = Var::from_tensor(h), va = Var::from_tensor(alpha);
  auto [ts, tn] = nn::ops::add_rms_norm(vx.as_tensor(), vh.as_tensor(), va.as_tensor(), 1e-5f);
  auto grads = (ts.sum_all() + (tn * tn).sum_all()).backward();
  const Tensor ws = vx.as_tensor() + vh.as_tensor();
  auto want = (ws.sum_all() + nn::ops::rms_norm_slow(ws, va.as_tensor(), 1e-5f).sqr().sum_all()).backward();
  for (const Var* v : {&vx, &vh, &va})
    expect_near_vec(grads.get(v->as_tensor())->flatten_all().to_vec1<float>(),
                    want.get(v->as_tensor())->flatten_all().to_vec1<float>(), 1e-5f);
  EXPECT_THROW(nn::ops::add_rms_norm(x, x.narrow(2, 0, 8), alpha, 1e-5f), Error);
}
