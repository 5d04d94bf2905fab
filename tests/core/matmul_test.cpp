// matmul family: matmul, broadcast_matmul, dot, mv, and the GEMMs under them.
// Expected values of the Candle* tests come from candle-core/tests/matmul_tests.rs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "candle/candle.h"
#include "cpu/gemm.h"
#include "test_util.h"

using namespace candle;
using test_util::view;

namespace {

const Device& dev() {
  static const Device d = Device::cpu();
  return d;
}

std::vector<float> rand_vec(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

Tensor make(const std::vector<float>& v, const Shape& s, DType dt = DType::F32) {
  return Tensor::from_vec(v, s, dev()).to_dtype(dt);
}

// The values of any tensor (any layout, any float dtype) as f64, row-major.
std::vector<double> values(const Tensor& t) { return t.to_dtype(DType::F64).flatten_to_vec<double>(); }

// Row-major [batch, m, k] x [batch, k, n] in double.
template <typename A, typename B>
std::vector<double> naive(const std::vector<A>& a, const std::vector<B>& b, size_t batch, size_t m, size_t n,
                          size_t k) {
  std::vector<double> c(batch * m * n, 0.0);
  for (size_t bi = 0; bi < batch; ++bi)
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < n; ++j) {
        double s = 0;
        for (size_t p = 0; p < k; ++p) s += double(a[(bi * m + i) * k + p]) * double(b[(bi * k + p) * n + j]);
        c[(bi * m + i) * n + j] = s;
      }
  return c;
}

// |got - want| <= tol * max(1, |want|) for every element.
template <typename G>
void expect_close(const std::vector<G>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_LE(std::fabs(double(got[i]) - want[i]), tol * std::max(1.0, std::fabs(want[i])))
        << "at " << i << ": got " << got[i] << ", want " << want[i];
  }
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  auto x = a.to_dtype(DType::F64).flatten_to_vec<double>();
  auto y = b.to_dtype(DType::F64).flatten_to_vec<double>();
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(double)) == 0;
}

// Tolerance per dtype for products of values in [-1, 1] with k <= ~100, relative to
// max(1, |want|): the output rounding of the dtype dominates (bf16 2^-8, f16 2^-11, f8 2^-4).
double tol_for(DType dt) {
  switch (dt) {
    case DType::BF16: return 1e-2;
    case DType::F16: return 2e-3;
    case DType::F8E4M3: return 7e-2;
    case DType::F32: return 1e-5;
    default: return 1e-12;
  }
}

const DType kFloatDTypes[] = {DType::BF16, DType::F16, DType::F32, DType::F64, DType::F8E4M3};

// The view [rows, cols] at column offset 1 of a [rows, cols + 3] storage padded with NaN:
// a leading dimension larger than the row plus a start offset.
Tensor padded_view(const std::vector<float>& v, size_t rows, size_t cols, DType dt) {
  std::vector<float> wide(rows * (cols + 3), std::numeric_limits<float>::quiet_NaN());
  for (size_t i = 0; i < rows; ++i)
    for (size_t j = 0; j < cols; ++j) wide[i * (cols + 3) + 1 + j] = v[i * cols + j];
  Tensor w = make(wide, {rows, cols + 3}, dt);
  return view(w, w.layout().narrow(1, 1, cols));
}

template <typename Fn>
void expect_error(Fn&& fn, ErrorKind kind, const std::string& msg) {
  try {
    fn();
    FAIL() << "expected an error: " << msg;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(msg), std::string::npos) << e.what();
  }
}

}  // namespace

// ---- candle's tests ----------------------------------------------------------------------

TEST(MatmulCandle, SquareAndOuter) {
  Tensor a = Tensor::from_vec(std::vector<float>{1, 2, 3, 4}, {2, 2}, dev());
  EXPECT_EQ(a.matmul(a).to_vec2<float>(), (std::vector<std::vector<float>>{{7, 10}, {15, 22}}));
  Tensor col = Tensor::from_vec(std::vector<float>{1, 2}, {2, 1}, dev());
  Tensor row = Tensor::from_vec(std::vector<float>{3, 4}, {1, 2}, dev());
  EXPECT_EQ(col.matmul(row).to_vec2<float>(), (std::vector<std::vector<float>>{{3, 4}, {6, 8}}));
}

TEST(MatmulCandle, Rectangular) {
  Tensor a = Tensor::from_vec(std::vector<float>{0, 1, 2, 3, 4, 5}, {2, 3}, dev());
  Tensor b = Tensor::from_vec(std::vector<float>{2, 3, 4, 5, 6, 7}, {3, 2}, dev());
  EXPECT_EQ(a.matmul(b).to_vec2<float>(), (std::vector<std::vector<float>>{{16, 19}, {52, 64}}));
}

namespace {
Tensor candle_batch_a() {
  std::vector<float> v(12);
  for (size_t i = 0; i < 12; ++i) v[i] = float(i);
  return Tensor::from_vec(v, {2, 2, 3}, dev());
}
Tensor candle_batch_b() {
  std::vector<float> v(12);
  for (size_t i = 0; i < 12; ++i) v[i] = float(i + 2);
  return Tensor::from_vec(v, {2, 3, 2}, dev());
}
// t.t().contiguous().t(): the same values stored with the last two dims swapped.
Tensor stored_transposed(const Tensor& t) {
  auto d = t.dims();
  std::vector<float> src = t.flatten_to_vec<float>(), tt(src.size());
  for (size_t b = 0; b < d[0]; ++b)
    for (size_t i = 0; i < d[1]; ++i)
      for (size_t j = 0; j < d[2]; ++j) tt[(b * d[2] + j) * d[1] + i] = src[(b * d[1] + i) * d[2] + j];
  Tensor s = Tensor::from_vec(tt, {d[0], d[2], d[1]}, dev());
  return view(s, s.layout().transpose(1, 2));
}
const std::vector<std::vector<std::vector<float>>> kCandleBatchExpected = {{{16, 19}, {52, 64}},
                                                                           {{214, 235}, {304, 334}}};
}  // namespace

TEST(MatmulCandle, Batched) {
  EXPECT_EQ(candle_batch_a().matmul(candle_batch_b()).to_vec3<float>(), kCandleBatchExpected);
}

TEST(MatmulCandle, BatchedTransposedOperands) {
  Tensor a = candle_batch_a(), b = candle_batch_b();
  Tensor a_tt = stored_transposed(a), b_tt = stored_transposed(b);
  ASSERT_FALSE(a_tt.is_contiguous());
  EXPECT_EQ(a_tt.stride(), (std::vector<size_t>{6, 1, 2}));
  EXPECT_EQ(b_tt.stride(), (std::vector<size_t>{6, 1, 3}));
  EXPECT_EQ(a_tt.matmul(b).to_vec3<float>(), kCandleBatchExpected);
  EXPECT_EQ(a.matmul(b_tt).to_vec3<float>(), kCandleBatchExpected);
  EXPECT_EQ(a_tt.matmul(b_tt).to_vec3<float>(), kCandleBatchExpected);
}

TEST(MatmulCandle, Bf16AndF16) {
  for (DType dt : {DType::BF16, DType::F16}) {
    Tensor a = make({1, 2, 3, 4}, {2, 2}, dt);
    Tensor c = a.matmul(a);
    EXPECT_EQ(c.dtype(), dt);
    EXPECT_EQ(c.to_dtype(DType::F32).to_vec2<float>(), (std::vector<std::vector<float>>{{7, 10}, {15, 22}}));
  }
}

TEST(MatmulCandle, BroadcastMatmul) {
  auto lv = rand_vec(3 * 4 * 5, 1), rv = rand_vec(6 * 5 * 2, 2);
  Tensor lhs = make(lv, {3, 1, 4, 5}), rhs = make(rv, {6, 5, 2});
  Tensor out = lhs.broadcast_matmul(rhs);
  ASSERT_EQ(out.shape(), Shape({3, 6, 4, 2}));
  std::vector<float> got = out.flatten_to_vec<float>();
  for (size_t i1 = 0; i1 < 3; ++i1)
    for (size_t i2 = 0; i2 < 6; ++i2) {
      std::vector<float> a(lv.begin() + i1 * 20, lv.begin() + (i1 + 1) * 20);
      std::vector<float> b(rv.begin() + i2 * 10, rv.begin() + (i2 + 1) * 10);
      std::vector<float> block(got.begin() + (i1 * 6 + i2) * 8, got.begin() + (i1 * 6 + i2 + 1) * 8);
      expect_close(block, naive(a, b, 1, 4, 2, 5), 1e-5);
    }
}

TEST(MatmulCandle, SqueezeMm) {
  // a = zeros(1, 8, 16); x = a.i((.., 7, ..)) -> [1, 16] at offset 112; w = zeros(32, 16).t()
  Tensor a = Tensor::zeros({1, 8, 16}, DType::F32, dev());
  Tensor x = view(a, Layout(Shape{1, 16}, {128, 1}, 112));
  Tensor w0 = Tensor::zeros({32, 16}, DType::F32, dev());
  Tensor w = view(w0, w0.layout().transpose(0, 1));
  Tensor y = x.matmul(w);
  EXPECT_EQ(y.shape(), Shape({1, 32}));
  EXPECT_EQ(y.flatten_to_vec<float>(), std::vector<float>(32, 0.0f));
}

TEST(MatmulCandle, MmLayout) {
  std::vector<float> av(16), bv(8);
  for (size_t i = 0; i < 16; ++i) av[i] = float(i);
  for (size_t i = 0; i < 8; ++i) bv[i] = float(i);
  Tensor a = Tensor::from_vec(av, {1, 1, 4, 4}, dev());
  Tensor b = Tensor::from_vec(bv, {1, 1, 4, 2}, dev());
  Tensor mm1 = a.matmul(b);
  // b.transpose(1, 2).force_contiguous().transpose(1, 2): shape [1, 1, 4, 2], stride [8, 2, 2, 1]
  Tensor b2 = view(b, Layout(Shape{1, 1, 4, 2}, {8, 2, 2, 1}, 0));
  Tensor mm2 = a.matmul(b2);
  EXPECT_EQ(mm1.flatten_to_vec<float>(), mm2.flatten_to_vec<float>());
  EXPECT_EQ(mm1.flatten_to_vec<float>(), (std::vector<float>{28, 34, 76, 98, 124, 162, 172, 226}));
}

TEST(MatmulCandle, Dot) {
  Tensor lhs = Tensor::new_({1., 2., 3.}, dev());
  Tensor rhs = Tensor::new_({4., 5., 6.}, dev());
  Tensor d = lhs.dot(rhs);
  EXPECT_EQ(d.rank(), 0u);
  EXPECT_EQ(d.to_scalar<double>(), 32.0);
}

TEST(MatmulCandle, Mv) {
  Tensor mat = Tensor::new_({{1., 2., 3.}, {4., 5., 6.}}, dev());
  Tensor vec = Tensor::new_({1., 1., 1.}, dev());
  EXPECT_EQ(mat.mv(vec).to_vec1<double>(), (std::vector<double>{6, 15}));
}

// ---- layouts ---------------------------------------------------------------------------

TEST(MatmulLayout, TransposedOperandsEveryDType) {
  const size_t m = 17, k = 29, n = 23;
  auto av = rand_vec(m * k, 3), bv = rand_vec(k * n, 4);
  for (DType dt : kFloatDTypes) {
    Tensor a = make(av, {m, k}, dt), b = make(bv, {k, n}, dt);
    auto want = naive(values(a), values(b), 1, m, n, k);
    Tensor at = test_util::transposed_copy_view(a), bt = test_util::transposed_copy_view(b);
    ASSERT_FALSE(at.is_contiguous());
    SCOPED_TRACE(std::string(dtype_name(dt)));
    expect_close(values(a.matmul(b)), want, tol_for(dt));
    expect_close(values(at.matmul(b)), want, tol_for(dt));
    expect_close(values(a.matmul(bt)), want, tol_for(dt));
    expect_close(values(at.matmul(bt)), want, tol_for(dt));
  }
}

TEST(MatmulLayout, OffsetViewsEqualContiguousCopies) {
  // candle once multiplied a strided view at its storage's old offset: a view that starts
  // inside its storage must give exactly the bytes of its contiguous copy
  const size_t b = 3, m = 5, k = 7, n = 4;
  auto av = rand_vec(b * m * k, 5), bv = rand_vec(b * k * n, 6);
  for (DType dt : kFloatDTypes) {
    Tensor a = make(av, {b, m, k}, dt), bb = make(bv, {b, k, n}, dt);
    Tensor ao = test_util::offset_view(a), bo = test_util::offset_view(bb, 3);
    ASSERT_NE(ao.layout().start_offset(), 0u);
    Tensor want = a.matmul(bb);
    SCOPED_TRACE(std::string(dtype_name(dt)));
    EXPECT_TRUE(same_bytes(ao.matmul(bb), want));
    EXPECT_TRUE(same_bytes(a.matmul(bo), want));
    EXPECT_TRUE(same_bytes(ao.matmul(bo), want));
    expect_close(values(want), naive(values(a), values(bb), b, m, n, k), tol_for(dt));
  }
}

TEST(MatmulLayout, NarrowedInnerDims) {
  // leading dimensions larger than the rows, start offsets, NaN in the padding around them
  const size_t m = 9, k = 11, n = 6;
  auto av = rand_vec(m * k, 7), bv = rand_vec(k * n, 8);
  for (DType dt : kFloatDTypes) {
    Tensor a = padded_view(av, m, k, dt), b = padded_view(bv, k, n, dt);
    ASSERT_EQ(a.stride(), (std::vector<size_t>{k + 3, 1}));
    auto want = naive(values(a), values(b), 1, m, n, k);
    SCOPED_TRACE(std::string(dtype_name(dt)));
    expect_close(values(a.matmul(b)), want, tol_for(dt));
    // B stored transposed in a narrowed view: column-major with a leading dimension > rows
    std::vector<float> bvt(n * k);
    for (size_t i = 0; i < k; ++i)
      for (size_t j = 0; j < n; ++j) bvt[j * k + i] = bv[i * n + j];
    Tensor btn = padded_view(bvt, n, k, dt);
    Tensor bt = view(btn, btn.layout().transpose(0, 1));
    ASSERT_EQ(bt.stride(), (std::vector<size_t>{1, k + 3}));
    expect_close(values(a.matmul(bt)), naive(values(a), values(bt), 1, m, n, k), tol_for(dt));
  }
}

TEST(MatmulLayout, GeneralStridesAreCopied) {
  // inner strides that are neither row- nor column-major (every other column), and a
  // stride-0 row (one row broadcast to all rows)
  const size_t m = 6, k = 8, n = 5;
  auto wide = rand_vec(m * 2 * k, 9), bv = rand_vec(k * n, 10), rowv = rand_vec(k, 11);
  for (DType dt : kFloatDTypes) {
    Tensor w = make(wide, {m, 2 * k}, dt);
    Tensor a = view(w, Layout(Shape{m, k}, {2 * k, 2}, 1));
    Tensor b = make(bv, {k, n}, dt);
    SCOPED_TRACE(std::string(dtype_name(dt)));
    expect_close(values(a.matmul(b)), naive(values(a), values(b), 1, m, n, k), tol_for(dt));
    Tensor row = make(rowv, {1, k}, dt);
    Tensor rows = view(row, row.layout().broadcast_as(Shape{m, k}));
    expect_close(values(rows.matmul(b)), naive(values(rows), values(b), 1, m, n, k), tol_for(dt));
  }
}

TEST(MatmulLayout, PermutedBatchDims) {
  // [2, 3, m, k] viewed from a [3, 2, m, k] storage: the batch dims do not fold
  const size_t m = 4, k = 5, n = 3;
  auto sv = rand_vec(3 * 2 * m * k, 12), bv = rand_vec(2 * 3 * k * n, 13);
  Tensor s = make(sv, {3, 2, m, k});
  Tensor a = view(s, s.layout().transpose(0, 1));
  Tensor b = make(bv, {2, 3, k, n});
  Tensor c = a.matmul(b);
  ASSERT_EQ(c.shape(), Shape({2, 3, m, n}));
  expect_close(values(c), naive(values(a), bv, 6, m, n, k), 1e-5);
}

TEST(MatmulLayout, BatchStrideZeroFromBroadcast) {
  // broadcast_matmul where neither operand's batch dims fold: [2, 1, m, k] x [1, 3, k, n]
  const size_t m = 3, k = 4, n = 5;
  auto av = rand_vec(2 * m * k, 14), bv = rand_vec(3 * k * n, 15);
  Tensor a = make(av, {2, 1, m, k}), b = make(bv, {1, 3, k, n});
  Tensor c = a.broadcast_matmul(b);
  ASSERT_EQ(c.shape(), Shape({2, 3, m, n}));
  std::vector<float> ae, be;
  for (size_t i = 0; i < 2; ++i)
    for (size_t j = 0; j < 3; ++j) {
      ae.insert(ae.end(), av.begin() + i * m * k, av.begin() + (i + 1) * m * k);
      be.insert(be.end(), bv.begin() + j * k * n, bv.begin() + (j + 1) * k * n);
    }
  expect_close(values(c), naive(ae, be, 6, m, n, k), 1e-5);
}

TEST(MatmulLayout, BroadcastSharedRhsAndLhs) {
  const size_t b = 4, m = 3, k = 6, n = 2;
  auto av = rand_vec(b * m * k, 16), wv = rand_vec(k * n, 17), sv = rand_vec(m * k, 18),
       bv = rand_vec(b * k * n, 19);
  // [b, m, k] x [k, n]: one GEMM over the b*m rows
  Tensor c = make(av, {b, m, k}).broadcast_matmul(make(wv, {k, n}));
  ASSERT_EQ(c.shape(), Shape({b, m, n}));
  expect_close(values(c), naive(av, wv, 1, b * m, n, k), 1e-5);
  // [m, k] x [b, k, n]: lhs shared by the batch
  Tensor d = make(sv, {m, k}).broadcast_matmul(make(bv, {b, k, n}));
  ASSERT_EQ(d.shape(), Shape({b, m, n}));
  std::vector<float> se;
  for (size_t i = 0; i < b; ++i) se.insert(se.end(), sv.begin(), sv.end());
  expect_close(values(d), naive(se, bv, b, m, n, k), 1e-5);
}

TEST(MatmulLayout, SharedRhsWithTransposedLhsRows) {
  // [b, m, k] whose rows are not evenly spaced across the batch: no row folding
  const size_t b = 3, m = 4, k = 5, n = 2;
  auto sv = rand_vec(b * k * m, 20), wv = rand_vec(k * n, 21);
  Tensor s = make(sv, {b, k, m});
  Tensor a = view(s, s.layout().transpose(1, 2));
  Tensor c = a.broadcast_matmul(make(wv, {k, n}));
  std::vector<float> we;
  for (size_t i = 0; i < b; ++i) we.insert(we.end(), wv.begin(), wv.end());
  expect_close(values(c), naive(values(a), we, b, m, n, k), 1e-5);
}

// ---- dtypes, sizes, empty dims ---------------------------------------------------------

TEST(MatmulDType, BatchedEveryFloatDType) {
  const size_t b = 5, m = 13, k = 37, n = 19;
  auto av = rand_vec(b * m * k, 22), bv = rand_vec(b * k * n, 23);
  for (DType dt : kFloatDTypes) {
    Tensor a = make(av, {b, m, k}, dt), bb = make(bv, {b, k, n}, dt);
    Tensor c = a.matmul(bb);
    EXPECT_EQ(c.dtype(), dt);
    SCOPED_TRACE(std::string(dtype_name(dt)));
    expect_close(values(c), naive(values(a), values(bb), b, m, n, k), tol_for(dt));
  }
}

TEST(MatmulDType, HalfTypesAccumulateInF32) {
  // a sum of 4096 ones: f16 accumulation would stop at 2048, bf16 at 256
  for (DType dt : {DType::F16, DType::BF16}) {
    Tensor a = Tensor::ones({1, 4096}, dt, dev()), b = Tensor::ones({4096, 1}, dt, dev());
    EXPECT_EQ(values(a.matmul(b)), std::vector<double>{4096.0}) << dtype_name(dt);
  }
}

TEST(MatmulDType, HalfOutputRoundingMatchesDType) {
  // outer products of exact f32 products: the f32 -> f16/bf16 rounding of the output must
  // give the bits of f16::from_f32 / bf16::from_f32, including subnormal results and overflow
  std::mt19937 gen(50);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  for (DType dt : {DType::F16, DType::BF16}) {
    const int emax = dt == DType::F16 ? 9 : 60;
    std::uniform_int_distribution<int> expo(-emax, emax);
    std::vector<float> av(64), bv(64);
    for (size_t i = 0; i < 64; ++i) {
      av[i] = std::ldexp(mant(gen), expo(gen)) * (i % 3 == 0 ? -1.0f : 1.0f);
      bv[i] = std::ldexp(mant(gen), expo(gen)) * (i % 5 == 0 ? -1.0f : 1.0f);
    }
    Tensor a = make(av, {64, 1}, dt), b = make(bv, {1, 64}, dt);
    Tensor c = a.matmul(b);
    auto ar = a.to_dtype(DType::F32).flatten_to_vec<float>(),
         br = b.to_dtype(DType::F32).flatten_to_vec<float>();
    std::vector<uint16_t> got;
    if (dt == DType::F16) {
      for (f16 h : c.flatten_to_vec<f16>()) got.push_back(h.bits);
    } else {
      for (bf16 h : c.flatten_to_vec<bf16>()) got.push_back(h.bits);
    }
    size_t special = 0;
    for (size_t i = 0; i < 64; ++i)
      for (size_t j = 0; j < 64; ++j) {
        float p = ar[i] * br[j];
        uint16_t want = dt == DType::F16 ? f16::from_f32(p) : bf16::from_f32(p);
        if ((want & 0x7c00) == 0x7c00 || (want & 0x7c00) == 0) ++special;
        ASSERT_EQ(got[i * 64 + j], want) << dtype_name(dt) << " " << ar[i] << " * " << br[j];
      }
    if (dt == DType::F16) {
      EXPECT_GT(special, 100u) << "the inputs should reach inf and subnormal results";
    }
  }
}

TEST(MatmulDType, NanAndInfPropagate) {
  for (DType dt : kFloatDTypes) {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    Tensor a = make({1, nan, 2, 3}, {2, 2}, dt), b = make({1, 0, 0, 1}, {2, 2}, dt);
    auto c = values(a.matmul(b));
    EXPECT_TRUE(std::isnan(c[0]) && std::isnan(c[1])) << dtype_name(dt);
    EXPECT_EQ(c[2], 2.0);
    EXPECT_EQ(c[3], 3.0);
    if (dt == DType::F8E4M3) continue;  // no infinities
    Tensor d = make({inf, 1}, {1, 2}, dt), e = make({2, 1}, {2, 1}, dt);
    EXPECT_EQ(values(d.matmul(e)), std::vector<double>{std::numeric_limits<double>::infinity()})
        << dtype_name(dt);
  }
}

TEST(MatmulDType, HalfTypesOverSeveralKPanels) {
  // (m + n) * k above the conversion panel size: K is converted in two passes
  const size_t m = 2, k = 1100, n = 8192;
  auto av = rand_vec(m * k, 24), bv = rand_vec(k * n, 25);
  for (DType dt : {DType::BF16, DType::F16}) {
    Tensor a = make(av, {m, k}, dt), b = make(bv, {k, n}, dt);
    SCOPED_TRACE(std::string(dtype_name(dt)));
    // |sum| of 1100 products of [-1, 1] values stays ~< 30: absolute error from the output rounding
    expect_close(values(a.matmul(b)), naive(values(a), values(b), 1, m, n, k),
                 dt == DType::BF16 ? 0.25 : 0.03);
  }
}

TEST(MatmulDType, IntegerDTypesAreUnsupported) {
  for (DType dt : {DType::U8, DType::U32, DType::I16, DType::I32, DType::I64}) {
    Tensor a = Tensor::ones({2, 2}, dt, dev());
    expect_error([&] { a.matmul(a); }, ErrorKind::UnsupportedOp, "matmul");
    expect_error([&] { a.broadcast_matmul(a); }, ErrorKind::UnsupportedOp, "broadcast_matmul");
    Tensor v = Tensor::ones({2}, dt, dev());
    expect_error([&] { v.dot(v); }, ErrorKind::UnsupportedOp, "dot");
    expect_error([&] { a.mv(v); }, ErrorKind::UnsupportedOp, "mv");
  }
}

TEST(MatmulDType, LargerF32AndF64) {
  const size_t m = 131, k = 257, n = 65;
  auto av = rand_vec(m * k, 26), bv = rand_vec(k * n, 27);
  expect_close(values(make(av, {m, k}).matmul(make(bv, {k, n}))), naive(av, bv, 1, m, n, k), 1e-5);
  expect_close(values(make(av, {m, k}, DType::F64).matmul(make(bv, {k, n}, DType::F64))),
               naive(av, bv, 1, m, n, k), 1e-12);
}

TEST(MatmulEmpty, ZeroM) {
  Tensor c = Tensor::zeros({0, 3}, DType::F32, dev()).matmul(Tensor::ones({3, 4}, DType::F32, dev()));
  EXPECT_EQ(c.shape(), Shape({0, 4}));
}

TEST(MatmulEmpty, ZeroN) {
  Tensor c = Tensor::ones({2, 3}, DType::F32, dev()).matmul(Tensor::zeros({3, 0}, DType::F32, dev()));
  EXPECT_EQ(c.shape(), Shape({2, 0}));
}

TEST(MatmulEmpty, ZeroKGivesZeros) {
  for (DType dt : kFloatDTypes) {
    Tensor c = Tensor::zeros({2, 0}, dt, dev()).matmul(Tensor::zeros({0, 3}, dt, dev()));
    EXPECT_EQ(c.shape(), Shape({2, 3}));
    EXPECT_EQ(c.dtype(), dt);
    EXPECT_EQ(values(c), std::vector<double>(6, 0.0));
  }
  Tensor d = Tensor::zeros({0}, DType::F32, dev()).dot(Tensor::zeros({0}, DType::F32, dev()));
  EXPECT_EQ(d.to_scalar<float>(), 0.0f);
}

TEST(MatmulEmpty, ZeroBatch) {
  Tensor c = Tensor::zeros({0, 2, 3}, DType::F32, dev()).matmul(Tensor::zeros({0, 3, 4}, DType::F32, dev()));
  EXPECT_EQ(c.shape(), Shape({0, 2, 4}));
}

TEST(MatmulOps, DotAndMvWithStridedOperands) {
  std::vector<float> v{1, 9, 2, 9, 3, 9};  // every other element: [1, 2, 3]
  Tensor s = Tensor::from_vec(v, {6}, dev());
  Tensor x = view(s, Layout(Shape{3}, {2}, 0));
  Tensor y = Tensor::from_vec(std::vector<float>{4, 5, 6}, {3}, dev());
  EXPECT_EQ(x.dot(y).to_scalar<float>(), 32.0f);
  EXPECT_EQ(y.dot(x).to_scalar<float>(), 32.0f);
  Tensor m23 = Tensor::from_vec(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}, dev());
  EXPECT_EQ(test_util::transposed_copy_view(m23).mv(x).to_vec1<float>(), (std::vector<float>{14, 32}));
  EXPECT_EQ(test_util::offset_view(m23).mv(y).to_vec1<float>(), (std::vector<float>{32, 77}));
}

// ---- errors ------------------------------------------------------------------------------

TEST(MatmulErrors, ShapeMismatch) {
  Tensor a = Tensor::zeros({2, 3}, DType::F32, dev()), b = Tensor::zeros({4, 5}, DType::F32, dev());
  expect_error([&] { a.matmul(b); }, ErrorKind::ShapeMismatch,
               "shape mismatch in matmul, lhs: [2, 3], rhs: [4, 5]");
  Tensor v = Tensor::zeros({3}, DType::F32, dev());
  expect_error([&] { v.matmul(v); }, ErrorKind::ShapeMismatch,
               "shape mismatch in matmul, lhs: [3], rhs: [3]");
  Tensor b3 = Tensor::zeros({2, 3, 4}, DType::F32, dev());
  expect_error([&] { a.matmul(b3); }, ErrorKind::ShapeMismatch,
               "shape mismatch in matmul, lhs: [2, 3], rhs: [2, 3, 4]");
  // equal batch products but different batch dims
  Tensor l = Tensor::zeros({2, 3, 2, 2}, DType::F32, dev()),
         r = Tensor::zeros({3, 2, 2, 2}, DType::F32, dev());
  expect_error([&] { l.matmul(r); }, ErrorKind::ShapeMismatch, "shape mismatch in matmul");
}

TEST(MatmulErrors, BroadcastShapeMismatch) {
  Tensor a = Tensor::zeros({2, 3, 4}, DType::F32, dev()), b = Tensor::zeros({3, 5, 2}, DType::F32, dev());
  expect_error([&] { a.broadcast_matmul(b); }, ErrorKind::ShapeMismatch, "broadcast_matmul");
  Tensor c = Tensor::zeros({3, 4, 2}, DType::F32, dev());
  expect_error([&] { a.broadcast_matmul(c); }, ErrorKind::ShapeMismatch, "broadcast_matmul");
}

TEST(MatmulErrors, DTypeMismatch) {
  Tensor a = Tensor::zeros({2, 2}, DType::F32, dev()), b = Tensor::zeros({2, 2}, DType::F64, dev());
  expect_error([&] { a.matmul(b); }, ErrorKind::DTypeMismatch, "matmul");
}

TEST(MatmulErrors, DotAndMvShapes) {
  Tensor v3 = Tensor::zeros({3}, DType::F32, dev()), v4 = Tensor::zeros({4}, DType::F32, dev());
  Tensor m23 = Tensor::zeros({2, 3}, DType::F32, dev());
  expect_error([&] { v3.dot(v4); }, ErrorKind::ShapeMismatch, "shape mismatch in dot, lhs: [3], rhs: [4]");
  expect_error([&] { m23.dot(m23); }, ErrorKind::ShapeMismatch, "shape mismatch in dot");
  expect_error([&] { m23.mv(v4); }, ErrorKind::ShapeMismatch, "shape mismatch in mv, lhs: [2, 3], rhs: [4]");
  expect_error([&] { v3.mv(v3); }, ErrorKind::ShapeMismatch, "shape mismatch in mv");
}

TEST(MatmulErrors, BlasName) {
  std::string name = blas_name();
  EXPECT_TRUE(name == "openblas" || name == "builtin") << name;
}

// ---- the built-in GEMM -------------------------------------------------------------------

namespace {
template <typename T>
void check_builtin(size_t m, size_t n, size_t k, bool trans_a, bool trans_b, bool accumulate, double tol) {
  auto av = rand_vec(m * k, uint32_t(m * 7 + k)), bv = rand_vec(k * n, uint32_t(n * 5 + k)),
       cv = rand_vec(m * n, 3);
  std::vector<T> a(av.begin(), av.end()), b(bv.begin(), bv.end());
  // transposed operands are stored column-major
  std::vector<T> as(m * k), bs(k * n);
  for (size_t i = 0; i < m; ++i)
    for (size_t p = 0; p < k; ++p) as[trans_a ? p * m + i : i * k + p] = a[i * k + p];
  for (size_t p = 0; p < k; ++p)
    for (size_t j = 0; j < n; ++j) bs[trans_b ? j * k + p : p * n + j] = b[p * n + j];
  cpu::MatRef<T> ar{as.data(), trans_a ? 1 : k, trans_a ? m : 1};
  cpu::MatRef<T> br{bs.data(), trans_b ? 1 : n, trans_b ? k : 1};
  const size_t ldc = n + 2;  // a leading dimension wider than the row
  std::vector<T> c(m * ldc, T(-7));
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j)
      c[i * ldc + j] = accumulate ? T(cv[i * n + j]) : std::numeric_limits<T>::quiet_NaN();
  cpu::gemm_builtin(m, n, k, ar, br, c.data(), ldc, accumulate);
  auto want = naive(av, bv, 1, m, n, k);
  for (size_t i = 0; i < m; ++i) {
    for (size_t j = 0; j < n; ++j) {
      double w = want[i * n + j] + (accumulate ? double(T(cv[i * n + j])) : 0.0);
      ASSERT_NEAR(double(c[i * ldc + j]), w, tol) << m << "x" << n << "x" << k << " at " << i << "," << j;
    }
    for (size_t j = n; j < ldc; ++j) ASSERT_EQ(c[i * ldc + j], T(-7)) << "wrote past the row at " << i;
  }
}
}  // namespace

TEST(GemmBuiltin, OddSizesAgainstNaiveF32) {
  const size_t sizes[][3] = {{1, 1, 1}, {7, 13, 5}, {65, 129, 33}, {300, 200, 100}};
  for (auto& s : sizes)
    for (int t = 0; t < 4; ++t)
      check_builtin<float>(s[0], s[1], s[2], t & 1, t & 2, false, 1e-5 * std::sqrt(double(s[2])) + 1e-6);
}

TEST(GemmBuiltin, OddSizesAgainstNaiveF64) {
  const size_t sizes[][3] = {{1, 1, 1}, {7, 13, 5}, {65, 129, 33}, {300, 200, 100}};
  for (auto& s : sizes)
    for (int t = 0; t < 4; ++t) check_builtin<double>(s[0], s[1], s[2], t & 1, t & 2, false, 1e-12);
}

TEST(GemmBuiltin, Accumulates) {
  check_builtin<float>(33, 47, 300, false, false, true, 1e-4);
  check_builtin<double>(33, 47, 300, true, false, true, 1e-12);
}

TEST(GemmBuiltin, LargeKAndNPanels) {
  // several K panels and more than one N panel of the packed B
  check_builtin<float>(9, 4100, 600, false, true, false, 1e-4);
}

TEST(GemmBuiltin, ZeroK) {
  std::vector<float> c(6, std::numeric_limits<float>::quiet_NaN());
  cpu::gemm_builtin(2, 3, 0, cpu::MatRef<float>{nullptr, 0, 1}, cpu::MatRef<float>{nullptr, 3, 1}, c.data(),
                    3, false);
  EXPECT_EQ(c, std::vector<float>(6, 0.0f));
}

TEST(GemmBuiltin, StrideZeroAndGeneralStrides) {
  // A: one row broadcast (row stride 0); B: every other column of a wider matrix
  const size_t m = 5, k = 9, n = 7;
  auto row = rand_vec(k, 30), wide = rand_vec(k * 2 * n, 31);
  std::vector<float> c(m * n);
  cpu::gemm_builtin(m, n, k, cpu::MatRef<float>{row.data(), 0, 1}, cpu::MatRef<float>{wide.data(), 2 * n, 2},
                    c.data(), n, false);
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j) {
      double s = 0;
      for (size_t p = 0; p < k; ++p) s += double(row[p]) * double(wide[p * 2 * n + 2 * j]);
      ASSERT_NEAR(c[i * n + j], s, 1e-5);
    }
}

// ---- determinism ---------------------------------------------------------------------------

namespace {
template <typename Fn>
void expect_same_for_thread_counts(Fn&& fn) {
  set_num_threads(1);
  auto r1 = fn();
  set_num_threads(2);
  auto r2 = fn();
  set_num_threads(3);
  auto r3 = fn();
  set_num_threads(0);
  ASSERT_EQ(r1.size(), r2.size());
  EXPECT_EQ(std::memcmp(r1.data(), r2.data(), r1.size() * sizeof(r1[0])), 0) << "1 vs 2 threads";
  EXPECT_EQ(std::memcmp(r1.data(), r3.data(), r1.size() * sizeof(r1[0])), 0) << "1 vs 3 threads";
}
}  // namespace

TEST(MatmulDeterminism, F32AndF64SameBytesForAnyThreadCount) {
  // 333x777x1111 is a shape where OpenBLAS's own threading changes the last bits
  const size_t m = 333, k = 1111, n = 777;
  auto av = rand_vec(m * k, 40), bv = rand_vec(k * n, 41);
  for (DType dt : {DType::F32, DType::F64}) {
    Tensor a = make(av, {m, k}, dt), b = make(bv, {k, n}, dt);
    expect_same_for_thread_counts([&] { return a.matmul(b).to_dtype(DType::F64).flatten_to_vec<double>(); });
  }
  // one tile (m, n < 256) but big enough for OpenBLAS to thread a call by itself
  auto cv = rand_vec(255 * 2000, 48), dv = rand_vec(2000 * 249, 49);
  Tensor c = make(cv, {255, 2000}), d = make(dv, {2000, 249});
  expect_same_for_thread_counts([&] { return c.matmul(d).flatten_to_vec<float>(); });
}

TEST(MatmulDeterminism, HalfTypesAndBatchesSameBytes) {
  auto av = rand_vec(300 * 500, 42), bv = rand_vec(500 * 260, 43);
  for (DType dt : {DType::BF16, DType::F16}) {
    Tensor a = make(av, {300, 500}, dt), b = make(bv, {500, 260}, dt);
    expect_same_for_thread_counts([&] { return values(a.matmul(b)); });
  }
  // many small matrices: parallel over the batch
  auto sv = rand_vec(64 * 24 * 40, 44), tv = rand_vec(64 * 40 * 24, 45);
  Tensor s = make(sv, {64, 24, 40}), t = make(tv, {64, 40, 24});
  expect_same_for_thread_counts([&] { return values(s.matmul(t)); });
}

TEST(MatmulDeterminism, BuiltinGemmSameBytes) {
  const size_t m = 300, k = 400, n = 520;
  auto av = rand_vec(m * k, 46), bv = rand_vec(k * n, 47);
  expect_same_for_thread_counts([&] {
    std::vector<float> c(m * n);
    cpu::gemm_builtin(m, n, k, cpu::MatRef<float>{av.data(), k, 1}, cpu::MatRef<float>{bv.data(), n, 1},
                      c.data(), n, false);
    return c;
  });
}

// ctest runs each test in its own process, so this is the process's first GEMM: OpenBLAS
// 0.3.21 rounded a process's first large multi-threaded sgemm differently from every later
// call (cpu::gemm now makes a tiny call first).
TEST(MatmulFirstCall, FirstCallOfTheProcessEqualsLaterCalls) {
  candle::set_num_threads(2);
  Tensor a = Tensor::randn(0.0, 1.0, {48, 432}, DType::F32, Device::cpu());
  Tensor b = Tensor::randn(0.0, 1.0, {432, 700}, DType::F32, Device::cpu());
  std::vector<float> first = a.matmul(b).flatten_to_vec<float>();
  std::vector<float> second = a.matmul(b).flatten_to_vec<float>();
  EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)), 0);
}

// Conv tiles rely on this: each element's bits do not depend on n or its column's position,
// also below OpenBLAS's small-matrix size (m*n*k <= 10^6).
TEST(MatmulFirstCall, GemmTileExactDoesNotDependOnTheColumnCount) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  const size_t m = 64, k = 64, nmax = 300;
  std::vector<float> a(m * k), b(k * nmax);
  for (auto& v : a) v = nd(rng);
  for (auto& v : b) v = nd(rng);
  std::vector<float> ref(m * nmax);
  candle::cpu::gemm_tile_exact(m, nmax, k, {a.data(), k, 1}, {b.data(), nmax, 1}, ref.data(), nmax, false);
  for (size_t off : {0, 3, 17}) {
    for (size_t n : {1, 8, 9, 31, 64, 200}) {
      std::vector<float> c(m * n);
      candle::cpu::gemm_tile_exact(m, n, k, {a.data(), k, 1}, {b.data() + off, nmax, 1}, c.data(), n, false);
      size_t diff = 0;
      for (size_t i = 0; i < m; ++i)
        for (size_t j = 0; j < n; ++j) diff += std::memcmp(&c[i * n + j], &ref[i * nmax + off + j], 4) != 0;
      EXPECT_EQ(diff, 0u) << "n " << n << " offset " << off << " (GEMM " << candle::blas_name() << ")";
      // the built-in GEMM (Winograd's small layers) has the same property
      std::vector<float> cb(m * n), rb(m * nmax);
      candle::cpu::gemm_builtin(m, nmax, k, {a.data(), k, 1}, {b.data(), nmax, 1}, rb.data(), nmax, false);
      candle::cpu::gemm_builtin(m, n, k, {a.data(), k, 1}, {b.data() + off, nmax, 1}, cb.data(), n, false);
      size_t diff_b = 0;
      for (size_t i = 0; i < m; ++i)
        for (size_t j = 0; j < n; ++j) diff_b += std::memcmp(&cb[i * n + j], &rb[i * nmax + off + j], 4) != 0;
      EXPECT_EQ(diff_b, 0u) << "built-in GEMM, n " << n << " offset " << off;
    }
  }
}

// ---- the built-in GEMM's bits per ISA ------------------------------------------------------

namespace {
// The ISAs this CPU runs, each made current in turn (restored to the default afterwards).
std::vector<cpu::CpuIsa> supported_isas() {
  std::vector<cpu::CpuIsa> v;
  for (cpu::CpuIsa isa : {cpu::CpuIsa::Sse, cpu::CpuIsa::Avx2, cpu::CpuIsa::Avx512})
    if (cpu::cpu_isa_supported(isa)) v.push_back(isa);
  return v;
}

struct IsaRestore {
  cpu::CpuIsa saved = cpu::cpu_isa();
  ~IsaRestore() { cpu::set_cpu_isa(saved); }
};
}  // namespace

// What convolutions rely on (tiled == untiled): element (i, j) of C depends only on row i of A,
// column j of B and k. Sub-products (rows [r0, r0 + m), columns [off, off + n)) must equal the
// full product's block bit for bit, for every kernel path: row counts that pick different
// micro-kernels and partial edge tiles, k over several K panels, accumulate, a packed A, and
// 1 vs 3 threads.
template <typename T>
void expect_sub_products_same_bits() {
  IsaRestore restore;
  const size_t mmax = 70, nmax = 300;
  auto conv = [](const std::vector<float>& v) { return std::vector<T>(v.begin(), v.end()); };
  for (cpu::CpuIsa isa : supported_isas()) {
    cpu::set_cpu_isa(isa);
    for (size_t k : {1, 64, 257, 600}) {
      auto a = conv(rand_vec(mmax * k, uint32_t(k))), b = conv(rand_vec(k * nmax, uint32_t(k + 1))),
           c0 = conv(rand_vec(mmax * nmax, 5));
      for (bool acc : {false, true}) {
        std::vector<T> ref = c0;
        set_num_threads(3);
        cpu::gemm_tile_exact(mmax, nmax, k, {a.data(), k, 1}, {b.data(), nmax, 1}, ref.data(), nmax, acc);
        set_num_threads(1);
        for (size_t m : {1, 3, 4, 6, 7, 8, 13, 32, 64}) {
          const size_t r0 = mmax - m;  // the last rows: a sub-block that does not start at 0
          const cpu::PackedA<T> pa = cpu::pack_a(m, k, {a.data() + r0 * k, k, 1});
          for (size_t off : {0, 3, 17}) {
            for (size_t n : {1, 5, 16, 31, 200}) {
              std::vector<T> c(m * n), cp(m * n);
              for (size_t i = 0; i < m; ++i)
                for (size_t j = 0; j < n; ++j) c[i * n + j] = cp[i * n + j] = c0[(r0 + i) * nmax + off + j];
              const cpu::MatRef<T> bs{b.data() + off, nmax, 1};
              cpu::gemm_tile_exact(m, n, k, {a.data() + r0 * k, k, 1}, bs, c.data(), n, acc);
              cpu::gemm_tile_exact(pa, n, bs, cp.data(), n, acc);
              size_t diff = 0, diff_p = 0;
              for (size_t i = 0; i < m; ++i)
                for (size_t j = 0; j < n; ++j) {
                  diff += std::memcmp(&c[i * n + j], &ref[(r0 + i) * nmax + off + j], sizeof(T)) != 0;
                  diff_p += std::memcmp(&cp[i * n + j], &ref[(r0 + i) * nmax + off + j], sizeof(T)) != 0;
                }
              ASSERT_EQ(diff, 0u) << cpu::cpu_isa_name(isa) << " m " << m << " n " << n << " k " << k
                                  << " off " << off << " acc " << acc;
              ASSERT_EQ(diff_p, 0u) << "packed A, " << cpu::cpu_isa_name(isa) << " m " << m << " n " << n
                                    << " k " << k << " off " << off << " acc " << acc;
            }
          }
        }
      }
    }
  }
  set_num_threads(0);
}

TEST(GemmTileExact, EveryIsaEveryKernelPathSameBitsF32) { expect_sub_products_same_bits<float>(); }
TEST(GemmTileExact, EveryIsaEveryKernelPathSameBitsF64) { expect_sub_products_same_bits<double>(); }

// Transposed and strided operands go through other packing paths: same bits as dense ones.
TEST(GemmTileExact, EveryIsaOperandLayoutsSameBits) {
  IsaRestore restore;
  const size_t m = 29, n = 45, k = 300;
  auto a = rand_vec(m * k, 11), b = rand_vec(k * n, 12);
  std::vector<float> at(k * m), bt(n * k), bw(k * 2 * n);
  for (size_t i = 0; i < m; ++i)
    for (size_t p = 0; p < k; ++p) at[p * m + i] = a[i * k + p];
  for (size_t p = 0; p < k; ++p)
    for (size_t j = 0; j < n; ++j) bt[j * k + p] = bw[p * 2 * n + 2 * j] = b[p * n + j];
  for (cpu::CpuIsa isa : supported_isas()) {
    cpu::set_cpu_isa(isa);
    std::vector<float> ref(m * n), c1(m * n), c2(m * n);
    cpu::gemm_tile_exact(m, n, k, {a.data(), k, 1}, {b.data(), n, 1}, ref.data(), n, false);
    cpu::gemm_tile_exact(m, n, k, {at.data(), 1, m}, {bt.data(), 1, k}, c1.data(), n, false);
    cpu::gemm_tile_exact(m, n, k, {at.data(), 1, m}, {bw.data(), 2 * n, 2}, c2.data(), n, false);
    EXPECT_EQ(std::memcmp(ref.data(), c1.data(), ref.size() * 4), 0)
        << cpu::cpu_isa_name(isa) << " transposed";
    EXPECT_EQ(std::memcmp(ref.data(), c2.data(), ref.size() * 4), 0) << cpu::cpu_isa_name(isa) << " strided";
  }
}

TEST(GemmTileExact, IsaSelection) {
  IsaRestore restore;
  EXPECT_TRUE(cpu::cpu_isa_supported(cpu::CpuIsa::Sse));
  EXPECT_TRUE(cpu::cpu_isa_supported(cpu::cpu_isa()));
  for (cpu::CpuIsa isa : {cpu::CpuIsa::Sse, cpu::CpuIsa::Avx2, cpu::CpuIsa::Avx512}) {
    if (cpu::cpu_isa_supported(isa)) {
      cpu::set_cpu_isa(isa);
      EXPECT_EQ(cpu::cpu_isa(), isa);
      EXPECT_EQ(std::string(cpu::gemm_builtin_kernel_name()).rfind(cpu::cpu_isa_name(isa), 0), 0u)
          << cpu::gemm_builtin_kernel_name();
    } else {
      EXPECT_THROW(cpu::set_cpu_isa(isa), Error) << cpu::cpu_isa_name(isa);
    }
  }
  // the default: CANDLE_CPU_ISA when set (tools/ci-isa-check.sh), else the best this CPU has
  if (const char* env = std::getenv("CANDLE_CPU_ISA")) {
    EXPECT_STREQ(cpu::cpu_isa_name(restore.saved), env);
  } else {
    cpu::CpuIsa best = cpu::CpuIsa::Sse;
    for (cpu::CpuIsa isa : supported_isas()) best = isa;
    EXPECT_EQ(restore.saved, best);
  }
}

// The ISAs differ in their bits (FMA or not), but every one computes the product.
TEST(GemmTileExact, EveryIsaAgainstNaive) {
  IsaRestore restore;
  const size_t m = 37, n = 53, k = 700;
  auto a = rand_vec(m * k, 21), b = rand_vec(k * n, 22);
  auto want = naive(a, b, 1, m, n, k);
  for (cpu::CpuIsa isa : supported_isas()) {
    cpu::set_cpu_isa(isa);
    std::vector<float> c(m * n);
    std::vector<double> cd(m * n);
    std::vector<double> ad(a.begin(), a.end()), bd(b.begin(), b.end());
    cpu::gemm_tile_exact(m, n, k, {a.data(), k, 1}, {b.data(), n, 1}, c.data(), n, false);
    cpu::gemm_tile_exact(m, n, k, {ad.data(), k, 1}, {bd.data(), n, 1}, cd.data(), n, false);
    for (size_t i = 0; i < m * n; ++i) {
      ASSERT_NEAR(c[i], want[i], 1e-4) << cpu::cpu_isa_name(isa) << " f32 at " << i;
      ASSERT_NEAR(cd[i], want[i], 1e-11) << cpu::cpu_isa_name(isa) << " f64 at " << i;
    }
  }
}
