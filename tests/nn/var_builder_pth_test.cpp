// VarBuilder::from_pth over the PyTorch checkpoints of tools/gen_pth_fixtures.py.
#include "candle/io/pickle.h"
#include "candle/io/safetensors.h"
#include "candle/nn/layers.h"
#include "nn_test_util.h"

using namespace candle;
using namespace candle::nn_test;

namespace {

std::string fixture(const std::string& name) { return std::string(CANDLE_TEST_DATA_DIR) + "/pth/" + name; }

}  // namespace

TEST(NnVarBuilderPth, StateDictPrefixShapeAndDtype) {
  auto want = safetensors::load(fixture("module.expected.safetensors"), Device::cpu());
  for (const char* file : {"module.pt", "module_legacy.pt", "module_proto4.pt"}) {
    SCOPED_TRACE(file);
    auto vb = nn::VarBuilder::from_pth(fixture(file), DType::F32, Device::cpu());
    auto lin = vb.pp("lin");
    EXPECT_TRUE(lin.contains_tensor("weight"));
    EXPECT_FALSE(lin.contains_tensor("nope"));
    Tensor w = lin.get({2, 3}, "weight");
    EXPECT_EQ(w.dtype(), DType::F32);
    EXPECT_EQ(f32_values(w), f32_values(want.at("lin.weight")));
    // converted to the builder's dtype: i8 (loaded as i16) and bf16 become f32
    EXPECT_EQ(f32_values(vb.get({4}, "i8")), (std::vector<float>{-128, 127, -1, 0}));
    EXPECT_EQ(vb.get({2, 3}, "bf16").dtype(), DType::F32);
    EXPECT_EQ(f32_values(vb.get({2, 3}, "bf16")), f32_values(want.at("bf16")));
    EXPECT_EQ(vb.set_dtype(DType::F16).get({2}, "lin.bias").dtype(), DType::F16);
  }
}

TEST(NnVarBuilderPth, LinearFromACheckpointKey) {
  auto vb =
      nn::VarBuilder::from_pth(fixture("nested.pt"), DType::F32, Device::cpu(), std::string("state_dict"));
  nn::Linear lin = nn::linear(2, 2, vb);
  auto want = safetensors::load(fixture("nested.expected.safetensors"), Device::cpu());
  Tensor x = Tensor::new_<float>({{1.f, 2.f}}, Device::cpu());
  Tensor expect = x.matmul(want.at("state_dict.weight").t()) + want.at("state_dict.bias").unsqueeze(0);
  EXPECT_EQ(f32_values(lin.forward(x)), f32_values(expect));
}

TEST(NnVarBuilderPth, ErrorsNameTheTensorAndTheFile) {
  auto vb = nn::VarBuilder::from_pth(fixture("module.pt"), DType::F32, Device::cpu());
  std::string missing = error_text([&] { vb.pp("enc").get({2}, "b"); });
  EXPECT_NE(missing.find("enc.b"), std::string::npos) << missing;
  EXPECT_NE(missing.find("module.pt"), std::string::npos) << missing;
  std::string shape = error_text([&] { vb.get({3, 2}, "lin.weight"); });
  EXPECT_NE(shape.find("shape mismatch for lin.weight"), std::string::npos) << shape;
  EXPECT_NE(shape.find("[2, 3]"), std::string::npos) << shape;
}
