// Creation helpers: expected values from candle-core's tensor_tests.rs (arange, tril_triu_eye,
// meshgrid_with_empty_axis) and the meshgrid doc example in candle-core/src/tensor.rs.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "candle/candle.h"
#include "test_util.h"

using namespace candle;

namespace {
const Device& cpu() {
  static Device d = Device::cpu();
  return d;
}
using V2 = std::vector<std::vector<float>>;
}  // namespace

TEST(CreationArange, Integers) {
  EXPECT_EQ(Tensor::arange<uint8_t>(0, 5, cpu()).to_vec1<uint8_t>(), (std::vector<uint8_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(Tensor::arange_step<uint8_t>(0, 5, 2, cpu()).to_vec1<uint8_t>(), (std::vector<uint8_t>{0, 2, 4}));
  EXPECT_EQ(Tensor::arange_step<uint8_t>(0, 5, 3, cpu()).to_vec1<uint8_t>(), (std::vector<uint8_t>{0, 3}));
  EXPECT_EQ(Tensor::arange_step<int64_t>(5, 0, -1, cpu()).to_vec1<int64_t>(),
            (std::vector<int64_t>{5, 4, 3, 2, 1}));
  EXPECT_EQ(Tensor::arange_step<int64_t>(5, 0, -2, cpu()).to_vec1<int64_t>(),
            (std::vector<int64_t>{5, 3, 1}));
  EXPECT_EQ(Tensor::arange<uint32_t>(3, 3, cpu()).elem_count(), 0u);
  EXPECT_EQ(Tensor::arange_step<int64_t>(0, 5, -1, cpu()).elem_count(), 0u);
  EXPECT_EQ(Tensor::arange<int32_t>(-3, 1, cpu()).to_vec1<int32_t>(), (std::vector<int32_t>{-3, -2, -1, 0}));
  EXPECT_EQ(Tensor::arange<int32_t>(-3, 1, cpu()).dtype(), DType::I32);
}

TEST(CreationArange, IntegerNearTypeLimitStops) {
  // candle's accumulating loop overflows u8 after 250 (250 + 10); the length is exact here
  EXPECT_EQ(Tensor::arange_step<uint8_t>(250, 255, 10, cpu()).to_vec1<uint8_t>(),
            (std::vector<uint8_t>{250}));
  EXPECT_EQ(Tensor::arange_step<uint8_t>(240, 255, 7, cpu()).to_vec1<uint8_t>(),
            (std::vector<uint8_t>{240, 247, 254}));
}

TEST(CreationArange, LargeIsParallelAndExact) {
  auto v = Tensor::arange<int64_t>(-50000, 50000, cpu()).to_vec1<int64_t>();
  ASSERT_EQ(v.size(), 100000u);
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], static_cast<int64_t>(i) - 50000);
}

TEST(CreationArange, FloatsAccumulateLikeCandle) {
  EXPECT_EQ(Tensor::arange_step(1.0, 0.0, -0.25, cpu()).to_vec1<double>(),
            (std::vector<double>{1, 0.75, 0.5, 0.25}));
  // 0.1f added ten times is 1.0000001f > 1, so 0.1f * 10 steps gives ten elements
  auto v = Tensor::arange_step(0.f, 1.f, 0.1f, cpu()).to_vec1<float>();
  ASSERT_EQ(v.size(), 10u);
  float acc = 0.f;
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ(v[i], acc) << i;  // the accumulated value, bit for bit
    acc += 0.1f;
  }
  EXPECT_EQ(Tensor::arange(0.f, 6.f, cpu()).to_vec1<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(Tensor::arange(0.5, 3.0, cpu()).to_vec1<double>(), (std::vector<double>{0.5, 1.5, 2.5}));
}

TEST(CreationArange, HalfAndF8) {
  auto h = Tensor::arange_step(f16(0.f), f16(2.f), f16(0.5f), cpu()).to_dtype(DType::F32).to_vec1<float>();
  EXPECT_EQ(h, (std::vector<float>{0, 0.5, 1, 1.5}));
  auto b = Tensor::arange(bf16(1.f), bf16(4.f), cpu()).to_dtype(DType::F32).to_vec1<float>();
  EXPECT_EQ(b, (std::vector<float>{1, 2, 3}));
  // tensor_tests.rs: f8e4m3 arange_step(0, 5, 2) = [0, 2, 4]
  Tensor f8 = Tensor::arange_impl(Scalar(0.f), Scalar(5.f), Scalar(2.f), DType::F8E4M3, cpu());
  EXPECT_EQ(f8.dtype(), DType::F8E4M3);
  auto bits = f8.to_vec1<f8e4m3>();
  ASSERT_EQ(bits.size(), 3u);
  EXPECT_EQ(bits[0].bits, f8e4m3::from_f32(0.f));
  EXPECT_EQ(bits[1].bits, f8e4m3::from_f32(2.f));
  EXPECT_EQ(bits[2].bits, f8e4m3::from_f32(4.f));
}

TEST(CreationArange, Errors) {
  try {
    Tensor::arange_step<int64_t>(0, 5, 0, cpu());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("step cannot be zero"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Tensor::arange_step(0.f, 1.f, 0.f, cpu()), Error);
  // f16 cannot get past 2048 in steps of 0.5 (candle would loop forever)
  EXPECT_THROW(Tensor::arange_step(f16(2040.f), f16(3000.f), f16(0.5f), cpu()), Error);
  // values that do not fit the dtype
  EXPECT_THROW(Tensor::arange_impl(Scalar(250), Scalar(300), Scalar(10), DType::U8, cpu()), Error);
}

TEST(CreationTriangular, TrilTriuEye) {
  EXPECT_EQ(Tensor::tril2(4, DType::F32, cpu()).to_vec2<float>(),
            (V2{{1, 0, 0, 0}, {1, 1, 0, 0}, {1, 1, 1, 0}, {1, 1, 1, 1}}));
  EXPECT_EQ(Tensor::triu2(4, DType::F32, cpu()).to_vec2<float>(),
            (V2{{1, 1, 1, 1}, {0, 1, 1, 1}, {0, 0, 1, 1}, {0, 0, 0, 1}}));
  EXPECT_EQ(Tensor::eye(4, DType::F32, cpu()).to_vec2<float>(),
            (V2{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}}));
  EXPECT_EQ(Tensor::eye(0, DType::F32, cpu()).dims(), (std::vector<size_t>{0, 0}));
}

TEST(CreationTriangular, EveryDType) {
  for (DType dt : kAllDTypes) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor t = Tensor::tril2(3, dt, cpu());
    EXPECT_EQ(t.dtype(), dt);
    EXPECT_EQ(t.to_dtype(DType::F32).to_vec2<float>(), (V2{{1, 0, 0}, {1, 1, 0}, {1, 1, 1}}));
    EXPECT_EQ(Tensor::eye(2, dt, cpu()).to_dtype(DType::F32).to_vec2<float>(), (V2{{1, 0}, {0, 1}}));
  }
}

TEST(CreationTriangular, LargeMatchesDefinition) {
  size_t n = 300;
  auto l = Tensor::tril2(n, DType::U8, cpu()).flatten_all().to_vec1<uint8_t>();
  auto u = Tensor::triu2(n, DType::U8, cpu()).flatten_all().to_vec1<uint8_t>();
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j) {
      ASSERT_EQ(l[i * n + j], j <= i ? 1 : 0) << i << "," << j;
      ASSERT_EQ(u[i * n + j], j >= i ? 1 : 0) << i << "," << j;
    }
}

TEST(CreationMeshgrid, XyAndIj) {
  Tensor x = Tensor::new_({1.f, 2.f, 3.f}, cpu());
  Tensor y = Tensor::new_({4.f, 5.f, 6.f}, cpu());
  auto xy = Tensor::meshgrid({x, y}, true);
  ASSERT_EQ(xy.size(), 2u);
  EXPECT_EQ(xy[0].dims(), (std::vector<size_t>{3, 3}));
  EXPECT_EQ(xy[0].to_vec2<float>(), (V2{{1, 2, 3}, {1, 2, 3}, {1, 2, 3}}));
  EXPECT_EQ(xy[1].to_vec2<float>(), (V2{{4, 4, 4}, {5, 5, 5}, {6, 6, 6}}));
  auto ij = Tensor::meshgrid({x, y}, false);
  EXPECT_EQ(ij[0].to_vec2<float>(), (V2{{1, 1, 1}, {2, 2, 2}, {3, 3, 3}}));
  EXPECT_EQ(ij[1].to_vec2<float>(), (V2{{4, 5, 6}, {4, 5, 6}, {4, 5, 6}}));
  EXPECT_TRUE(ij[0].is_contiguous());
}

TEST(CreationMeshgrid, UnequalLengthsAndStridedInput) {
  Tensor x = Tensor::new_({1.f, 2.f}, cpu());
  Tensor y = Tensor::new_({{7.f, 0.f}, {8.f, 0.f}, {9.f, 0.f}}, cpu()).i({Slice::all(), 0});  // strided [3]
  auto ij = Tensor::meshgrid({x, y}, false);
  EXPECT_EQ(ij[0].to_vec2<float>(), (V2{{1, 1, 1}, {2, 2, 2}}));
  EXPECT_EQ(ij[1].to_vec2<float>(), (V2{{7, 8, 9}, {7, 8, 9}}));
  auto xy = Tensor::meshgrid({x, y}, true);
  EXPECT_EQ(xy[0].to_vec2<float>(), (V2{{1, 2}, {1, 2}, {1, 2}}));
  EXPECT_EQ(xy[1].to_vec2<float>(), (V2{{7, 7}, {8, 8}, {9, 9}}));
  auto three = Tensor::meshgrid({x, y, x}, false);
  EXPECT_EQ(three[2].dims(), (std::vector<size_t>{2, 3, 2}));
  EXPECT_EQ(three[1].i({1, 2, 0}).to_scalar<float>(), 9.f);
}

TEST(CreationMeshgrid, EmptyAxisAndErrors) {
  Tensor empty = Tensor::from_vec(std::vector<float>{}, {0}, cpu());
  Tensor c = Tensor::new_({10.f, 20.f, 30.f}, cpu());
  auto grids = Tensor::meshgrid({empty, c}, false);
  ASSERT_EQ(grids.size(), 2u);
  for (const auto& g : grids) {
    EXPECT_EQ(g.dims(), (std::vector<size_t>{0, 3}));
    EXPECT_EQ(g.elem_count(), 0u);
  }
  EXPECT_THROW(Tensor::meshgrid({c}, false), Error);
  try {
    Tensor::meshgrid({c, c.reshape({1, 3})}, false);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("meshgrid"), std::string::npos) << e.what();
  }
}
