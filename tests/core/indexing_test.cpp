// The gather/scatter/index family. Expected values of the *CandleValues tests come from
// candle-core/tests/tensor_tests.rs (index_select, gather, scatter, scatter_add, index_add,
// slice_scatter, slice_set, embeddings).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "candle/candle.h"
#include "test_util.h"

using namespace candle;
using test_util::view;

namespace {

const Device& cpu() {
  static Device d = Device::cpu();
  return d;
}

using Mat = std::vector<std::vector<float>>;

// 0, 1, ..., n-1 as f32 with the given shape (candle's arange(..).reshape(..)).
Tensor arange_f32(float start, const Shape& shape) {
  std::vector<float> v(shape.elem_count());
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + static_cast<float>(i);
  return Tensor::from_vec(v, shape, cpu());
}

Tensor ids_of(const std::vector<int64_t>& v, const Shape& shape, DType dt = DType::U32) {
  return Tensor::from_vec(v, shape, cpu()).to_dtype(dt);
}

constexpr DType kIndexDTypes[] = {DType::U8, DType::U32, DType::I16, DType::I32, DType::I64};

using test_util::bytes_of;

// A tensor of pseudo-random bytes (NaN payloads and all): copies must move them unchanged.
Tensor random_bytes(DType dt, const Shape& shape, uint32_t seed) {
  std::vector<std::byte> b(shape.elem_count() * dtype_size(dt));
  uint32_t x = seed * 2654435761u + 1;
  for (auto& v : b) {
    x = x * 1664525u + 1013904223u;
    v = static_cast<std::byte>(x >> 24);
  }
  return Tensor::from_raw_buffer(b, dt, shape, cpu());
}

std::vector<int64_t> pseudo_random_ids(size_t n, size_t limit, uint32_t seed) {
  std::vector<int64_t> v(n);
  uint32_t x = seed;
  for (auto& e : v) {
    x = x * 1664525u + 1013904223u;
    e = static_cast<int64_t>((x >> 8) % limit);
  }
  return v;
}

template <typename Fn>
void expect_error(ErrorKind kind, Fn&& fn, std::vector<std::string> needles) {
  try {
    fn();
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

struct Threads {
  explicit Threads(size_t n) { set_num_threads(n); }
  ~Threads() { set_num_threads(0); }
};

// Runs fn with 1, 2 and 3 threads; the bytes of its results must be identical.
template <typename Fn>
void expect_same_bytes_for_any_thread_count(Fn&& fn) {
  std::vector<uint8_t> ref;
  {
    Threads t(1);
    ref = bytes_of(fn());
  }
  for (size_t n : {2, 3}) {
    Threads t(n);
    EXPECT_EQ(bytes_of(fn()), ref) << n << " threads";
  }
}

const Mat k4x3 = {{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9, 10, 11}};

}  // namespace

// ---- index_select -----------------------------------------------------------------------------

TEST(IndexSelect, CandleValues) {
  Tensor t = arange_f32(0, {4, 3});
  Tensor ids = ids_of({0, 2, 1}, {3});
  EXPECT_EQ(t.index_select(ids, 1).to_vec2<float>(), (Mat{{0, 2, 1}, {3, 5, 4}, {6, 8, 7}, {9, 11, 10}}));
  EXPECT_EQ(t.index_select(ids, 0).to_vec2<float>(), (Mat{{0, 1, 2}, {6, 7, 8}, {3, 4, 5}}));
  Tensor ids6 = ids_of({0, 2, 1, 0, 2, 1}, {6});
  EXPECT_EQ(t.index_select(ids6, 0).to_vec2<float>(),
            (Mat{{0, 1, 2}, {6, 7, 8}, {3, 4, 5}, {0, 1, 2}, {6, 7, 8}, {3, 4, 5}}));
  Tensor t2 = arange_f32(1, {2, 2});
  EXPECT_EQ(t2.index_select(ids_of({1, 0, 1}, {3}), 1).to_vec2<float>(), (Mat{{2, 1, 2}, {4, 3, 4}}));
}

TEST(IndexSelect, EveryIndexDtype) {
  Tensor t = arange_f32(0, {4, 3});
  for (DType dt : kIndexDTypes) {
    Tensor ids = ids_of({0, 2, 1}, {3}, dt);
    EXPECT_EQ(t.index_select(ids, 1).to_vec2<float>(), (Mat{{0, 2, 1}, {3, 5, 4}, {6, 8, 7}, {9, 11, 10}}))
        << dtype_name(dt);
    EXPECT_EQ(t.index_select(ids, -2).to_vec2<float>(), (Mat{{0, 1, 2}, {6, 7, 8}, {3, 4, 5}}))
        << dtype_name(dt);
  }
}

TEST(IndexSelect, EveryDataDtypeBytesExact) {
  // [2, 3, 4] along dim 1 with ids [2, 0, 2, 1]: out[a, k, c] = t[a, ids[k], c]
  std::vector<int64_t> ids = {2, 0, 2, 1};
  for (DType dt : kAllDTypes) {
    Tensor t = random_bytes(dt, {2, 3, 4}, 7);
    std::vector<uint8_t> src = bytes_of(t), want;
    size_t es = dtype_size(dt);
    for (size_t a = 0; a < 2; ++a)
      for (int64_t k : ids)
        for (size_t c = 0; c < 4; ++c)
          for (size_t b = 0; b < es; ++b) want.push_back(src[((a * 3 + k) * 4 + c) * es + b]);
    Tensor r = t.index_select(ids_of(ids, {4}), 1);
    EXPECT_EQ(r.shape(), Shape({2, 4, 4}));
    EXPECT_EQ(r.dtype(), dt);
    EXPECT_EQ(bytes_of(r), want) << dtype_name(dt);
  }
}

TEST(IndexSelect, LastDimBytesExact) {
  std::vector<int64_t> ids = {3, 3, 0};
  for (DType dt : kAllDTypes) {
    Tensor t = random_bytes(dt, {3, 4}, 11);
    std::vector<uint8_t> src = bytes_of(t), want;
    size_t es = dtype_size(dt);
    for (size_t a = 0; a < 3; ++a)
      for (int64_t k : ids)
        for (size_t b = 0; b < es; ++b) want.push_back(src[(a * 4 + k) * es + b]);
    EXPECT_EQ(bytes_of(t.index_select(ids_of(ids, {3}), 1)), want) << dtype_name(dt);
  }
}

TEST(IndexSelect, TransposedSelf) {
  Tensor t = test_util::transposed_copy_view(arange_f32(0, {4, 3}));
  ASSERT_FALSE(t.is_contiguous());
  Tensor ids = ids_of({0, 2, 1}, {3});
  EXPECT_EQ(t.index_select(ids, 1).to_vec2<float>(), (Mat{{0, 2, 1}, {3, 5, 4}, {6, 8, 7}, {9, 11, 10}}));
  EXPECT_EQ(t.index_select(ids, 0).to_vec2<float>(), (Mat{{0, 1, 2}, {6, 7, 8}, {3, 4, 5}}));
}

TEST(IndexSelect, OffsetSelf) {
  Tensor t = test_util::offset_view(arange_f32(0, {4, 3}));
  ASSERT_NE(t.layout().start_offset(), 0u);
  Tensor ids = ids_of({3, 0}, {2});
  EXPECT_EQ(t.index_select(ids, 0).to_vec2<float>(), (Mat{{9, 10, 11}, {0, 1, 2}}));
  EXPECT_EQ(t.index_select(ids_of({2, 0}, {2}), 1).to_vec2<float>(), (Mat{{2, 0}, {5, 3}, {8, 6}, {11, 9}}));
}

TEST(IndexSelect, BroadcastSelf) {
  Tensor row = Tensor::new_({1.f, 2.f, 3.f}, cpu());
  Tensor t = view(row, Layout::contiguous({1, 3}).broadcast_as({4, 3}));
  EXPECT_EQ(t.index_select(ids_of({3, 1}, {2}), 0).to_vec2<float>(), (Mat{{1, 2, 3}, {1, 2, 3}}));
  EXPECT_EQ(t.index_select(ids_of({2, 2}, {2}), 1).to_vec2<float>(), (Mat{{3, 3}, {3, 3}, {3, 3}, {3, 3}}));
}

TEST(IndexSelect, StridedAndOffsetIds) {
  Tensor t = arange_f32(0, {4, 3});
  // storage [9, 3, 9, 0, 9, 2]: the view at offset 1 with stride 2 reads [3, 0, 2]
  Tensor store = ids_of({9, 3, 9, 0, 9, 2}, {6}, DType::I64);
  Tensor ids = view(store, Layout(Shape{3}, {2}, 1));
  EXPECT_EQ(t.index_select(ids, 0).to_vec2<float>(), (Mat{{9, 10, 11}, {0, 1, 2}, {6, 7, 8}}));
}

TEST(IndexSelect, OutOfRangeIdThrows) {
  Tensor t = arange_f32(0, {4, 3});
  expect_error(ErrorKind::IndexOutOfRange,
               [&] {
                 t.index_select(ids_of({0, 4}, {2}), 0);
               },
               {"index_select", "index 4", "size 4"});
  expect_error(ErrorKind::IndexOutOfRange, [&] { t.index_select(ids_of({3}, {1}, DType::U8), 1); },
               {"index_select", "index 3", "size 3"});
  for (DType dt : {DType::I16, DType::I32, DType::I64}) {
    expect_error(ErrorKind::IndexOutOfRange,
                 [&] {
                   t.index_select(ids_of({1, -1}, {2}, dt), 0);
                 },
                 {"index_select", "index -1", "size 4"});
  }
  expect_error(ErrorKind::IndexOutOfRange,
               [&] { t.index_select(ids_of({int64_t{1} << 40}, {1}, DType::I64), 0); }, {"1099511627776"});
}

TEST(IndexSelect, FirstOutOfRangeIdIsReportedForAnyThreadCount) {
  Tensor t = arange_f32(0, {4, 3});
  std::vector<int64_t> idv = pseudo_random_ids(100000, 4, 63);
  idv[70000] = 9;
  idv[50000] = 5;
  Tensor ids = ids_of(idv, {100000}, DType::I32);
  for (size_t n : {1, 2, 3}) {
    Threads threads(n);
    expect_error(ErrorKind::IndexOutOfRange, [&] { t.index_select(ids, 0); }, {"index 5 ", "size 4"});
  }
}

TEST(IndexSelect, RejectsBadArguments) {
  Tensor t = arange_f32(0, {4, 3});
  expect_error(ErrorKind::DTypeMismatch, [&] { t.index_select(Tensor::new_({0.f}, cpu()), 0); },
               {"index_select"});
  expect_error(ErrorKind::ShapeMismatch,
               [&] {
                 t.index_select(ids_of({0, 1}, {1, 2}), 0);
               },
               {"index_select", "[4, 3]", "[1, 2]"});
  EXPECT_THROW(t.index_select(ids_of({0}, {1}), 2), Error);
}

TEST(IndexSelect, EmptyIds) {
  Tensor t = arange_f32(0, {4, 3});
  Tensor r = t.index_select(Tensor::zeros({0}, DType::U32, cpu()), 0);
  EXPECT_EQ(r.shape(), Shape({0, 3}));
}

TEST(IndexSelect, LargeTableMatchesReferenceForAnyThreadCount) {
  const size_t vocab = 1000, hidden = 48, n = 3000;  // 144K output elements
  Tensor table = random_bytes(DType::F32, {vocab, hidden}, 3);
  std::vector<int64_t> ids = pseudo_random_ids(n, vocab, 5);
  std::vector<uint8_t> src = bytes_of(table), want;
  for (int64_t id : ids)
    want.insert(want.end(), src.begin() + id * hidden * 4, src.begin() + (id + 1) * hidden * 4);
  Tensor ids_t = ids_of(ids, {n});
  EXPECT_EQ(bytes_of(table.index_select(ids_t, 0)), want);
  expect_same_bytes_for_any_thread_count([&] { return table.index_select(ids_t, 0); });
  Tensor wide = random_bytes(DType::BF16, {64, 1024}, 4);
  Tensor cols = ids_of(pseudo_random_ids(700, 1024, 6), {700}, DType::I32);
  expect_same_bytes_for_any_thread_count([&] { return wide.index_select(cols, 1); });
}

// ---- gather ---------------------------------------------------------------------------------

TEST(Gather, CandleValues) {
  Tensor t = arange_f32(0, {4, 3});
  EXPECT_EQ(t.gather(ids_of({0, 2, 1, 0}, {4, 1}), 1).to_vec2<float>(), (Mat{{0}, {5}, {7}, {9}}));
  EXPECT_EQ(t.gather(ids_of({0, 0, 2, 0, 1, 1, 0, 2}, {4, 2}), 1).to_vec2<float>(),
            (Mat{{0, 0}, {5, 3}, {7, 7}, {9, 11}}));
  EXPECT_EQ(t.gather(ids_of({0, 2, 0}, {1, 3}), 0).to_vec2<float>(), (Mat{{0, 7, 2}}));
  EXPECT_EQ(t.gather(ids_of({0, 2, 0, 0, 1, 1}, {2, 3}), 0).to_vec2<float>(), (Mat{{0, 7, 2}, {0, 4, 5}}));
}

TEST(Gather, CandleValues3dDim1) {
  Tensor t = Tensor::from_vec(
      std::vector<float>{
          -117, -175, 69,   -163, 200,  242,  -21,  -67,  179,  150,  -126, -75,  -118, 38,   -138, -13,
          -221, 136,  -185, 180,  58,   182,  -204, -149, 3,    -148, -58,  -154, -43,  45,   -108, 4,
          -69,  -249, -71,  -21,  80,   110,  -152, -235, -88,  7,    92,   -250, -186, 207,  -242, 98,
          238,  19,   64,   -242, -150, -97,  218,  58,   111,  -233, 204,  -212, -242, -232, 83,   42,
          153,  62,   -251, 219,  -117, 36,   -119, 10,   215,  159,  -169, -27,  -83,  101,  -88,  169,
          -205, 93,   225,  -64,  -162, 240,  214,  23,   -112, 6,    21,   245,  -38,  113,  93,   215,
          91,   -188, -148, 101,  74,   203,  -35,  55,   -116, -130, -153, -96,  58,   22,   -45,  -194,
          -221, -134, 73,   159,  -203, -254, 31,   235,  105,  -53,  61,   186,  -195, 234,  75,   -1,
          51,   139,  160,  -108, -173, -167, 161,  19,   83,   -246, 156,  -222, 109,  39,   -149, 137},
      {6, 6, 4}, cpu());
  Tensor ids = ids_of({4, 4, 4, 2, 0, 4, 4, 3, 1, 5, 3, 4, 0, 3, 3, 2, 1, 1, 5, 2, 1, 4, 5, 4}, {6, 1, 4});
  EXPECT_EQ(t.gather(ids, 1).flatten_to_vec<float>(),
            (std::vector<float>{-221, 136, -185, -75, 3,  7,   92, -235, -150, 36,   83,   219,
                                215,  240, 214,  -64, 74, 203, 31, -96,  -195, -246, -149, -222}));
}

TEST(Gather, CandleValues3dDim2) {
  Tensor t = Tensor::from_vec(
      std::vector<float>{-162, 202, -126, -39, 35, -65, 1, 80, 37, 248, -191, 89, 117, -40, -217, 220},
      {2, 4, 2}, cpu());
  Tensor ids = ids_of({1, 0, 1, 1, 0, 1, 0, 1}, {2, 4, 1});
  EXPECT_EQ(t.gather(ids, 2).flatten_to_vec<float>(),
            (std::vector<float>{202, -126, -65, 80, 37, 89, 117, 220}));
  Tensor t2 = Tensor::from_vec(
      std::vector<float>{-21, -197, 194, 122, 255, -106, -191, 250, 33, -117, 43, 10, -130, 238, -217, -92},
      {4, 2, 2}, cpu());
  Tensor ids2 = ids_of({0, 1, 1, 0, 1, 0, 0, 1, 0, 1, 0, 1, 1, 0, 1, 0}, {4, 2, 2});
  EXPECT_EQ(t2.gather(ids2, 2).flatten_to_vec<float>(),
            (std::vector<float>{-21, -197, 122, 194, -106, 255, -191, 250, 33, -117, 43, 10, 238, -130, -92,
                                -217}));
}

TEST(Gather, EveryIndexDtype) {
  Tensor t = arange_f32(0, {4, 3});
  for (DType dt : kIndexDTypes) {
    EXPECT_EQ(t.gather(ids_of({0, 0, 2, 0, 1, 1, 0, 2}, {4, 2}, dt), 1).to_vec2<float>(),
              (Mat{{0, 0}, {5, 3}, {7, 7}, {9, 11}}))
        << dtype_name(dt);
  }
}

TEST(Gather, EveryDataDtypeBytesExact) {
  // [3, 4, 2] gathered along dim 1 with ids of shape [3, 5, 2]
  std::vector<int64_t> ids = pseudo_random_ids(30, 4, 9);
  for (DType dt : kAllDTypes) {
    Tensor t = random_bytes(dt, {3, 4, 2}, 13);
    std::vector<uint8_t> src = bytes_of(t), want;
    size_t es = dtype_size(dt);
    for (size_t a = 0; a < 3; ++a)
      for (size_t k = 0; k < 5; ++k)
        for (size_t c = 0; c < 2; ++c) {
          size_t id = static_cast<size_t>(ids[(a * 5 + k) * 2 + c]);
          for (size_t b = 0; b < es; ++b) want.push_back(src[((a * 4 + id) * 2 + c) * es + b]);
        }
    Tensor r = t.gather(ids_of(ids, {3, 5, 2}), 1);
    EXPECT_EQ(r.shape(), Shape({3, 5, 2}));
    EXPECT_EQ(bytes_of(r), want) << dtype_name(dt);
  }
}

TEST(Gather, StridedSelfAndIds) {
  Tensor t = test_util::transposed_copy_view(arange_f32(0, {4, 3}));
  Tensor ids = test_util::transposed_copy_view(ids_of({0, 0, 2, 0, 1, 1, 0, 2}, {4, 2}, DType::I64));
  ASSERT_FALSE(t.is_contiguous());
  ASSERT_FALSE(ids.is_contiguous());
  EXPECT_EQ(t.gather(ids, 1).to_vec2<float>(), (Mat{{0, 0}, {5, 3}, {7, 7}, {9, 11}}));
  // offset views of both
  Tensor to = test_util::offset_view(arange_f32(0, {4, 3}));
  Tensor io = test_util::offset_view(ids_of({0, 2, 1, 0}, {4, 1}, DType::I32));
  EXPECT_EQ(to.gather(io, 1).to_vec2<float>(), (Mat{{0}, {5}, {7}, {9}}));
}

TEST(Gather, OutOfRangeIdThrows) {
  Tensor t = arange_f32(0, {4, 3});
  expect_error(ErrorKind::IndexOutOfRange,
               [&] {
                 t.gather(ids_of({0, 2, 3, 0}, {4, 1}), 1);
               },
               {"gather", "index 3", "size 3"});
  expect_error(ErrorKind::IndexOutOfRange,
               [&] {
                 t.gather(ids_of({0, -2, 0}, {1, 3}, DType::I16), 0);
               },
               {"gather", "index -2", "size 4"});
}

TEST(Gather, FirstOutOfRangeIdIsReportedForAnyThreadCount) {
  Tensor t = random_bytes(DType::F32, {4, 30000}, 61);
  std::vector<int64_t> idv = pseudo_random_ids(4 * 30000, 4, 62);
  idv[70000] = 9;
  idv[40000] = 7;
  idv[100000] = -3;
  Tensor ids = ids_of(idv, {4, 30000}, DType::I64);
  for (size_t n : {1, 2, 3}) {
    Threads threads(n);
    expect_error(ErrorKind::IndexOutOfRange, [&] { t.gather(ids, 0); }, {"index 7 ", "size 4"});
  }
}

TEST(Gather, ShapeMismatchThrows) {
  Tensor t = arange_f32(0, {4, 3});
  expect_error(ErrorKind::ShapeMismatch,
               [&] {
                 t.gather(ids_of({0, 0}, {2, 1}), 1);
               },
               {"gather", "[4, 3]", "[2, 1]"});
  expect_error(ErrorKind::ShapeMismatch, [&] { t.gather(ids_of({0, 0, 0, 0}, {4}), 1); }, {"gather"});
  expect_error(ErrorKind::DTypeMismatch,
               [&] {
                 t.gather(Tensor::zeros({4, 1}, DType::F16, cpu()), 1);
               },
               {"gather"});
}

TEST(Gather, LargeMatchesForAnyThreadCount) {
  Tensor t = random_bytes(DType::F16, {300, 200}, 21);
  Tensor ids0 = ids_of(pseudo_random_ids(250 * 200, 300, 22), {250, 200}, DType::I64);
  Tensor ids1 = ids_of(pseudo_random_ids(300 * 150, 200, 23), {300, 150});
  expect_same_bytes_for_any_thread_count([&] { return t.gather(ids0, 0); });
  expect_same_bytes_for_any_thread_count([&] { return t.gather(ids1, 1); });
  // spot check against the definition
  std::vector<uint8_t> src = bytes_of(t), got = bytes_of(t.gather(ids1, 1));
  std::vector<int64_t> ids = pseudo_random_ids(300 * 150, 200, 23);
  for (size_t k : {size_t{0}, size_t{777}, size_t{44999}}) {
    size_t row = k / 150;
    size_t from = (row * 200 + static_cast<size_t>(ids[k])) * 2;
    EXPECT_EQ(got[k * 2], src[from]) << k;
    EXPECT_EQ(got[k * 2 + 1], src[from + 1]) << k;
  }
}

// ---- scatter / scatter_add / scatter_set ------------------------------------------------------

namespace {
Tensor candle_scatter_ids(DType dt = DType::U32) {
  return ids_of({0, 1, 2, 3, 4, 0, 3, 3, 1, 2, 0, 4}, {4, 3}, dt);
}
}  // namespace

TEST(Scatter, CandleValues) {
  Tensor t = arange_f32(0, {4, 3});
  Tensor init = Tensor::ones({4, 5}, DType::F32, cpu());
  EXPECT_EQ(init.scatter(candle_scatter_ids(), t, 1).to_vec2<float>(),
            (Mat{{0, 1, 2, 1, 1}, {5, 1, 1, 3, 4}, {1, 8, 1, 7, 1}, {10, 1, 9, 1, 11}}));
  Tensor init0 = Tensor::ones({6, 3}, DType::F32, cpu());
  EXPECT_EQ(init0.scatter(candle_scatter_ids(), t, 0).to_vec2<float>(),
            (Mat{{0, 10, 5}, {1, 1, 8}, {9, 1, 2}, {6, 7, 1}, {1, 4, 11}, {1, 1, 1}}));
  // scatter returns a new tensor
  EXPECT_EQ(init.flatten_to_vec<float>(), std::vector<float>(20, 1.f));
}

TEST(ScatterAdd, CandleValues) {
  Tensor t = arange_f32(0, {4, 3});
  Tensor init = Tensor::ones({4, 5}, DType::F32, cpu());
  EXPECT_EQ(init.scatter_add(candle_scatter_ids(), t, 1).to_vec2<float>(),
            (Mat{{1, 2, 3, 1, 1}, {6, 1, 1, 4, 5}, {1, 9, 1, 14, 1}, {11, 1, 10, 1, 12}}));
  Tensor init0 = Tensor::ones({6, 3}, DType::F32, cpu());
  EXPECT_EQ(init0.scatter_add(candle_scatter_ids(), t, 0).to_vec2<float>(),
            (Mat{{1, 11, 6}, {1, 2, 9}, {10, 1, 3}, {10, 8, 1}, {1, 5, 12}, {1, 1, 1}}));
  EXPECT_EQ(init.flatten_to_vec<float>(), std::vector<float>(20, 1.f));
}

TEST(ScatterSet, InPlaceCandleValues) {
  Tensor t = arange_f32(0, {4, 3});
  Tensor init = Tensor::ones({4, 5}, DType::F32, cpu());
  init.scatter_set(candle_scatter_ids(), t, 1);
  EXPECT_EQ(init.to_vec2<float>(),
            (Mat{{0, 1, 2, 1, 1}, {5, 1, 1, 3, 4}, {1, 8, 1, 7, 1}, {10, 1, 9, 1, 11}}));
  Tensor acc = Tensor::ones({6, 3}, DType::F32, cpu());
  acc.scatter_add_set(candle_scatter_ids(), t, 0);
  EXPECT_EQ(acc.to_vec2<float>(),
            (Mat{{1, 11, 6}, {1, 2, 9}, {10, 1, 3}, {10, 8, 1}, {1, 5, 12}, {1, 1, 1}}));
}

TEST(ScatterSet, OffsetSelfWritesOnlyItsOwnRows) {
  // self is rows 2..6 of an 8-row storage: rows 0, 1, 6, 7 must stay untouched
  Tensor self = test_util::offset_view(Tensor::ones({4, 5}, DType::F32, cpu()));
  ASSERT_TRUE(self.is_contiguous());
  self.scatter_set(candle_scatter_ids(), arange_f32(0, {4, 3}), 1);
  EXPECT_EQ(self.to_vec2<float>(),
            (Mat{{0, 1, 2, 1, 1}, {5, 1, 1, 3, 4}, {1, 8, 1, 7, 1}, {10, 1, 9, 1, 11}}));
  Tensor whole = view(self, Layout::contiguous({8, 5}));
  std::vector<float> all = whole.flatten_to_vec<float>();
  for (size_t i : {0, 1, 6, 7})
    for (size_t j = 0; j < 5; ++j) EXPECT_EQ(all[i * 5 + j], 0.f) << i << "," << j;
  self.scatter_add_set(candle_scatter_ids(), arange_f32(0, {4, 3}), 1);
  EXPECT_EQ(self.to_vec2<float>(),
            (Mat{{0, 2, 4, 1, 1}, {10, 1, 1, 6, 8}, {1, 16, 1, 20, 1}, {20, 1, 18, 1, 22}}));
  all = whole.flatten_to_vec<float>();
  for (size_t i : {0, 1, 6, 7})
    for (size_t j = 0; j < 5; ++j) EXPECT_EQ(all[i * 5 + j], 0.f) << i << "," << j;
}

TEST(Scatter, StridedSelfIdsAndSrc) {
  Tensor self = test_util::transposed_copy_view(Tensor::ones({4, 5}, DType::F32, cpu()));
  Tensor ids = test_util::transposed_copy_view(candle_scatter_ids(DType::F32)).to_dtype(DType::I64);
  Tensor src = test_util::transposed_copy_view(arange_f32(0, {4, 3}));
  ASSERT_FALSE(self.is_contiguous());
  ASSERT_FALSE(src.is_contiguous());
  EXPECT_EQ(self.scatter(ids, src, 1).to_vec2<float>(),
            (Mat{{0, 1, 2, 1, 1}, {5, 1, 1, 3, 4}, {1, 8, 1, 7, 1}, {10, 1, 9, 1, 11}}));
  Tensor src_off = test_util::offset_view(arange_f32(0, {4, 3}));
  Tensor ids_off = test_util::offset_view(candle_scatter_ids(DType::I32));
  EXPECT_EQ(Tensor::ones({4, 5}, DType::F32, cpu()).scatter_add(ids_off, src_off, 1).to_vec2<float>(),
            (Mat{{1, 2, 3, 1, 1}, {6, 1, 1, 4, 5}, {1, 9, 1, 14, 1}, {11, 1, 10, 1, 12}}));
}

TEST(ScatterAdd, BroadcastSrc) {
  // src: one row [1, 2] broadcast to [3, 2]
  Tensor row = Tensor::new_({1.f, 2.f}, cpu());
  Tensor src = view(row, Layout::contiguous({1, 2}).broadcast_as({3, 2}));
  Tensor ids = ids_of({0, 0, 2, 0, 0, 2}, {3, 2});
  EXPECT_EQ(Tensor::zeros({3, 2}, DType::F32, cpu()).scatter_add(ids, src, 0).to_vec2<float>(),
            (Mat{{2, 4}, {0, 0}, {1, 2}}));
}

TEST(Scatter, EveryIndexDtype) {
  Tensor t = arange_f32(0, {4, 3});
  for (DType dt : kIndexDTypes) {
    EXPECT_EQ(Tensor::ones({4, 5}, DType::F32, cpu()).scatter(candle_scatter_ids(dt), t, 1).to_vec2<float>(),
              (Mat{{0, 1, 2, 1, 1}, {5, 1, 1, 3, 4}, {1, 8, 1, 7, 1}, {10, 1, 9, 1, 11}}))
        << dtype_name(dt);
    EXPECT_EQ(
        Tensor::ones({6, 3}, DType::F32, cpu()).scatter_add(candle_scatter_ids(dt), t, 0).to_vec2<float>(),
        (Mat{{1, 11, 6}, {1, 2, 9}, {10, 1, 3}, {10, 8, 1}, {1, 5, 12}, {1, 1, 1}}))
        << dtype_name(dt);
  }
}

TEST(Scatter, EveryDataDtypeBytesExact) {
  Tensor ids = candle_scatter_ids();
  std::vector<int64_t> idv = {0, 1, 2, 3, 4, 0, 3, 3, 1, 2, 0, 4};
  for (DType dt : kAllDTypes) {
    Tensor self = random_bytes(dt, {4, 5}, 31), src = random_bytes(dt, {4, 3}, 32);
    std::vector<uint8_t> want = bytes_of(self), s = bytes_of(src);
    size_t es = dtype_size(dt);
    for (size_t a = 0; a < 4; ++a)
      for (size_t k = 0; k < 3; ++k)
        std::memcpy(&want[(a * 5 + static_cast<size_t>(idv[a * 3 + k])) * es], &s[(a * 3 + k) * es], es);
    EXPECT_EQ(bytes_of(self.scatter(ids, src, 1)), want) << dtype_name(dt);
    self.scatter_set(ids, src, 1);
    EXPECT_EQ(bytes_of(self), want) << dtype_name(dt);
  }
}

TEST(ScatterAdd, EveryDataDtype) {
  Tensor ids = candle_scatter_ids();
  for (DType dt : kAllDTypes) {
    Tensor t = arange_f32(0, {4, 3}).to_dtype(dt);
    Tensor init = Tensor::ones({4, 5}, dt, cpu());
    Tensor r = init.scatter_add(ids, t, 1);
    EXPECT_EQ(r.dtype(), dt);
    EXPECT_EQ(r.to_dtype(DType::F32).to_vec2<float>(),
              (Mat{{1, 2, 3, 1, 1}, {6, 1, 1, 4, 5}, {1, 9, 1, 14, 1}, {11, 1, 10, 1, 12}}))
        << dtype_name(dt);
    init.scatter_add_set(ids, t, 1);
    EXPECT_EQ(bytes_of(init), bytes_of(r)) << dtype_name(dt);
  }
}

TEST(ScatterAdd, IntegerWrapsAround) {
  Tensor self = Tensor::new_({uint8_t{250}, uint8_t{1}}, cpu());
  Tensor r = self.scatter_add(ids_of({0, 0}, {2}), Tensor::new_({uint8_t{3}, uint8_t{5}}, cpu()), 0);
  EXPECT_EQ(r.to_vec1<uint8_t>(), (std::vector<uint8_t>{2, 1}));
}

TEST(ScatterSet, OutOfRangeIdLeavesSelfUntouched) {
  Tensor self = Tensor::ones({4, 5}, DType::F32, cpu());
  // the bad id comes last, after ids that would have been written first
  Tensor bad = ids_of({0, 1, 2, 3, 4, 0, 3, 3, 1, 2, 0, 5}, {4, 3});
  Tensor t = arange_f32(0, {4, 3});
  expect_error(ErrorKind::IndexOutOfRange, [&] { self.scatter_set(bad, t, 1); },
               {"scatter", "index 5", "size 5"});
  expect_error(ErrorKind::IndexOutOfRange, [&] { self.scatter_add_set(bad, t, 1); },
               {"scatter_add", "index 5", "size 5"});
  Tensor neg = ids_of({0, 1, 2, 3, 4, 0, 3, 3, 1, 2, 0, -1}, {4, 3}, DType::I32);
  expect_error(ErrorKind::IndexOutOfRange, [&] { self.scatter_add_set(neg, t, 1); }, {"index -1"});
  EXPECT_EQ(self.flatten_to_vec<float>(), std::vector<float>(20, 1.f));
  expect_error(ErrorKind::IndexOutOfRange, [&] { self.scatter(bad, t, 1); }, {"scatter"});
}

TEST(ScatterSet, LargeOutOfRangeIdLeavesSelfUntouched) {
  Tensor self = Tensor::zeros({2, 40000}, DType::F32, cpu());
  std::vector<int64_t> idv(2 * 40000, 1);
  idv.back() = 2;
  Tensor ids = ids_of(idv, {2, 40000});
  Tensor src = Tensor::ones({2, 40000}, DType::F32, cpu());
  Threads threads(3);
  expect_error(ErrorKind::IndexOutOfRange, [&] { self.scatter_add_set(ids, src, 0); }, {"index 2", "size 2"});
  EXPECT_EQ(self.flatten_to_vec<float>(), std::vector<float>(80000, 0.f));
}

TEST(ScatterSet, RequiresContiguousSelf) {
  Tensor self = test_util::transposed_copy_view(Tensor::ones({4, 5}, DType::F32, cpu()));
  expect_error(ErrorKind::InvalidArgument,
               [&] {
                 self.scatter_set(candle_scatter_ids(), arange_f32(0, {4, 3}), 1);
               },
               {"scatter_set"});
  expect_error(ErrorKind::InvalidArgument,
               [&] {
                 self.scatter_add_set(candle_scatter_ids(), arange_f32(0, {4, 3}), 1);
               },
               {"scatter_add_set"});
}

TEST(Scatter, ShapeAndDtypeMismatchThrows) {
  Tensor init = Tensor::ones({4, 5}, DType::F32, cpu());
  Tensor t = arange_f32(0, {4, 3});
  expect_error(ErrorKind::ShapeMismatch,
               [&] {
                 init.scatter(candle_scatter_ids(), arange_f32(0, {3, 3}), 1);
               },
               {"scatter", "[4, 5]", "[3, 3]"});
  expect_error(ErrorKind::ShapeMismatch,
               [&] {
                 init.scatter_add(ids_of({0, 1}, {1, 2}), t, 1);
               },
               {"scatter_add", "[1, 2]", "[4, 3]"});
  expect_error(ErrorKind::DTypeMismatch,
               [&] { init.scatter(candle_scatter_ids(), t.to_dtype(DType::F64), 1); }, {"scatter"});
  expect_error(ErrorKind::DTypeMismatch, [&] { init.scatter(t, t, 1); }, {"scatter"});
}

TEST(ScatterSet, SrcSharingSelfStorage) {
  // src is a view of self's own storage: the result must be as if src had been read first
  Tensor self = Tensor::new_({1.f, 2.f, 3.f, 4.f}, cpu());
  Tensor src = view(self, Layout(Shape{3}, {1}, 1));  // [2, 3, 4]
  self.scatter_set(ids_of({0, 1, 2}, {3}), src, 0);
  EXPECT_EQ(self.to_vec1<float>(), (std::vector<float>{2, 3, 4, 4}));
  // ids that are a view of self (an integer tensor)
  Tensor iself = Tensor::new_({int64_t{2}, int64_t{0}, int64_t{1}}, cpu());
  iself.scatter_set(iself, Tensor::new_({int64_t{7}, int64_t{8}, int64_t{9}}, cpu()), 0);
  EXPECT_EQ(iself.to_vec1<int64_t>(), (std::vector<int64_t>{8, 9, 7}));
}

// ---- determinism of the additions -----------------------------------------------------------

namespace {
// Values whose float sums depend on the order of addition.
std::vector<float> order_sensitive_values(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t x = seed;
  for (auto& e : v) {
    x = x * 1664525u + 1013904223u;
    float mag = static_cast<float>(x >> 8) / static_cast<float>(1 << 24);
    e = (x & 1 ? 1.f : -1.f) * mag * ((x >> 4) % 3 == 0 ? 1e6f : 1e-3f);
  }
  return v;
}
}  // namespace

TEST(ScatterAdd, RepeatedIdsAddInSourceOrderForAnyThreadCount) {
  const size_t rows = 40, cols = 1000, out_rows = 3;  // 40K source elements into 3K outputs
  std::vector<float> src_v = order_sensitive_values(rows * cols, 1);
  std::vector<int64_t> idv = pseudo_random_ids(rows * cols, out_rows, 2);
  Tensor src = Tensor::from_vec(src_v, {rows, cols}, cpu());
  Tensor ids = ids_of(idv, {rows, cols}, DType::I64);
  Tensor self = Tensor::zeros({out_rows, cols}, DType::F32, cpu());
  std::vector<float> want(out_rows * cols, 0.f);
  for (size_t k = 0; k < rows; ++k)
    for (size_t c = 0; c < cols; ++c)
      want[static_cast<size_t>(idv[k * cols + c]) * cols + c] += src_v[k * cols + c];
  for (size_t n : {1, 2, 3}) {
    Threads t(n);
    EXPECT_EQ(self.scatter_add(ids, src, 0).flatten_to_vec<float>(), want) << n << " threads";
  }
  expect_same_bytes_for_any_thread_count([&] { return self.scatter_add(ids, src, 0); });
  // along the last dim: every row is an independent column set
  Tensor src_t = Tensor::from_vec(src_v, {cols, rows}, cpu());
  Tensor ids_t = ids_of(idv, {cols, rows}, DType::U8);
  Tensor self_t = Tensor::zeros({cols, out_rows}, DType::F32, cpu());
  expect_same_bytes_for_any_thread_count([&] { return self_t.scatter_add(ids_t, src_t, 1); });
  expect_same_bytes_for_any_thread_count([&] {
    Tensor s = Tensor::zeros({cols, out_rows}, DType::BF16, cpu());
    s.scatter_add_set(ids_t, src_t.to_dtype(DType::BF16), 1);
    return s;
  });
}

TEST(IndexAdd, RepeatedIdsAddInSourceOrderForAnyThreadCount) {
  const size_t n = 300, hidden = 128, vocab = 7;  // 38K source elements
  std::vector<float> src_v = order_sensitive_values(n * hidden, 3);
  std::vector<int64_t> idv = pseudo_random_ids(n, vocab, 4);
  Tensor src = Tensor::from_vec(src_v, {n, hidden}, cpu());
  Tensor ids = ids_of(idv, {n}, DType::I32);
  Tensor self = Tensor::zeros({vocab, hidden}, DType::F32, cpu());
  std::vector<float> want(vocab * hidden, 0.f);
  for (size_t k = 0; k < n; ++k)
    for (size_t c = 0; c < hidden; ++c)
      want[static_cast<size_t>(idv[k]) * hidden + c] += src_v[k * hidden + c];
  for (size_t threads : {1, 2, 3}) {
    Threads t(threads);
    EXPECT_EQ(self.index_add(ids, src, 0).flatten_to_vec<float>(), want) << threads << " threads";
  }
  // along dim 1 of a [hidden, n] source
  Tensor src1 = Tensor::from_vec(src_v, {hidden, n}, cpu());
  Tensor self1 = Tensor::zeros({hidden, vocab}, DType::F64, cpu());
  expect_same_bytes_for_any_thread_count([&] { return self1.index_add(ids, src1.to_dtype(DType::F64), 1); });
}

// ---- index_add --------------------------------------------------------------------------------

TEST(IndexAdd, CandleValues) {
  Tensor t = arange_f32(0, {4, 3});
  Tensor init = Tensor::ones({4, 2}, DType::F32, cpu());
  EXPECT_EQ(init.index_add(ids_of({0, 1, 1}, {3}), t, 1).to_vec2<float>(),
            (Mat{{1, 4}, {4, 10}, {7, 16}, {10, 22}}));
  EXPECT_EQ(Tensor::zeros({4, 2}, DType::F32, cpu()).index_add(ids_of({1, 0, 0}, {3}), t, 1).to_vec2<float>(),
            (Mat{{3, 0}, {9, 3}, {15, 6}, {21, 9}}));
  EXPECT_EQ(
      Tensor::zeros({6, 3}, DType::F32, cpu()).index_add(ids_of({5, 0, 1, 0}, {4}), t, 0).to_vec2<float>(),
      (Mat{{12, 14, 16}, {6, 7, 8}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 1, 2}}));
  EXPECT_EQ(init.flatten_to_vec<float>(), std::vector<float>(8, 1.f));
}

TEST(IndexAdd, EveryIndexAndDataDtype) {
  for (DType it : kIndexDTypes) {
    for (DType dt : kAllDTypes) {
      Tensor t = arange_f32(0, {4, 3}).to_dtype(dt);
      Tensor r = Tensor::ones({4, 2}, dt, cpu()).index_add(ids_of({0, 1, 1}, {3}, it), t, 1);
      EXPECT_EQ(r.dtype(), dt);
      EXPECT_EQ(r.to_dtype(DType::F32).to_vec2<float>(), (Mat{{1, 4}, {4, 10}, {7, 16}, {10, 22}}))
          << dtype_name(it) << " " << dtype_name(dt);
    }
  }
}

TEST(IndexAdd, StridedSelfIdsAndSrc) {
  Tensor t = test_util::transposed_copy_view(arange_f32(0, {4, 3}));
  Tensor self = test_util::offset_view(Tensor::zeros({6, 3}, DType::F32, cpu()));
  Tensor store = ids_of({5, 9, 0, 9, 1, 9, 0}, {7}, DType::I16);
  Tensor ids = view(store, Layout(Shape{4}, {2}, 0));  // [5, 0, 1, 0]
  EXPECT_EQ(self.index_add(ids, t, 0).to_vec2<float>(),
            (Mat{{12, 14, 16}, {6, 7, 8}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 1, 2}}));
  Tensor tself = test_util::transposed_copy_view(Tensor::ones({4, 2}, DType::F32, cpu()));
  EXPECT_EQ(tself.index_add(ids_of({0, 1, 1}, {3}), arange_f32(0, {4, 3}), 1).to_vec2<float>(),
            (Mat{{1, 4}, {4, 10}, {7, 16}, {10, 22}}));
}

TEST(IndexAdd, ErrorsNameTheOp) {
  Tensor t = arange_f32(0, {4, 3});
  Tensor init = Tensor::ones({4, 2}, DType::F32, cpu());
  expect_error(ErrorKind::IndexOutOfRange,
               [&] {
                 init.index_add(ids_of({0, 2, 1}, {3}), t, 1);
               },
               {"index_add", "index 2", "size 2"});
  expect_error(ErrorKind::IndexOutOfRange,
               [&] {
                 init.index_add(ids_of({0, -1, 1}, {3}, DType::I64), t, 1);
               },
               {"index_add", "index -1"});
  expect_error(ErrorKind::ShapeMismatch,
               [&] {
                 init.index_add(ids_of({0, 1}, {2}), t, 1);
               },
               {"index_add", "[2]", "[4, 3]"});
  expect_error(ErrorKind::ShapeMismatch,
               [&] {
                 init.index_add(ids_of({0, 1, 1}, {3}), arange_f32(0, {3, 3}), 1);
               },
               {"index_add", "[4, 2]", "[3, 3]"});
  expect_error(ErrorKind::DTypeMismatch,
               [&] {
                 init.index_add(ids_of({0, 1, 1}, {3}), t.to_dtype(DType::F16), 1);
               },
               {"index_add"});
}

// ---- slice_scatter / slice_set ------------------------------------------------------------------

TEST(SliceScatter, CandleValues) {
  Tensor t = arange_f32(0, {4, 3});
  Tensor src = arange_f32(100, {2, 3});
  EXPECT_EQ(t.slice_scatter0(src, 0).to_vec2<float>(),
            (Mat{{100, 101, 102}, {103, 104, 105}, {6, 7, 8}, {9, 10, 11}}));
  EXPECT_EQ(t.slice_scatter0(src, 1).to_vec2<float>(),
            (Mat{{0, 1, 2}, {100, 101, 102}, {103, 104, 105}, {9, 10, 11}}));
  EXPECT_EQ(t.slice_scatter0(src, 2).to_vec2<float>(),
            (Mat{{0, 1, 2}, {3, 4, 5}, {100, 101, 102}, {103, 104, 105}}));
  EXPECT_EQ(t.to_vec2<float>(), k4x3);
}

TEST(SliceScatter, InnerDim) {
  Tensor t = arange_f32(0, {4, 3});
  Tensor src = arange_f32(100, {4, 2});
  EXPECT_EQ(t.slice_scatter(src, 1, 1).to_vec2<float>(),
            (Mat{{0, 100, 101}, {3, 102, 103}, {6, 104, 105}, {9, 106, 107}}));
  EXPECT_EQ(t.slice_scatter(src, -1, 0).to_vec2<float>(),
            (Mat{{100, 101, 2}, {102, 103, 5}, {104, 105, 8}, {106, 107, 11}}));
}

TEST(SliceScatter, StridedSelfAndSrc) {
  Tensor t = test_util::transposed_copy_view(arange_f32(0, {4, 3}));
  Tensor src = test_util::transposed_copy_view(arange_f32(100, {4, 2}));
  EXPECT_EQ(t.slice_scatter(src, 1, 1).to_vec2<float>(),
            (Mat{{0, 100, 101}, {3, 102, 103}, {6, 104, 105}, {9, 106, 107}}));
  Tensor to = test_util::offset_view(arange_f32(0, {4, 3}));
  Tensor so = test_util::offset_view(arange_f32(100, {2, 3}));
  EXPECT_EQ(to.slice_scatter0(so, 1).to_vec2<float>(),
            (Mat{{0, 1, 2}, {100, 101, 102}, {103, 104, 105}, {9, 10, 11}}));
}

TEST(SliceScatter, EveryDataDtypeBytesExact) {
  for (DType dt : kAllDTypes) {
    Tensor t = random_bytes(dt, {3, 4}, 41), src = random_bytes(dt, {3, 2}, 42);
    std::vector<uint8_t> want = bytes_of(t), s = bytes_of(src);
    size_t es = dtype_size(dt);
    for (size_t a = 0; a < 3; ++a) std::memcpy(&want[(a * 4 + 2) * es], &s[a * 2 * es], 2 * es);
    EXPECT_EQ(bytes_of(t.slice_scatter(src, 1, 2)), want) << dtype_name(dt);
  }
}

TEST(SliceScatter, ErrorsNameTheOp) {
  Tensor t = arange_f32(0, {4, 3});
  expect_error(ErrorKind::IndexOutOfRange,
               [&] {
                 t.slice_scatter0(arange_f32(0, {2, 3}), 3);
               },
               {"slice_scatter", "[4, 3]", "[2, 3]"});
  expect_error(ErrorKind::ShapeMismatch,
               [&] {
                 t.slice_scatter0(arange_f32(0, {2, 2}), 0);
               },
               {"slice_scatter", "[4, 3]", "[2, 2]"});
  expect_error(ErrorKind::DTypeMismatch,
               [&] {
                 t.slice_scatter0(arange_f32(0, {2, 3}).to_dtype(DType::F64), 0);
               },
               {"slice_scatter"});
}

TEST(SliceSet, CandleKvCacheValues) {
  const size_t b = 2, h = 4, max_t = 7, d = 3;
  Tensor cache = Tensor::zeros({b, h, max_t, d}, DType::F32, cpu());
  std::vector<float> tv(b * h * 4 * d);
  for (size_t i = 0; i < tv.size(); ++i) tv[i] = static_cast<float>(i) * 0.5f - 20.f;
  Tensor tensor = Tensor::from_vec(tv, {b, h, 4, d}, cpu());
  auto at = [&](const std::vector<float>& v, size_t i, size_t j, size_t t, size_t k) {
    return v[((i * h + j) * max_t + t) * d + k];
  };
  cache.slice_set(tensor, 2, 0);
  std::vector<float> c = cache.flatten_to_vec<float>();
  for (size_t i = 0; i < b; ++i)
    for (size_t j = 0; j < h; ++j)
      for (size_t t = 0; t < max_t; ++t)
        for (size_t k = 0; k < d; ++k)
          EXPECT_EQ(at(c, i, j, t, k), t < 4 ? tv[((i * h + j) * 4 + t) * d + k] : 0.f);
  cache.slice_set(tensor, 2, 1);
  c = cache.flatten_to_vec<float>();
  for (size_t i = 0; i < b; ++i)
    for (size_t j = 0; j < h; ++j)
      for (size_t t = 1; t < 5; ++t)
        for (size_t k = 0; k < d; ++k) EXPECT_EQ(at(c, i, j, t, k), tv[((i * h + j) * 4 + t - 1) * d + k]);
  cache.slice_set(Tensor::ones({b, h, 1, d}, DType::F32, cpu()), 2, 6);
  c = cache.flatten_to_vec<float>();
  for (size_t i = 0; i < b; ++i)
    for (size_t j = 0; j < h; ++j)
      for (size_t k = 0; k < d; ++k) {
        EXPECT_EQ(at(c, i, j, 5, k), 0.f);
        EXPECT_EQ(at(c, i, j, 6, k), 1.f);
      }
}

TEST(SliceSet, OffsetSelfAndStridedSrc) {
  // self: rows 2..6 of an 8-row storage; the padding rows must not change
  Tensor self = test_util::offset_view(Tensor::zeros({4, 3}, DType::F32, cpu()));
  Tensor src = test_util::transposed_copy_view(arange_f32(100, {4, 2}));
  self.slice_set(src, 1, 1);
  EXPECT_EQ(self.to_vec2<float>(), (Mat{{0, 100, 101}, {0, 102, 103}, {0, 104, 105}, {0, 106, 107}}));
  self.slice_set(test_util::offset_view(arange_f32(7, {1, 3})), 0, 3);
  EXPECT_EQ(self.to_vec2<float>(), (Mat{{0, 100, 101}, {0, 102, 103}, {0, 104, 105}, {7, 8, 9}}));
  std::vector<float> all = view(self, Layout::contiguous({8, 3})).flatten_to_vec<float>();
  for (size_t i : {0, 1, 2, 3, 18, 19, 20, 21, 22, 23}) EXPECT_EQ(all[i], 0.f) << i;
}

TEST(SliceSet, SrcOverlappingSelf) {
  // candle refuses a src sharing self's storage; here it behaves as if src were copied first
  Tensor t = Tensor::new_({0.f, 1.f, 2.f, 3.f, 4.f}, cpu());
  t.slice_set(view(t, Layout::contiguous({4}, 0)), 0, 1);
  EXPECT_EQ(t.to_vec1<float>(), (std::vector<float>{0, 0, 1, 2, 3}));
  Tensor cache = arange_f32(0, {2, 3});
  cache.slice_set(cache, 0, 0);
  EXPECT_EQ(cache.to_vec2<float>(), (Mat{{0, 1, 2}, {3, 4, 5}}));
}

TEST(SliceSet, EveryDataDtypeBytesExact) {
  for (DType dt : kAllDTypes) {
    Tensor t = random_bytes(dt, {3, 4}, 51), src = random_bytes(dt, {1, 4}, 52);
    std::vector<uint8_t> want = bytes_of(t), s = bytes_of(src);
    std::memcpy(&want[4 * dtype_size(dt)], s.data(), s.size());
    t.slice_set(src, 0, 1);
    EXPECT_EQ(bytes_of(t), want) << dtype_name(dt);
  }
}

TEST(SliceSet, ErrorsLeaveSelfUntouched) {
  Tensor t = arange_f32(0, {4, 3});
  expect_error(ErrorKind::IndexOutOfRange,
               [&] {
                 t.slice_set(arange_f32(0, {4, 2}), 1, 2);
               },
               {"slice_set", "[4, 3]", "[4, 2]"});
  expect_error(ErrorKind::ShapeMismatch, [&] { t.slice_set(arange_f32(0, {3, 2}), 1, 0); }, {"slice_set"});
  expect_error(ErrorKind::DTypeMismatch,
               [&] {
                 t.slice_set(Tensor::zeros({4, 1}, DType::F16, cpu()), 1, 0);
               },
               {"slice_set"});
  Tensor tt = test_util::transposed_copy_view(arange_f32(0, {4, 3}));
  expect_error(ErrorKind::InvalidArgument, [&] { tt.slice_set(arange_f32(0, {1, 3}), 0, 0); }, {"slice_set"});
  EXPECT_EQ(t.to_vec2<float>(), k4x3);
}

// ---- embedding --------------------------------------------------------------------------------

TEST(Embedding, CandleValues) {
  Tensor t = Tensor::new_({{0.f, 1.f}, {2.f, 3.f}, {4.f, 5.f}}, cpu());
  Tensor ids = ids_of({0, 2, 1}, {3});
  EXPECT_EQ(t.embedding(ids).to_vec2<float>(), (Mat{{0, 1}, {4, 5}, {2, 3}}));
  EXPECT_EQ(t.index_select(ids.to_dtype(DType::I64), 0).to_vec2<float>(), (Mat{{0, 1}, {4, 5}, {2, 3}}));
}

TEST(Embedding, MultiDimIds) {
  Tensor t = Tensor::new_({{0.f, 1.f}, {2.f, 3.f}, {4.f, 5.f}}, cpu());
  for (DType dt : kIndexDTypes) {
    Tensor r = t.embedding(ids_of({2, 2, 0, 1}, {2, 2}, dt));
    EXPECT_EQ(r.shape(), Shape({2, 2, 2}));
    EXPECT_EQ(r.flatten_to_vec<float>(), (std::vector<float>{4, 5, 4, 5, 0, 1, 2, 3})) << dtype_name(dt);
  }
  Tensor scalar = t.embedding(Tensor::new_(int64_t{1}, cpu()));
  EXPECT_EQ(scalar.shape(), Shape({2}));
  EXPECT_EQ(scalar.to_vec1<float>(), (std::vector<float>{2, 3}));
}

TEST(Embedding, StridedIdsAndOffsetTable) {
  Tensor t = test_util::offset_view(Tensor::new_({{0.f, 1.f}, {2.f, 3.f}, {4.f, 5.f}}, cpu()));
  // storage [[0, 2], [1, 2]] read through its transpose: [[0, 1], [2, 2]]
  Tensor stored = ids_of({0, 2, 1, 2}, {2, 2}, DType::I64);
  Tensor ids = view(stored, stored.layout().transpose(0, 1));
  ASSERT_FALSE(ids.is_contiguous());
  EXPECT_EQ(t.embedding(ids).flatten_to_vec<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5, 4, 5}));
  // an offset view of ids
  Tensor ids_off = test_util::offset_view(ids_of({2, 0}, {1, 2}, DType::U8));
  EXPECT_EQ(t.embedding(ids_off).flatten_to_vec<float>(), (std::vector<float>{4, 5, 0, 1}));
}

TEST(Embedding, ErrorsNameTheOp) {
  Tensor t = Tensor::new_({{0.f, 1.f}, {2.f, 3.f}, {4.f, 5.f}}, cpu());
  expect_error(ErrorKind::IndexOutOfRange, [&] { t.embedding(ids_of({0, 3}, {2})); }, {"index 3", "size 3"});
  expect_error(ErrorKind::ShapeMismatch,
               [&] {
                 arange_f32(0, {2, 2, 2}).embedding(ids_of({0}, {1}));
               },
               {"embedding", "[2, 2, 2]"});
  expect_error(ErrorKind::DTypeMismatch, [&] { t.embedding(Tensor::new_({0.f}, cpu())); }, {"embedding"});
}

// ---- const_set --------------------------------------------------------------------------------

TEST(ConstSet, NarrowedColumnOnly) {
  Tensor t = Tensor::zeros({3, 4}, DType::F32, cpu());
  Tensor col = view(t, t.layout().narrow(1, 1, 1));
  col.const_set(5.f);
  EXPECT_EQ(t.to_vec2<float>(), (Mat{{0, 5, 0, 0}, {0, 5, 0, 0}, {0, 5, 0, 0}}));
  view(t, t.layout().narrow(0, 2, 1).narrow(1, 2, 2)).one_set();
  EXPECT_EQ(t.to_vec2<float>(), (Mat{{0, 5, 0, 0}, {0, 5, 0, 0}, {0, 5, 1, 1}}));
  col.zero_set();
  EXPECT_EQ(t.to_vec2<float>(), (Mat{{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 1, 1}}));
}

TEST(ConstSet, TransposedAndOffsetViews) {
  Tensor t = Tensor::zeros({2, 3}, DType::I64, cpu());
  Tensor tv = view(t, t.layout().transpose(0, 1));  // [3, 2]
  view(tv, tv.layout().narrow(0, 1, 1)).const_set(int64_t{-7});
  EXPECT_EQ(t.to_vec2<int64_t>(), (std::vector<std::vector<int64_t>>{{0, -7, 0}, {0, -7, 0}}));
  Tensor o = test_util::offset_view(Tensor::zeros({2, 2}, DType::U8, cpu()), 1);
  o.const_set(uint8_t{9});
  EXPECT_EQ(view(o, Layout::contiguous({4, 2})).flatten_to_vec<uint8_t>(),
            (std::vector<uint8_t>{0, 0, 9, 9, 9, 9, 0, 0}));
}

TEST(ConstSet, EveryDataDtype) {
  for (DType dt : kAllDTypes) {
    Tensor t = Tensor::zeros({2, 3}, dt, cpu());
    view(t, t.layout().narrow(1, 0, 2)).const_set(3);
    EXPECT_EQ(t.to_dtype(DType::F32).to_vec2<float>(), (Mat{{3, 3, 0}, {3, 3, 0}})) << dtype_name(dt);
    t.one_set();
    EXPECT_EQ(t.to_dtype(DType::F32).to_vec2<float>(), (Mat{{1, 1, 1}, {1, 1, 1}})) << dtype_name(dt);
  }
}
