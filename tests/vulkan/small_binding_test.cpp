// Kernels on operands larger than one binding, with the binding limit lowered to 4 MiB by
// CANDLE_VULKAN_MAX_BINDING_MB=4 (ctest's VulkanSmallBindings entry sets it): the paths that
// 4k feature maps take on real GPUs (maxStorageBufferRange 128 MiB on lavapipe, 4 GiB on most
// GPUs), on tensors small enough to check everywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "vk_util.h"

namespace candle {
namespace {

using namespace vk_test;

constexpr uint64_t kLimit = 4ull << 20;

#define SMALL_BINDING_OR_SKIP(dev)                                                                        \
  VK_DEVICE_OR_SKIP(dev);                                                                                 \
  do {                                                                                                    \
    const char* mb = std::getenv("CANDLE_VULKAN_MAX_BINDING_MB");                                         \
    if (!mb || std::strtoull(mb, nullptr, 10) != 4)                                                       \
      GTEST_SKIP() << "needs CANDLE_VULKAN_MAX_BINDING_MB=4 (ctest's VulkanSmallBindings entry sets it)"; \
  } while (0)

// |vk - cpu| <= atol + rtol |cpu| over every element; the index of the first miss, or -1.
int64_t first_miss(const Tensor& vk, const Tensor& cpu, float atol, float rtol) {
  auto a = vk.to_device(Device::cpu()).flatten_to_vec<float>();
  auto b = cpu.flatten_to_vec<float>();
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::fabs(a[i] - b[i]) <= atol + rtol * std::fabs(b[i]))) {
      ADD_FAILURE() << "element " << i << ": " << a[i] << " vs " << b[i];
      return static_cast<int64_t>(i);
    }
  return -1;
}

Tensor random(std::vector<size_t> dims, uint32_t seed) {
  Shape s(dims);
  return Tensor::from_vec(values(s.elem_count(), -1.0f, 1.0f, seed), s, Device::cpu());
}

// Tolerance of the conv comparisons (as in tests/core/differential_test.cpp): f32 sums of up to 400 terms
// of |x w| < 1 in another order, and the CPU's Winograd for 3x3 kernels.
constexpr float kTol = 2e-4f;

TEST(VulkanSmallBinding, Conv2dInputAndOutputInBandsOfRows) {
  SMALL_BINDING_OR_SKIP(dev);
  auto xb = random({1, 16, 300, 260}, 2);  // 5 MiB: beyond one binding
  auto w = random({24, 16, 3, 3}, 3);      // output [1, 24, 300, 260]: 7.1 MiB
  vulkan::reset_stats();
  auto vk = xb.to_device(dev).conv2d(w.to_device(dev), 1, 1, 1, 1);
  EXPECT_EQ(first_miss(vk, xb.conv2d(w, 1, 1, 1, 1), kTol, kTol), -1);
  EXPECT_TRUE(vulkan::stats().round_trips.empty());
  ASSERT_GT(xb.elem_count() * 4, kLimit);
}

TEST(VulkanSmallBinding, Conv2dBandsWithStrideDilationGroupsPaddingAndEpilogue) {
  SMALL_BINDING_OR_SKIP(dev);
  auto x = random({2, 16, 301, 257}, 4);  // 4.7 MiB per image: two images, bands in each
  auto w = random({8, 8, 3, 3}, 5);       // groups 2
  auto bias = random({8}, 6);
  vulkan::reset_stats();
  for (auto [pad, stride, dil] : std::vector<std::array<size_t, 3>>{{2, 2, 2}, {0, 3, 1}, {3, 1, 3}}) {
    auto vk = x.to_device(dev).conv2d_fused(w.to_device(dev), bias.to_device(dev), pad, stride, dil, 2,
                                            UnaryOp::Silu);
    auto cpu = x.conv2d_fused(w, bias, pad, stride, dil, 2, UnaryOp::Silu);
    EXPECT_EQ(first_miss(vk, cpu, kTol, kTol), -1) << pad << " " << stride << " " << dil;
  }
  EXPECT_TRUE(vulkan::stats().round_trips.empty());
}

TEST(VulkanSmallBinding, Conv2dOfAStridedInputInBands) {
  SMALL_BINDING_OR_SKIP(dev);
  auto x = random({1, 300, 16, 260}, 7);  // viewed as [1, 16, 300, 260] through a transpose
  auto w = random({4, 16, 5, 5}, 8);
  auto xt = x.transpose(1, 2);
  vulkan::reset_stats();
  auto vk = x.to_device(dev).transpose(1, 2).conv2d(w.to_device(dev), 2, 1, 1, 1);
  EXPECT_EQ(first_miss(vk, xt.conv2d(w, 2, 1, 1, 1), kTol, kTol), -1);
  EXPECT_TRUE(vulkan::stats().round_trips.empty());
}

TEST(VulkanSmallBinding, ElementwiseAndReductionsSplit) {
  SMALL_BINDING_OR_SKIP(dev);
  auto x = random({1200, 1100}, 9);  // 5 MiB
  vulkan::reset_stats();
  auto xv = x.to_device(dev);
  EXPECT_EQ(first_miss(xv.exp().t().contiguous(), x.exp().t().contiguous(), 1e-6f, 1e-6f), -1);
  EXPECT_EQ(first_miss(xv.sum_keepdim(0), x.sum_keepdim(0), 1e-4f, 1e-5f), -1);
  EXPECT_EQ(first_miss(xv.max_keepdim(1), x.max_keepdim(1), 0, 0), -1);
  EXPECT_TRUE(vulkan::stats().round_trips.empty());
}

TEST(VulkanSmallBinding, ConvTranspose2dInBandsOfRows) {
  SMALL_BINDING_OR_SKIP(dev);
  auto x = random({2, 16, 160, 210}, 12);  // 2.1 MiB per image, 4.3 MiB in all
  auto w = random({16, 3, 4, 4}, 13);      // [c_in, c_out, kh, kw]
  auto w3 = random({16, 2, 3, 3}, 14);
  vulkan::reset_stats();
  // (padding, output_padding, stride, dilation)
  for (auto [pad, opad, stride, dil] :
       std::vector<std::array<size_t, 4>>{{1, 0, 2, 1}, {0, 1, 3, 1}, {2, 0, 1, 2}, {5, 0, 2, 1}}) {
    const Tensor& k = stride == 3 || dil == 2 ? w3 : w;
    auto vk = x.to_device(dev).conv_transpose2d(k.to_device(dev), pad, opad, stride, dil);
    auto cpu = x.conv_transpose2d(k, pad, opad, stride, dil);
    EXPECT_EQ(first_miss(vk, cpu, kTol, kTol), -1) << pad << " " << opad << " " << stride << " " << dil;
  }
  EXPECT_TRUE(vulkan::stats().round_trips.empty());
}

TEST(VulkanSmallBinding, Conv2dBandsOfOnlyPaddingRows) {
  SMALL_BINDING_OR_SKIP(dev);
  // 4.6 MiB; bands of 85 output rows, padding 40: the last band (rows 170..177) reads only
  // padding, and the first starts 40 rows above the image
  auto x = random({1, 200, 100, 60}, 15);
  auto w = random({4, 200, 3, 3}, 16);
  auto bias = random({4}, 17);
  vulkan::reset_stats();
  auto vk =
      x.to_device(dev).conv2d_fused(w.to_device(dev), bias.to_device(dev), 40, 1, 1, 1, UnaryOp::Sigmoid);
  EXPECT_EQ(first_miss(vk, x.conv2d_fused(w, bias, 40, 1, 1, 1, UnaryOp::Sigmoid), kTol, kTol), -1);
  EXPECT_TRUE(vulkan::stats().round_trips.empty());
}

// matmul past one binding: blocks of C whose rows of A and columns of B fit (f32 sums of up to
// 1000 terms of |a b| < 1 in another order: 1e-4).
TEST(VulkanSmallBinding, MatmulInBlocks) {
  SMALL_BINDING_OR_SKIP(dev);
  struct Case {
    const char* name;
    Tensor a, b;
  };
  auto bt = random({1100, 1000}, 21);
  std::vector<Case> cases = {
      {"A past", random({1100, 1000}, 22), random({1000, 300}, 23)},
      {"B past", random({64, 1000}, 24), random({1000, 1100}, 25)},
      {"B past, transposed", random({64, 1000}, 26), bt.t()},
      {"A past, transposed", random({1000, 1100}, 27).t(), random({1000, 200}, 28)},
      {"C past", random({2000, 64}, 29), random({64, 600}, 30)},
      {"batched", random({3, 500, 800}, 31), random({3, 800, 500}, 32)},
      {"gemv rows", random({1, 1200}, 33), random({1200, 1000}, 34)},
  };
  vulkan::reset_stats();
  for (const auto& c : cases) {
    auto vk = c.a.to_device(dev).matmul(c.b.to_device(dev));
    EXPECT_EQ(first_miss(vk, c.a.matmul(c.b), 1e-4f, 1e-4f), -1) << c.name;
  }
  EXPECT_TRUE(vulkan::stats().round_trips.empty());
}

// index_select / gather from a table past one binding (an embedding): ranges of rows, one
// dispatch each; the output in chunks; skip ids give zeros; bad ids still raise.
TEST(VulkanSmallBinding, IndexSelectAndGatherFromABigTable) {
  SMALL_BINDING_OR_SKIP(dev);
  auto table = random({5000, 300}, 40);  // 6 MiB
  std::vector<uint32_t> ids(4000);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<uint32_t>((i * 2654435761u) % 5000);
  ids[7] = 0xffffffffu;  // skip id: a zero row
  auto idt = Tensor::from_vec(ids, {ids.size()}, Device::cpu());
  std::vector<int64_t> gids(800 * 300);
  for (size_t i = 0; i < gids.size(); ++i) gids[i] = static_cast<int64_t>((i * 40503u) % 5000);
  auto gidt = Tensor::from_vec(gids, {800, 300}, Device::cpu());
  auto tv = table.to_device(dev);
  vulkan::reset_stats();
  EXPECT_EQ(first_miss(tv.index_select(idt.to_device(dev), 0), table.index_select(idt, 0), 0, 0), -1);
  EXPECT_EQ(first_miss(tv.index_select(idt.narrow(0, 0, 700).to_device(dev), 0),
                       table.index_select(idt.narrow(0, 0, 700), 0), 0, 0),
            -1);
  EXPECT_EQ(first_miss(tv.gather(gidt.to_device(dev), 0), table.gather(gidt, 0), 0, 0), -1);
  EXPECT_TRUE(vulkan::stats().round_trips.empty());
  auto bad = Tensor::from_vec(std::vector<uint32_t>{4999, 5000}, {2}, Device::cpu()).to_device(dev);
  auto r = tv.index_select(bad, 0);
  EXPECT_THROW(r.to_device(Device::cpu()), Error);
  // a table past one binding indexed along an inner dim has no split: the counted round-trip
  auto inner = Tensor::from_vec(std::vector<uint32_t>{3, 1}, {2}, Device::cpu());
  EXPECT_EQ(first_miss(tv.t().contiguous().index_select(inner.to_device(dev), 1),
                       table.t().contiguous().index_select(inner, 1), 0, 0),
            -1);
  EXPECT_EQ(vulkan::stats().round_trips["index_select"], 1u);
}

// Pooling and resizing of inputs beyond one binding: runs of whole planes, bound one by one.
TEST(VulkanSmallBinding, PoolingAndResizingInRunsOfPlanes) {
  SMALL_BINDING_OR_SKIP(dev);
  auto x = random({2, 12, 200, 230}, 10);                   // 4.2 MiB per image
  auto xt = random({2, 200, 12, 230}, 11).transpose(1, 2);  // strided planes
  vulkan::reset_stats();
  for (const Tensor& in : {x, xt}) {
    auto v = in.to_device(dev);
    EXPECT_EQ(
        first_miss(v.max_pool2d_with_stride({3, 3}, {2, 2}), in.max_pool2d_with_stride({3, 3}, {2, 2}), 0, 0),
        -1);
    EXPECT_EQ(first_miss(v.avg_pool2d({2, 2}), in.avg_pool2d({2, 2}), 1e-6f, 1e-6f), -1);
    EXPECT_EQ(first_miss(v.upsample_nearest2d(300, 345), in.upsample_nearest2d(300, 345), 0, 0), -1);
    EXPECT_EQ(first_miss(v.upsample_bilinear2d(150, 400, false), in.upsample_bilinear2d(150, 400, false),
                         1e-6f, 1e-6f),
              -1);
  }
  EXPECT_TRUE(vulkan::stats().round_trips.empty());
}

}  // namespace
}  // namespace candle
