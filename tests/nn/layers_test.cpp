// Layers: candle-nn's layer_norm.rs, group_norm.rs, batch_norm.rs, the Linear/Embedding
// examples, convolutions, activations, Sequential and Func.
#include <cmath>

#include "nn_test_util.h"

using namespace candle;
using namespace candle::nn_test;
using candle::test_util::expect_near_vec;

constexpr float kRound4 = 1e-4f;  // candle's values are rounded to 4 decimals

TEST(NnLinear, NoBias) {
  nn::Linear layer(Tensor::new_<float>({{1.f, 2.f}, {3.f, 4.f}, {5.f, 6.f}}, Device::cpu()), std::nullopt);
  Tensor xs = Tensor::new_<float>({{10.f, 100.f}}, Device::cpu());
  EXPECT_EQ(layer.forward(xs).to_vec2<float>(), (std::vector<std::vector<float>>{{210.f, 430.f, 650.f}}));
}

TEST(NnLinear, BiasAndBatchDims) {
  Tensor w = Tensor::new_<float>({{1.f, 2.f}, {3.f, 4.f}, {5.f, 6.f}}, Device::cpu());
  nn::Linear layer(w, Tensor::new_<float>({1.f, -1.f, 0.5f}, Device::cpu()));
  Tensor x3 = Tensor::new_<float>({{{10.f, 100.f}}, {{1.f, 1.f}}}, Device::cpu());  // [2, 1, 2]
  EXPECT_EQ(layer.forward(x3).flatten_all().to_vec1<float>(),
            (std::vector<float>{211.f, 429.f, 650.5f, 4.f, 6.f, 11.5f}));
  Tensor x4 = x3.reshape({2, 1, 1, 2});
  EXPECT_EQ(layer.forward(x4).dims(), (std::vector<size_t>{2, 1, 1, 3}));
  EXPECT_EQ(layer.forward(x4).flatten_all().to_vec1<float>(),
            (std::vector<float>{211.f, 429.f, 650.5f, 4.f, 6.f, 11.5f}));
}

TEST(NnEmbedding, SelectsRows) {
  nn::Embedding emb(Tensor::new_<float>({{0.f, 1.f}, {2.f, 3.f}, {4.f, 5.f}, {6.f, 7.f}}, Device::cpu()), 2);
  Tensor ids = Tensor::new_<uint32_t>({{0u, 1u}, {3u, 2u}}, Device::cpu());
  EXPECT_EQ(emb.forward(ids).to_vec3<float>(),
            (std::vector<std::vector<std::vector<float>>>{{{0, 1}, {2, 3}}, {{6, 7}, {4, 5}}}));
}

TEST(NnLayerNorm, CandleLayerNormTest) {
  Device dev = Device::cpu();
  Tensor w = Tensor::new_<float>({3.f}, dev), b = Tensor::new_<float>({0.5f}, dev);
  nn::LayerNorm ln2(Tensor::cat({w, w}, 0), Tensor::cat({b, b}, 0), 1e-8);
  nn::LayerNorm ln3(Tensor::cat({w, w, w}, 0), Tensor::cat({b, b, b}, 0), 1e-8);
  nn::LayerNorm ln(w, b, 1e-8);
  EXPECT_EQ(ln.eps(), 1e-8);
  EXPECT_TRUE(ln.remove_mean());
  EXPECT_EQ(ln.forward(Tensor::new_<float>({{{2.f}}}, dev)).flatten_all().to_vec1<float>(),
            (std::vector<float>{0.5f}));
  EXPECT_EQ(ln2.forward(Tensor::new_<float>({{{4.f, 0.f}}}, dev)).to_vec3<float>(),
            (std::vector<std::vector<std::vector<float>>>{{{3.5f, -2.5f}}}));
  Tensor res = ln3.forward(Tensor::new_<float>({{{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}, {9.f, 8.f, 7.f}}}, dev));
  expect_near_vec(f32_values(res),
                  {-3.1742f, 0.5f, 4.1742f, -3.1742f, 0.5f, 4.1742f, 4.1742f, 0.5f, -3.1742f}, kRound4);
  Tensor mean = res.sum_keepdim(2) / 3.0;
  expect_near_vec(f32_values(mean), {0.5f, 0.5f, 0.5f}, kRound4);
  Tensor std = res.broadcast_sub(mean).sqr().sum_keepdim(2).sqrt() / 3.0;
  expect_near_vec(f32_values(std), {1.7321f, 1.7321f, 1.7321f}, kRound4);
  nn::LayerNorm rms = nn::LayerNorm::rms_norm(Tensor::new_<float>({1.f}, dev), 1e-5);
  EXPECT_EQ(rms.eps(), 1e-5);
  EXPECT_FALSE(rms.remove_mean());
}

TEST(NnLayerNorm, FromVarBuilder) {
  Device dev = Device::cpu();
  Tensor weight = Tensor::new_<float>({3.f, 3.f}, dev), bias = Tensor::new_<float>({0.5f, 0.5f}, dev);
  auto vb = nn::VarBuilder::from_tensors({{"weight", weight}}, DType::F32, dev);
  EXPECT_FALSE(nn::layer_norm_no_bias(2, 1e-8, vb).bias().has_value());
  auto vb2 = nn::VarBuilder::from_tensors({{"gamma", weight}, {"beta", bias}}, DType::F32, dev);
  nn::LayerNorm ln = nn::layer_norm(2, nn::LayerNormConfig{}, vb2);
  EXPECT_EQ(ln.weight().to_vec1<float>(), (std::vector<float>{3.f, 3.f}));
  EXPECT_EQ(ln.bias()->to_vec1<float>(), (std::vector<float>{0.5f, 0.5f}));
  EXPECT_THROW(nn::layer_norm(2, nn::LayerNormConfig{}, vb), Error);
}

TEST(NnLayerNorm, NoBiasAndRmsNormLayers) {
  Device dev = Device::cpu();
  Tensor x = ops_data();
  Tensor w = Tensor::new_<float>({1.f, 2.f, 3.f}, dev);
  // RmsNorm = ops::rms_norm; values from candle's rms_norm test
  expect_near_vec(f32_values(nn::RmsNorm(w, 1e-5).forward(x)),
                  {1.019f, 0.6794f, 4.0762f, 0.1674f, 1.6744f, 4.521f, 0.4714f, 0.4714f, 4.9497f, 1.206f,
                   0.603f, 3.6181f},
                  kRound4);
  // LayerNorm without bias = layer_norm with a zero bias
  Tensor zeros = Tensor::zeros({3}, DType::F32, dev);
  expect_near_vec(f32_values(nn::LayerNorm::new_no_bias(w, 1e-5).forward(x)),
                  f32_values(nn::ops::layer_norm(x, w, zeros, 1e-5f)), 1e-5f);
}

TEST(NnGroupNorm, CandleGroupNormTest) {
  Device dev = Device::cpu();
  Tensor w = Tensor::ones({6}, DType::F32, dev), b = Tensor::zeros({6}, DType::F32, dev);
  nn::GroupNorm gn2(w, b, 6, 2, 1e-5), gn3(w, b, 6, 3, 1e-5);
  Tensor input = Tensor::new_<float>({{{-0.3034f, 0.2726f, -0.9659f},
                                       {-1.1845f, -1.3236f, 0.0172f},
                                       {1.9507f, 1.2554f, -0.8625f},
                                       {1.0682f, 0.3604f, 0.3985f},
                                       {-0.4957f, -0.4461f, -0.9721f},
                                       {1.5157f, -0.1546f, -0.5596f}},
                                      {{-1.6698f, -0.4040f, -0.7927f},
                                       {0.3736f, -0.0975f, -0.1351f},
                                       {-0.9461f, 0.5461f, -0.6334f},
                                       {-1.0919f, -0.1158f, 0.1213f},
                                       {-0.9535f, 0.1281f, 0.4372f},
                                       {-0.2845f, 0.3488f, 0.5641f}}},
                                     dev);
  expect_near_vec(f32_values(gn2.forward(input)),
                  {-0.1653f, 0.3748f,  -0.7866f, -0.9916f, -1.1220f, 0.1353f,  1.9485f,  1.2965f,  -0.6896f,
                   1.2769f,  0.3628f,  0.4120f,  -0.7427f, -0.6786f, -1.3578f, 1.8547f,  -0.3022f, -0.8252f,
                   -1.9342f, 0.0211f,  -0.5793f, 1.2223f,  0.4945f,  0.4365f,  -0.8163f, 1.4887f,  -0.3333f,
                   -1.7960f, -0.0392f, 0.3875f,  -1.5469f, 0.3998f,  0.9561f,  -0.3428f, 0.7970f,  1.1845f},
                  kRound4);
  expect_near_vec(f32_values(gn3.forward(input)),
                  {0.4560f,  1.4014f,  -0.6313f, -0.9901f, -1.2184f, 0.9822f,  1.4254f,  0.6360f, -1.7682f,
                   0.4235f,  -0.3800f, -0.3367f, -0.3890f, -0.3268f, -0.9862f, 2.1325f,  0.0386f, -0.4691f,
                   -1.8797f, 0.0777f,  -0.5234f, 1.2802f,  0.5517f,  0.4935f,  -1.0102f, 1.5327f, -0.4773f,
                   -1.2587f, 0.4047f,  0.8088f,  -1.9074f, 0.1691f,  0.7625f,  -0.6230f, 0.5928f, 1.0061f},
                  kRound4);
  EXPECT_THROW(nn::GroupNorm(w, b, 6, 4, 1e-5), Error);
}

namespace {

const std::vector<float> kBnInput = {
    -0.7493f, -1.0410f, 1.6977f,  -0.6579f, 1.7982f,  -0.0087f, 0.2812f,  -0.1190f, 0.2908f,  -0.5975f,
    -0.0278f, -0.2138f, -1.3130f, -1.6048f, -2.2028f, 0.9452f,  0.4002f,  0.0831f,  1.0004f,  0.1860f,
    0.5004f,  0.5539f,  0.9991f,  -0.2540f, -0.0703f, -0.3752f, -0.1096f, -0.2374f, 1.0258f,  -2.2208f,
    -0.0257f, 0.6073f,  -1.1627f, -0.0964f, -1.9718f, 1.6577f,  0.1931f,  -0.3692f, -0.8011f, 0.9059f,
    0.4797f,  0.6521f,  -0.0165f, -0.6683f, -0.4148f, 2.0649f,  -0.8276f, 1.7947f,  -0.2061f, 0.5812f,
    -1.3598f, 1.6192f,  1.0466f,  -0.4423f, 0.4202f,  0.1749f,  0.6969f,  0.2616f,  -0.0369f, -1.4951f,
    -0.0814f, -0.1877f, 0.0267f,  0.6150f,  0.2402f,  -1.1440f, -2.0068f, 0.6032f,  -2.6639f, 0.8260f,
    0.1085f,  -0.1693f, 1.2805f,  0.7654f,  -0.4930f, 0.3770f,  1.1309f,  0.2303f,  0.2949f,  -0.2634f,
    -0.5225f, 0.4269f,  0.6341f,  1.5736f,  0.9827f,  -1.2499f, 0.3509f,  -1.6243f, -0.8123f, 0.7634f,
    -0.3047f, 0.0143f,  -0.4032f, 0.0537f,  0.7022f,  0.8405f,  -1.2221f, -1.6847f, -0.0714f, -0.1608f,
    0.5579f,  -1.5858f, 0.4617f,  -0.6480f, 0.1332f,  0.0419f,  -0.9784f, 0.4173f,  1.2313f,  -1.9046f,
    -0.1656f, 0.1259f,  0.0763f,  1.4252f,  -0.9115f, -0.1093f, -0.3100f, -0.6734f, -1.4357f, 0.9205f};
const std::vector<float> kBnOutput = {
    -0.6391f, -0.9414f, 1.8965f,  -0.5444f, 2.0007f,  0.1283f,  0.4287f,  0.014f,   0.4387f,  -0.4818f,
    0.1085f,  -0.0842f, -1.6809f, -2.0057f, -2.6714f, 0.8328f,  0.2262f,  -0.1268f, 0.8943f,  -0.0123f,
    0.3377f,  0.3973f,  0.8928f,  -0.5021f, 0.0861f,  -0.2324f, 0.0451f,  -0.0884f, 1.2311f,  -2.1603f,
    0.1327f,  0.7939f,  -1.055f,  0.0589f,  -1.9002f, 1.8912f,  0.2918f,  -0.3253f, -0.7993f, 1.0741f,
    0.6063f,  0.7955f,  0.0617f,  -0.6536f, -0.3754f, 2.3461f,  -0.8284f, 2.0495f,  -0.201f,  0.6476f,
    -1.4446f, 1.7665f,  1.1493f,  -0.4556f, 0.4741f,  0.2097f,  0.7723f,  0.3031f,  -0.0186f, -1.5905f,
    0.053f,   -0.0572f, 0.165f,   0.7746f,  0.3862f,  -1.0481f, -1.9422f, 0.7624f,  -2.6231f, 0.9933f,
    0.2498f,  -0.0381f, 1.2061f,  0.6327f,  -0.7681f, 0.2004f,  1.0396f,  0.037f,   0.109f,   -0.5125f,
    -0.8009f, 0.2559f,  0.4865f,  1.5324f,  1.1861f,  -1.1461f, 0.5261f,  -1.5372f, -0.689f,  0.957f,
    -0.1587f, 0.1745f,  -0.2616f, 0.2156f,  0.8931f,  1.0375f,  -1.2614f, -1.7691f, 0.0015f,  -0.0966f,
    0.6921f,  -1.6605f, 0.5866f,  -0.6313f, 0.226f,   0.1258f,  -0.9939f, 0.5378f,  1.3484f,  -2.0319f,
    -0.1574f, 0.1568f,  0.1034f,  1.5574f,  -0.9614f, -0.0967f, -0.313f,  -0.7047f, -1.5264f, 1.0134f};

}  // namespace

TEST(NnBatchNorm, CandleBatchNormTestLearning) {
  Device dev = Device::cpu();
  Tensor rm = Tensor::zeros({5}, DType::F32, dev), rv = Tensor::ones({5}, DType::F32, dev);
  auto bn = nn::BatchNorm::new_no_bias(5, rm, rv, 1e-8);
  Tensor input = Tensor::from_vec(kBnInput, {2, 5, 3, 4}, dev);
  Tensor out = bn.forward_learning(input);
  EXPECT_EQ(out.dims(), (std::vector<size_t>{2, 5, 3, 4}));
  expect_near_vec(f32_values(out), kBnOutput, kRound4);
  nn::BatchNorm bn2(5, rm, rv, Tensor::new_<float>({0.5f}, dev).broadcast_as({5}),
                    Tensor::new_<float>({-1.5f}, dev).broadcast_as({5}), 1e-8);
  Tensor out2 = bn2.forward_learning(input);
  float diff = ((out2 - out * 0.5) + 1.5).sqr().sum_all().to_scalar<float>();
  EXPECT_LT(diff, 1e-8f);
}

TEST(NnBatchNorm, EvalUsesRunningStats) {
  Device dev = Device::cpu();
  Tensor rm = Tensor::new_<float>({1.f, -1.f}, dev), rv = Tensor::new_<float>({4.f, 0.25f}, dev);
  nn::BatchNorm bn(2, rm, rv, Tensor::new_<float>({2.f, 1.f}, dev), Tensor::new_<float>({0.f, 10.f}, dev),
                   0.0);
  Tensor x = Tensor::new_<float>({{3.f, 0.f}, {-1.f, -1.f}}, dev);  // [b = 2, c = 2]
  // channel 0: (x - 1) / 2 * 2; channel 1: (x + 1) / 0.5 + 10
  EXPECT_EQ(bn.forward(x).to_vec2<float>(), (std::vector<std::vector<float>>{{2.f, 12.f}, {-2.f, 10.f}}));
  EXPECT_EQ(bn.forward_t(x, false).to_vec2<float>(), bn.forward(x).to_vec2<float>());
  EXPECT_THROW(bn.forward(Tensor::zeros({2, 3}, DType::F32, dev)), Error);
  EXPECT_THROW(nn::BatchNorm::new_no_bias(3, rm, rv, 1e-5), Error);
  EXPECT_THROW(nn::BatchNorm::new_no_bias(2, rm, rv, -1.0), Error);
}

TEST(NnBatchNorm, TrainUpdatesRunningStats) {
  Device dev = Device::cpu();
  auto bn = nn::BatchNorm::new_no_bias(1, Tensor::zeros({1}, DType::F32, dev),
                                       Tensor::ones({1}, DType::F32, dev), 0.0);
  Tensor x = Tensor::new_<float>({{1.f}, {3.f}}, dev);  // mean 2, biased var 1, unbiased var 2
  expect_near_vec(f32_values(bn.forward_t(x, true)), {-1.f, 1.f}, 1e-6f);
  expect_near_vec(bn.running_mean().to_vec1<float>(), {0.2f}, 1e-6f);
  expect_near_vec(bn.running_var().to_vec1<float>(), {0.9f + 0.2f}, 1e-6f);
}

TEST(NnConv, Conv2dLayerFusesBias) {
  Device dev = Device::cpu();
  nn::Conv2d conv(Tensor::new_<float>({2.f, 3.f}, dev).reshape({2, 1, 1, 1}),
                  Tensor::new_<float>({1.f, -1.f}, dev), nn::Conv2dConfig{});
  Tensor x = Tensor::new_<float>({1.f, 2.f, 3.f, 4.f}, dev).reshape({1, 1, 2, 2});
  EXPECT_EQ(conv.forward(x).flatten_all().to_vec1<float>(), (std::vector<float>{3, 5, 7, 9, 2, 5, 8, 11}));
}

TEST(NnConv, Conv1dLayer) {
  Device dev = Device::cpu();
  // kernel [1, 1, 2] = [1, 1]: pairwise sums, then + bias 0.5
  nn::Conv1d conv(Tensor::new_<float>({1.f, 1.f}, dev).reshape({1, 1, 2}), Tensor::new_<float>({0.5f}, dev),
                  nn::Conv1dConfig{});
  Tensor x = Tensor::new_<float>({1.f, 2.f, 4.f}, dev).reshape({1, 1, 3});
  EXPECT_EQ(conv.forward(x).flatten_all().to_vec1<float>(), (std::vector<float>{3.5f, 6.5f}));
}

TEST(NnConv, ConvTranspose2dLayer) {
  Device dev = Device::cpu();
  nn::ConvTranspose2d conv(Tensor::new_<float>({2.f, 3.f}, dev).reshape({1, 2, 1, 1}),
                           Tensor::new_<float>({1.f, -1.f}, dev), nn::ConvTranspose2dConfig{});
  Tensor x = Tensor::new_<float>({1.f, 2.f, 3.f, 4.f}, dev).reshape({1, 1, 2, 2});
  EXPECT_EQ(conv.forward(x).flatten_all().to_vec1<float>(), (std::vector<float>{3, 5, 7, 9, 2, 5, 8, 11}));
}

TEST(NnConv, ConvTranspose1dLayer) {
  Device dev = Device::cpu();
  // kernel [1, 1, 2] = [1, 2], stride 2: each input spreads to (x, 2x)
  nn::ConvTranspose1dConfig cfg;
  cfg.stride = 2;
  nn::ConvTranspose1d conv(Tensor::new_<float>({1.f, 2.f}, dev).reshape({1, 1, 2}),
                           Tensor::new_<float>({1.f}, dev), cfg);
  Tensor x = Tensor::new_<float>({1.f, 3.f}, dev).reshape({1, 1, 2});
  EXPECT_EQ(conv.forward(x).flatten_all().to_vec1<float>(), (std::vector<float>{2.f, 3.f, 4.f, 7.f}));
}

TEST(NnConv, ConstructorsShapesFromVarMap) {
  nn::VarMap vm;
  auto vb = nn::VarBuilder::from_varmap(vm, DType::F32, Device::cpu());
  nn::Conv2dConfig c2;
  c2.groups = 2;
  EXPECT_EQ(nn::conv2d(4, 6, 3, c2, vb.pp("c2")).weight().dims(), (std::vector<size_t>{6, 2, 3, 3}));
  EXPECT_EQ(nn::conv1d(4, 6, 5, nn::Conv1dConfig{}, vb.pp("c1")).weight().dims(),
            (std::vector<size_t>{6, 4, 5}));
  EXPECT_EQ(nn::conv_transpose1d(4, 6, 3, nn::ConvTranspose1dConfig{}, vb.pp("t1")).weight().dims(),
            (std::vector<size_t>{4, 6, 3}));
  EXPECT_EQ(nn::conv_transpose2d(4, 6, 3, nn::ConvTranspose2dConfig{}, vb.pp("t2")).weight().dims(),
            (std::vector<size_t>{4, 6, 3, 3}));
  EXPECT_FALSE(nn::conv2d_no_bias(4, 6, 3, nn::Conv2dConfig{}, vb.pp("nb")).bias().has_value());
  EXPECT_TRUE(vm.contains("c2.bias"));
  EXPECT_EQ(vm.size(), 9u);
  EXPECT_THROW(nn::conv2d(4, 6, 3, nn::Conv2dConfig{0, 1, 1, 3}, vb.pp("bad")), Error);
}

TEST(NnActivation, Values) {
  Tensor x = Tensor::new_<float>({-2.f, -0.5f, 0.f, 1.f, 8.f}, Device::cpu());
  auto run = [&](nn::Activation a) { return a.forward(x).to_vec1<float>(); };
  EXPECT_EQ(run(nn::Activation::Relu), (std::vector<float>{0, 0, 0, 1, 8}));
  EXPECT_EQ(run(nn::Activation::Relu2), (std::vector<float>{0, 0, 0, 1, 64}));
  EXPECT_EQ(run(nn::Activation::Relu6), (std::vector<float>{0, 0, 0, 1, 6}));
  expect_near_vec(run(nn::Activation::HardSigmoid), {1.f / 6, 2.5f / 6, 0.5f, 4.f / 6, 1.f}, 1e-6f);
  expect_near_vec(run(nn::Activation::HardSwish), {-2.f / 6, -0.5f * 2.5f / 6, 0.f, 4.f / 6, 8.f}, 1e-6f);
  expect_near_vec(run(nn::Activation::leaky_relu(0.1)), {-0.2f, -0.05f, 0.f, 1.f, 8.f}, 1e-7f);
  expect_near_vec(run(nn::Activation::elu(2.0)),
                  {2.f * (std::exp(-2.f) - 1), 2.f * (std::exp(-0.5f) - 1), 0, 1, 8}, 1e-6f);
  // Gelu is the erf form, NewGelu the tanh approximation: they differ at x = 1
  expect_near_vec(run(nn::Activation::Gelu), {-0.04550026f, -0.15426877f, 0.f, 0.8413447f, 8.f}, 1e-6f);
  expect_near_vec(run(nn::Activation::NewGelu), {-0.04540231f, -0.15428599f, 0.f, 0.8411920f, 8.f}, 1e-6f);
  EXPECT_EQ(run(nn::Activation::GeluPytorchTanh), run(nn::Activation::NewGelu));
  expect_near_vec(run(nn::Activation::Sigmoid), {0.11920292f, 0.37754067f, 0.5f, 0.7310586f, 0.99966466f},
                  1e-6f);
  expect_near_vec(run(nn::Activation::Silu), {-0.23840584f, -0.18877033f, 0.f, 0.7310586f, 7.9973173f},
                  1e-5f);
  EXPECT_EQ(run(nn::Activation::Swish), run(nn::Activation::Silu));
  Tensor pair = Tensor::new_<float>({1.f, 2.f}, Device::cpu());
  expect_near_vec(nn::Activation(nn::Activation::Swiglu).forward(pair).to_vec1<float>(), {0.7310586f * 2.f},
                  1e-6f);
}

TEST(NnSequential, AppliesLayersInOrder) {
  nn::Linear double_it(Tensor::new_<float>({{2.f}}, Device::cpu()), std::nullopt);
  auto model = nn::seq()
                   .add(double_it)
                   .add_fn([](const Tensor& x) { return x + 1.0; })
                   .add(nn::Activation(nn::Activation::Relu));
  EXPECT_EQ(model.len(), 3u);
  Tensor x = Tensor::new_<float>({{-3.f}, {1.f}}, Device::cpu());
  EXPECT_EQ(model.forward(x).flatten_all().to_vec1<float>(), (std::vector<float>{0.f, 3.f}));
  auto all = model.forward_all(x);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[1].flatten_all().to_vec1<float>(), (std::vector<float>{-5.f, 3.f}));
  EXPECT_TRUE(nn::seq().is_empty());
  EXPECT_EQ(nn::seq().forward(x).flatten_all().to_vec1<float>(), (std::vector<float>{-3.f, 1.f}));
}

TEST(NnFunc, WrapsAFunction) {
  nn::Func f = nn::func([](const Tensor& x) { return x * 3.0; });
  EXPECT_EQ(f.forward(Tensor::new_<float>({1.f, 2.f}, Device::cpu())).to_vec1<float>(),
            (std::vector<float>{3.f, 6.f}));
}
