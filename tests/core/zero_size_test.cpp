// Zero-size dims: every op of include/candle/tensor.h on tensors with a dim of size 0. Each
// test asserts the result's shape (and values where there are any) and that nothing crashes;
// the few cases that have no answer (max/min/arg over an empty reduced dim) throw candle::Error.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "candle/candle.h"
#include "candle/display.h"
#include "candle/io/safetensors.h"
#include "test_util.h"

using namespace candle;

namespace {

const Device& dev() {
  static Device d = Device::cpu();
  return d;
}

using Dims = std::vector<size_t>;
using F1 = std::vector<float>;
using F2 = std::vector<std::vector<float>>;

Tensor empty_f32(const Shape& s) { return Tensor::zeros(s, DType::F32, dev()); }

// [2, 3] = [[0, 1, 2], [3, 4, 5]]
Tensor small() { return Tensor::arange(0.f, 6.f, dev()).reshape({2, 3}); }

// An empty [4, 0] view into a non-empty storage at a non-zero offset.
Tensor empty_view() { return Tensor::arange(0.f, 8.f, dev()).reshape({4, 2}).narrow(1, 1, 0); }

void expect_dims(const Tensor& t, const Dims& want) {
  EXPECT_EQ(t.dims(), want);
  EXPECT_EQ(t.elem_count(), Shape(want).elem_count());
}

}  // namespace

// ---- creation ------------------------------------------------------------------------------------

TEST(ZeroSize, Creation) {
  for (DType dt : kAllDTypes) {
    expect_dims(Tensor::zeros({0, 3}, dt, dev()), {0, 3});
    expect_dims(Tensor::ones({3, 0}, dt, dev()), {3, 0});
    expect_dims(Tensor::full(Scalar(7), {2, 0, 4}, dt, dev()), {2, 0, 4});
    expect_dims(Tensor::zeros({0}, dt, dev()).ones_like(), {0});
    expect_dims(Tensor::zeros({0}, dt, dev()).zeros_like(), {0});
    expect_dims(Tensor::zeros({0, 2}, dt, dev()).full_like(Scalar(3)), {0, 2});
  }
  expect_dims(Tensor::full(2.5f, {0, 4}, dev()), {0, 4});
  expect_dims(Tensor::from_vec(std::vector<float>{}, {0, 5}, dev()), {0, 5});
  expect_dims(Tensor::from_raw_buffer({}, DType::F16, {3, 0}, dev()), {3, 0});
  expect_dims(Tensor::rand(0.f, 1.f, {0, 3}, dev()), {0, 3});
  expect_dims(Tensor::randn(0.0, 1.0, {4, 0}, dev()), {4, 0});
  expect_dims(empty_f32({0, 3}).rand_like(0, 1), {0, 3});
  expect_dims(empty_f32({0, 3}).randn_like(0, 1), {0, 3});
  expect_dims(Tensor::arange(5.f, 5.f, dev()), {0});
  expect_dims(Tensor::arange_step<int64_t>(0, 5, -1, dev()), {0});
  expect_dims(Tensor::eye(0, DType::F32, dev()), {0, 0});
  expect_dims(Tensor::tril2(0, DType::F32, dev()), {0, 0});
  expect_dims(Tensor::triu2(0, DType::U8, dev()), {0, 0});
  auto grids = Tensor::meshgrid({Tensor::new_({1.f, 2.f}, dev()), empty_f32({0})}, true);
  ASSERT_EQ(grids.size(), 2u);
  expect_dims(grids[0], {0, 2});
  expect_dims(grids[1], {0, 2});
}

TEST(ZeroSize, ReadingOutValues) {
  Tensor t = empty_f32({0, 3});
  EXPECT_TRUE(t.to_vec2<float>().empty());
  EXPECT_EQ(empty_f32({3, 0}).to_vec2<float>(), (F2{{}, {}, {}}));
  EXPECT_TRUE(empty_f32({0}).to_vec1<float>().empty());
  EXPECT_TRUE(empty_f32({2, 0, 3}).to_vec3<float>()[1].empty());
  EXPECT_TRUE(empty_view().flatten_to_vec<float>().empty());
  EXPECT_THROW(t.to_scalar<float>(), Error);
}

// ---- shape ops -------------------------------------------------------------------------------------

TEST(ZeroSize, ReshapeSqueezeFlatten) {
  Tensor t = empty_f32({2, 0, 3});
  expect_dims(t.reshape({0, 6}), {0, 6});
  expect_dims(t.reshape({0}), {0});
  expect_dims(t.reshape({3, 0, 1}), {3, 0, 1});
  EXPECT_THROW(t.reshape({2, 3}), Error);
  expect_dims(empty_view().reshape({0, 4}), {0, 4});
  expect_dims(t.unsqueeze(0), {1, 2, 0, 3});
  expect_dims(t.unsqueeze(3), {2, 0, 3, 1});
  expect_dims(t.unsqueeze(0).squeeze(0), {2, 0, 3});
  expect_dims(t.squeeze(1), {2, 0, 3});  // a size-0 dim is not squeezed
  expect_dims(t.flatten_all(), {0});
  expect_dims(t.flatten(0, 1), {0, 3});
  expect_dims(t.flatten_to(1), {0, 3});
  expect_dims(t.flatten_from(1), {2, 0});
}

TEST(ZeroSize, TransposePermuteNarrow) {
  Tensor t = empty_f32({2, 0, 3});
  expect_dims(t.t(), {2, 3, 0});
  expect_dims(t.transpose(0, 1), {0, 2, 3});
  expect_dims(t.permute({2, 0, 1}), {3, 2, 0});
  expect_dims(t.narrow(2, 1, 2), {2, 0, 2});
  expect_dims(t.narrow(1, 0, 0), {2, 0, 3});
  EXPECT_THROW(t.narrow(1, 0, 1), Error);
  expect_dims(small().narrow(1, 3, 0), {2, 0});
  EXPECT_TRUE(t.chunk(2, 1).empty());  // candle: one chunk per element when size < chunks
  auto parts = t.chunk(2, 2);
  ASSERT_EQ(parts.size(), 2u);
  expect_dims(parts[0], {2, 0, 2});
  expect_dims(parts[1], {2, 0, 1});
  expect_dims(t.get(1), {0, 3});
  expect_dims(t.get_on_dim(2, 2), {2, 0});
  EXPECT_THROW(t.get_on_dim(1, 0), Error);
}

TEST(ZeroSize, BroadcastRepeatExpand) {
  Tensor row = Tensor::new_({{1.f, 2.f, 3.f}}, dev());
  expect_dims(row.broadcast_as({0, 3}), {0, 3});
  expect_dims(row.expand({4, 0, 3}), {4, 0, 3});
  expect_dims(empty_f32({0, 3}).broadcast_left({5}), {5, 0, 3});
  expect_dims(row.broadcast_left({0}), {0, 1, 3});
  EXPECT_THROW(empty_f32({0, 3}).broadcast_as({2, 3}), Error);
  expect_dims(empty_f32({0, 3}).broadcast_as({4, 0, 3}), {4, 0, 3});
  expect_dims(empty_f32({0, 3}).repeat({3, 2}), {0, 6});
  expect_dims(small().repeat({0, 1}), {0, 3});
}

TEST(ZeroSize, CatAndStack) {
  Tensor a = small();
  Tensor e0 = empty_f32({0, 3});
  EXPECT_EQ(Tensor::cat({e0, a, e0}, 0).to_vec2<float>(), (F2{{0, 1, 2}, {3, 4, 5}}));
  EXPECT_EQ(Tensor::cat({empty_f32({2, 0}), a, empty_view().narrow(0, 0, 2)}, 1).to_vec2<float>(),
            (F2{{0, 1, 2}, {3, 4, 5}}));
  expect_dims(Tensor::cat({e0, e0}, 0), {0, 3});
  expect_dims(Tensor::cat({e0, e0}, 1), {0, 6});
  expect_dims(Tensor::cat({e0.t(), e0.t()}, 0), {6, 0});
  expect_dims(Tensor::stack({e0, e0}, 0), {2, 0, 3});
  expect_dims(Tensor::stack({e0, e0}, 2), {0, 3, 2});
  EXPECT_THROW(Tensor::cat({e0, empty_f32({0, 2})}, 0), Error);
}

TEST(ZeroSize, PadRollFlipUnfold) {
  Tensor e = empty_f32({0, 3});
  expect_dims(e.pad_with_zeros(1, 1, 2), {0, 6});
  EXPECT_EQ(e.pad_with_zeros(0, 1, 1).to_vec2<float>(), (F2{{0, 0, 0}, {0, 0, 0}}));
  expect_dims(empty_f32({2, 0}).pad_with_zeros(1, 1, 0), {2, 1});
  // candle refuses pad_with_same on any empty tensor (there is no edge value to repeat)
  EXPECT_THROW(e.pad_with_same(1, 1, 1), Error);
  EXPECT_THROW(e.pad_with_same(0, 1, 1), Error);
  EXPECT_THROW(empty_f32({2, 0}).pad_with_same(1, 0, 1), Error);
  expect_dims(e.pad_with_same(0, 0, 0), {0, 3});
  expect_dims(e.roll(1, 0), {0, 3});  // candle divides by the dim size here (a panic)
  expect_dims(e.roll(-2, 1), {0, 3});
  expect_dims(e.flip({0, 1}), {0, 3});
  expect_dims(e.unfold(1, 2, 1), {0, 2, 2});
  expect_dims(empty_f32({2, 0}).unfold(1, 0, 1), {2, 1, 0});
  EXPECT_THROW(empty_f32({2, 0}).unfold(1, 1, 1), Error);
}

TEST(ZeroSize, ContiguousOfEmptyViews) {
  Tensor t = empty_f32({3, 0}).t();
  EXPECT_FALSE(t.storage() == nullptr);
  Tensor c = t.contiguous();
  expect_dims(c, {0, 3});
  EXPECT_TRUE(c.is_contiguous());
  Tensor v = empty_view();
  expect_dims(v.contiguous(), {4, 0});
  expect_dims(v.t().contiguous(), {0, 4});
  expect_dims(v.copy(), {4, 0});
  expect_dims(Tensor::new_(1.f, dev()).broadcast_as({0, 5}).contiguous(), {0, 5});
  expect_dims(empty_f32({2, 0, 3}).permute({2, 1, 0}).copy(), {3, 0, 2});
  expect_dims(empty_f32({2, 0, 3}).transpose(0, 2).reshape({0, 2}), {0, 2});
}

TEST(ZeroSize, IndexWithI) {
  Tensor a = small();
  expect_dims(a.i(Slice(1, 1)), {0, 3});
  expect_dims(a.i({Slice::all(), Slice(2, 2)}), {2, 0});
  expect_dims(a.i(std::vector<int64_t>{}), {0, 3});
  expect_dims(a.i({Slice::all(), std::vector<int64_t>{}}), {2, 0});
  Tensor e = empty_f32({0, 3});
  expect_dims(e.i({Slice::all(), 1}), {0});
  EXPECT_THROW(e.i(0), Error);
}

// ---- element-wise ----------------------------------------------------------------------------------

TEST(ZeroSize, Unary) {
  for (const Tensor& t : {empty_f32({0, 3}), empty_view(), empty_f32({3, 0}).t()}) {
    Dims d = t.dims();
    for (const Tensor& r : {t.recip(),
                            t.neg(),
                            t.exp(),
                            t.log(),
                            t.sin(),
                            t.cos(),
                            t.tanh(),
                            t.abs(),
                            t.sqr(),
                            t.sqrt(),
                            t.gelu(),
                            t.gelu_erf(),
                            t.erf(),
                            t.relu(),
                            t.silu(),
                            t.sigmoid(),
                            t.ceil(),
                            t.floor(),
                            t.round(),
                            t.sign(),
                            t.affine(2, 1),
                            t.elu(1.0),
                            t.powf(2.0),
                            t.clamp(Scalar(0.f), Scalar(1.f)),
                            t.round_to(2),
                            -t,
                            t.clamp(Tensor::new_(0.f, dev()), Tensor::ones(t.shape(), DType::F32, dev()))}) {
      expect_dims(r, d);
      EXPECT_EQ(r.dtype(), DType::F32);
    }
  }
  for (DType dt : kAllDTypes) {
    Tensor t = Tensor::zeros({2, 0}, dt, dev());
    expect_dims(t.neg(), {2, 0});
    expect_dims(t.abs(), {2, 0});
    expect_dims(t.affine(3, 1), {2, 0});
  }
  // float-only ops still reject integer dtypes when empty
  EXPECT_THROW(Tensor::zeros({0}, DType::U32, dev()).exp(), Error);
}

TEST(ZeroSize, BinaryAndBroadcast) {
  Tensor a = empty_f32({0, 3}), v = empty_view();
  for (const Tensor& r :
       {a.add(a), a.sub(a), a.mul(a), a.div(a), a.maximum(a), a.minimum(a), a.pow(a), a + a, a - a, a * a,
        a / a, a + 1.0, 2.0 * a, 1.0 / a, a.maximum(Scalar(0.5)), a.minimum(Scalar(0))}) {
    expect_dims(r, {0, 3});
  }
  expect_dims(v.add(v.contiguous()), {4, 0});
  Tensor row = Tensor::new_({{1.f, 2.f, 3.f}}, dev());
  for (const Tensor& r :
       {a.broadcast_add(row), row.broadcast_sub(a), a.broadcast_mul(row), row.broadcast_div(a),
        a.broadcast_maximum(row), a.broadcast_minimum(row), a.broadcast_pow(row)}) {
    expect_dims(r, {0, 3});
  }
  Tensor col = Tensor::new_({{1.f}, {2.f}, {3.f}, {4.f}}, dev());
  expect_dims(v.broadcast_add(col), {4, 0});
  expect_dims(col.broadcast_mul(empty_f32({0})), {4, 0});
  expect_dims(empty_f32({2, 1, 3}).broadcast_add(empty_f32({0, 1})), {2, 0, 3});
  EXPECT_THROW(a.add(empty_f32({3, 0})), Error);
  EXPECT_THROW(a.broadcast_add(empty_f32({2, 3})), Error);
  EXPECT_THROW(a.add(Tensor::zeros({0, 3}, DType::F64, dev())), Error);
  for (DType dt : kAllDTypes) {
    Tensor t = Tensor::zeros({0, 2}, dt, dev());
    expect_dims(t.add(t), {0, 2});
    expect_dims(t.broadcast_mul(Tensor::ones({2}, dt, dev())), {0, 2});
  }
}

TEST(ZeroSize, CmpAndWhereCond) {
  Tensor a = empty_f32({0, 3});
  for (const Tensor& r :
       {a.eq(a), a.ne(a), a.lt(a), a.le(a), a.gt(a), a.ge(a), a.cmp(CmpOp::Lt, a), a.eq(Scalar(1.f)),
        a.ge(Scalar(0)), a.broadcast_lt(Tensor::new_({1.f, 2.f, 3.f}, dev()))}) {
    expect_dims(r, {0, 3});
    EXPECT_EQ(r.dtype(), DType::U8);
  }
  Tensor cond = Tensor::zeros({0, 3}, DType::U8, dev());
  expect_dims(cond.where_cond(a, a), {0, 3});
  // on_true / on_false broadcast to the condition's shape
  expect_dims(cond.where_cond(Tensor::new_({1.f, 2.f, 3.f}, dev()), Tensor::new_(0.f, dev())), {0, 3});
  Tensor vcond = empty_view().to_dtype(DType::U8);
  expect_dims(vcond.where_cond(empty_view(), Tensor::new_(1.f, dev())), {4, 0});
}

// ---- reductions --------------------------------------------------------------------------------------

TEST(ZeroSize, SumOverAnEmptyDimIsZero) {
  Tensor t = empty_f32({4, 0});
  EXPECT_EQ(t.sum(1).to_vec1<float>(), (F1{0, 0, 0, 0}));
  EXPECT_EQ(t.sum_keepdim(1).to_vec2<float>(), (F2{{0}, {0}, {0}, {0}}));
  EXPECT_EQ(empty_view().sum(1).to_vec1<float>(), (F1{0, 0, 0, 0}));
  EXPECT_EQ(empty_view().t().sum(0).to_vec1<float>(), (F1{0, 0, 0, 0}));
  EXPECT_EQ(t.sum_all().to_scalar<float>(), 0.f);
  EXPECT_EQ(t.sum(std::vector<int64_t>{0, 1}).to_scalar<float>(), 0.f);
  // over the non-empty dim: an empty result
  expect_dims(t.sum(0), {0});
  expect_dims(t.sum_keepdim(0), {1, 0});
  for (DType dt : kAllDTypes) {
    Tensor s = Tensor::zeros({3, 0}, dt, dev()).sum(1);
    EXPECT_EQ(s.dtype(), dt);
    EXPECT_EQ(s.to_dtype(DType::F32).to_vec1<float>(), (F1{0, 0, 0})) << dtype_name(dt);
  }
}

TEST(ZeroSize, MeanOverAnEmptyDimIsNaN) {
  // 0 / 0, as candle and PyTorch
  auto m = empty_f32({2, 0}).mean(1).to_vec1<float>();
  ASSERT_EQ(m.size(), 2u);
  EXPECT_TRUE(std::isnan(m[0]));
  EXPECT_TRUE(std::isnan(m[1]));
  EXPECT_TRUE(std::isnan(empty_f32({0, 3}).mean_all().to_scalar<float>()));
  expect_dims(empty_f32({0, 3}).mean(1), {0});
  expect_dims(empty_f32({0, 3}).mean_keepdim(1), {0, 1});
}

TEST(ZeroSize, MaxMinArgOverAnEmptyDimThrow) {
  Tensor t = empty_f32({3, 0});
  EXPECT_THROW(t.max(1), Error);
  EXPECT_THROW(t.min(1), Error);
  EXPECT_THROW(t.max_keepdim(1), Error);
  EXPECT_THROW(t.min_keepdim(-1), Error);
  EXPECT_THROW(t.argmax(1), Error);
  EXPECT_THROW(t.argmin(1), Error);
  EXPECT_THROW(t.argmax_keepdim(1), Error);
  EXPECT_THROW(t.argmin_keepdim(1), Error);
  EXPECT_THROW(t.max_all(), Error);
  EXPECT_THROW(t.min_all(), Error);
  EXPECT_THROW(empty_view().max(1), Error);
}

TEST(ZeroSize, LogSumExpOverAnEmptyDimIsMinusInf) {
  // log of an empty sum, as PyTorch (candle errors: its max over the empty dim fails)
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(empty_f32({3, 0}).log_sum_exp(1).to_vec1<float>(), (F1{-inf, -inf, -inf}));
  EXPECT_EQ(empty_view().log_sum_exp(-1).to_vec1<float>(), (F1{-inf, -inf, -inf, -inf}));
}

TEST(ZeroSize, MaxMinArgOverANonEmptyDimAreEmpty) {
  Tensor t = empty_f32({3, 0});
  expect_dims(t.max(0), {0});
  expect_dims(t.min(0), {0});
  expect_dims(t.max_keepdim(0), {1, 0});
  expect_dims(t.min_keepdim(0), {1, 0});
  Tensor am = t.argmax(0), an = t.argmin_keepdim(0);
  expect_dims(am, {0});
  expect_dims(an, {1, 0});
  EXPECT_EQ(am.dtype(), DType::U32);
  expect_dims(empty_view().t().max(1), {0});
  expect_dims(t.log_sum_exp(0), {0});
  expect_dims(empty_f32({0, 3}).var(1), {0});
  expect_dims(empty_f32({0, 3}).var_keepdim(1), {0, 1});
  for (DType dt : kAllDTypes) expect_dims(Tensor::zeros({0, 2}, dt, dev()).max(1), {0});
}

TEST(ZeroSize, VarOverAnEmptyDimIsNaN) {
  // candle computes n - 1 in usize here and underflows; an empty sample's variance is NaN
  auto v = empty_f32({2, 0}).var(1).to_vec1<float>();
  ASSERT_EQ(v.size(), 2u);
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_TRUE(std::isnan(v[1]));
}

TEST(ZeroSize, CumsumNormSort) {
  expect_dims(empty_f32({0, 3}).cumsum(0), {0, 3});
  expect_dims(empty_f32({0, 3}).cumsum(1), {0, 3});
  expect_dims(empty_view().cumsum(1), {4, 0});
  expect_dims(Tensor::zeros({0}, DType::I64, dev()).cumsum(0), {0});
  EXPECT_EQ(empty_f32({0, 3}).norm().to_scalar<float>(), 0.f);
  for (const Tensor& t : {empty_f32({3, 0}), empty_f32({0, 5}), empty_view()}) {
    for (bool asc : {true, false}) {
      auto [vals, ids] = t.sort_last_dim(asc);
      expect_dims(vals, t.dims());
      expect_dims(ids, t.dims());
      EXPECT_EQ(ids.dtype(), DType::U32);
      expect_dims(t.arg_sort_last_dim(asc), t.dims());
    }
  }
}

// ---- matmul ------------------------------------------------------------------------------------------

TEST(ZeroSize, MatmulZeroMNK) {
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    Tensor m0 = Tensor::zeros({0, 3}, dt, dev()).matmul(Tensor::ones({3, 4}, dt, dev()));
    expect_dims(m0, {0, 4});
    EXPECT_EQ(m0.dtype(), dt);
    expect_dims(Tensor::ones({2, 3}, dt, dev()).matmul(Tensor::zeros({3, 0}, dt, dev())), {2, 0});
    Tensor k0 = Tensor::ones({2, 0}, dt, dev()).matmul(Tensor::ones({0, 4}, dt, dev()));
    expect_dims(k0, {2, 4});
    EXPECT_EQ(k0.to_dtype(DType::F32).to_vec2<float>(), (F2{{0, 0, 0, 0}, {0, 0, 0, 0}})) << dtype_name(dt);
  }
  // k = 0 through views (transposed and offset)
  Tensor k0v = empty_view().matmul(empty_view().t());
  EXPECT_EQ(k0v.to_vec2<float>(), F2(4, F1(4, 0.f)));
  expect_dims(empty_f32({0, 2, 3}).matmul(empty_f32({0, 3, 4})), {0, 2, 4});
  expect_dims(empty_f32({5, 2, 0}).matmul(empty_f32({5, 0, 3})), {5, 2, 3});
  expect_dims(empty_f32({0, 2, 3}).broadcast_matmul(Tensor::ones({3, 4}, DType::F32, dev())), {0, 2, 4});
  expect_dims(empty_f32({2, 1, 2, 0}).broadcast_matmul(empty_f32({3, 0, 4})), {2, 3, 2, 4});
  EXPECT_THROW(empty_f32({0, 3}).matmul(empty_f32({2, 4})), Error);
  EXPECT_EQ(empty_f32({0}).dot(empty_f32({0})).to_scalar<float>(), 0.f);
  EXPECT_EQ(empty_f32({2, 0}).mv(empty_f32({0})).to_vec1<float>(), (F1{0, 0}));
  expect_dims(empty_f32({0, 3}).mv(Tensor::new_({1.f, 2.f, 3.f}, dev())), {0});
  EXPECT_THROW(Tensor::zeros({0, 3}, DType::U32, dev()).matmul(Tensor::zeros({3, 2}, DType::U32, dev())),
               Error);
}

// ---- indexing ----------------------------------------------------------------------------------------

TEST(ZeroSize, IndexSelectAndEmbeddingWithEmptyIds) {
  Tensor a = small();
  Tensor no_ids = Tensor::zeros({0}, DType::U32, dev());
  expect_dims(a.index_select(no_ids, 0), {0, 3});
  expect_dims(a.index_select(no_ids, 1), {2, 0});
  expect_dims(empty_f32({0, 3}).index_select(no_ids, 0), {0, 3});
  expect_dims(empty_f32({0, 3}).index_select(Tensor::new_({2u, 0u}, dev()), 1), {0, 2});
  EXPECT_THROW(empty_f32({0, 3}).index_select(Tensor::new_({0u}, dev()), 0), Error);
  expect_dims(a.embedding(no_ids), {0, 3});
  expect_dims(a.embedding(Tensor::zeros({2, 0}, DType::I64, dev())), {2, 0, 3});
  expect_dims(empty_f32({4, 0}).embedding(Tensor::new_({1u, 3u}, dev())), {2, 0});
}

TEST(ZeroSize, GatherScatterIndexAddWithEmptyIds) {
  Tensor a = small();
  F2 values{{0, 1, 2}, {3, 4, 5}};
  Tensor ids20 = Tensor::zeros({2, 0}, DType::U32, dev());
  expect_dims(a.gather(ids20, 1), {2, 0});
  expect_dims(a.gather(Tensor::zeros({0, 3}, DType::I64, dev()), 0), {0, 3});
  EXPECT_EQ(a.scatter(ids20, empty_f32({2, 0}), 1).to_vec2<float>(), values);
  EXPECT_EQ(a.scatter_add(ids20, empty_f32({2, 0}), 1).to_vec2<float>(), values);
  Tensor b = a.copy();
  b.scatter_set(ids20, empty_f32({2, 0}), 1);
  b.scatter_add_set(ids20, empty_f32({2, 0}), 1);
  EXPECT_EQ(b.to_vec2<float>(), values);
  Tensor no_ids = Tensor::zeros({0}, DType::U8, dev());
  EXPECT_EQ(a.index_add(no_ids, empty_f32({0, 3}), 0).to_vec2<float>(), values);
  EXPECT_EQ(a.index_add(no_ids, empty_f32({2, 0}), 1).to_vec2<float>(), values);
  // self empty too
  expect_dims(empty_f32({0, 3}).scatter(Tensor::zeros({0, 3}, DType::U32, dev()), empty_f32({0, 3}), 1),
              {0, 3});
  expect_dims(empty_f32({0, 3}).index_add(no_ids, empty_f32({0, 0}), 1), {0, 3});
  expect_dims(empty_f32({3, 0}).gather(Tensor::zeros({3, 0}, DType::U32, dev()), 0), {3, 0});
}

TEST(ZeroSize, SliceScatterSliceSetConstSet) {
  Tensor a = small();
  F2 values{{0, 1, 2}, {3, 4, 5}};
  EXPECT_EQ(a.slice_scatter(empty_f32({0, 3}), 0, 2).to_vec2<float>(), values);
  EXPECT_EQ(a.slice_scatter(empty_f32({2, 0}), 1, 1).to_vec2<float>(), values);
  expect_dims(empty_f32({0, 3}).slice_scatter(empty_f32({0, 2}), 1, 1), {0, 3});
  Tensor b = a.copy();
  b.slice_set(empty_f32({0, 3}), 0, 2);
  b.slice_set(empty_f32({2, 0}), 1, 3);
  EXPECT_EQ(b.to_vec2<float>(), values);
  Tensor e = empty_f32({0, 3});
  e.slice_set(empty_f32({0, 1}), 1, 2);
  e.const_set(Scalar(5));
  empty_view().const_set(Scalar(9.f));
  b.narrow(1, 1, 0).zero_set();
  b.narrow(0, 2, 0).one_set();
  EXPECT_EQ(b.to_vec2<float>(), values);
  expect_dims(e, {0, 3});
}

// ---- dtype, display ----------------------------------------------------------------------------------

TEST(ZeroSize, ToDtypeEveryPair) {
  for (DType from : kAllDTypes) {
    Tensor t = Tensor::zeros({3, 0}, from, dev());
    for (DType to : kAllDTypes) {
      Tensor r = t.to_dtype(to);
      expect_dims(r, {3, 0});
      EXPECT_EQ(r.dtype(), to);
      expect_dims(t.t().to_dtype(to), {0, 3});
    }
  }
  expect_dims(empty_view().to_dtype(DType::BF16), {4, 0});
  expect_dims(empty_view().to_device(dev()), {4, 0});
  expect_dims(empty_view().detach(), {4, 0});
}

TEST(ZeroSize, Display) {
  EXPECT_EQ(to_string(empty_f32({0, 3})), "[]\nTensor[[0, 3], f32]");
  EXPECT_EQ(to_string(empty_f32({2, 0})), "[[],\n []]\nTensor[[2, 0], f32]");
  EXPECT_EQ(to_string(Tensor::zeros({0}, DType::I64, dev())), "[]\nTensor[[0], i64]");
  EXPECT_EQ(to_string(empty_view().t()), "[]\nTensor[[0, 4], f32]");
  // nothing to summarise, whatever the (huge) other dims
  EXPECT_EQ(to_string(Tensor::new_(1.f, dev()).broadcast_as({0, 100000})), "[]\nTensor[[0, 100000], f32]");
  for (DType dt : kAllDTypes) {
    std::string s = to_string(Tensor::zeros({2, 0, 3}, dt, dev()));
    EXPECT_NE(s.find(std::string("Tensor[[2, 0, 3], ") + std::string(dtype_name(dt)) + "]"),
              std::string::npos)
        << s;
  }
}

TEST(ZeroSize, SaveAndLoadSafetensors) {
  std::string path = (std::filesystem::temp_directory_path() / "candle_zero_size_test.safetensors").string();
  empty_view().t().save_safetensors("e", path);
  auto loaded = safetensors::load(path, dev());
  std::filesystem::remove(path);
  ASSERT_EQ(loaded.count("e"), 1u);
  expect_dims(loaded.at("e"), {0, 4});
  EXPECT_EQ(loaded.at("e").dtype(), DType::F32);
}
