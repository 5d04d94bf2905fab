// VarBuilder (safetensors, npz, tensor maps, VarMap), VarMap save/load and Init.
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "candle/io/npy.h"
#include "candle/io/safetensors.h"
#include "nn_test_util.h"

using namespace candle;
using namespace candle::nn_test;

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("candle_nn_" + std::to_string(getpid()) + "_" + name))
      .string();
}

struct TempFile {
  std::string path;
  explicit TempFile(const std::string& name) : path(temp_path(name)) {}
  ~TempFile() { std::filesystem::remove(path); }
};

}  // namespace

TEST(NnVarBuilder, SafetensorsPrefixDtypeAndContains) {
  TempFile f("vb.safetensors");
  Tensor w = Tensor::new_<float>({{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}}, Device::cpu());
  safetensors::save({{"model.lin.weight", w}}, f.path);
  auto vb = nn::VarBuilder::from_mmaped_safetensors({f.path}, DType::F16, Device::cpu());
  auto sub = vb.pp("model").pp("lin");
  EXPECT_EQ(sub.prefix(), "model.lin");
  EXPECT_TRUE(sub.contains_tensor("weight"));
  EXPECT_FALSE(sub.contains_tensor("bias"));
  Tensor got = sub.get({2, 3}, "weight");
  EXPECT_EQ(got.dtype(), DType::F16);
  EXPECT_EQ(f32_values(got), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(sub.get_unchecked("weight").dims(), (std::vector<size_t>{2, 3}));
  EXPECT_EQ(sub.root().prefix(), "");
}

TEST(NnVarBuilder, MissingTensorNamesTensorAndFile) {
  TempFile f("missing.safetensors");
  safetensors::save({{"a", Tensor::zeros({2}, DType::F32, Device::cpu())}}, f.path);
  auto vb = nn::VarBuilder::from_mmaped_safetensors({f.path}, DType::F32, Device::cpu());
  std::string msg = error_text([&] { vb.pp("enc").get({2}, "b"); });
  EXPECT_NE(msg.find("enc.b"), std::string::npos) << msg;
  EXPECT_NE(msg.find(f.path), std::string::npos) << msg;
}

TEST(NnVarBuilder, WrongShapeNamesBothShapesAndFile) {
  TempFile f("shape.safetensors");
  safetensors::save({{"w", Tensor::zeros({2, 3}, DType::F32, Device::cpu())}}, f.path);
  auto vb = nn::VarBuilder::from_mmaped_safetensors({f.path}, DType::F32, Device::cpu());
  try {
    vb.get({3, 2}, "w");
    FAIL() << "wrong shape accepted";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::ShapeMismatch);
    EXPECT_NE(msg.find("w"), std::string::npos) << msg;
    EXPECT_NE(msg.find("expected: [3, 2]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("got: [2, 3]"), std::string::npos) << msg;
    EXPECT_NE(msg.find(f.path), std::string::npos) << msg;
  }
}

TEST(NnVarBuilder, ShardsActAsOneAndErrorsNameTheShard) {
  TempFile f1("shard1.safetensors"), f2("shard2.safetensors");
  safetensors::save({{"a", Tensor::ones({2}, DType::F32, Device::cpu())}}, f1.path);
  safetensors::save({{"b", Tensor::zeros({3}, DType::F32, Device::cpu())}}, f2.path);
  auto vb = nn::VarBuilder::from_mmaped_safetensors({f1.path, f2.path}, DType::F32, Device::cpu());
  EXPECT_EQ(vb.get({2}, "a").to_vec1<float>(), (std::vector<float>{1, 1}));
  EXPECT_EQ(vb.get({3}, "b").to_vec1<float>(), (std::vector<float>{0, 0, 0}));
  std::string msg = error_text([&] { vb.get({4}, "b"); });
  EXPECT_NE(msg.find(f2.path), std::string::npos) << msg;
  EXPECT_EQ(msg.find(f1.path), std::string::npos) << msg;
}

TEST(NnVarBuilder, FromNpz) {
  TempFile f("vb.npz");
  npy::write_npz({{"emb.weight", Tensor::new_<double>({{1.0, 2.0}, {3.0, 4.0}}, Device::cpu())}}, f.path);
  auto vb = nn::VarBuilder::from_npz(f.path, DType::F32, Device::cpu());
  nn::Embedding emb = nn::embedding(2, 2, vb.pp("emb"));
  EXPECT_EQ(emb.embeddings().dtype(), DType::F32);
  EXPECT_EQ(emb.forward(Tensor::new_<uint32_t>({1u}, Device::cpu())).to_vec2<float>(),
            (std::vector<std::vector<float>>{{3.f, 4.f}}));
  std::string msg = error_text([&] { vb.get({2, 2}, "nope"); });
  EXPECT_NE(msg.find("nope"), std::string::npos) << msg;
  EXPECT_NE(msg.find(f.path), std::string::npos) << msg;
}

TEST(NnVarBuilder, FromTensorsBuildsLinear) {
  auto vb = nn::VarBuilder::from_tensors({{"fc.weight", Tensor::new_<float>({{1.f, 2.f}}, Device::cpu())},
                                          {"fc.bias", Tensor::new_<float>({0.5f}, Device::cpu())}},
                                         DType::F32, Device::cpu());
  nn::Linear fc = nn::linear(2, 1, vb.pp("fc"));
  EXPECT_EQ(fc.forward(Tensor::new_<float>({{3.f, 4.f}}, Device::cpu())).to_vec2<float>(),
            (std::vector<std::vector<float>>{{11.5f}}));
  EXPECT_THROW(nn::linear(3, 1, vb.pp("fc")), Error);
}

TEST(NnVarBuilder, ZerosBuilder) {
  auto vb = nn::VarBuilder::zeros(DType::BF16, Device::cpu());
  Tensor t = vb.get({2, 2}, "anything");
  EXPECT_EQ(t.dtype(), DType::BF16);
  EXPECT_EQ(f32_values(t), (std::vector<float>{0, 0, 0, 0}));
}

TEST(NnVarMap, CreatesOnceAndChecksShape) {
  nn::VarMap vm;
  auto vb = nn::VarBuilder::from_varmap(vm, DType::F32, Device::cpu());
  Tensor a = vb.pp("l").get_with_hints({2, 3}, "w", nn::Init::Const{2.5});
  EXPECT_EQ(a.flatten_all().to_vec1<float>(), std::vector<float>(6, 2.5f));
  Tensor again = vb.pp("l").get_with_hints({2, 3}, "w", nn::init::ZERO);
  EXPECT_EQ(again.flatten_all().to_vec1<float>(), std::vector<float>(6, 2.5f));  // not re-created
  EXPECT_TRUE(again.is_variable());
  std::string msg = error_text([&] { vb.pp("l").get({3, 3}, "w"); });
  EXPECT_NE(msg.find("l.w"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[3, 3]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[2, 3]"), std::string::npos) << msg;
  EXPECT_EQ(vm.all_vars().size(), 1u);
}

TEST(NnVarMap, SaveLoadRoundTrip) {
  TempFile f("varmap.safetensors");
  Device::cpu().set_seed(1);
  nn::VarMap vm1;
  auto vb1 = nn::VarBuilder::from_varmap(vm1, DType::F32, Device::cpu());
  nn::Linear l1 = nn::linear(3, 2, vb1.pp("fc"));
  vm1.save(f.path);

  Device::cpu().set_seed(2);
  nn::VarMap vm2;
  auto vb2 = nn::VarBuilder::from_varmap(vm2, DType::F32, Device::cpu());
  nn::Linear l2 = nn::linear(3, 2, vb2.pp("fc"));
  ASSERT_NE(l1.weight().flatten_all().to_vec1<float>(), l2.weight().flatten_all().to_vec1<float>());
  vm2.load(f.path);
  // the layer holds the variables, so it sees the loaded values
  EXPECT_EQ(l1.weight().flatten_all().to_vec1<float>(), l2.weight().flatten_all().to_vec1<float>());
  EXPECT_EQ(l1.bias()->to_vec1<float>(), l2.bias()->to_vec1<float>());
}

TEST(NnVarMap, LoadChecksShapesAndNames) {
  TempFile f("varmap_bad.safetensors");
  safetensors::save({{"w", Tensor::zeros({2, 3}, DType::F32, Device::cpu())}}, f.path);
  nn::VarMap vm;
  vm.get({2, 4}, "w", nn::init::ONE, DType::F32, Device::cpu());
  std::string msg = error_text([&] { vm.load(f.path); });
  EXPECT_NE(msg.find("[2, 4]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[2, 3]"), std::string::npos) << msg;
  EXPECT_EQ(vm.all_vars()[0].as_tensor().flatten_all().to_vec1<float>(),
            std::vector<float>(8, 1.f));  // unchanged
  nn::VarMap vm2;
  vm2.get({1}, "missing", nn::init::ONE, DType::F32, Device::cpu());
  msg = error_text([&] { vm2.load(f.path); });
  EXPECT_NE(msg.find("missing"), std::string::npos) << msg;
}

TEST(NnInit, FanAndGain) {
  EXPECT_EQ(nn::fan_for_shape(nn::FanInOut::FanIn, {8, 4, 3, 3}), 36u);
  EXPECT_EQ(nn::fan_for_shape(nn::FanInOut::FanOut, {8, 4, 3, 3}), 72u);
  EXPECT_EQ(nn::fan_for_shape(nn::FanInOut::FanIn, {5}), 1u);
  EXPECT_EQ(nn::fan_for_shape(nn::FanInOut::FanOut, {5}), 5u);
  EXPECT_DOUBLE_EQ(nn::NonLinearity(nn::NonLinearity::ReLU).gain(), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(nn::NonLinearity(nn::NonLinearity::Tanh).gain(), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(nn::NonLinearity(nn::NonLinearity::SELU).gain(), 0.75);
  EXPECT_DOUBLE_EQ(nn::NonLinearity::gain_of(3.0).gain(), 3.0);
}

TEST(NnInit, RandomInitsHaveTheirStatistics) {
  Device dev = Device::cpu();
  dev.set_seed(3);
  auto stats = [](const Var& v) {
    auto x = v.as_tensor().flatten_all().to_dtype(DType::F64).to_vec1<double>();
    double m = 0, s = 0, lo = 1e9, hi = -1e9;
    for (double a : x) m += a, lo = std::min(lo, a), hi = std::max(hi, a);
    m /= x.size();
    for (double a : x) s += (a - m) * (a - m);
    return std::array<double, 4>{m, std::sqrt(s / x.size()), lo, hi};
  };
  auto u = stats(nn::Init(nn::Init::Uniform{-2.0, 1.0}).var({100, 100}, DType::F32, dev));
  EXPECT_GE(u[2], -2.0);
  EXPECT_LT(u[3], 1.0);
  EXPECT_NEAR(u[0], -0.5, 0.05);
  auto r = stats(nn::Init(nn::Init::Randn{1.0, 0.5}).var({100, 100}, DType::F32, dev));
  EXPECT_NEAR(r[0], 1.0, 0.03);
  EXPECT_NEAR(r[1], 0.5, 0.03);
  // Kaiming normal, fan_in 50: std sqrt(2 / 50) = 0.2
  auto k = stats(nn::init::DEFAULT_KAIMING_NORMAL.var({200, 50}, DType::F32, dev));
  EXPECT_NEAR(k[1], 0.2, 0.01);
  // Kaiming uniform: bound sqrt(3) * 0.2
  auto ku = stats(nn::init::DEFAULT_KAIMING_UNIFORM.var({200, 50}, DType::F32, dev));
  EXPECT_LE(ku[3], std::sqrt(3.0) * 0.2);
  EXPECT_NEAR(ku[1], 0.2, 0.01);
}
