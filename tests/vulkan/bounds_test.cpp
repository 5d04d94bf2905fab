// Out-of-range ids on Vulkan: checked on the device before the op touches anything, reported as
// IndexOutOfRange (op, id, position, dim size, shape) by the next download or synchronize().
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "vk_util.h"

namespace candle {
namespace {

using namespace vk_test;

// Runs fn (which must download or synchronize) and returns the IndexOutOfRange message.
template <typename Fn>
std::string index_error(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::IndexOutOfRange) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error was thrown";
  return "";
}

Tensor src_4x3(const Device& dev) {
  return Tensor::from_vec(std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {4, 3}, Device::cpu())
      .to_device(dev);
}

void expect_contains(const std::string& msg, const std::string& part) {
  EXPECT_NE(msg.find(part), std::string::npos) << "'" << part << "' not in: " << msg;
}

TEST(VulkanBounds, IndexSelectU32OutOfRangeIsAnErrorNamingTheId) {
  VK_DEVICE_OR_SKIP(dev);
  auto ids = Tensor::from_vec(std::vector<uint32_t>{1, 3, 9, 0, 12}, {5}, Device::cpu()).to_device(dev);
  auto r = src_4x3(dev).index_select(ids, 0);
  std::string msg = index_error([&] { r.to_vec2<float>(); });
  expect_contains(msg, "index_select");
  expect_contains(msg, "index 9 at position 2");  // the first bad one
  expect_contains(msg, "dim 0 of size 4");
  expect_contains(msg, "[4, 3]");
}

TEST(VulkanBounds, IndexSelectNegativeI64IsAnError) {
  VK_DEVICE_OR_SKIP(dev);
  auto ids = Tensor::from_vec(std::vector<int64_t>{0, 1, -2}, {3}, Device::cpu()).to_device(dev);
  auto r = src_4x3(dev).index_select(ids, 1);
  std::string msg = index_error([&] { r.to_vec2<float>(); });
  expect_contains(msg, "index -2 at position 2 for dim 1 of size 3");
}

TEST(VulkanBounds, GatherI64BeyondU32IsAnError) {
  VK_DEVICE_OR_SKIP(dev);
  std::vector<int64_t> v(12, 0);
  v[7] = int64_t(1) << 33;
  auto ids = Tensor::from_vec(v, {4, 3}, Device::cpu()).to_device(dev);
  auto r = src_4x3(dev).gather(ids, 1);
  std::string msg = index_error([&] { dev.synchronize(); });
  expect_contains(msg, "gather: index 8589934592 at position 7");
}

TEST(VulkanBounds, SkipIdsAreNotErrors) {
  VK_DEVICE_OR_SKIP(dev);
  const uint32_t skip = std::numeric_limits<uint32_t>::max();
  auto ids = Tensor::from_vec(std::vector<uint32_t>{2, skip}, {2}, Device::cpu());
  auto src = Tensor::from_vec(std::vector<float>{1, 1, 1, 2, 2, 2}, {2, 3}, Device::cpu());
  auto cpu = src_4x3(Device::cpu()).index_add(ids, src, 0).to_vec2<float>();
  auto vk = src_4x3(dev).index_add(ids.to_device(dev), src.to_device(dev), 0).to_vec2<float>();
  EXPECT_EQ(vk, cpu);
  EXPECT_EQ(vk[2], (std::vector<float>{7, 8, 9}));
  EXPECT_EQ(vk[3], (std::vector<float>{9, 10, 11}));
}

TEST(VulkanBounds, ScatterSetWithABadIdLeavesTheDestinationUnchanged) {
  VK_DEVICE_OR_SKIP(dev);
  auto dst = src_4x3(dev);
  auto ids = Tensor::from_vec(std::vector<int64_t>{0, 1, 2, 3, 4, 0}, {2, 3}, Device::cpu()).to_device(dev);
  auto src = Tensor::full(Scalar(-1.0f), {2, 3}, DType::F32, dev);
  dst.scatter_set(ids, src, 0);
  std::string msg = index_error([&] { dst.to_vec2<float>(); });
  expect_contains(msg, "scatter: index 4 at position 4 for dim 0 of size 4");
  EXPECT_EQ(dst.to_vec2<float>(), src_4x3(Device::cpu()).to_vec2<float>());
}

TEST(VulkanBounds, ScatterAddAndIndexAddReportTheirOp) {
  VK_DEVICE_OR_SKIP(dev);
  auto ids2 =
      Tensor::from_vec(std::vector<uint32_t>{0, 0, 0, 0, 0, 3, 1, 1}, {4, 2}, Device::cpu()).to_device(dev);
  auto r = src_4x3(dev).scatter_add(ids2, Tensor::ones({4, 2}, DType::F32, dev), 1);
  expect_contains(index_error([&] { r.to_vec2<float>(); }),
                  "scatter_add: index 3 at position 5 for dim 1 of size 3");
  auto ids1 = Tensor::from_vec(std::vector<uint32_t>{4, 0}, {2}, Device::cpu()).to_device(dev);
  auto r2 = src_4x3(dev).index_add(ids1, Tensor::ones({2, 3}, DType::F32, dev), 0);
  expect_contains(index_error([&] { r2.to_vec2<float>(); }), "index_add: index 4 at position 0");
}

TEST(VulkanBounds, TheDeviceWorksAfterAnErrorAndLaterFaultsAreMentioned) {
  VK_DEVICE_OR_SKIP(dev);
  auto bad = Tensor::from_vec(std::vector<uint32_t>{7}, {1}, Device::cpu()).to_device(dev);
  auto bad2 = Tensor::from_vec(std::vector<uint32_t>{5}, {1}, Device::cpu()).to_device(dev);
  auto r1 = src_4x3(dev).index_select(bad, 0);
  auto r2 = src_4x3(dev).index_select(bad2, 0);
  std::string msg = index_error([&] { dev.synchronize(); });
  expect_contains(msg, "index 7");
  expect_contains(msg, "later indexing ops had out-of-range ids too");
  // reported once; the device goes on
  EXPECT_NO_THROW(dev.synchronize());
  auto ok = Tensor::from_vec(std::vector<uint32_t>{3, 0}, {2}, Device::cpu()).to_device(dev);
  EXPECT_EQ(src_4x3(dev).index_select(ok, 0).to_vec2<float>(),
            (std::vector<std::vector<float>>{{9, 10, 11}, {0, 1, 2}}));
}

TEST(VulkanBounds, ErrorSurvivesManyLaterBatches) {
  VK_DEVICE_OR_SKIP(dev);
  auto bad = Tensor::from_vec(std::vector<uint32_t>{0, 4}, {2}, Device::cpu()).to_device(dev);
  auto x = src_4x3(dev);
  auto r = x.index_select(bad, 0);
  for (int i = 0; i < 600; ++i) x = x.affine(1.0, 1.0);  // more than two full batches
  expect_contains(index_error([&] { x.to_vec2<float>(); }), "index 4 at position 1");
  EXPECT_EQ(x.to_vec2<float>()[0][0], 600.0f);
}

}  // namespace
}  // namespace candle
