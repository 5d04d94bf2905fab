#include <gtest/gtest.h>

#include <algorithm>

#include "candle/backend/cpu_storage.h"
#include "candle/candle.h"
#include "core/sanitizer.h"
#include "test_util.h"

using namespace candle;

TEST(DType, HalfConversionsRoundTrip) {
  EXPECT_EQ(f16::from_f32(1.0f), 0x3c00);
  EXPECT_EQ(f16::from_f32(-2.0f), 0xc000);
  EXPECT_EQ(f16::from_f32(65504.0f), 0x7bff);
  EXPECT_EQ(f16::from_f32(65520.0f), 0x7c00);  // rounds to inf
  EXPECT_EQ(f16::from_f32(5.9604645e-08f), 0x0001);
  EXPECT_FLOAT_EQ(f16::to_f32(0x3555), 0.33325195f);
  EXPECT_EQ(bf16::from_f32(1.0f), 0x3f80);
  EXPECT_EQ(bf16::from_f32(3.140625f), 0x4049);
  EXPECT_FLOAT_EQ(bf16::to_f32(0x4049), 3.140625f);
  EXPECT_EQ(f8e4m3::from_f32(448.0f), 0x7e);
  EXPECT_EQ(f8e4m3::from_f32(1.0f), 0x38);
  EXPECT_EQ(f8e4m3::from_f32(-0.5f), 0xb0);
  EXPECT_EQ(f8e4m3::from_f32(0.001953125f), 0x01);  // smallest subnormal
  EXPECT_EQ(f8e4m3::from_f32(500.0f), 0x7f);        // out of range -> NaN
  EXPECT_FLOAT_EQ(f8e4m3::to_f32(0x7e), 448.0f);
  EXPECT_TRUE(std::isnan(f8e4m3::to_f32(0xff)));
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7f) == 0x7f) continue;
    EXPECT_EQ(f8e4m3::from_f32(f8e4m3::to_f32(static_cast<uint8_t>(b))), b) << b;
  }
  for (uint32_t b = 0; b < 0x7c00; ++b) {
    ASSERT_EQ(f16::from_f32(f16::to_f32(static_cast<uint16_t>(b))), b) << b;
  }
}

TEST(DType, Names) {
  for (DType dt : kAllDTypes) EXPECT_EQ(dtype_from_name(dtype_name(dt)), dt);
  EXPECT_THROW(dtype_from_name("f128"), Error);
}

TEST(Tensor, FromVecChecksCount) {
  auto dev = Device::cpu();
  Tensor t = Tensor::from_vec(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}, dev);
  EXPECT_EQ(t.shape(), Shape({2, 3}));
  EXPECT_EQ(t.dtype(), DType::F32);
  EXPECT_EQ(t.to_vec2<float>(), (std::vector<std::vector<float>>{{1, 2, 3}, {4, 5, 6}}));
  try {
    Tensor::from_vec(std::vector<float>{1, 2, 3}, {2, 2}, dev);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::ShapeMismatch);
    EXPECT_NE(std::string(e.what()).find("[2, 2]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(t.to_vec2<double>(), Error);
  EXPECT_THROW(t.to_vec1<float>(), Error);
}

TEST(Tensor, NestedNew) {
  auto dev = Device::cpu();
  Tensor t = Tensor::new_({{1.f, 2.f}, {3.f, 4.f}}, dev);
  EXPECT_EQ(t.shape(), Shape({2, 2}));
  EXPECT_EQ(Tensor::new_({{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}}, dev).shape(), Shape({2, 2, 2}));
  EXPECT_EQ(Tensor::new_(3.5, dev).to_scalar<double>(), 3.5);
  EXPECT_THROW(Tensor::new_({{1.f, 2.f}, {3.f}}, dev), Error);
}

// candle's to_vec0 reads a rank-0 tensor; any other rank or a wrong dtype is an error.
TEST(Tensor, ToVec0) {
  auto dev = Device::cpu();
  EXPECT_EQ(Tensor::new_(3.5f, dev).to_vec0<float>(), 3.5f);
  EXPECT_EQ(Tensor::new_<int64_t>({4, 5}, dev).sum_all().to_vec0<int64_t>(), 9);
  EXPECT_THROW(Tensor::new_<float>({1.f}, dev).to_vec0<float>(), Error);
  EXPECT_THROW(Tensor::new_(1.0, dev).to_vec0<float>(), Error);
}

TEST(Tensor, ForceContiguousCopiesAndFortranOrder) {
  auto dev = Device::cpu();
  Tensor a = Tensor::new_({{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}}, dev);
  Tensor f = a.force_contiguous();
  EXPECT_NE(f.storage().get(), a.storage().get());
  EXPECT_EQ(f.to_vec2<float>(), a.to_vec2<float>());
  EXPECT_TRUE(a.t().is_fortran_contiguous());
  EXPECT_FALSE(a.t().is_contiguous());
  EXPECT_TRUE(a.t().force_contiguous().is_contiguous());
}

TEST(Tensor, ZerosOnesFull) {
  auto dev = Device::cpu();
  EXPECT_EQ(Tensor::zeros({2, 2}, DType::F32, dev).flatten_to_vec<float>(), std::vector<float>(4, 0.f));
  EXPECT_EQ(Tensor::ones({3}, DType::U32, dev).to_vec1<uint32_t>(), std::vector<uint32_t>(3, 1));
  EXPECT_EQ(Tensor::full(int64_t{9007199254740993}, {1}, dev).to_vec1<int64_t>()[0], 9007199254740993);
  EXPECT_EQ(Tensor::full(2.5f, {2}, dev).dtype(), DType::F32);
  EXPECT_EQ(Tensor::zeros({0, 3}, DType::F32, dev).elem_count(), 0u);
}

TEST(Tensor, ToDtypeAllPairs) {
  auto dev = Device::cpu();
  Tensor t = Tensor::new_({0.f, 1.f, 2.f, 3.f, 96.f}, dev);
  for (DType a : kAllDTypes) {
    for (DType b : kAllDTypes) {
      Tensor r = t.to_dtype(a).to_dtype(b).to_dtype(DType::F32);
      EXPECT_EQ(r.to_vec1<float>(), (std::vector<float>{0, 1, 2, 3, 96}))
          << dtype_name(a) << " -> " << dtype_name(b);
    }
  }
}

TEST(Tensor, StridedCopies) {
  auto dev = Device::cpu();
  Tensor t = Tensor::from_vec(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}, dev);
  Tensor tt = test_util::view(t, t.layout().transpose(0, 1));
  EXPECT_FALSE(tt.is_contiguous());
  EXPECT_EQ(tt.contiguous().to_vec2<float>(), (std::vector<std::vector<float>>{{1, 4}, {2, 5}, {3, 6}}));
  EXPECT_EQ(tt.to_vec2<float>(), (std::vector<std::vector<float>>{{1, 4}, {2, 5}, {3, 6}}));
  Tensor o = test_util::offset_view(t);
  EXPECT_EQ(o.to_vec2<float>(), t.to_vec2<float>());
  Tensor b = test_util::view(Tensor::new_({1.f, 2.f}, dev), Layout::contiguous({2}).broadcast_as({3, 2}));
  EXPECT_EQ(b.flatten_to_vec<float>(), (std::vector<float>{1, 2, 1, 2, 1, 2}));
}

TEST(Tensor, RandIsSeedable) {
  auto dev = Device::cpu();
  dev.set_seed(42);
  auto a = Tensor::rand(0.f, 1.f, {100}, dev).to_vec1<float>();
  dev.set_seed(42);
  auto b = Tensor::rand(0.f, 1.f, {100}, dev).to_vec1<float>();
  EXPECT_EQ(a, b);
  for (float v : a) {
    EXPECT_GE(v, 0.f);
    EXPECT_LT(v, 1.f);
  }
  EXPECT_THROW(Tensor::rand(0.0, 1.0, {2}, DType::U32, dev), Error);
}

TEST(Device, UnknownAndMissing) {
  EXPECT_THROW(Device::from_name("tpu"), Error);
  EXPECT_EQ(Device::from_name("cpu").to_string(), "cpu");
  try {
    Device::cuda(0);
    GTEST_SKIP() << "a cuda backend is present";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Device);
    // no plugin: the library is named; a plugin without a driver or GPU: what is missing
    const std::string m = e.what();
    EXPECT_TRUE(m.find("libcandle_cuda.so") != std::string::npos ||
                m.find("CUDA driver") != std::string::npos || m.find("no device cuda:0") != std::string::npos)
        << m;
  }
  try {
    Device::rocm(0);
    GTEST_SKIP() << "a rocm backend is present";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Device);
    EXPECT_NE(std::string(e.what()).find("libcandle_rocm.so"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(Device::cuda_if_available(0).is_cpu() || Device::cuda_if_available(0).is_cuda());
}

// auto_select never throws and never picks a software Vulkan device (lavapipe in CI: the CPU
// then); it says why.
TEST(Device, AutoSelectSaysWhyAndSkipsSoftwareDevices) {
  std::string why;
  Device dev = Device::auto_select(&why);
  EXPECT_EQ(why.rfind(dev.to_string(), 0), 0u) << why;  // the choice comes first
  if (dev.is_cpu()) {
    // every better kind was passed over with a reason
    for (const char* kind : {"cuda: ", "rocm: ", "vulkan: "})
      EXPECT_NE(why.find(kind), std::string::npos) << why;
  }
  EXPECT_EQ(Device::from_name("auto").to_string(), dev.to_string());
  if (dev.is_vulkan()) {
    EXPECT_EQ(why.find("software"), std::string::npos) << why;
  }
}

// The CPU's memory is the system's: some free, no more than the total.
TEST(Device, CpuMemoryIsTheSystemsAvailableMemory) {
  DeviceMemory m = Device::cpu().memory();
  EXPECT_GT(m.total_bytes, uint64_t{64} << 20);
  EXPECT_GT(m.free_bytes, 0u);
  EXPECT_LE(m.free_bytes, m.total_bytes);
  EXPECT_TRUE(m.shared_with_system);
}

TEST(Var, SetWritesInPlace) {
  auto dev = Device::cpu();
  Var v = Var::zeros({2}, DType::F32, dev);
  EXPECT_TRUE(v.as_tensor().is_variable());
  Tensor before = v.as_tensor();
  v.set(Tensor::new_({1.f, 2.f}, dev));
  EXPECT_EQ(before.to_vec1<float>(), (std::vector<float>{1, 2}));
  EXPECT_THROW(v.set(Tensor::new_({1.0, 2.0}, dev)), Error);
  EXPECT_THROW(v.set(Tensor::new_({1.f, 2.f, 3.f}, dev)), Error);
}

TEST(Error, ContextChain) {
  Error e(ErrorKind::Parse, "bad header");
  Error e2 = e.with_context("loading model.safetensors");
  EXPECT_STREQ(e2.what(), "loading model.safetensors: bad header");
  EXPECT_EQ(e2.kind(), ErrorKind::Parse);
}

TEST(CpuAllocator, LargeBlocksAreCachedAndReusedClean) {
  auto dev = Device::cpu();
  empty_cpu_cache();
  EXPECT_EQ(cpu_cache_bytes(), 0u);
  const void* first = nullptr;
  {
    Tensor t = Tensor::full(7.f, {1 << 20}, dev);  // 4 MiB
    first = t.storage()->to_cpu()->bytes();
  }
#if CANDLE_ASAN
  EXPECT_EQ(cpu_cache_bytes(), 0u);  // the cache is off under AddressSanitizer
#else
  EXPECT_GE(cpu_cache_bytes(), size_t{4} << 20);
  Tensor z = Tensor::zeros({1 << 20}, DType::F32, dev);
  EXPECT_EQ(static_cast<const void*>(z.storage()->to_cpu()->bytes()), first);  // the block came back
  auto v = z.to_vec1<float>();
  EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](float x) { return x == 0.f; }));
  z = Tensor();
  empty_cpu_cache();
  EXPECT_EQ(cpu_cache_bytes(), 0u);
#endif
  (void)first;
}

TEST(CpuAllocator, LimitCanBeChanged) {
  const size_t before = cpu_cache_limit();
  set_cpu_cache_limit(0);
  EXPECT_EQ(cpu_cache_bytes(), 0u);  // lowering the limit frees what no longer fits
  { Tensor t = Tensor::zeros({1 << 20}, DType::F32, Device::cpu()); }
  EXPECT_EQ(cpu_cache_bytes(), 0u);  // nothing is kept with a zero limit
  set_cpu_cache_limit(before);
  EXPECT_EQ(cpu_cache_limit(), before);
}

// candle::Graph on a device that records no graphs (the CPU): capture() keeps the work without
// running it, each replay() runs it, so the outputs it assigns follow the inputs written in place.
TEST(Graph, WithoutRecordingReplayRunsTheWork) {
  auto dev = Device::cpu();
  EXPECT_FALSE(dev.records_graphs());
  Tensor x = Tensor::from_vec(std::vector<float>{1, 2, 3}, {3}, dev), out;
  int runs = 0;
  Graph g = Graph::capture(dev, [&] {
    ++runs;
    EXPECT_FALSE(Graph::recording()) << "the CPU records nothing";
    out = (x * 2.0) + 1.0;
  });
  EXPECT_FALSE(g.recorded());
  EXPECT_EQ(g.nodes(), 0u);
  EXPECT_EQ(runs, 0);
  g.replay();
  EXPECT_EQ(out.to_vec1<float>(), (std::vector<float>{3, 5, 7}));
  x.slice_set(Tensor::from_vec(std::vector<float>{10}, {1}, dev), 0, 1);
  g.replay();
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(out.to_vec1<float>(), (std::vector<float>{3, 21, 7}));
  EXPECT_THROW(Graph::capture(dev, nullptr), Error);
  EXPECT_THROW(Graph().replay(), Error);
}
