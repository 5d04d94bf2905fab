// The Vulkan backend through the Tensor API: no CPU round-trip for ops with kernels, the
// round-trip counters for ops without, device selection, batching and the memory cache.
#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>
#include <string>

#include "candle/nn/ops.h"
#include "candle/nn/rotary_emb.h"
#include "vk_util.h"

namespace candle {
namespace {

using namespace vk_test;

TEST(VulkanBackend, OpsWithKernelsTakeNoRoundTrip) {
  VK_DEVICE_OR_SKIP(dev);
  auto a = Tensor::from_vec(values(24 * 16, -1.0f, 1.0f, 1), {24, 16}, Device::cpu()).to_device(dev);
  auto b = Tensor::from_vec(values(16 * 8, -1.0f, 1.0f, 2), {16, 8}, Device::cpu()).to_device(dev);
  auto ids = Tensor::from_vec(std::vector<uint32_t>{2, 0, 5}, {3}, Device::cpu()).to_device(dev);
  dev.synchronize();
  reset_backend_stats();
  vulkan::reset_stats();
  auto at = a.t();  // [16, 24] strided
  std::vector<Tensor> keep;
  keep.push_back(a.exp().add(a.sin()).mul(a.affine(2.0, 1.0)));
  keep.push_back(a.powf(2.0).elu(0.5).gelu().relu().sqrt().tanh());
  keep.push_back(a.broadcast_add(a.narrow(0, 0, 1)));
  keep.push_back(a.gt(a.t().t()).where_cond(a, a.neg()));
  keep.push_back(a.to_dtype(DType::F16).to_dtype(DType::BF16).to_dtype(DType::F32));
  keep.push_back(at.contiguous());
  keep.push_back(Tensor::cat({a, a}, 1));
  keep.push_back(a.pad_with_zeros(0, 1, 2));
  keep.push_back(a.sum_keepdim(0).add(a.max_keepdim(0)).add(a.min_keepdim(0)));
  keep.push_back(a.argmax_keepdim(1).to_dtype(DType::F32).add(a.argmin_keepdim(1).to_dtype(DType::F32)));
  keep.push_back(a.sum_all());
  keep.push_back(a.matmul(b));
  keep.push_back(a.narrow(0, 0, 1).matmul(b));  // gemv
  keep.push_back(a.index_select(ids, 0));
  keep.push_back(a.gather(Tensor::zeros({24, 3}, DType::U32, dev), 1));
  keep.push_back(Tensor::zeros({4, 4}, DType::F32, dev).add(Tensor::ones({4, 4}, DType::F32, dev)));
  // convolutions, pooling, resizing, scans, scatters
  auto img = a.reshape({2, 3, 8, 8});
  auto k3 = b.narrow(0, 0, 9).reshape({3, 1, 3, 8}).narrow(3, 0, 3);  // [3, 1, 3, 3], strided
  auto bias = b.narrow(1, 0, 1).narrow(0, 0, 3).flatten_all();
  keep.push_back(img.conv2d(k3, 1, 1, 1, 3));
  keep.push_back(img.conv2d_fused(k3.reshape({3, 1, 3, 3}).broadcast_as({3, 3, 3, 3}).contiguous(), bias, 1,
                                  2, 1, 1, UnaryOp::Relu));
  keep.push_back(img.conv_transpose2d(k3.reshape({3, 1, 3, 3}).contiguous(), 1, 0, 2, 1));
  auto seq = a.reshape({2, 12, 16});
  auto k1 = b.narrow(0, 0, 12).reshape({4, 3, 8}).narrow(2, 0, 3).contiguous();  // [4, 3, 3]
  keep.push_back(seq.conv1d(k1, 1, 1, 1, 4));
  keep.push_back(seq.conv_transpose1d(k1.reshape({12, 1, 3}).contiguous(), 0, 0, 2, 1, 1));
  keep.push_back(img.avg_pool2d({2, 2}));
  keep.push_back(img.max_pool2d_with_stride({3, 3}, {2, 2}));
  keep.push_back(img.upsample_nearest2d(16, 12));
  keep.push_back(seq.upsample_nearest1d(40));
  keep.push_back(img.upsample_bilinear2d(13, 5, true));
  keep.push_back(a.cumsum(0).add(a.cumsum(1)));
  keep.push_back(a.arg_sort_last_dim(false).to_dtype(DType::F32));
  keep.push_back(a.index_add(ids, a.narrow(0, 0, 3), 0));
  keep.push_back(a.scatter(Tensor::zeros({2, 16}, DType::U32, dev), a.narrow(0, 0, 2), 0));
  keep.push_back(a.scatter_add(Tensor::zeros({2, 16}, DType::U32, dev), a.narrow(0, 0, 2), 0));
  // nn fused ops: their own kernels (ops_nn.cpp)
  keep.push_back(nn::ops::softmax_last_dim(a));
  keep.push_back(nn::ops::rms_norm(a, b.narrow(1, 0, 1).narrow(0, 0, 16).flatten_all(), 1e-5f));
  auto alpha = b.narrow(1, 1, 1).narrow(0, 0, 16).flatten_all();
  keep.push_back(nn::ops::layer_norm(a, alpha, alpha, 1e-5f));
  auto q = a.reshape({1, 2, 12, 16});
  auto cs = a.narrow(0, 0, 12).narrow(1, 0, 8);
  keep.push_back(nn::rotary_emb::rope(q, cs.contiguous(), cs.neg().contiguous()));
  keep.push_back(nn::rotary_emb::rope_i(q, cs.contiguous(), cs.contiguous()));
  keep.push_back(nn::rotary_emb::rope_thd(q, cs.contiguous(), cs.contiguous()));
  // integer arithmetic (u8, u32, i64)
  for (DType dt : {DType::U8, DType::U32, DType::I64}) {
    auto t = a.affine(100.0, 120.0).to_dtype(dt);
    auto t1 = t.affine(1.0, 1.0);
    keep.push_back(t.add(t1).sub(t).mul(t1).div(t1).maximum(t.t().t()).minimum(t1));
    keep.push_back(t.neg().abs().sqr().relu().sign().ceil().floor().round().affine(3.0, 2.0));
    keep.push_back(t.ge(t1).where_cond(t, t1).eq(t).to_dtype(dt));
    keep.push_back(t.sum_keepdim(0).add(t.max_keepdim(0)).add(t.min_keepdim(0)));
    keep.push_back(t.argmax_keepdim(1).add(t.argmin_keepdim(1)));
    keep.push_back(t.sum_all());
    keep.push_back(t.cumsum(0).add(t.cumsum(1)));
    keep.push_back(t.index_add(ids, t.narrow(0, 0, 3), 0));
    keep.push_back(t.scatter_add(Tensor::zeros({2, 16}, DType::U32, dev), t.narrow(0, 0, 2), 0));
    for (DType to : {DType::U8, DType::U32, DType::I64})
      if (to != dt) keep.push_back(t.to_dtype(to));
  }
  dev.synchronize();
  auto s = vulkan::stats();
  EXPECT_TRUE(s.round_trips.empty()) << "round-trip: "
                                     << (s.round_trips.empty() ? "" : s.round_trips.begin()->first);
  EXPECT_TRUE(backend_stats().empty());
  EXPECT_GT(s.dispatches, 20u);
}

// The ops that the CPU runs as single-pass kernels and other backends through their composed
// defaults (mean, var, log_sum_exp, norm, flip, sort's gather, arange, eye, tril2 / triu2):
// on Vulkan, no CPU round-trip, and the CPU's values.
TEST(VulkanBackend, ComposedOpsTakeNoRoundTripAndMatchTheCpu) {
  VK_DEVICE_OR_SKIP(dev);
  auto a = Tensor::from_vec(values(6 * 5 * 7, -3.0f, 3.0f, 11), {6, 5, 7}, Device::cpu());
  auto inf = Tensor::full(Scalar(-std::numeric_limits<float>::infinity()), {2, 7}, DType::F32, Device::cpu());
  auto av = a.to_device(dev), infv = inf.to_device(dev);
  auto ints = a.affine(20.0, 70.0).to_dtype(DType::U8);
  auto intsv = ints.to_device(dev);
  dev.synchronize();
  reset_backend_stats();
  vulkan::reset_stats();
  auto run = [](const Tensor& x, const Tensor& neg_inf, const Tensor& u8) {
    const Device& d = x.device();
    std::vector<Tensor> r;
    r.push_back(x.mean_keepdim(std::vector<int64_t>{0, 2}));
    r.push_back(x.mean_all().reshape({1}));
    r.push_back(x.transpose(0, 2).mean(1).flatten_all());
    r.push_back(x.var_keepdim(1).flatten_all());
    r.push_back(x.to_dtype(DType::F16).var(2).to_dtype(DType::F32).flatten_all());
    r.push_back(x.log_sum_exp(std::vector<int64_t>{1, 2}));
    r.push_back(neg_inf.log_sum_exp(1));                          // all -inf: -inf
    r.push_back(x.narrow(1, 0, 1).log_sum_exp(1).flatten_all());  // one element
    r.push_back(x.norm().reshape({1}));
    r.push_back(x.flip({0, 2}).flatten_all());
    r.push_back(x.t().flip({-1}).flatten_all());
    r.push_back(x.sort_last_dim(true).first.flatten_all());
    r.push_back(Tensor::arange<float>(-2.f, 5.f, d).add(Tensor::arange_step<float>(3.f, -4.f, -1.f, d)));
    r.push_back(Tensor::eye(5, DType::F32, d).add(Tensor::tril2(5, DType::F32, d)).flatten_all());
    r.push_back(Tensor::triu2(4, DType::F32, d).flatten_all());
    r.push_back(u8.mean_keepdim(0).to_dtype(DType::F32).flatten_all());
    return r;
  };
  auto got = run(av, infv, intsv);
  dev.synchronize();
  auto s = vulkan::stats();
  EXPECT_TRUE(s.round_trips.empty()) << "round-trip: "
                                     << (s.round_trips.empty() ? "" : s.round_trips.begin()->first);
  EXPECT_TRUE(backend_stats().empty());
  auto want = run(a, inf, ints);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    expect_close(got[i].to_device(Device::cpu()).flatten_to_vec<float>(), want[i].flatten_to_vec<float>(),
                 1e-3f, 1e-5f, "composed op " + std::to_string(i), /*nonfinite_expected=*/i == 6);
  }
}

// to_vec / flatten_to_vec of a view download only the view's elements, straight into the
// result (a strided view is made dense on the device first).
TEST(VulkanBackend, DownloadsOfViewsReadOnlyTheirElements) {
  VK_DEVICE_OR_SKIP(dev);
  auto a = Tensor::from_vec(values(300 * 200, -1.0f, 1.0f, 4), {300, 200}, Device::cpu());
  auto av = a.to_device(dev);
  dev.synchronize();
  vulkan::reset_stats();
  EXPECT_EQ(av.narrow(0, 17, 3).narrow(1, 0, 200).flatten_to_vec<float>(),
            a.narrow(0, 17, 3).flatten_to_vec<float>());
  EXPECT_EQ(vulkan::stats().bytes_downloaded, 3u * 200 * 4);
  EXPECT_EQ(av.t().narrow(0, 5, 2).to_vec2<float>(), a.t().narrow(0, 5, 2).to_vec2<float>());
  EXPECT_EQ(vulkan::stats().bytes_downloaded, 3u * 200 * 4 + 2 * 300 * 4);
  EXPECT_EQ(av.get(299).get(199).to_scalar<float>(), a.get(299).get(199).to_scalar<float>());
  EXPECT_EQ(av.narrow(1, 3, 1).broadcast_as({300, 4}).flatten_to_vec<float>(),
            a.narrow(1, 3, 1).broadcast_as({300, 4}).flatten_to_vec<float>());
}

TEST(VulkanBackend, OpsWithoutKernelsAreCountedRoundTrips) {
  VK_DEVICE_OR_SKIP(dev);
  auto a = Tensor::from_vec(values(4 * 5, -1.0f, 1.0f, 3), {4, 5}, Device::cpu());
  auto av = a.to_device(dev);
  reset_backend_stats();
  vulkan::reset_stats();
  // an integer affine with a fractional factor (computed in f64 on the CPU) has no kernel
  auto ai = a.affine(10.0, 10.0).to_dtype(DType::U32);
  auto got = ai.to_device(dev).affine(0.5, 0.0).to_device(Device::cpu());
  EXPECT_EQ(got.flatten_to_vec<uint32_t>(), ai.affine(0.5, 0.0).flatten_to_vec<uint32_t>());
  EXPECT_EQ(vulkan::stats().round_trips["affine"], 1u);
  EXPECT_EQ(backend_stats()["affine"], 1u);
}

TEST(VulkanBackend, TensorResultsMatchTheCpu) {
  VK_DEVICE_OR_SKIP(dev);
  auto a = Tensor::from_vec(values(6 * 9, -2.0f, 2.0f, 4), {2, 3, 9}, Device::cpu());
  auto w = Tensor::from_vec(values(9 * 4, -1.0f, 1.0f, 5), {9, 4}, Device::cpu());
  auto f = [](const Tensor& x, const Tensor& y) {
    return x.broadcast_matmul(y).silu().sum_keepdim(1).broadcast_sub(x.narrow(2, 1, 4).max_keepdim(1));
  };
  auto want = f(a, w).flatten_to_vec<float>();
  auto got = f(a.to_device(dev), w.to_device(dev)).to_device(Device::cpu()).flatten_to_vec<float>();
  expect_close(got, want, 1e-5f, 1e-5f, "composite");
}

TEST(VulkanBackend, ManySmallOpsAreBatched) {
  VK_DEVICE_OR_SKIP(dev);
  auto x = Tensor::ones({64}, DType::F32, dev);
  dev.synchronize();
  vulkan::reset_stats();
  for (int i = 0; i < 100; ++i) x = x.affine(1.0, 1.0);
  auto v = x.to_device(Device::cpu()).to_vec1<float>();
  EXPECT_EQ(v[0], 101.0f);
  EXPECT_EQ(v[63], 101.0f);
  auto s = vulkan::stats();
  EXPECT_EQ(s.dispatches, 100u);
  EXPECT_LE(s.submits, 2u);  // one batch for all 100, submitted at the download
}

TEST(VulkanBackend, FreedBlocksAreReused) {
  VK_DEVICE_OR_SKIP(dev);
  { auto t = Tensor::zeros({1000, 100}, DType::F32, dev); }
  dev.synchronize();
  vulkan::reset_stats();
  { auto t = Tensor::zeros({1000, 100}, DType::F32, dev); }
  EXPECT_EQ(vulkan::stats().allocations, 0u);
  EXPECT_GE(vulkan::stats().cache_hits, 1u);
}

// ---- device selection -----------------------------------------------------------------------

// Sets (or unsets, value == nullptr) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::optional<size_t> software_adapter() {
  try {
    for (const auto& a : vulkan::adapters())
      if (a.type == "cpu") return a.index;
  } catch (const Error&) {
  }
  return std::nullopt;
}

TEST(VulkanSelection, SoftwareDeviceRefusedWithoutTheEnvVar) {
  auto sw = software_adapter();
  if (!sw) GTEST_SKIP() << "no software Vulkan device (lavapipe) installed";
  ScopedEnv env("CANDLE_VULKAN_ALLOW_CPU", nullptr);
  auto info = vulkan::adapters()[*sw];
  EXPECT_FALSE(info.usable);
  EXPECT_NE(info.verdict.find("CANDLE_VULKAN_ALLOW_CPU"), std::string::npos) << info.verdict;
  try {
    vulkan::probe_adapter(*sw);
    ADD_FAILURE() << "probe_adapter accepted a software device";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Device);
    EXPECT_NE(std::string(e.what()).find("software device"), std::string::npos) << e.what();
  }
}

TEST(VulkanSelection, SoftwareDeviceAllowedWithTheEnvVar) {
  auto sw = software_adapter();
  if (!sw) GTEST_SKIP() << "no software Vulkan device (lavapipe) installed";
  ScopedEnv env("CANDLE_VULKAN_ALLOW_CPU", "1");
  EXPECT_TRUE(vulkan::adapters()[*sw].usable);
  EXPECT_NO_THROW(vulkan::probe_adapter(*sw));
}

TEST(VulkanSelection, BestAdapterNeverPicksASoftwareDevice) {
  auto sw = software_adapter();
  if (!sw) GTEST_SKIP() << "no software Vulkan device (lavapipe) installed";
  ScopedEnv env("CANDLE_VULKAN_ALLOW_CPU", "1");
  std::string why;
  auto best = vulkan::best_adapter(&why);
  EXPECT_NE(best, sw) << why;
  EXPECT_FALSE(why.empty());
}

TEST(VulkanSelection, MissingAdapterIsAClearError) {
  try {
    if (vulkan::adapters().empty()) GTEST_SKIP() << "no Vulkan adapter";
  } catch (const Error& e) {
    GTEST_SKIP() << e.what();
  }
  try {
    vulkan::probe_adapter(1000);
    ADD_FAILURE() << "adapter 1000 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no adapter 1000"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Device::vulkan(1000), Error);
}

TEST(VulkanSelection, AdaptersReportMemory) {
  std::vector<vulkan::AdapterInfo> list;
  try {
    list = vulkan::adapters();
  } catch (const Error& e) {
    GTEST_SKIP() << e.what();
  }
  if (list.empty()) GTEST_SKIP() << "no Vulkan adapter";
  for (const auto& a : list) {
    EXPECT_FALSE(a.heaps.empty()) << a.name;
    EXPECT_FALSE(a.memory_types.empty()) << a.name;
    EXPECT_GT(a.max_storage_buffer_range, 0u) << a.name;
    EXPECT_FALSE(a.verdict.empty()) << a.name;
  }
}

}  // namespace
// A block released while the GPU work reading it is still queued goes back to the cache at once
// (later GPU work may reuse it); an upload into it must wait for that work, or the queued op
// would read the new values.
TEST(VulkanBackend, UploadIntoARecycledBlockWaitsForQueuedReaders) {
  VK_DEVICE_OR_SKIP(dev);
  const size_t n = 1 << 16;
  std::vector<float> x = values(n, -1.0f, 1.0f, 11), y = values(n, -1.0f, 1.0f, 12);
  Tensor e;
  {
    Tensor a = Tensor::from_vec(x, {n}, Device::cpu()).to_device(dev);
    e = a.exp();                                                      // queued, reads a's block
  }                                                                   // a's block is free (and busy)
  Tensor c = Tensor::from_vec(y, {n}, Device::cpu()).to_device(dev);  // likely the same block
  std::vector<float> got_e = e.to_device(Device::cpu()).to_vec1<float>();
  std::vector<float> got_c = c.to_device(Device::cpu()).to_vec1<float>();
  for (size_t i = 0; i < n; i += 997) {
    EXPECT_NEAR(got_e[i], std::exp(x[i]), 1e-5f * std::exp(x[i])) << i;
    EXPECT_EQ(got_c[i], y[i]) << i;
  }
}

}  // namespace candle
