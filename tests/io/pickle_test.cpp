// PyTorch checkpoints (candle::pickle): the fixtures of tools/gen_pth_fixtures.py (torch 1.13)
// against the values it wrote next to them (<name>.expected.safetensors), byte for byte.
#include "candle/io/pickle.h"

#include <gtest/gtest.h>

#include <map>

#include "candle/backend/cpu_storage.h"
#include "candle/candle.h"
#include "candle/io/safetensors.h"
#include "io/io_test_util.h"

namespace {

using namespace candle;
using io_test::data_path;
using io_test::tensor_bytes;

std::string pth(const std::string& name) { return data_path("pth/" + name + ".pt"); }

// Every tensor of the checkpoint equals the expected one: same names, dtypes, shapes, bytes.
void expect_matches_fixture(const std::string& name) {
  SCOPED_TRACE(name);
  auto want = safetensors::load(data_path("pth/" + name + ".expected.safetensors"), Device::cpu());
  auto got = pickle::read_all(pth(name));
  std::map<std::string, Tensor> by_name;
  for (auto& [n, t] : got) EXPECT_TRUE(by_name.emplace(n, t).second) << "name twice: " << n;
  ASSERT_EQ(by_name.size(), want.size());
  for (const auto& [n, w] : want) {
    SCOPED_TRACE(n);
    auto it = by_name.find(n);
    ASSERT_NE(it, by_name.end()) << "missing tensor " << n;
    const Tensor& t = it->second;
    EXPECT_EQ(t.dtype(), w.dtype());
    EXPECT_EQ(t.shape(), w.shape());
    EXPECT_TRUE(t.is_contiguous());
    EXPECT_EQ(tensor_bytes(t), tensor_bytes(w));
  }
}

TEST(Pth, ModuleStateDictZipProtocol2) { expect_matches_fixture("module"); }
TEST(Pth, ModuleStateDictZipProtocol4) { expect_matches_fixture("module_proto4"); }
TEST(Pth, ModuleStateDictLegacyFormat) { expect_matches_fixture("module_legacy"); }
TEST(Pth, ViewsZip) { expect_matches_fixture("views"); }
TEST(Pth, ViewsLegacy) { expect_matches_fixture("views_legacy"); }
TEST(Pth, ViewsZipProtocol5) { expect_matches_fixture("views_proto5"); }
TEST(Pth, NestedCheckpoint) { expect_matches_fixture("nested"); }
TEST(Pth, NestedCheckpointLegacy) { expect_matches_fixture("nested_legacy"); }
TEST(Pth, NestedCheckpointProtocol4) { expect_matches_fixture("nested_proto4"); }
TEST(Pth, ArchiveFolderName) { expect_matches_fixture("archive_folder"); }

TEST(Pth, StateDictOrderAndDtypes) {
  auto all = pickle::read_all(pth("module"));
  std::vector<std::string> names;
  for (auto& [n, t] : all) names.push_back(n);
  const std::vector<std::string> want = {"f64",
                                         "f16",
                                         "bf16",
                                         "i32",
                                         "i16",
                                         "i8",
                                         "u8",
                                         "flags",
                                         "i64",
                                         "scalar",
                                         "lin.weight",
                                         "lin.bias",
                                         "bn.weight",
                                         "bn.bias",
                                         "bn.running_mean",
                                         "bn.running_var",
                                         "bn.num_batches_tracked"};
  EXPECT_EQ(names, want);
  std::map<std::string, Tensor> m(all.begin(), all.end());
  EXPECT_EQ(m["f64"].dtype(), DType::F64);
  EXPECT_EQ(m["f16"].dtype(), DType::F16);
  EXPECT_EQ(m["bf16"].dtype(), DType::BF16);
  EXPECT_EQ(m["i32"].dtype(), DType::I32);
  EXPECT_EQ(m["bn.num_batches_tracked"].dtype(), DType::I64);
  EXPECT_EQ(m["bn.num_batches_tracked"].rank(), 0u);
  // int8 widened to i16, bool to u8
  EXPECT_EQ(m["i8"].dtype(), DType::I16);
  EXPECT_EQ(m["i8"].to_vec1<int16_t>(), (std::vector<int16_t>{-128, 127, -1, 0}));
  EXPECT_EQ(m["flags"].dtype(), DType::U8);
  EXPECT_EQ(m["flags"].to_vec1<uint8_t>(), (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(m["i64"].to_vec1<int64_t>(), (std::vector<int64_t>{INT64_MIN, INT64_MAX, 3}));
  EXPECT_EQ(m["u8"].to_vec1<uint8_t>(), (std::vector<uint8_t>{0, 255, 7}));
  EXPECT_EQ(m["scalar"].to_scalar<float>(), 2.5f);
}

TEST(Pth, TensorInfosOfViews) {
  pickle::PthTensors p(pth("views"));
  const pickle::TensorInfo* base = p.info("base");
  const pickle::TensorInfo* tr = p.info("transposed");
  const pickle::TensorInfo* sl = p.info("sliced");
  const pickle::TensorInfo* ex = p.info("expanded");
  ASSERT_TRUE(base && tr && sl && ex);
  EXPECT_EQ(base->dtype, DType::F32);
  EXPECT_EQ(base->shape, (std::vector<size_t>{4, 6}));
  EXPECT_EQ(base->stride, (std::vector<size_t>{6, 1}));
  EXPECT_EQ(base->storage_size, 24u);
  EXPECT_EQ(tr->shape, (std::vector<size_t>{6, 4}));
  EXPECT_EQ(tr->stride, (std::vector<size_t>{1, 6}));
  EXPECT_EQ(tr->storage, base->storage);
  EXPECT_EQ(sl->storage_offset, 6u);
  EXPECT_EQ(sl->stride, (std::vector<size_t>{6, 2}));
  EXPECT_EQ(sl->storage, base->storage);
  EXPECT_EQ(ex->stride, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(p.info("i8_t")->dtype, DType::I16);
  EXPECT_EQ(p.tensor_infos().size(), 9u);
  EXPECT_EQ(p.tensor_infos()[0].name, "base");
  // values of the copied views, written out
  EXPECT_EQ(p.load("sliced").to_vec2<float>(),
            (std::vector<std::vector<float>>{{6, 8, 10}, {12, 14, 16}, {18, 20, 22}}));
  EXPECT_EQ(p.load("transposed").to_vec2<float>()[1], (std::vector<float>{1, 7, 13, 19}));
  EXPECT_EQ(p.load("i8_t").to_vec2<int16_t>(),
            (std::vector<std::vector<int16_t>>{{1, -4}, {-2, 5}, {3, -6}}));
  EXPECT_EQ(p.load("expanded").to_vec2<float>()[3], (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(p.load("empty").dims(), (std::vector<size_t>{0, 3}));
}

const std::byte* data_ptr(const Tensor& t) {
  auto cpu = std::dynamic_pointer_cast<CpuStorage>(t.storage());
  return cpu ? cpu->bytes() + t.layout().start_offset() * dtype_size(t.dtype()) : nullptr;
}

TEST(Pth, ContiguousTensorsViewTheFileAndShareStorages) {
  pickle::PthTensors p(pth("views"));
  Tensor base = p.load("base");
  Tensor row2 = p.load("row2");
  Tensor flat = p.load("flat");
  ASSERT_NE(data_ptr(base), nullptr);
  // row2 starts 12 floats into the storage that base and flat view, without a copy
  EXPECT_EQ(data_ptr(row2), data_ptr(base) + 12 * 4);
  EXPECT_EQ(data_ptr(flat), data_ptr(base));
  EXPECT_EQ(row2.to_vec1<float>(), (std::vector<float>{12, 13, 14, 15, 16, 17}));
}

TEST(Pth, NestedNamesAndKey) {
  pickle::PthTensors p(pth("nested"));
  for (const char* n : {"state_dict.weight", "state_dict.bias", "optimizer.state.0.exp_avg",
                        "optimizer.state.1.exp_avg_sq", "param", "list.0", "list.1.deep.er"})
    EXPECT_TRUE(p.contains(n)) << n;
  EXPECT_TRUE(p.info("param")->requires_grad);
  EXPECT_EQ(p.load("param").to_vec1<float>(), (std::vector<float>{0.5f, -0.5f}));
  EXPECT_EQ(p.load("list.0").to_vec1<int32_t>(), (std::vector<int32_t>{1, 2}));

  auto sd = pickle::read_all_with_key(pth("nested"), "state_dict");
  ASSERT_EQ(sd.size(), 2u);
  EXPECT_EQ(sd[0].first, "weight");
  EXPECT_EQ(sd[1].first, "bias");
  auto want = safetensors::load(data_path("pth/nested.expected.safetensors"), Device::cpu());
  EXPECT_EQ(tensor_bytes(sd[0].second), tensor_bytes(want.at("state_dict.weight")));

  pickle::PthTensors legacy(pth("nested_legacy"), std::string("optimizer"));
  EXPECT_TRUE(legacy.contains("state.0.exp_avg"));
}

TEST(Pth, MissingKeyAndName) {
  auto e = io_test::expect_error([] { pickle::read_all_with_key(pth("nested"), "model"); });
  EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
  EXPECT_TRUE(io_test::contains(e.what(), "no key 'model'")) << e.what();
  EXPECT_TRUE(io_test::contains(e.what(), "state_dict")) << e.what();
  auto e2 = io_test::expect_error([] { pickle::read_all_with_key(pth("tensor"), "x"); });
  EXPECT_EQ(e2.kind(), ErrorKind::InvalidArgument);
  pickle::PthTensors p(pth("module"));
  EXPECT_FALSE(p.get("nope").has_value());
  auto e3 = io_test::expect_error([&] { p.load("nope"); });
  EXPECT_EQ(e3.kind(), ErrorKind::InvalidArgument);
}

TEST(Pth, LoneTensorIsNamedEmpty) {
  auto all = pickle::read_all(pth("tensor"));
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].first, "");
  EXPECT_EQ(all[0].second.to_vec1<int16_t>(), (std::vector<int16_t>{0, 1, 2, 3, 4}));
}

TEST(Pth, FromBufferMatchesFile) {
  auto bytes = io_test::read_bytes(pth("module_legacy"));
  auto p = pickle::PthTensors::from_buffer(bytes);
  auto want = pickle::read_all(pth("module"));
  ASSERT_EQ(p.tensor_infos().size(), want.size());
  for (auto& [n, t] : want) EXPECT_EQ(tensor_bytes(p.load(n)), tensor_bytes(t)) << n;
}

TEST(Pth, LegacyStorageView) {
  // ('storage', FloatStorage, '0', 'cpu', 4, ('v', 1, 2)) over [1, 2, 3, 4]; the tensor is
  // element 1 of the view, i.e. element 2 of the storage
  auto all = pickle::read_all(data_path("../fuzz/corpus/pth/legacy_view.pt"));
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].first, "w");
  EXPECT_EQ(all[0].second.to_vec1<float>(), (std::vector<float>{3}));
}

}  // namespace
