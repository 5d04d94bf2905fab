// Shape/view ops: expected values from candle-core's tensor_tests.rs, layout_tests.rs,
// indexing_tests.rs and the doc examples in candle-core/src/tensor.rs.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "candle/candle.h"
#include "candle/utils.h"
#include "test_util.h"

using namespace candle;

namespace {

using V1 = std::vector<float>;
using V2 = std::vector<std::vector<float>>;
using V3 = std::vector<std::vector<std::vector<float>>>;

const Device& cpu() {
  static Device d = Device::cpu();
  return d;
}

Tensor arange_f32(size_t n) { return Tensor::arange(0.f, static_cast<float>(n), cpu()); }
Tensor arange_u32(uint32_t a, uint32_t b) { return Tensor::arange(a, b, cpu()); }

// The bytes of t's elements in row-major order.
using test_util::bytes_of;

// A tensor of `dtype` whose element i has the bytes (seed + 31 * i + b) for byte b: every
// element differs, and float patterns include NaNs, which must be copied bit for bit.
Tensor patterned(DType dtype, const Shape& shape, uint8_t seed) {
  size_t es = dtype_size(dtype);
  std::vector<std::byte> buf(shape.elem_count() * es);
  for (size_t i = 0; i < shape.elem_count(); ++i)
    for (size_t b = 0; b < es; ++b) buf[i * es + b] = static_cast<std::byte>(seed + 31 * i + b);
  return Tensor::from_raw_buffer(buf, dtype, shape, cpu());
}

// Expected bytes: element j of the result is element src_index(j) of `src_bytes`.
template <typename Fn>
std::vector<uint8_t> gather_bytes(const std::vector<uint8_t>& src, size_t es, size_t count, Fn src_index) {
  std::vector<uint8_t> out(count * es);
  for (size_t j = 0; j < count; ++j) std::memcpy(&out[j * es], &src[src_index(j) * es], es);
  return out;
}

void expect_error(const std::function<void()>& fn, ErrorKind kind, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

}  // namespace

// ---- views ---------------------------------------------------------------------------------

TEST(ShapeReshape, ContiguousIsAViewAndChecksCount) {
  Tensor t = arange_f32(6);
  Tensor r = t.reshape({2, 3});
  EXPECT_EQ(r.storage().get(), t.storage().get());
  EXPECT_EQ(r.to_vec2<float>(), (V2{{0, 1, 2}, {3, 4, 5}}));
  expect_error(
      [&] {
        t.reshape({4, 2});
      },
      ErrorKind::ShapeMismatch, {"shape mismatch in reshape", "src: [6]", "dst: [4, 2]"});
}

TEST(ShapeReshape, NonContiguousCopies) {
  Tensor t = arange_f32(6).reshape({2, 3}).t();
  Tensor r = t.reshape({6});
  EXPECT_NE(r.storage().get(), t.storage().get());
  EXPECT_TRUE(r.is_contiguous());
  EXPECT_EQ(r.to_vec1<float>(), (V1{0, 3, 1, 4, 2, 5}));
}

TEST(ShapeReshape, TransposedBatchOfMatricesTiledCopy) {
  // big enough for the tiled transpose path, with a batch dim and an odd size
  Tensor a = arange_f32(2 * 40 * 33).reshape({2, 40, 33});
  Tensor t = a.transpose(1, 2);  // [2, 33, 40]
  auto got = t.flatten_all().to_vec1<float>();
  ASSERT_EQ(got.size(), 2u * 33 * 40);
  for (size_t b = 0; b < 2; ++b)
    for (size_t j = 0; j < 33; ++j)
      for (size_t i = 0; i < 40; ++i)
        ASSERT_EQ(got[(b * 33 + j) * 40 + i], static_cast<float>((b * 40 + i) * 33 + j))
            << b << "," << j << "," << i;
  EXPECT_EQ(Tensor::cat({t, t}, 0).narrow(0, 2, 2).flatten_all().to_vec1<float>(), got);
}

TEST(ShapeReshape, OffsetViewKeepsOffset) {
  Tensor t = arange_f32(26).narrow(0, 2, 24).reshape({2, 3, 4});
  EXPECT_EQ(t.layout().start_offset(), 2u);
  EXPECT_EQ(t.i({1, 2, 3}).to_scalar<float>(), 25.f);
}

TEST(ShapeSqueeze, RemovesSizeOneDimsOnly) {
  Tensor a = Tensor::zeros({2, 3, 1}, DType::F32, cpu());
  EXPECT_EQ(a.squeeze(2).dims(), (std::vector<size_t>{2, 3}));
  EXPECT_EQ(a.squeeze(-1).dims(), (std::vector<size_t>{2, 3}));
  EXPECT_EQ(a.squeeze(0).dims(), (std::vector<size_t>{2, 3, 1}));  // no-op, as candle
  EXPECT_EQ(a.squeeze(2).storage().get(), a.storage().get());
  expect_error([&] { a.squeeze(3); }, ErrorKind::DimOutOfRange, {"squeeze", "[2, 3, 1]"});
}

TEST(ShapeUnsqueeze, InsertsAtAnyPositionIncludingRank) {
  Tensor a = Tensor::zeros({2, 3}, DType::F32, cpu());
  EXPECT_EQ(a.unsqueeze(0).dims(), (std::vector<size_t>{1, 2, 3}));
  EXPECT_EQ(a.unsqueeze(1).dims(), (std::vector<size_t>{2, 1, 3}));
  EXPECT_EQ(a.unsqueeze(2).dims(), (std::vector<size_t>{2, 3, 1}));
  EXPECT_EQ(a.unsqueeze(-1).dims(), (std::vector<size_t>{2, 3, 1}));
  EXPECT_EQ(a.unsqueeze(-3).dims(), (std::vector<size_t>{1, 2, 3}));
  EXPECT_TRUE(a.unsqueeze(1).is_contiguous());
  EXPECT_EQ(a.unsqueeze(1).storage().get(), a.storage().get());
  expect_error([&] { a.unsqueeze(3); }, ErrorKind::DimOutOfRange, {"unsqueeze"});
  expect_error([&] { a.unsqueeze(-4); }, ErrorKind::DimOutOfRange, {"unsqueeze"});
}

TEST(ShapeUnsqueeze, OfTransposedView) {
  Tensor t = arange_f32(6).reshape({2, 3}).t().unsqueeze(1);
  EXPECT_EQ(t.dims(), (std::vector<size_t>{3, 1, 2}));
  EXPECT_EQ(t.squeeze(1).to_vec2<float>(), (V2{{0, 3}, {1, 4}, {2, 5}}));
}

TEST(ShapeFlatten, Variants) {
  Tensor t = arange_u32(0, 24).reshape({2, 3, 4});
  EXPECT_EQ(t.flatten(1, 2).dims(), (std::vector<size_t>{2, 12}));
  EXPECT_EQ(t.flatten(0, 1).dims(), (std::vector<size_t>{6, 4}));
  EXPECT_EQ(t.flatten_to(1).dims(), (std::vector<size_t>{6, 4}));
  EXPECT_EQ(t.flatten_from(1).dims(), (std::vector<size_t>{2, 12}));
  EXPECT_EQ(t.flatten_from(-1).dims(), (std::vector<size_t>{2, 3, 4}));
  EXPECT_EQ(t.flatten_all().dims(), (std::vector<size_t>{24}));
  EXPECT_EQ(Tensor::new_(5.f, cpu()).flatten_all().to_vec1<float>(), (V1{5}));
  // layout_tests.rs: flatten_all of a transposed view
  EXPECT_EQ(t.transpose(0, 1).flatten_all().to_vec1<uint32_t>(),
            (std::vector<uint32_t>{0,  1,  2,  3,  12, 13, 14, 15, 4,  5,  6,  7,
                                   16, 17, 18, 19, 8,  9,  10, 11, 20, 21, 22, 23}));
  expect_error([&] { t.flatten(2, 1); }, ErrorKind::InvalidArgument, {"flatten"});
  expect_error([&] { t.flatten(0, 3); }, ErrorKind::DimOutOfRange, {"flatten"});
}

TEST(ShapeTranspose, ValuesAndT) {
  // tensor_tests.rs: transpose
  Tensor data = Tensor::new_({{3.f, 1.f, 4.f, 1.f, 5.f}, {2.f, 1.f, 7.f, 8.f, 2.f}}, cpu());
  Tensor t = data.t();
  EXPECT_EQ(t.dims(), (std::vector<size_t>{5, 2}));
  EXPECT_EQ(t.to_vec2<float>(), (V2{{3, 2}, {1, 1}, {4, 7}, {1, 8}, {5, 2}}));
  EXPECT_EQ(t.t().to_vec2<float>(), data.to_vec2<float>());
  EXPECT_EQ(t.contiguous().t().to_vec2<float>(), data.to_vec2<float>());
  EXPECT_EQ(t.storage().get(), data.storage().get());
  EXPECT_EQ(data.transpose(0, 0).storage().get(), data.storage().get());
  expect_error([&] { arange_f32(3).t(); }, ErrorKind::ShapeMismatch, {"t", "[3]"});
  expect_error([&] { data.transpose(0, 2); }, ErrorKind::DimOutOfRange, {"transpose", "[2, 5]"});
}

TEST(ShapeTranspose, LayoutTestsContiguous) {
  // layout_tests.rs: contiguous
  Tensor t = arange_u32(0, 24).reshape({2, 3, 4});
  using U3 = std::vector<std::vector<std::vector<uint32_t>>>;
  EXPECT_EQ(t.t().contiguous().to_vec3<uint32_t>(),
            (U3{{{0, 4, 8}, {1, 5, 9}, {2, 6, 10}, {3, 7, 11}},
                {{12, 16, 20}, {13, 17, 21}, {14, 18, 22}, {15, 19, 23}}}));
  EXPECT_EQ(t.transpose(0, 1).contiguous().to_vec3<uint32_t>(), (U3{{{0, 1, 2, 3}, {12, 13, 14, 15}},
                                                                    {{4, 5, 6, 7}, {16, 17, 18, 19}},
                                                                    {{8, 9, 10, 11}, {20, 21, 22, 23}}}));
  EXPECT_EQ(t.i(Slice::from(1)).transpose(0, 1).contiguous().to_vec3<uint32_t>(),
            (U3{{{12, 13, 14, 15}}, {{16, 17, 18, 19}}, {{20, 21, 22, 23}}}));
  EXPECT_EQ(t.transpose(0, 2).contiguous().to_vec3<uint32_t>(), (U3{{{0, 12}, {4, 16}, {8, 20}},
                                                                    {{1, 13}, {5, 17}, {9, 21}},
                                                                    {{2, 14}, {6, 18}, {10, 22}},
                                                                    {{3, 15}, {7, 19}, {11, 23}}}));
}

TEST(ShapePermute, DimsValuesAndErrors) {
  Tensor t = arange_u32(0, 120).reshape({2, 3, 4, 5});
  Tensor p = t.permute({2, 3, 1, 0});
  EXPECT_EQ(p.dims(), (std::vector<size_t>{4, 5, 3, 2}));
  EXPECT_EQ(p.storage().get(), t.storage().get());
  // p[a, b, c, d] = t[d, c, a, b]
  EXPECT_EQ(p.i({1, 2, 0, 1}).to_scalar<uint32_t>(), 60u + 0u + 5u + 2u);
  EXPECT_EQ(t.permute({-1, 0, 1, 2}).dims(), (std::vector<size_t>{5, 2, 3, 4}));
  Tensor small = arange_f32(6).reshape({1, 2, 3});
  EXPECT_EQ(small.permute({2, 0, 1}).contiguous().flatten_all().to_vec1<float>(), (V1{0, 3, 1, 4, 2, 5}));
  expect_error([&] { t.permute({0, 1, 2}); }, ErrorKind::ShapeMismatch, {"permute", "[2, 3, 4, 5]"});
  expect_error([&] { t.permute({0, 1, 1, 2}); }, ErrorKind::InvalidArgument, {"permute"});
}

TEST(ShapeNarrow, CandleValues) {
  // tensor_tests.rs: narrow
  Tensor t = Tensor::new_({{{3.f, 1.f, 4.f}, {1.f, 5.f, 9.f}}, {{2.f, 1.f, 7.f}, {8.f, 2.f, 8.f}}}, cpu());
  EXPECT_EQ(t.narrow(2, 1, 2).to_vec3<float>(), (V3{{{1, 4}, {5, 9}}, {{1, 7}, {2, 8}}}));
  EXPECT_EQ(t.narrow(1, 1, 1).to_vec3<float>(), (V3{{{1, 5, 9}}, {{8, 2, 8}}}));
  EXPECT_EQ(t.narrow(0, 0, 1).to_vec3<float>(), (V3{{{3, 1, 4}, {1, 5, 9}}}));
  EXPECT_EQ(t.narrow(0, 1, 1).to_vec3<float>(), (V3{{{2, 1, 7}, {8, 2, 8}}}));
  EXPECT_EQ(t.t().narrow(1, 1, 2).to_vec3<float>(), (V3{{{1, 5}, {4, 9}}, {{1, 2}, {7, 8}}}));
  EXPECT_EQ(t.narrow(-1, 1, 2).to_vec3<float>(), (V3{{{1, 4}, {5, 9}}, {{1, 7}, {2, 8}}}));
  EXPECT_EQ(t.narrow(2, 1, 2).storage().get(), t.storage().get());
  EXPECT_EQ(t.narrow(2, 3, 0).dims(), (std::vector<size_t>{2, 2, 0}));
}

TEST(ShapeNarrow, BoundsErrors) {
  Tensor t = Tensor::zeros({2, 3}, DType::F32, cpu());
  expect_error([&] { t.narrow(1, 2, 2); }, ErrorKind::IndexOutOfRange,
               {"narrow", "[2, 3]", "start: 2", "len: 2"});
  expect_error([&] { t.narrow(1, 4, 0); }, ErrorKind::IndexOutOfRange, {"narrow"});
  expect_error([&] { t.narrow(1, 1, SIZE_MAX); }, ErrorKind::IndexOutOfRange, {"narrow"});
  expect_error([&] { t.narrow(2, 0, 1); }, ErrorKind::DimOutOfRange, {"narrow", "[2, 3]"});
}

TEST(ShapeChunk, CandleSizes) {
  Tensor t = arange_f32(10);
  auto c = t.chunk(4, 0);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0].to_vec1<float>(), (V1{0, 1, 2}));
  EXPECT_EQ(c[1].to_vec1<float>(), (V1{3, 4, 5}));
  EXPECT_EQ(c[2].to_vec1<float>(), (V1{6, 7}));
  EXPECT_EQ(c[3].to_vec1<float>(), (V1{8, 9}));
  EXPECT_EQ(c[2].storage().get(), t.storage().get());
  auto c2 = arange_f32(6).reshape({2, 3}).chunk(2, -1);
  ASSERT_EQ(c2.size(), 2u);
  EXPECT_EQ(c2[0].to_vec2<float>(), (V2{{0, 1}, {3, 4}}));
  EXPECT_EQ(c2[1].to_vec2<float>(), (V2{{2}, {5}}));
  // fewer elements than chunks: one chunk per element
  EXPECT_EQ(arange_f32(2).chunk(5, 0).size(), 2u);
  expect_error([&] { t.chunk(0, 0); }, ErrorKind::InvalidArgument, {"chunk"});
}

TEST(ShapeGet, GetAndGetOnDim) {
  // tensor.rs doc examples
  Tensor t = Tensor::new_({{0.f, 1.f}, {2.f, 3.f}, {4.f, 5.f}}, cpu());
  EXPECT_EQ(t.get(0).to_vec1<float>(), (V1{0, 1}));
  EXPECT_EQ(t.get(1).to_vec1<float>(), (V1{2, 3}));
  EXPECT_EQ(t.get_on_dim(1, 0).to_vec1<float>(), (V1{0, 2, 4}));
  EXPECT_EQ(t.get_on_dim(1, 1).to_vec1<float>(), (V1{1, 3, 5}));
  EXPECT_EQ(t.get_on_dim(0, 1).to_vec1<float>(), (V1{2, 3}));
  EXPECT_EQ(t.get_on_dim(-1, 1).storage().get(), t.storage().get());
  expect_error([&] { t.get(3); }, ErrorKind::IndexOutOfRange, {"[3, 2]"});
  expect_error([&] { t.get_on_dim(2, 0); }, ErrorKind::DimOutOfRange, {"get_on_dim"});
}

TEST(ShapeBroadcast, AsAndLeft) {
  // tensor_tests.rs: broadcast
  Tensor t = Tensor::new_({3.f, 1.f, 4.f}, cpu());
  Tensor b = t.broadcast_left({3, 1});
  EXPECT_EQ(b.to_vec3<float>(), (V3{{{3, 1, 4}}, {{3, 1, 4}}, {{3, 1, 4}}}));
  EXPECT_EQ(b.stride(), (std::vector<size_t>{0, 0, 1}));
  EXPECT_EQ(b.storage().get(), t.storage().get());
  Tensor c = Tensor::new_({{1.f}, {2.f}}, cpu()).broadcast_as({2, 3});
  EXPECT_EQ(c.to_vec2<float>(), (V2{{1, 1, 1}, {2, 2, 2}}));
  EXPECT_EQ(t.expand({2, 3}).to_vec2<float>(), (V2{{3, 1, 4}, {3, 1, 4}}));
  expect_error([&] { t.broadcast_as({2, 4}); }, ErrorKind::ShapeMismatch, {"broadcast_as", "[3]", "[2, 4]"});
}

TEST(ShapeUnfold, PyTorchWindows) {
  Tensor x = Tensor::arange(1.f, 8.f, cpu());
  EXPECT_EQ(x.unfold(0, 2, 1).to_vec2<float>(), (V2{{1, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 6}, {6, 7}}));
  EXPECT_EQ(x.unfold(0, 2, 2).to_vec2<float>(), (V2{{1, 2}, {3, 4}, {5, 6}}));
  Tensor u = x.unfold(0, 3, 2);
  EXPECT_EQ(u.stride(), (std::vector<size_t>{2, 1}));
  EXPECT_EQ(u.storage().get(), x.storage().get());
  Tensor m = arange_f32(12).reshape({3, 4}).unfold(1, 2, 2);
  EXPECT_EQ(m.dims(), (std::vector<size_t>{3, 2, 2}));
  EXPECT_EQ(m.stride(), (std::vector<size_t>{4, 2, 1}));
  EXPECT_EQ(m.to_vec3<float>(), (V3{{{0, 1}, {2, 3}}, {{4, 5}, {6, 7}}, {{8, 9}, {10, 11}}}));
  Tensor r = arange_f32(12).reshape({3, 4}).unfold(0, 2, 1);  // windows over rows
  EXPECT_EQ(r.dims(), (std::vector<size_t>{2, 4, 2}));
  EXPECT_EQ(r.to_vec3<float>(), (V3{{{0, 4}, {1, 5}, {2, 6}, {3, 7}}, {{4, 8}, {5, 9}, {6, 10}, {7, 11}}}));
  expect_error([&] { x.unfold(0, 8, 1); }, ErrorKind::ShapeMismatch, {"unfold", "[7]"});
  expect_error([&] { x.unfold(0, 2, 0); }, ErrorKind::InvalidArgument, {"unfold"});
}

// ---- cat / stack --------------------------------------------------------------------------

TEST(ShapeCat, OneDim) {
  Tensor t1 = Tensor::new_({3.f, 1.f, 4.f}, cpu());
  Tensor t2 = Tensor::new_({1.f, 5.f, 9.f, 2.f}, cpu());
  Tensor t3 = Tensor::new_({6.f, 5.f, 3.f, 5.f, 8.f, 9.f}, cpu());
  EXPECT_EQ(Tensor::cat({t1}, 0).to_vec1<float>(), (V1{3, 1, 4}));
  EXPECT_EQ(Tensor::cat({t1, t2}, 0).to_vec1<float>(), (V1{3, 1, 4, 1, 5, 9, 2}));
  EXPECT_EQ(Tensor::cat({t1, t2, t3}, 0).to_vec1<float>(), (V1{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9}));
}

TEST(ShapeCat, TwoDims) {
  Tensor t1 = Tensor::new_({{3.f, 1.f, 4.f, 1.f, 5.f}, {2.f, 7.f, 1.f, 8.f, 2.f}}, cpu());
  Tensor t2 = Tensor::new_({{5.f, 5.f, 5.f, 5.f, 5.f}, {2.f, 7.f, 1.f, 8.f, 2.f}}, cpu());
  V2 cat0{{3, 1, 4, 1, 5}, {2, 7, 1, 8, 2}, {5, 5, 5, 5, 5}, {2, 7, 1, 8, 2}};
  EXPECT_EQ(Tensor::cat({t1, t2}, 0).to_vec2<float>(), cat0);
  EXPECT_EQ(Tensor::cat({t1.t(), t2.t()}, 1).t().to_vec2<float>(), cat0);
  EXPECT_EQ(Tensor::cat({t1, t2}, 1).to_vec2<float>(),
            (V2{{3, 1, 4, 1, 5, 5, 5, 5, 5, 5}, {2, 7, 1, 8, 2, 2, 7, 1, 8, 2}}));
  EXPECT_EQ(Tensor::cat({t1, t2}, -1).to_vec2<float>(), Tensor::cat({t1, t2}, 1).to_vec2<float>());
}

TEST(ShapeCat, ThreeDimsAndStridedInputs) {
  Tensor t1 = Tensor::arange<int64_t>(0, 48, cpu()).reshape({2, 6, 4});
  Tensor t2 = Tensor::arange<int64_t>(100, 124, cpu()).reshape({2, 3, 4});
  Tensor t3 = Tensor::arange<int64_t>(10000, 10032, cpu()).reshape({2, 4, 4});
  Tensor c = Tensor::cat({t1, t2, t3}, 1);
  EXPECT_EQ(c.dims(), (std::vector<size_t>{2, 13, 4}));
  Tensor c2 = Tensor::cat({t1.t().contiguous().t(), t2.t().contiguous().t(), t3.t().contiguous().t()}, 1);
  EXPECT_EQ(bytes_of(c), bytes_of(c2));
  EXPECT_EQ(c.i({0, 0, 0}).to_scalar<int64_t>(), 0);
  EXPECT_EQ(c.i({0, 4, 0}).to_scalar<int64_t>(), 16);
  EXPECT_EQ(c.i({0, 5, 0}).to_scalar<int64_t>(), 20);
  EXPECT_EQ(c.i({1, 5, 0}).to_scalar<int64_t>(), 44);
  EXPECT_EQ(c.i({0, 6, 0}).to_scalar<int64_t>(), 100);
  EXPECT_EQ(c.i({1, 6, 0}).to_scalar<int64_t>(), 112);
  EXPECT_EQ(c.i({0, 6, 1}).to_scalar<int64_t>(), 101);
  EXPECT_EQ(c.i({0, 7, 1}).to_scalar<int64_t>(), 105);
  EXPECT_EQ(c.i({0, 12, 1}).to_scalar<int64_t>(), 10013);
  EXPECT_EQ(c.i({1, 12, 3}).to_scalar<int64_t>(), 10031);
  // padded outer stride (narrow of a larger tensor) equals the contiguous result
  Tensor base = arange_f32(3 * 6 * 5).reshape({3, 6, 5});
  Tensor tp1 = base.narrow(1, 0, 4), tp2 = base.narrow(1, 2, 4);
  EXPECT_EQ(Tensor::cat({tp1, tp2}, 1).to_vec3<float>(),
            Tensor::cat({tp1.contiguous(), tp2.contiguous()}, 1).to_vec3<float>());
}

TEST(ShapeCat, OffsetAndBroadcastInputs) {
  Tensor a = Tensor::new_({{1.f, 2.f}, {3.f, 4.f}}, cpu());
  Tensor off = test_util::offset_view(a);
  Tensor bc = Tensor::new_({{7.f, 8.f}}, cpu()).broadcast_as({3, 2});
  EXPECT_EQ(Tensor::cat({off, bc}, 0).to_vec2<float>(), (V2{{1, 2}, {3, 4}, {7, 8}, {7, 8}, {7, 8}}));
  Tensor col = Tensor::new_({{9.f}, {6.f}}, cpu()).broadcast_as({2, 3});
  EXPECT_EQ(Tensor::cat({test_util::transposed_copy_view(a), col}, 1).to_vec2<float>(),
            (V2{{1, 2, 9, 9, 9}, {3, 4, 6, 6, 6}}));
}

TEST(ShapeCat, ZeroSizedDims) {
  Tensor t = Tensor::zeros({4, 0, 1}, DType::F32, cpu());
  Tensor t2 = Tensor::ones({4, 3, 1}, DType::F32, cpu());
  EXPECT_EQ(Tensor::cat({t, t2}, 1).dims(), (std::vector<size_t>{4, 3, 1}));
  EXPECT_EQ(Tensor::cat({t, t}, 1).dims(), (std::vector<size_t>{4, 0, 1}));
  EXPECT_EQ(Tensor::cat({t, t2, t}, 1).flatten_all().to_vec1<float>(), V1(12, 1.f));
}

TEST(ShapeCat, EveryDTypeCopiesBytesExactly) {
  for (DType dt : kAllDTypes) {
    SCOPED_TRACE(dtype_name(dt));
    size_t es = dtype_size(dt);
    Tensor a = patterned(dt, {2, 3}, 1), b = patterned(dt, {2, 2}, 100);
    auto ab = bytes_of(a), bb = bytes_of(b);
    std::vector<uint8_t> want;
    for (size_t r = 0; r < 2; ++r) {
      want.insert(want.end(), ab.begin() + r * 3 * es, ab.begin() + (r + 1) * 3 * es);
      want.insert(want.end(), bb.begin() + r * 2 * es, bb.begin() + (r + 1) * 2 * es);
    }
    EXPECT_EQ(bytes_of(Tensor::cat({a, b}, 1)), want);
    std::vector<uint8_t> want0 = ab;
    want0.insert(want0.end(), bb.begin(), bb.end());
    EXPECT_EQ(bytes_of(Tensor::cat({a.reshape({3, 2}), b}, 0)), want0);
    // a transposed input goes through the strided path
    Tensor at = a.t();  // [3, 2], at[i][j] = a[j][i]
    auto want_t = gather_bytes(ab, es, 6, [](size_t j) { return (j % 2) * 3 + j / 2; });
    want_t.insert(want_t.end(), bb.begin(), bb.end());
    EXPECT_EQ(bytes_of(Tensor::cat({at, b}, 0)), want_t);
  }
}

TEST(ShapeCat, Errors) {
  Tensor a = Tensor::zeros({2, 3}, DType::F32, cpu());
  expect_error(
      [&] {
        Tensor::cat({a, Tensor::zeros({3, 3}, DType::F32, cpu())}, 1);
      },
      ErrorKind::ShapeMismatch, {"cat", "[2, 3]", "[3, 3]"});
  expect_error(
      [&] {
        Tensor::cat({a, Tensor::zeros({2, 3, 1}, DType::F32, cpu())}, 0);
      },
      ErrorKind::ShapeMismatch, {"cat", "[2, 3]", "[2, 3, 1]"});
  expect_error(
      [&] {
        Tensor::cat({a, Tensor::zeros({2, 3}, DType::F16, cpu())}, 0);
      },
      ErrorKind::DTypeMismatch, {"cat", "f32", "f16"});
  expect_error([&] { Tensor::cat({a, a}, 2); }, ErrorKind::DimOutOfRange, {"cat", "[2, 3]"});
  expect_error([&] { Tensor::cat({}, 0); }, ErrorKind::InvalidArgument, {"cat"});
}

TEST(ShapeStack, ShapesAndValues) {
  Tensor a = arange_f32(6).reshape({2, 3});
  Tensor b = Tensor::arange(10.f, 16.f, cpu()).reshape({2, 3});
  EXPECT_EQ(Tensor::stack({a, b}, 0).dims(), (std::vector<size_t>{2, 2, 3}));
  EXPECT_EQ(Tensor::stack({a, b}, 2).dims(), (std::vector<size_t>{2, 3, 2}));
  EXPECT_EQ(Tensor::stack({a, b}, 0).to_vec3<float>(),
            (V3{{{0, 1, 2}, {3, 4, 5}}, {{10, 11, 12}, {13, 14, 15}}}));
  EXPECT_EQ(Tensor::stack({a, b}, -1).to_vec3<float>(),
            (V3{{{0, 10}, {1, 11}, {2, 12}}, {{3, 13}, {4, 14}, {5, 15}}}));
  EXPECT_EQ(Tensor::stack({a, b}, 1).to_vec3<float>(),
            (V3{{{0, 1, 2}, {10, 11, 12}}, {{3, 4, 5}, {13, 14, 15}}}));
  expect_error(
      [&] {
        Tensor::stack({a, a.t()}, 0);
      },
      ErrorKind::ShapeMismatch, {"stack", "[2, 3]", "[3, 2]"});
  expect_error([&] { Tensor::stack({a, b}, 3); }, ErrorKind::DimOutOfRange, {"stack"});
  expect_error([&] { Tensor::stack({}, 0); }, ErrorKind::InvalidArgument, {"stack"});
}

// ---- pad / roll / flip / repeat ------------------------------------------------------------

TEST(ShapePad, WithZeros) {
  Tensor t = Tensor::arange(1.f, 5.f, cpu()).reshape({2, 2});
  EXPECT_EQ(t.pad_with_zeros(0, 1, 2).to_vec2<float>(), (V2{{0, 0}, {1, 2}, {3, 4}, {0, 0}, {0, 0}}));
  EXPECT_EQ(t.pad_with_zeros(1, 1, 2).to_vec2<float>(), (V2{{0, 1, 2, 0, 0}, {0, 3, 4, 0, 0}}));
  EXPECT_EQ(t.pad_with_zeros(-1, 0, 1).to_vec2<float>(), (V2{{1, 2, 0}, {3, 4, 0}}));
  EXPECT_EQ(t.pad_with_zeros(1, 0, 0).storage().get(), t.storage().get());
  expect_error([&] { t.pad_with_zeros(2, 1, 1); }, ErrorKind::DimOutOfRange, {"pad_with_zeros"});
}

TEST(ShapePad, WithSame) {
  // tensor_tests.rs: pad_with_same
  Tensor t = Tensor::arange(1.f, 5.f, cpu()).reshape({2, 2});
  EXPECT_EQ(t.pad_with_same(0, 1, 2).to_vec2<float>(), (V2{{1, 2}, {1, 2}, {3, 4}, {3, 4}, {3, 4}}));
  EXPECT_EQ(t.pad_with_same(1, 1, 2).to_vec2<float>(), (V2{{1, 1, 2, 2, 2}, {3, 3, 4, 4, 4}}));
  EXPECT_EQ(t.pad_with_same(1, 2, 0).to_vec2<float>(), (V2{{1, 1, 1, 2}, {3, 3, 3, 4}}));
  expect_error(
      [&] {
        Tensor::zeros({0, 2}, DType::F32, cpu()).pad_with_same(1, 1, 1);
      },
      ErrorKind::InvalidArgument, {"pad_with_same", "[0, 2]"});
}

TEST(ShapePad, StridedInputsMatchContiguous) {
  Tensor c = arange_f32(4 * 5 * 6).reshape({4, 5, 6});
  Tensor tv = c.transpose(0, 2).contiguous().transpose(0, 2);  // same values, strided
  Tensor ov = test_util::offset_view(c, 3);
  ASSERT_FALSE(tv.is_contiguous());
  for (int64_t d = 0; d < 3; ++d) {
    SCOPED_TRACE(d);
    auto z = c.pad_with_zeros(d, 2, 3).flatten_all().to_vec1<float>();
    auto s = c.pad_with_same(d, 3, 2).flatten_all().to_vec1<float>();
    EXPECT_EQ(tv.pad_with_zeros(d, 2, 3).flatten_all().to_vec1<float>(), z);
    EXPECT_EQ(ov.pad_with_zeros(d, 2, 3).flatten_all().to_vec1<float>(), z);
    EXPECT_EQ(tv.pad_with_same(d, 3, 2).flatten_all().to_vec1<float>(), s);
    EXPECT_EQ(ov.pad_with_same(d, 3, 2).flatten_all().to_vec1<float>(), s);
  }
  // spot checks of the contiguous result: [4, 5, 6] padded on dim 1 by (3, 2)
  Tensor s1 = c.pad_with_same(1, 3, 2);
  EXPECT_EQ(s1.i({1, 0, 2}).to_scalar<float>(), 32.f);  // = c[1, 0, 2]
  EXPECT_EQ(s1.i({1, 9, 2}).to_scalar<float>(), 56.f);  // = c[1, 4, 2]
  Tensor z1 = c.pad_with_zeros(2, 2, 3);
  EXPECT_EQ(z1.i({3, 4}).to_vec1<float>(), (V1{0, 0, 114, 115, 116, 117, 118, 119, 0, 0, 0}));
}

TEST(ShapePad, EveryDTypeCopiesBytesExactly) {
  for (DType dt : kAllDTypes) {
    SCOPED_TRACE(dtype_name(dt));
    size_t es = dtype_size(dt);
    Tensor a = patterned(dt, {2, 3}, 7);
    auto ab = bytes_of(a);
    // pad_with_same along dim 1 by (1, 2): columns 0, 0, 1, 2, 2, 2
    const size_t cols[] = {0, 0, 1, 2, 2, 2};
    EXPECT_EQ(bytes_of(a.pad_with_same(1, 1, 2)),
              gather_bytes(ab, es, 12, [&](size_t j) { return (j / 6) * 3 + cols[j % 6]; }));
    std::vector<uint8_t> want(2 * 5 * es, 0);
    for (size_t r = 0; r < 2; ++r) std::memcpy(&want[(r * 5 + 1) * es], &ab[r * 3 * es], 3 * es);
    EXPECT_EQ(bytes_of(a.pad_with_zeros(1, 1, 1)), want);
  }
}

TEST(ShapeRoll, CandleValuesAndShifts) {
  Tensor t = Tensor::new_({{0.f, 1.f}, {2.f, 3.f}, {4.f, 5.f}}, cpu());
  EXPECT_EQ(t.roll(1, 0).to_vec2<float>(), (V2{{4, 5}, {0, 1}, {2, 3}}));
  EXPECT_EQ(t.roll(-1, 0).to_vec2<float>(), (V2{{2, 3}, {4, 5}, {0, 1}}));
  EXPECT_EQ(t.roll(7, 0).to_vec2<float>(), (V2{{4, 5}, {0, 1}, {2, 3}}));
  EXPECT_EQ(t.roll(-8, 0).to_vec2<float>(), (V2{{4, 5}, {0, 1}, {2, 3}}));
  EXPECT_EQ(t.roll(1, 1).to_vec2<float>(), (V2{{1, 0}, {3, 2}, {5, 4}}));
  EXPECT_EQ(t.roll(3, 0).to_vec2<float>(), t.to_vec2<float>());
  EXPECT_EQ(t.t().roll(1, -1).to_vec2<float>(), (V2{{4, 0, 2}, {5, 1, 3}}));
  expect_error([&] { t.roll(1, 2); }, ErrorKind::DimOutOfRange, {"roll"});
}

TEST(ShapeFlip, CandleValues) {
  EXPECT_EQ(arange_f32(5).flip({0}).to_vec1<float>(), (V1{4, 3, 2, 1, 0}));
  EXPECT_EQ(arange_f32(6).reshape({2, 3}).flip({0, 1}).to_vec2<float>(), (V2{{5, 4, 3}, {2, 1, 0}}));
  EXPECT_EQ(arange_f32(12).reshape({2, 2, 3}).flip({2}).to_vec3<float>(),
            (V3{{{2, 1, 0}, {5, 4, 3}}, {{8, 7, 6}, {11, 10, 9}}}));
  EXPECT_EQ(arange_f32(12).reshape({2, 2, 3}).flip({1}).to_vec3<float>(),
            (V3{{{3, 4, 5}, {0, 1, 2}}, {{9, 10, 11}, {6, 7, 8}}}));
  EXPECT_EQ(arange_f32(12).reshape({2, 2, 3}).flip({-3, -1}).to_vec3<float>(),
            (V3{{{8, 7, 6}, {11, 10, 9}}, {{2, 1, 0}, {5, 4, 3}}}));
  Tensor t = arange_f32(6).reshape({2, 3});
  Tensor f = t.flip({0});
  EXPECT_NE(f.storage().get(), t.storage().get());
  EXPECT_TRUE(f.is_contiguous());
  expect_error([&] { t.flip({0, -2}); }, ErrorKind::InvalidArgument, {"flip"});
  expect_error([&] { t.flip({2}); }, ErrorKind::DimOutOfRange, {"flip"});
}

TEST(ShapeFlip, StridedInputsMatchContiguous) {
  Tensor c = arange_f32(3 * 4 * 5).reshape({3, 4, 5});
  Tensor tv = c.transpose(0, 2).contiguous().transpose(0, 2);
  Tensor ov = test_util::offset_view(c, 1);
  Tensor bc = Tensor::new_({1.f, 2.f, 3.f}, cpu()).broadcast_as({2, 3});
  for (const std::vector<int64_t>& dims : {std::vector<int64_t>{0}, {1}, {2}, {0, 2}, {0, 1, 2}}) {
    auto want = c.flip(dims).flatten_all().to_vec1<float>();
    EXPECT_EQ(tv.flip(dims).flatten_all().to_vec1<float>(), want);
    EXPECT_EQ(ov.flip(dims).flatten_all().to_vec1<float>(), want);
  }
  EXPECT_EQ(bc.flip({1}).to_vec2<float>(), (V2{{3, 2, 1}, {3, 2, 1}}));
  EXPECT_EQ(c.t().flip({1}).i({0, 0}).to_vec1<float>(), (V1{4, 9, 14, 19}));  // = c[0, :, 4]
}

TEST(ShapeFlip, EveryDTypeCopiesBytesExactly) {
  for (DType dt : kAllDTypes) {
    SCOPED_TRACE(dtype_name(dt));
    size_t es = dtype_size(dt);
    Tensor a = patterned(dt, {2, 3}, 3);
    auto ab = bytes_of(a);
    EXPECT_EQ(bytes_of(a.flip({1})),
              gather_bytes(ab, es, 6, [](size_t j) { return (j / 3) * 3 + 2 - j % 3; }));
    EXPECT_EQ(bytes_of(a.flip({0})),
              gather_bytes(ab, es, 6, [](size_t j) { return (1 - j / 3) * 3 + j % 3; }));
    EXPECT_EQ(bytes_of(a.t().flip({0})), gather_bytes(ab, es, 6, [](size_t j) {
                return (j % 2) * 3 + 2 - j / 2;  // row j/2 of a^T, reversed rows
              }));
  }
}

TEST(ShapeRepeat, Values) {
  Tensor t = Tensor::new_({{1.f, 2.f}, {3.f, 4.f}}, cpu());
  EXPECT_EQ(t.repeat({2, 3}).to_vec2<float>(),
            (V2{{1, 2, 1, 2, 1, 2}, {3, 4, 3, 4, 3, 4}, {1, 2, 1, 2, 1, 2}, {3, 4, 3, 4, 3, 4}}));
  EXPECT_EQ(t.repeat({3, 1}).to_vec2<float>(), (V2{{1, 2}, {3, 4}, {1, 2}, {3, 4}, {1, 2}, {3, 4}}));
  EXPECT_EQ(t.repeat({1, 2}).to_vec2<float>(), (V2{{1, 2, 1, 2}, {3, 4, 3, 4}}));
  // leading repeats add dims, as PyTorch and candle
  EXPECT_EQ(t.repeat({2, 1, 1}).to_vec3<float>(), (V3{{{1, 2}, {3, 4}}, {{1, 2}, {3, 4}}}));
  EXPECT_EQ(t.repeat({1, 1}).storage().get(), t.storage().get());
  EXPECT_EQ(t.t().repeat({1, 2}).to_vec2<float>(), (V2{{1, 3, 1, 3}, {2, 4, 2, 4}}));
  EXPECT_EQ(Tensor::new_({{5.f}, {6.f}}, cpu()).repeat({1, 4}).to_vec2<float>(),
            (V2{{5, 5, 5, 5}, {6, 6, 6, 6}}));
}

TEST(ShapeRepeat, ZeroFactor) {
  Tensor t = Tensor::new_({{1u, 2u}, {3u, 4u}}, cpu());
  EXPECT_EQ(t.repeat({0, 2}).dims(), (std::vector<size_t>{0, 4}));
  EXPECT_EQ(t.repeat({2, 0}).dims(), (std::vector<size_t>{4, 0}));
}

TEST(ShapeRepeat, MatchesNaiveTiling) {
  Tensor c = arange_f32(2 * 3 * 4).reshape({2, 3, 4});
  std::vector<Tensor> inputs{c, c.transpose(0, 2).contiguous().transpose(0, 2), test_util::offset_view(c, 2),
                             c.narrow(2, 1, 2)};
  for (const Tensor& x : inputs) {
    for (const Shape& reps :
         {Shape{3, 1, 1}, Shape{1, 2, 1}, Shape{1, 1, 5}, Shape{2, 3, 2}, Shape{2, 1, 3, 1}}) {
      SCOPED_TRACE(reps.to_string());
      Tensor r = x.repeat(reps);
      auto got = r.flatten_all().to_vec1<float>();
      auto src = x.contiguous().flatten_all().to_vec1<float>();
      auto in = x.dims();
      size_t lead = reps.rank() - in.size();
      auto out = r.dims();
      ASSERT_EQ(got.size(), r.elem_count());
      for (size_t j = 0; j < got.size(); ++j) {
        size_t rem = j, src_idx = 0, mul = 1;
        for (size_t k = out.size(); k-- > lead;) {
          size_t o = rem % out[k];
          rem /= out[k];
          src_idx += (o % in[k - lead]) * mul;
          mul *= in[k - lead];
        }
        ASSERT_EQ(got[j], src[src_idx]) << "at " << j;
      }
    }
  }
}

// ---- i(...) ------------------------------------------------------------------------------------

TEST(ShapeIndex, Integer) {
  Tensor t = arange_u32(0, 6).reshape({2, 3});
  EXPECT_EQ(t.i(1).to_vec1<uint32_t>(), (std::vector<uint32_t>{3, 4, 5}));
  EXPECT_EQ(t.i({Slice::all(), 2}).to_vec1<uint32_t>(), (std::vector<uint32_t>{2, 5}));
  EXPECT_EQ(t.i(-1).to_vec1<uint32_t>(), (std::vector<uint32_t>{3, 4, 5}));
  EXPECT_EQ(t.i({Slice::all(), -3}).to_vec1<uint32_t>(), (std::vector<uint32_t>{0, 3}));
  EXPECT_EQ(t.i({size_t{1}, int64_t{0}}).to_scalar<uint32_t>(), 3u);
}

TEST(ShapeIndex, Ranges) {
  Tensor t = arange_u32(0, 12).reshape({4, 3});
  using U2 = std::vector<std::vector<uint32_t>>;
  EXPECT_EQ(t.i(Slice::all()).to_vec2<uint32_t>(), (U2{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9, 10, 11}}));
  EXPECT_EQ(t.i(Slice(1, 3)).to_vec2<uint32_t>(), (U2{{3, 4, 5}, {6, 7, 8}}));
  EXPECT_EQ(t.i(Slice::from(2)).to_vec2<uint32_t>(), (U2{{6, 7, 8}, {9, 10, 11}}));
  EXPECT_EQ(t.i(Slice::to(2)).to_vec2<uint32_t>(), (U2{{0, 1, 2}, {3, 4, 5}}));
  EXPECT_EQ(t.i(Slice::to(1)).to_vec2<uint32_t>(), (U2{{0, 1, 2}}));
  EXPECT_EQ(t.i(Slice(1, 1)).dims(), (std::vector<size_t>{0, 3}));
  EXPECT_EQ(t.i(Slice(1, 0)).dims(), (std::vector<size_t>{0, 3}));  // reversed range: empty
  EXPECT_EQ(t.i(Slice(-2, std::nullopt)).to_vec2<uint32_t>(), (U2{{6, 7, 8}, {9, 10, 11}}));
  EXPECT_EQ(t.i(Slice(1, -1)).to_vec2<uint32_t>(), (U2{{3, 4, 5}, {6, 7, 8}}));
  EXPECT_EQ(t.i({Slice::all(), Slice::to(-1)}).to_vec2<uint32_t>(), (U2{{0, 1}, {3, 4}, {6, 7}, {9, 10}}));
  EXPECT_EQ(t.i(Slice(1, 3)).storage().get(), t.storage().get());
}

TEST(ShapeIndex, ThreeDims) {
  Tensor t = arange_u32(0, 24).reshape({2, 3, 4});
  using U1 = std::vector<uint32_t>;
  using U2 = std::vector<std::vector<uint32_t>>;
  EXPECT_EQ(t.i({0, 0, 0}).to_scalar<uint32_t>(), 0u);
  EXPECT_EQ(t.i({1, 0, 0}).to_scalar<uint32_t>(), 12u);
  EXPECT_EQ(t.i({0, 1, 0}).to_scalar<uint32_t>(), 4u);
  EXPECT_EQ(t.i({0, 1, 3}).to_scalar<uint32_t>(), 7u);
  EXPECT_EQ(t.i({Slice(0, 2), 0, 0}).to_vec1<uint32_t>(), (U1{0, 12}));
  EXPECT_EQ(t.i({Slice(0, 2), Slice::all(), 0}).to_vec2<uint32_t>(), (U2{{0, 4, 8}, {12, 16, 20}}));
  EXPECT_EQ(t.i({Slice::to(2), Slice::all(), 3}).to_vec2<uint32_t>(), (U2{{3, 7, 11}, {15, 19, 23}}));
  EXPECT_EQ(t.i({1, Slice::all(), 3}).to_vec1<uint32_t>(), (U1{15, 19, 23}));
  // layout_tests.rs: strided_blocks views
  EXPECT_EQ(t.i({Slice::all(), 1}).to_vec2<uint32_t>(), (U2{{4, 5, 6, 7}, {16, 17, 18, 19}}));
  EXPECT_EQ(t.i(1).layout().start_offset(), 12u);
}

TEST(ShapeIndex, Errors) {
  Tensor t = arange_u32(0, 12).reshape({4, 3});
  expect_error([&] { t.i(4); }, ErrorKind::IndexOutOfRange, {"i", "[4, 3]"});
  expect_error([&] { t.i(-5); }, ErrorKind::IndexOutOfRange, {"i", "[4, 3]"});
  expect_error([&] { t.i(Slice(0, 5)); }, ErrorKind::IndexOutOfRange, {"i", "[4, 3]"});
  expect_error([&] { t.i(Slice(-5, 2)); }, ErrorKind::IndexOutOfRange, {"i"});
  expect_error([&] { t.i({0, 0, 0}); }, ErrorKind::DimOutOfRange, {"i", "[4, 3]"});
}

// ---- determinism ---------------------------------------------------------------------------

TEST(ShapeThreads, BigCopiesAreIdenticalForAnyThreadCount) {
  Tensor a = Tensor::arange(0.f, 300.f * 257.f, cpu()).reshape({300, 257});
  Tensor b = Tensor::arange(0.f, 300.f * 129.f, cpu()).reshape({300, 129});
  Tensor big = Tensor::arange(0.f, 1.f * (1 << 20), cpu());
  auto run = [&] {
    std::vector<std::vector<uint8_t>> out;
    out.push_back(bytes_of(Tensor::cat({a, b}, 1)));
    out.push_back(bytes_of(Tensor::cat({a.t(), b.t()}, 0)));
    out.push_back(bytes_of(Tensor::cat({big, big}, 0)));
    out.push_back(bytes_of(a.pad_with_zeros(1, 30, 40)));
    out.push_back(bytes_of(a.t().pad_with_same(1, 30, 40)));
    out.push_back(bytes_of(a.flip({0, 1})));
    out.push_back(bytes_of(a.t().flip({1})));
    out.push_back(bytes_of(a.repeat({2, 3})));
    out.push_back(bytes_of(a.t().contiguous()));
    out.push_back(bytes_of(a.t().reshape({257 * 300})));
    return out;
  };
  set_num_threads(1);
  auto ref = run();
  for (size_t n : {2, 3}) {
    set_num_threads(n);
    auto got = run();
    for (size_t k = 0; k < ref.size(); ++k) EXPECT_EQ(got[k], ref[k]) << "case " << k << ", threads " << n;
  }
  set_num_threads(0);
  // and the values are right
  auto flipped = a.flip({0, 1}).flatten_all().to_vec1<float>();
  EXPECT_EQ(flipped.front(), 300.f * 257.f - 1.f);
  EXPECT_EQ(flipped.back(), 0.f);
  EXPECT_EQ(a.t().reshape({257 * 300}).to_vec1<float>()[301], 257.f + 1.f);
}

TEST(ShapeIndexing, ListsAndTensorsOfIndices) {
  Device dev = Device::cpu();
  Tensor t = Tensor::arange<float>(0, 12, dev).reshape({3, 4});
  // a list selects rows (index_select along dim 0); negative entries count from the end
  EXPECT_EQ(t.i(std::vector<int64_t>{2, 0}).to_vec2<float>(),
            (std::vector<std::vector<float>>{{8, 9, 10, 11}, {0, 1, 2, 3}}));
  EXPECT_EQ(t.i({Slice::all(), std::vector<int64_t>{-1, 1}}).to_vec2<float>(),
            (std::vector<std::vector<float>>{{3, 1}, {7, 5}, {11, 9}}));
  Tensor ids = Tensor::new_({1u, 1u, 2u}, dev);
  EXPECT_EQ(t.i({1, ids}).to_vec1<float>(), (std::vector<float>{5, 5, 6}));
  EXPECT_THROW(t.i(std::vector<int64_t>{3}), Error);
  EXPECT_THROW(t.i({Slice::all(), std::vector<int64_t>{-5}}), Error);
}
