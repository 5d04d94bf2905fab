// The CUDA backend's own tests: opening (and the errors where there is no driver or device),
// transfers, the allocator, the RNG and cuBLAS matmuls. The ops against the CPU are in the
// device-parametrized suites (tests/core/differential_test.cpp, ...), which run on /cuda too.
// Tests that need a GPU skip with the reason where cuda:0 does not open (CI has no GPU).
#include "candle/cuda.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>

#include "candle/candle.h"
#include "test_device.h"
#include "test_util.h"

namespace candle {
namespace {

// cuda:0, or the reason it does not open.
struct Opened {
  std::optional<Device> dev;
  std::string why;
};
const Opened& cuda0() {
  static const Opened o = [] {
    Opened r;
    try {
      r.dev = Device::cuda(0);
    } catch (const Error& e) {
      r.why = e.what();
    }
    return r;
  }();
  return o;
}

#define NEED_GPU()                                                          \
  if (!cuda0().dev) GTEST_SKIP() << "no CUDA device here: " << cuda0().why; \
  const Device& dev = *cuda0().dev

TEST(CudaOpen, AMissingDriverOrDeviceIsAClearDeviceError) {
  // cuda:1000 never exists: the error names the driver (none here) or the device count.
  try {
    Device::cuda(1000);
    FAIL() << "cuda:1000 opened";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Device);
    std::string m = e.what();
    EXPECT_NE(m.find("cuda"), std::string::npos) << m;
    if (cuda0().dev) {
      EXPECT_NE(m.find("no device cuda:1000"), std::string::npos) << m;
    } else {
      EXPECT_TRUE(m.find("driver") != std::string::npos || m.find("libcublas") != std::string::npos) << m;
    }
  }
  if (!cuda0().dev) {
    // the program keeps running and the reason is the same one every time
    EXPECT_NE(cuda0().why.find("cuda"), std::string::npos) << cuda0().why;
    EXPECT_THROW(Device::from_name("cuda:0"), Error);
  }
}

TEST(CudaOpen, IfAvailableFallsBackToTheCpu) {
  Device d = Device::cuda_if_available(0);
  if (cuda0().dev) {
    EXPECT_TRUE(d.is_cuda());
    EXPECT_EQ(d.to_string(), "cuda:0");
  } else {
    EXPECT_TRUE(d.is_cpu());
  }
  // a tensor works either way
  Tensor t = Tensor::arange(0.0, 4.0, d).to_dtype(DType::F32);
  EXPECT_EQ(t.to_device(Device::cpu()).to_vec1<float>(), (std::vector<float>{0, 1, 2, 3}));
}

TEST(CudaOpen, AutoSelectNeverThrows) {
  std::string why;
  Device d = Device::auto_select(&why);
  EXPECT_FALSE(why.empty());
  // where cuda:0 opens, auto takes it (unless CANDLE_CUDA_AUTO=0 says not to)
  const char* opt = std::getenv("CANDLE_CUDA_AUTO");
  const bool opted_out = opt && std::string(opt) == "0";
  if (cuda0().dev && !opted_out) {
    EXPECT_TRUE(d.is_cuda()) << why;
    EXPECT_EQ(why.rfind("cuda:0", 0), 0u) << why;
  }
  if (!cuda0().dev) {
    EXPECT_FALSE(d.is_cuda()) << why;
  }
}

TEST(CudaTransfers, EveryDtypeRoundTripsBitExactAcrossStagingSizes) {
  NEED_GPU();
  // 3 MiB of f32 and 11 M u8: past the direct-copy size and the 8 MiB staging buffers
  for (size_t n : {size_t(1), size_t(1000), size_t(3) << 20, size_t(11) << 20}) {
    std::vector<uint8_t> bytes(n);
    for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
    Tensor t = Tensor::from_vec(bytes, {n}, Device::cpu()).to_device(dev);
    EXPECT_EQ(t.to_device(Device::cpu()).to_vec1<uint8_t>(), bytes) << n;
  }
  for (DType dt : kAllDTypes) {
    Tensor cpu = Tensor::arange(0.0, 1000.0, Device::cpu()).affine(0.37, -100.0).to_dtype(dt);
    Tensor back = cpu.to_device(dev).to_device(Device::cpu());
    EXPECT_EQ(test_util::bytes_of(back), test_util::bytes_of(cpu)) << dtype_name(dt);
  }
}

TEST(CudaTransfers, StridedViewsDownloadTheirElements) {
  NEED_GPU();
  Tensor cpu = Tensor::arange(0.0, 60.0, Device::cpu()).to_dtype(DType::F32).reshape({3, 4, 5});
  Tensor g = cpu.to_device(dev);
  for (auto [a, b] : {std::pair<size_t, size_t>{0, 2}, {1, 2}, {0, 1}}) {
    EXPECT_EQ(g.transpose(a, b).to_device(Device::cpu()).flatten_all().to_vec1<float>(),
              cpu.transpose(a, b).contiguous().flatten_all().to_vec1<float>());
  }
  EXPECT_EQ(g.narrow(2, 1, 3).to_device(Device::cpu()).flatten_all().to_vec1<float>(),
            cpu.narrow(2, 1, 3).contiguous().flatten_all().to_vec1<float>());
}

TEST(CudaAllocator, FreedBlocksAreReusedAndCounted) {
  NEED_GPU();
  cuda::reset_stats();
  { Tensor a = Tensor::zeros({1 << 20}, DType::F32, dev); }
  auto s0 = cuda::stats();
  EXPECT_GE(s0.cached_bytes, size_t(4) << 20);
  { Tensor b = Tensor::zeros({1 << 20}, DType::F32, dev); }
  auto s1 = cuda::stats();
  EXPECT_EQ(s1.cache_hits, s0.cache_hits + 1);
  EXPECT_EQ(s1.allocations, s0.allocations);
  cuda::empty_cache();
  EXPECT_EQ(cuda::stats().cached_bytes, 0u);
}

TEST(CudaAllocator, OutOfMemoryIsAnErrorNamingTheSizeAndWhatIsFree) {
  NEED_GPU();
  try {
    Tensor t = Tensor::zeros({size_t(1) << 50}, DType::U8, dev);  // 1 PiB
    FAIL() << "1 PiB allocated";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Device);
    std::string m = e.what();
    EXPECT_NE(m.find("out of memory allocating"), std::string::npos) << m;
    EXPECT_NE(m.find("free of"), std::string::npos) << m;
  }
  // and the device still works
  EXPECT_EQ(Tensor::ones({3}, DType::F32, dev).sum_all().to_device(Device::cpu()).to_scalar<float>(), 3.0f);
  DeviceMemory m = dev.memory();
  EXPECT_GT(m.total_bytes, 0u);
  EXPECT_LE(m.free_bytes, m.total_bytes);
}

TEST(CudaRandom, SeededDrawsRepeatAndHaveTheirMoments) {
  NEED_GPU();
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    dev.set_seed(42);
    Tensor a = Tensor::randn(0.0, 1.0, {1 << 20}, dt, dev);
    Tensor u = Tensor::rand(-2.0, 3.0, {1 << 20}, dt, dev);
    dev.set_seed(42);
    Tensor b = Tensor::randn(0.0, 1.0, {1 << 20}, dt, dev);
    EXPECT_EQ(test_util::bytes_of(a), test_util::bytes_of(b)) << dtype_name(dt);
    auto v = a.to_dtype(DType::F64).to_device(Device::cpu()).to_vec1<double>();
    double mean = std::accumulate(v.begin(), v.end(), 0.0) / v.size(), var = 0;
    for (double x : v) var += (x - mean) * (x - mean);
    var /= v.size();
    EXPECT_NEAR(mean, 0.0, 5e-3) << dtype_name(dt);
    EXPECT_NEAR(var, 1.0, 1e-2) << dtype_name(dt);
    auto w = u.to_dtype(DType::F64).to_device(Device::cpu()).to_vec1<double>();
    double lo = *std::min_element(w.begin(), w.end()), hi = *std::max_element(w.begin(), w.end());
    double um = std::accumulate(w.begin(), w.end(), 0.0) / w.size();
    EXPECT_GE(lo, -2.0);
    EXPECT_LE(hi, 3.0);
    EXPECT_NEAR(um, 0.5, 1e-2) << dtype_name(dt);
  }
  // a second draw is not the first one again
  dev.set_seed(7);
  Tensor x = Tensor::rand(0.0, 1.0, {1000}, DType::F32, dev);
  Tensor y = Tensor::rand(0.0, 1.0, {1000}, DType::F32, dev);
  EXPECT_NE(test_util::bytes_of(x), test_util::bytes_of(y));
}

TEST(CudaMatmul, CublasMatchesTheCpuForTransposedBroadcastAndHalfOperands) {
  NEED_GPU();
  Device cpu = Device::cpu();
  cpu.set_seed(3);
  struct Case {
    std::vector<size_t> a, b;
    bool ta, tb;
  };
  for (const Case& c : std::vector<Case>{{{64, 48}, {48, 80}, false, false},
                                         {{7, 5}, {5, 3}, true, false},
                                         {{7, 5}, {5, 3}, false, true},
                                         {{3, 33, 17}, {3, 17, 9}, true, true},
                                         {{4, 1, 32}, {32, 50}, false, false},
                                         {{2, 3, 16, 8}, {8, 16}, false, true}}) {
    for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
      Tensor a = Tensor::randn(0.0, 1.0, c.a, DType::F32, cpu);
      Tensor b = Tensor::randn(0.0, 1.0, c.b, DType::F32, cpu);
      auto shape_t = [](Tensor t, bool tr) {
        if (!tr) return t;
        size_t r = t.rank();
        return t.transpose(r - 1, r - 2).contiguous().transpose(r - 1, r - 2);  // same values, strided
      };
      Tensor ac = shape_t(a.to_dtype(dt), c.ta), bc = shape_t(b.to_dtype(dt), c.tb);
      Tensor want = ac.to_dtype(DType::F64).broadcast_matmul(bc.to_dtype(DType::F64));
      Tensor got = shape_t(a.to_dtype(dt).to_device(dev), c.ta)
                       .broadcast_matmul(shape_t(b.to_dtype(dt).to_device(dev), c.tb));
      const double tol = dt == DType::F32 ? 1e-4 : dt == DType::F64 ? 1e-10 : dt == DType::F16 ? 2e-2 : 1e-1;
      test_device::expect_close(got, want, tol, tol, "matmul " + std::string(dtype_name(dt)));
    }
  }
  cuda::set_gemm_reduced_precision_f32(true);
  EXPECT_TRUE(cuda::gemm_reduced_precision_f32());
  Tensor a = Tensor::randn(0.0, 1.0, {256, 256}, DType::F32, cpu);
  Tensor tf32 = a.to_device(dev).matmul(a.to_device(dev)).to_device(cpu);
  cuda::set_gemm_reduced_precision_f32(false);
  Tensor full = a.to_device(dev).matmul(a.to_device(dev)).to_device(cpu);
  Tensor want = a.to_dtype(DType::F64).matmul(a.to_dtype(DType::F64)).to_dtype(DType::F32);
  double err_tf32 = (tf32 - want).abs().max_all().to_scalar<float>();
  double err_full = (full - want).abs().max_all().to_scalar<float>();
  EXPECT_LT(err_full, 1e-3);
  EXPECT_GT(err_tf32, err_full) << "TF32 was asked for but the product is as exact as full f32";
  EXPECT_LT(err_tf32, 0.5);
}

}  // namespace
}  // namespace candle
