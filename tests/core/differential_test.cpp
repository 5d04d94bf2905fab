// The differential harness: every op with a GPU kernel x dtype (f32, f16 where the device has
// it) x layout (contiguous, transposed, narrowed with an offset, broadcast) against the CPU
// backend, called at the storage level with identical layouts, on every GPU device present
// (Differential.<test>/vulkan, /cuda, /rocm; a kind that does not open here is skipped with the
// reason). The CPU is the reference, so it has no instance. The tolerances were set on Vulkan.
//
// Tolerances (|vk - cpu| <= atol + rtol |cpu|):
//  - exact ops (neg, abs, sqr, relu, ceil, floor, round, sign, copies, casts to integers,
//    min/max/arg reductions, cmp, where, index ops): bit-identical;
//  - f32 arithmetic: atol 1e-6, rtol 1e-6 (affine, add, sub, mul, div, maximum, minimum);
//  - f32 transcendentals: atol 1e-5, rtol 1e-4 (Vulkan's exp/log/pow precision), sin/cos
//    atol 5e-4 (the spec allows 2^-11 absolute);
//  - f16 results: atol 2e-3, rtol 2e-3 (one f16 ulp plus the f32 differences);
//  - sums and matmul (different summation order, f32 accumulation): see each test;
//  - conv2d/conv1d (f32 accumulation in k order on Vulkan; the CPU uses GEMM tiles / Winograd):
//    atol 2e-4 rtol 2e-4 (f32), 3e-2 (f16); conv_transpose the same;
//  - pooling max, nearest resizing, arg_sort, scatter_set, index_add/scatter_add in f32
//    (same order of additions as the CPU): bit-identical; avg pooling and bilinear 1e-6;
//  - cumsum: atol 1e-5 rtol 1e-5 (compensated f32 on Vulkan, f64 on the CPU).
#include <gtest/gtest.h>

#include <cstring>

#include "candle/backend/cpu_storage.h"
#include "storage_util.h"
#include "test_device.h"

namespace candle {
namespace {

using namespace storage_test;

CANDLE_GPU_DEVICE_TEST_SUITE(Differential);

constexpr size_t R = 37, C = 29;  // odd sizes: partial work-groups and tiles

struct Tol {
  float atol, rtol;
};
Tol f16_tol{2e-3f, 2e-3f};

// The input values an unary op is tested on.
std::vector<float> unary_input(UnaryOp op, size_t n) {
  auto v = values(n, -4.0f, 4.0f, 7 + static_cast<uint32_t>(op));
  for (auto& x : v) {
    if (op == UnaryOp::Log || op == UnaryOp::Sqrt) x = std::fabs(x) + 0.05f;
    if (op == UnaryOp::Recip) x = x < 0 ? x - 0.5f : x + 0.5f;
    if (op == UnaryOp::Round) x = std::round(x * 4.0f) / 4.0f;  // halves included
  }
  return v;
}

Tol unary_tol(UnaryOp op) {
  switch (op) {
    case UnaryOp::Neg:
    case UnaryOp::Abs:
    case UnaryOp::Relu:
    case UnaryOp::Ceil:
    case UnaryOp::Floor:
    case UnaryOp::Round:
    case UnaryOp::Sign: return {0, 0};
    case UnaryOp::Sqr:
    case UnaryOp::Recip:
    case UnaryOp::Sqrt: return {1e-6f, 1e-6f};
    case UnaryOp::Sin:
    case UnaryOp::Cos: return {5e-4f, 0};
    default: return {1e-5f, 1e-4f};
  }
}

CANDLE_DEVICE_TEST(Differential, UnaryEveryOpDtypeLayout) {
  const size_t n = storage_elems(R, C);
  for (DType dt : float_dtypes(dev)) {
    for (int o = 0; o <= static_cast<int>(UnaryOp::Sigmoid); ++o) {
      auto op = static_cast<UnaryOp>(o);
      auto p = make_pair(dev, dt, unary_input(op, n));
      for (const auto& nl : layouts(R, C)) {
        std::string what = std::string(unary_op_name(op)) + " " + std::string(dtype_name(dt)) + " " + nl.name;
        Tol t = dt == DType::F16 ? f16_tol : unary_tol(op);
        expect_close(as_f32(*p.vk->unary(op, nl.l)), as_f32(*p.cpu->unary(op, nl.l)), t.atol, t.rtol, what);
      }
    }
  }
}

CANDLE_DEVICE_TEST(Differential, AffinePowfElu) {
  const size_t n = storage_elems(R, C);
  auto v = values(n, -3.0f, 3.0f, 3);
  for (DType dt : float_dtypes(dev)) {
    auto p = make_pair(dev, dt, v);
    for (const auto& nl : layouts(R, C)) {
      std::string what = std::string(dtype_name(dt)) + " " + nl.name;
      Tol ex = dt == DType::F16 ? f16_tol : Tol{1e-6f, 1e-6f};
      Tol tr = dt == DType::F16 ? f16_tol : Tol{1e-5f, 1e-4f};
      expect_close(as_f32(*p.vk->affine(nl.l, 1.5, -0.25)), as_f32(*p.cpu->affine(nl.l, 1.5, -0.25)), ex.atol,
                   ex.rtol, "affine " + what, /*nonfinite_expected=*/true);
      // negative bases with integral exponents, a fractional exponent (NaN for negatives)
      for (double e : {2.0, 3.0, -1.0, 0.5}) {
        expect_close(as_f32(*p.vk->powf(nl.l, e)), as_f32(*p.cpu->powf(nl.l, e)), tr.atol, tr.rtol,
                     "powf " + std::to_string(e) + " " + what, /*nonfinite_expected=*/true);
      }
      expect_close(as_f32(*p.vk->elu(nl.l, 0.7)), as_f32(*p.cpu->elu(nl.l, 0.7)), tr.atol, tr.rtol,
                   "elu " + what, /*nonfinite_expected=*/true);
    }
  }
}

CANDLE_DEVICE_TEST(Differential, BinaryEveryOpLayoutPair) {
  const size_t n = storage_elems(R, C);
  for (DType dt : float_dtypes(dev)) {
    auto a = make_pair(dev, dt, values(n, 0.1f, 3.0f, 11));  // positive: pow is real
    auto b = make_pair(dev, dt, values(n, -2.0f, 2.0f, 12));
    for (int o = 0; o <= static_cast<int>(BinaryOp::Pow); ++o) {
      auto op = static_cast<BinaryOp>(o);
      for (const auto& la : layouts(R, C)) {
        for (const auto& lb : layouts(R, C)) {
          std::string what = std::string(binary_op_name(op)) + " " + std::string(dtype_name(dt)) + " " +
                             la.name + " x " + lb.name;
          Tol t = dt == DType::F16 ? f16_tol : op == BinaryOp::Pow ? Tol{1e-5f, 1e-4f} : Tol{1e-6f, 1e-6f};
          expect_close(as_f32(*a.vk->binary(op, la.l, *b.vk, lb.l)),
                       as_f32(*a.cpu->binary(op, la.l, *b.cpu, lb.l)), t.atol, t.rtol, what);
        }
      }
    }
  }
}

CANDLE_DEVICE_TEST(Differential, BinaryMaximumMinimumPropagateNaN) {
  std::vector<float> a{1.0f, NAN, 3.0f, NAN}, b{NAN, 2.0f, -1.0f, NAN};
  auto pa = make_pair(dev, DType::F32, a), pb = make_pair(dev, DType::F32, b);
  auto l = Layout::contiguous(Shape{4});
  expect_close(as_f32(*pa.vk->binary(BinaryOp::Maximum, l, *pb.vk, l)), {NAN, NAN, 3.0f, NAN}, 0, 0,
               "maximum", /*nonfinite_expected=*/true);
  expect_close(as_f32(*pa.vk->binary(BinaryOp::Minimum, l, *pb.vk, l)), {NAN, NAN, -1.0f, NAN}, 0, 0,
               "minimum", /*nonfinite_expected=*/true);
}

CANDLE_DEVICE_TEST(Differential, CmpEveryOp) {
  const size_t n = storage_elems(R, C);
  auto qa = values(n, -2.0f, 2.0f, 21), qb = values(n, -2.0f, 2.0f, 22);
  for (auto& x : qa) x = std::round(x * 2.0f) / 2.0f;  // coarse values: many equal pairs
  for (auto& x : qb) x = std::round(x * 2.0f) / 2.0f;
  for (DType dt : float_dtypes(dev)) {
    auto a = make_pair(dev, dt, qa), b = make_pair(dev, dt, qb);
    for (int o = 0; o <= static_cast<int>(CmpOp::Ge); ++o) {
      auto op = static_cast<CmpOp>(o);
      for (const auto& la : layouts(R, C)) {
        for (const auto& lb : layouts(R, C)) {
          std::string what = std::string(cmp_op_name(op)) + " " + std::string(dtype_name(dt)) + " " +
                             la.name + " x " + lb.name;
          expect_same_bytes(*a.vk->cmp(op, la.l, *b.vk, lb.l), *a.cpu->cmp(op, la.l, *b.cpu, lb.l), what);
        }
      }
    }
  }
}

CANDLE_DEVICE_TEST(Differential, WhereCondU8AndU32Conditions) {
  const size_t n = storage_elems(R, C);
  auto cv = values(n, -1.0f, 1.0f, 31);
  for (auto& x : cv) x = x > 0 ? 1.0f : 0.0f;
  std::vector<DType> vdts = float_dtypes(dev);
  vdts.push_back(DType::U32);
  vdts.push_back(DType::I64);
  for (DType cdt : {DType::U8, DType::U32}) {
    auto c = make_pair(dev, cdt, cv);
    for (DType dt : vdts) {
      auto t = make_pair(dev, dt, values(n, 0.0f, 100.0f, 32));
      auto f = make_pair(dev, dt, values(n, -100.0f, 0.0f, 33));
      for (const auto& lc : layouts(R, C)) {
        for (const auto& lt : layouts(R, C)) {
          const Layout lf = layouts(R, C)[1].l;
          std::string what = std::string("where ") + std::string(dtype_name(cdt)) + " " +
                             std::string(dtype_name(dt)) + " " + lc.name + " " + lt.name;
          expect_same_bytes(*c.vk->where_cond(lc.l, *t.vk, lt.l, *f.vk, lf),
                            *c.cpu->where_cond(lc.l, *t.cpu, lt.l, *f.cpu, lf), what);
        }
      }
    }
  }
}

CANDLE_DEVICE_TEST(Differential, ToDtypeCasts) {
  const size_t n = storage_elems(R, C);
  auto v = values(n, -300.0f, 300.0f, 41);
  v[5] = NAN;    // NaN -> 0 for integers
  v[6] = 1e10f;  // saturates
  v[7] = 0.1f;   // rounding
  bool f16 = float_dtypes(dev).size() > 1;
  std::vector<std::pair<DType, DType>> casts{{DType::F32, DType::BF16}, {DType::BF16, DType::F32},
                                             {DType::F32, DType::U8},   {DType::U8, DType::F32},
                                             {DType::F32, DType::U32},  {DType::U32, DType::F32},
                                             {DType::F32, DType::I64},  {DType::I64, DType::F32}};
  if (f16) {
    casts.insert(casts.end(), {{DType::F32, DType::F16},
                               {DType::F16, DType::F32},
                               {DType::F16, DType::BF16},
                               {DType::BF16, DType::F16},
                               {DType::F16, DType::U8},
                               {DType::I64, DType::F16}});
  }
  for (auto [from, to] : casts) {
    auto p = make_pair(dev, from, v);
    for (const auto& nl : layouts(R, C)) {
      std::string what = std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)) + " " + nl.name;
      if (to == DType::F16) {
        // the device's f32 -> f16 conversion may round differently from the CPU's
        expect_close(as_f32(*p.vk->to_dtype(nl.l, to)), as_f32(*p.cpu->to_dtype(nl.l, to)), 0, 1e-3f, what,
                     /*nonfinite_expected=*/true);
      } else {
        expect_same_bytes(*p.vk->to_dtype(nl.l, to), *p.cpu->to_dtype(nl.l, to), what);
      }
    }
  }
}

CANDLE_DEVICE_TEST(Differential, CopyStridedEveryLayoutAndElementSize) {
  const size_t n = storage_elems(R, C);
  auto v = values(n, 0.0f, 200.0f, 51);
  for (DType dt : {DType::F32, DType::F16, DType::U8, DType::I64, DType::BF16}) {
    auto p = make_pair(dev, dt, v);
    for (const auto& nl : layouts(R, C)) {
      // into a destination at an offset
      auto dv = dev.backend().alloc(dt, R * C + 3);
      auto dc = CpuStorage::zeros(dt, R * C + 3);
      auto zero = dev.backend().from_cpu(*dc);
      zero->copy_strided_src(*dv, 0, Layout::contiguous(Shape{R * C + 3}));
      p.vk->copy_strided_src(*dv, 3, nl.l);
      p.cpu->copy_strided_src(*dc, 3, nl.l);
      expect_same_bytes(*dv, *dc,
                        std::string("copy_strided_src ") + std::string(dtype_name(dt)) + " " + nl.name);
    }
  }
}

CANDLE_DEVICE_TEST(Differential, Copy2dRowsManyAndFew) {
  auto v = values(4000, -5.0f, 5.0f, 52);
  for (DType dt : {DType::F32, DType::F16, DType::U8}) {
    auto p = make_pair(dev, dt, v);
    // (d1, d2, src_s, dst_s, src_o, dst_o): many short rows (kernel), few long rows (buffer copies)
    for (auto [d1, d2, ss, ds, so, dof] : std::vector<std::array<size_t, 6>>{
             {40, 7, 9, 11, 3, 1}, {3, 500, 900, 600, 10, 20}, {100, 13, 13, 20, 0, 5}}) {
      auto dc = CpuStorage::zeros(dt, 3000);
      auto dv = dev.backend().from_cpu(*dc);
      p.vk->copy2d(*dv, d1, d2, ss, ds, so, dof);
      p.cpu->copy2d(*dc, d1, d2, ss, ds, so, dof);
      expect_same_bytes(*dv, *dc, "copy2d " + std::string(dtype_name(dt)) + " d1=" + std::to_string(d1));
    }
  }
}

CANDLE_DEVICE_TEST(Differential, ConstSetStridedLayouts) {
  const size_t n = storage_elems(R, C);
  for (DType dt : {DType::F32, DType::F16, DType::U8, DType::I64, DType::U32}) {
    for (const auto& nl : layouts(R, C)) {
      if (std::string(nl.name) == "broadcast") continue;
      auto p = make_pair(dev, dt, values(n, 0.0f, 50.0f, 61));
      p.vk->const_set(Scalar(-7), nl.l);
      p.cpu->const_set(Scalar(-7), nl.l);
      expect_same_bytes(*p.vk, *p.cpu, "const_set " + std::string(dtype_name(dt)) + " " + nl.name);
    }
  }
}

CANDLE_DEVICE_TEST(Differential, ReduceEveryOpOverDims) {
  const size_t n = storage_elems(R, C);
  for (DType dt : float_dtypes(dev)) {
    auto p = make_pair(dev, dt, values(n, -1.0f, 1.0f, 71));
    for (int o = 0; o <= static_cast<int>(ReduceOp::ArgMax); ++o) {
      auto op = static_cast<ReduceOp>(o);
      bool is_arg = op == ReduceOp::ArgMin || op == ReduceOp::ArgMax;
      std::vector<std::vector<size_t>> dimsets{{0}, {1}};
      if (!is_arg) dimsets.push_back({0, 1});
      for (const auto& nl : layouts(R, C)) {
        for (const auto& dims : dimsets) {
          std::string what = std::string(reduce_op_name(op)) + " " + std::string(dtype_name(dt)) + " " +
                             nl.name + " dims " + Shape(dims).to_string();
          auto got = p.vk->reduce(op, nl.l, dims), want = p.cpu->reduce(op, nl.l, dims);
          if (op == ReduceOp::Sum)
            expect_close(as_f32(*got), as_f32(*want), dt == DType::F16 ? 2e-2f : 2e-5f, 2e-3f, what);
          else
            expect_same_bytes(*got, *want, what);
        }
      }
    }
  }
}

CANDLE_DEVICE_TEST(Differential, Reduce3dNonAdjacentDimsAndLongRows) {
  // [6, 7, 8] over {0, 2}: a copy to rows first
  auto p = make_pair(dev, DType::F32, values(6 * 7 * 8, -1.0f, 1.0f, 72));
  auto l = Layout::contiguous(Shape{6, 7, 8});
  for (auto op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min}) {
    auto got = p.vk->reduce(op, l, {0, 2}), want = p.cpu->reduce(op, l, {0, 2});
    expect_close(as_f32(*got), as_f32(*want), 1e-5f, 1e-5f, std::string("3d ") + reduce_op_name(op));
  }
  // two rows of 200003: split over many work-groups + a second pass
  auto q = make_pair(dev, DType::F32, values(2 * 200003, -1.0f, 1.0f, 73));
  auto lq = Layout::contiguous(Shape{2, 200003});
  expect_close(as_f32(*q.vk->reduce(ReduceOp::Sum, lq, {1})), as_f32(*q.cpu->reduce(ReduceOp::Sum, lq, {1})),
               1e-3f, 1e-5f, "long sum");
  for (auto op : {ReduceOp::Max, ReduceOp::Min, ReduceOp::ArgMax, ReduceOp::ArgMin}) {
    expect_same_bytes(*q.vk->reduce(op, lq, {1}), *q.cpu->reduce(op, lq, {1}),
                      std::string("long ") + reduce_op_name(op));
  }
}

CANDLE_DEVICE_TEST(Differential, ArgReduceTiesAndNaNTakeTheFirst) {
  // row 0: max 5 at 1 and 3 -> 1; min -2 at 0 and 4 -> 0. row 1: NaN at 2 and 4 -> 2 for both.
  std::vector<float> v{-2, 5, 1, 5, -2, 0, 1, NAN, 3, NAN};
  auto p = make_pair(dev, DType::F32, v);
  auto l = Layout::contiguous(Shape{2, 5});
  auto am = p.vk->reduce(ReduceOp::ArgMax, l, {1})->to_cpu();
  auto an = p.vk->reduce(ReduceOp::ArgMin, l, {1})->to_cpu();
  EXPECT_EQ(am->data<uint32_t>()[0], 1u);
  EXPECT_EQ(am->data<uint32_t>()[1], 2u);
  EXPECT_EQ(an->data<uint32_t>()[0], 0u);
  EXPECT_EQ(an->data<uint32_t>()[1], 2u);
  auto mx = as_f32(*p.vk->reduce(ReduceOp::Max, l, {1}));
  EXPECT_EQ(mx[0], 5.0f);
  EXPECT_TRUE(std::isnan(mx[1]));
}

CANDLE_DEVICE_TEST(Differential, ReduceIsDeterministic) {
  auto p = make_pair(dev, DType::F32, values(1 << 20, -1.0f, 1.0f, 74));
  auto l = Layout::contiguous(Shape{1 << 20});
  auto a = p.vk->reduce(ReduceOp::Sum, l, {0}), b = p.vk->reduce(ReduceOp::Sum, l, {0});
  expect_same_bytes(*a, *b, "sum_all twice");
}

CANDLE_DEVICE_TEST(Differential, IndexSelectAndGatherU32AndI64) {
  const size_t n = storage_elems(R, C);
  std::vector<float> idv{3, 0, 28, 28, 7, 1};
  for (DType dt : {DType::F32, DType::F16, DType::U8, DType::I64}) {
    auto p = make_pair(dev, dt, values(n, 0.0f, 100.0f, 81));
    for (DType idt : {DType::U32, DType::I64}) {
      auto ids = make_pair(dev, idt, idv);
      Layout il = Layout::contiguous(Shape{idv.size()});
      for (const auto& nl : layouts(R, C)) {
        for (size_t dim : {0, 1}) {
          std::string what = "index_select " + std::string(dtype_name(dt)) + " ids " +
                             std::string(dtype_name(idt)) + " " + nl.name + " dim " + std::to_string(dim);
          expect_same_bytes(*p.vk->index_select(nl.l, *ids.vk, il, dim),
                            *p.cpu->index_select(nl.l, *ids.cpu, il, dim), what);
        }
        // gather along dim 1: ids [R, 4] with values < C
        auto gv = values(R * 4, 0.0f, static_cast<float>(C), 82);
        for (auto& x : gv) x = std::floor(x);
        auto gids = make_pair(dev, idt, gv);
        Layout gl = Layout::contiguous(Shape{R, 4});
        expect_same_bytes(*p.vk->gather(nl.l, *gids.vk, gl, 1), *p.cpu->gather(nl.l, *gids.cpu, gl, 1),
                          "gather " + std::string(dtype_name(dt)) + " " + nl.name);
      }
    }
  }
}

// A [batch, rows, cols] layout of the given kind over a storage big enough for every kind.
Layout mat_layout(const char* kind, size_t b, size_t r, size_t c) {
  std::string k = kind;
  if (k == "contiguous") return Layout::contiguous(Shape{b, r, c});
  if (k == "transposed") return Layout(Shape{b, r, c}, {r * c, 1, r}, 0);
  if (k == "narrowed") return Layout(Shape{b, r, c}, {r * (c + 2) + 1, c + 2, 1}, 3);
  return Layout(Shape{b, r, c}, {0, c, 1}, 1);  // broadcast over the batch
}

CANDLE_DEVICE_TEST(Differential, MatmulEveryLayoutPairAndGemv) {
  const char* kinds[] = {"contiguous", "transposed", "narrowed", "broadcast"};
  for (DType dt : float_dtypes(dev)) {
    for (auto [b, m, k, nn] :
         std::vector<std::array<size_t, 4>>{{3, 70, 33, 65}, {2, 1, 100, 37}, {1, 5, 130, 9}}) {
      auto a = make_pair(dev, dt, values(b * m * (k + 2) + b + 8, -1.0f, 1.0f, 91));
      auto w = make_pair(dev, dt, values(b * k * (nn + 2) + b + 8, -1.0f, 1.0f, 92));
      for (const char* ka : kinds) {
        for (const char* kb : kinds) {
          Layout la = mat_layout(ka, b, m, k), lb = mat_layout(kb, b, k, nn);
          std::string what = "matmul " + std::string(dtype_name(dt)) + " " + std::to_string(b) + "x" +
                             std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(nn) + " " +
                             ka + " x " + kb;
          MatmulDims d{b, m, nn, k};
          float tol = dt == DType::F16 ? 3e-2f : 2e-5f;
          expect_close(as_f32(*a.vk->matmul(la, *w.vk, lb, d)), as_f32(*a.cpu->matmul(la, *w.cpu, lb, d)),
                       tol, tol, what);
        }
      }
    }
  }
}

// ---- convolutions, pooling, resizing, scans, scatters ------------------------------------------

// The four layouts of a [b, c, h, w] input over one storage of layouts4_elems(...) elements:
// contiguous, transposed (h and w swapped in memory), narrowed with an offset, broadcast over b.
std::vector<NamedLayout> layouts4(size_t b, size_t c, size_t h, size_t w) {
  const size_t H = h + 2, W = w + 3;
  return {{"contiguous", Layout::contiguous(Shape{b, c, h, w})},
          {"transposed", Layout(Shape{b, c, h, w}, {c * h * w, h * w, 1, h}, 0)},
          {"narrowed", Layout(Shape{b, c, h, w}, {c * H * W, H * W, W, 1}, 5)},
          {"broadcast", Layout(Shape{b, c, h, w}, {0, h * w, w, 1}, 2)}};
}
size_t layouts4_elems(size_t b, size_t c, size_t h, size_t w) { return 5 + b * c * (h + 2) * (w + 3) + 8; }

// [b, c, l] layouts the same way.
std::vector<NamedLayout> layouts3(size_t b, size_t c, size_t l) {
  return {{"contiguous", Layout::contiguous(Shape{b, c, l})},
          {"transposed", Layout(Shape{b, c, l}, {c * l, 1, c}, 0)},
          {"narrowed", Layout(Shape{b, c, l}, {c * (l + 3), l + 3, 1}, 5)},
          {"broadcast", Layout(Shape{b, c, l}, {0, l, 1}, 2)}};
}
size_t layouts3_elems(size_t b, size_t c, size_t l) { return 5 + b * c * (l + 3) + 8; }

struct Conv2dCase {
  size_t b, ci, co, h, w, kh, kw, pad, stride, dil, groups;
};

std::string conv_name(const Conv2dCase& c) {
  return std::to_string(c.b) + "x" + std::to_string(c.ci) + "->" + std::to_string(c.co) + " " +
         std::to_string(c.h) + "x" + std::to_string(c.w) + " k" + std::to_string(c.kh) + "x" +
         std::to_string(c.kw) + " p" + std::to_string(c.pad) + " s" + std::to_string(c.stride) + " d" +
         std::to_string(c.dil) + " g" + std::to_string(c.groups);
}

const std::vector<Conv2dCase> kConv2dCases{
    {2, 3, 5, 9, 11, 3, 3, 1, 1, 1, 1},    // the fast case, partial tiles
    {1, 4, 6, 10, 7, 3, 3, 0, 2, 1, 2},    // stride 2, groups 2
    {2, 6, 70, 8, 9, 3, 3, 2, 1, 2, 1},    // dilation 2, > 64 output channels
    {1, 40, 8, 6, 6, 1, 1, 0, 1, 1, 1},    // 1x1
    {1, 4, 4, 7, 7, 3, 3, 1, 1, 1, 4},     // depthwise
    {1, 3, 4, 5, 20, 2, 5, 2, 3, 1, 1},    // non-square kernel, stride 3
    {1, 8, 3, 33, 35, 3, 3, 1, 1, 1, 1}};  // more than one pixel tile of 128

CANDLE_DEVICE_TEST(Differential, Conv2dEveryCaseDtypeLayoutAndEpilogue) {
  for (DType dt : float_dtypes(dev)) {
    const float tol = dt == DType::F16 ? 3e-2f : 2e-4f;
    for (const auto& c : kConv2dCases) {
      auto x = make_pair(dev, dt, values(layouts4_elems(c.b, c.ci, c.h, c.w), -1.0f, 1.0f, 101));
      const size_t wn = c.co * (c.ci / c.groups) * c.kh * c.kw;
      auto w = make_pair(dev, dt, values(wn, -0.5f, 0.5f, 102));
      auto bias = make_pair(dev, dt, values(2 * c.co, -1.0f, 1.0f, 103));
      Layout wl = Layout::contiguous(Shape{c.co, c.ci / c.groups, c.kh, c.kw});
      ParamsConv2D p{c.b, c.h, c.w, c.kh, c.kw, c.co, c.ci, c.pad, 0, c.stride, c.dil, c.groups};
      for (const auto& nl : layouts4(c.b, c.ci, c.h, c.w)) {
        std::string what = "conv2d " + std::string(dtype_name(dt)) + " " + conv_name(c) + " " + nl.name;
        expect_close(as_f32(*x.vk->conv2d(nl.l, *w.vk, wl, p, {})),
                     as_f32(*x.cpu->conv2d(nl.l, *w.cpu, wl, p, {})), tol, tol, what);
        // bias read with stride 2, then relu / silu / no activation
        for (std::optional<UnaryOp> act : {std::optional<UnaryOp>(UnaryOp::Relu),
                                           std::optional<UnaryOp>(UnaryOp::Silu), std::optional<UnaryOp>()}) {
          ConvEpilogue ev, ec;
          ev.bias = bias.vk.get(), ec.bias = bias.cpu.get();
          ev.bias_layout = ec.bias_layout = Layout(Shape{c.co}, {2}, 1);
          ev.activation = ec.activation = act;
          expect_close(as_f32(*x.vk->conv2d(nl.l, *w.vk, wl, p, ev)),
                       as_f32(*x.cpu->conv2d(nl.l, *w.cpu, wl, p, ec)), tol, tol,
                       what + " bias+" + (act ? unary_op_name(*act) : "none"));
        }
      }
    }
  }
}

CANDLE_DEVICE_TEST(Differential, Conv2dStridedKernelAndActivationWithoutBias) {
  // kernel [co, ci, kh, kw] read transposed in (kh, kw); gelu epilogue, no bias
  const size_t b = 1, ci = 5, co = 7, h = 12, w = 10;
  auto x = make_pair(dev, DType::F32, values(b * ci * h * w, -1.0f, 1.0f, 104));
  auto k = make_pair(dev, DType::F32, values(co * ci * 9, -0.5f, 0.5f, 105));
  Layout xl = Layout::contiguous(Shape{b, ci, h, w});
  Layout kl(Shape{co, ci, 3, 3}, {ci * 9, 9, 1, 3}, 0);
  ParamsConv2D p{b, h, w, 3, 3, co, ci, 1, 0, 1, 1, 1};
  ConvEpilogue e;
  e.activation = UnaryOp::Gelu;
  expect_close(as_f32(*x.vk->conv2d(xl, *k.vk, kl, p, e)), as_f32(*x.cpu->conv2d(xl, *k.cpu, kl, p, e)),
               2e-4f, 2e-4f, "conv2d strided kernel gelu");
}

CANDLE_DEVICE_TEST(Differential, Conv1dEveryLayout) {
  for (DType dt : float_dtypes(dev)) {
    const float tol = dt == DType::F16 ? 3e-2f : 2e-4f;
    // (b, ci, co, l, k, pad, stride, dil, groups)
    for (auto [b, ci, co, l, k, pad, st, dil, g] : std::vector<std::array<size_t, 9>>{
             {2, 3, 5, 40, 3, 1, 1, 1, 1}, {1, 4, 6, 33, 5, 2, 2, 2, 2}, {2, 6, 6, 17, 1, 0, 1, 1, 6}}) {
      auto x = make_pair(dev, dt, values(layouts3_elems(b, ci, l), -1.0f, 1.0f, 111));
      auto w = make_pair(dev, dt, values(co * (ci / g) * k, -0.5f, 0.5f, 112));
      Layout wl = Layout::contiguous(Shape{co, ci / g, k});
      ParamsConv1D p{b, l, co, ci, k, pad, 0, st, dil, g};
      for (const auto& nl : layouts3(b, ci, l)) {
        expect_close(as_f32(*x.vk->conv1d(nl.l, *w.vk, wl, p)), as_f32(*x.cpu->conv1d(nl.l, *w.cpu, wl, p)),
                     tol, tol,
                     "conv1d " + std::string(dtype_name(dt)) + " k" + std::to_string(k) + " " + nl.name);
      }
    }
  }
}

CANDLE_DEVICE_TEST(Differential, ConvTranspose2dAnd1dEveryLayout) {
  for (DType dt : float_dtypes(dev)) {
    const float tol = dt == DType::F16 ? 3e-2f : 2e-4f;
    // (b, ci, co, h, w, k, pad, out_pad, stride, dil, groups)
    for (auto [b, ci, co, h, w, k, pad, op, st, dil, g] :
         std::vector<std::array<size_t, 11>>{{2, 3, 5, 6, 7, 3, 1, 0, 1, 1, 1},
                                             {1, 4, 6, 5, 4, 4, 1, 1, 2, 1, 2},
                                             {1, 2, 3, 4, 5, 3, 0, 0, 3, 2, 1}}) {
      auto x = make_pair(dev, dt, values(layouts4_elems(b, ci, h, w), -1.0f, 1.0f, 121));
      // conv_transpose2d has no groups (candle); conv_transpose1d takes them
      auto wt = make_pair(dev, dt, values(ci * co * k * k, -0.5f, 0.5f, 122));
      Layout wl = Layout::contiguous(Shape{ci, co, k, k});
      ParamsConv2D p{b, h, w, k, k, co, ci, pad, op, st, dil, 1};
      for (const auto& nl : layouts4(b, ci, h, w)) {
        expect_close(
            as_f32(*x.vk->conv_transpose2d(nl.l, *wt.vk, wl, p)),
            as_f32(*x.cpu->conv_transpose2d(nl.l, *wt.cpu, wl, p)), tol, tol,
            "conv_transpose2d " + std::string(dtype_name(dt)) + " s" + std::to_string(st) + " " + nl.name);
      }
      auto x1 = make_pair(dev, dt, values(layouts3_elems(b, ci, 3 * w), -1.0f, 1.0f, 123));
      Layout wl1 = Layout::contiguous(Shape{ci, co / g, k});
      ParamsConv1D p1{b, 3 * w, co, ci, k, pad, op, st, dil, g};
      for (const auto& nl : layouts3(b, ci, 3 * w)) {
        expect_close(
            as_f32(*x1.vk->conv_transpose1d(nl.l, *wt.vk, wl1, p1)),
            as_f32(*x1.cpu->conv_transpose1d(nl.l, *wt.cpu, wl1, p1)), tol, tol,
            "conv_transpose1d " + std::string(dtype_name(dt)) + " s" + std::to_string(st) + " " + nl.name);
      }
    }
  }
}

CANDLE_DEVICE_TEST(Differential, PoolingEveryLayoutAndNaN) {
  const size_t b = 2, c = 3, h = 9, w = 11;
  auto v = values(layouts4_elems(b, c, h, w), -2.0f, 2.0f, 131);
  v[40] = NAN;
  v[77] = NAN;
  for (DType dt : float_dtypes(dev)) {
    auto x = make_pair(dev, dt, v);
    for (const auto& nl : layouts4(b, c, h, w)) {
      for (auto [k0, k1, s0, s1] :
           std::vector<std::array<size_t, 4>>{{2, 2, 2, 2}, {3, 2, 1, 2}, {3, 3, 3, 2}}) {
        std::string what = std::string(dtype_name(dt)) + " k" + std::to_string(k0) + "x" +
                           std::to_string(k1) + " s" + std::to_string(s0) + "x" + std::to_string(s1) + " " +
                           nl.name;
        expect_same_bytes(*x.vk->max_pool2d(nl.l, {k0, k1}, {s0, s1}),
                          *x.cpu->max_pool2d(nl.l, {k0, k1}, {s0, s1}), "max_pool2d " + what);
        expect_close(as_f32(*x.vk->avg_pool2d(nl.l, {k0, k1}, {s0, s1})),
                     as_f32(*x.cpu->avg_pool2d(nl.l, {k0, k1}, {s0, s1})), 1e-6f, 1e-6f, "avg_pool2d " + what,
                     /*nonfinite_expected=*/true);
      }
    }
  }
}

CANDLE_DEVICE_TEST(Differential, UpsampleNearestAnyDtypeBitIdentical) {
  const size_t b = 2, c = 3, h = 5, w = 7;
  for (DType dt : {DType::F32, DType::F16, DType::U8, DType::I64}) {
    auto x = make_pair(dev, dt, values(layouts4_elems(b, c, h, w), 0.0f, 100.0f, 141));
    for (const auto& nl : layouts4(b, c, h, w)) {
      for (auto [oh, ow] : std::vector<std::array<size_t, 2>>{{10, 14}, {7, 3}, {98, 2}}) {
        expect_same_bytes(*x.vk->upsample_nearest2d(nl.l, oh, ow), *x.cpu->upsample_nearest2d(nl.l, oh, ow),
                          "upsample_nearest2d " + std::string(dtype_name(dt)) + " " + std::to_string(oh) +
                              "x" + std::to_string(ow) + " " + nl.name);
      }
    }
    auto x1 = make_pair(dev, dt, values(layouts3_elems(b, c, 2), 0.0f, 100.0f, 142));
    for (const auto& nl : layouts3(b, c, 2)) {
      expect_same_bytes(*x1.vk->upsample_nearest1d(nl.l, 98), *x1.cpu->upsample_nearest1d(nl.l, 98),
                        "upsample_nearest1d " + std::string(dtype_name(dt)) + " " + nl.name);
    }
  }
}

CANDLE_DEVICE_TEST(Differential, UpsampleBilinearAlignCornersAndScaleForms) {
  const size_t b = 2, c = 3, h = 5, w = 7;
  for (DType dt : float_dtypes(dev)) {
    const float tol = dt == DType::F16 ? 2e-3f : 1e-6f;
    auto x = make_pair(dev, dt, values(layouts4_elems(b, c, h, w), -3.0f, 3.0f, 151));
    for (const auto& nl : layouts4(b, c, h, w)) {
      struct Case {
        size_t oh, ow;
        bool ac;
        std::optional<double> sh, sw;
      };
      for (const Case& k : std::vector<Case>{{11, 16, false, {}, {}},
                                             {11, 16, true, {}, {}},
                                             {3, 4, false, {}, {}},
                                             {12, 17, false, 2.5, 2.5},
                                             {5, 20, false, {}, 2.9},
                                             {1, 1, true, {}, {}}}) {
        std::string what = "upsample_bilinear2d " + std::string(dtype_name(dt)) + " " + std::to_string(k.oh) +
                           "x" + std::to_string(k.ow) + (k.ac ? " align" : "") +
                           (k.sh || k.sw ? " scale" : "") + " " + nl.name;
        expect_close(as_f32(*x.vk->upsample_bilinear2d(nl.l, k.oh, k.ow, k.ac, k.sh, k.sw)),
                     as_f32(*x.cpu->upsample_bilinear2d(nl.l, k.oh, k.ow, k.ac, k.sh, k.sw)), tol, tol, what);
      }
    }
  }
}

CANDLE_DEVICE_TEST(Differential, CumsumEveryDimAndLayout) {
  const size_t n = storage_elems(R, C);
  for (DType dt : float_dtypes(dev)) {
    const float tol = dt == DType::F16 ? 2e-2f : 1e-5f;
    auto x = make_pair(dev, dt, values(n, -1.0f, 1.0f, 161));
    for (const auto& nl : layouts(R, C)) {
      for (size_t dim : {0, 1}) {
        expect_close(as_f32(*x.vk->cumsum(nl.l, dim)), as_f32(*x.cpu->cumsum(nl.l, dim)), tol, tol,
                     "cumsum " + std::string(dtype_name(dt)) + " dim " + std::to_string(dim) + " " + nl.name);
      }
    }
  }
  // a long row: the compensated sum stays within 1e-5 of the CPU's f64 one
  auto y = make_pair(dev, DType::F32, values(100000, 0.0f, 1.0f, 162));
  auto l = Layout::contiguous(Shape{100000});
  expect_close(as_f32(*y.vk->cumsum(l, 0)), as_f32(*y.cpu->cumsum(l, 0)), 1e-5f, 1e-6f, "cumsum long");
}

CANDLE_DEVICE_TEST(Differential, ArgSortTiesNaNAndLongRows) {
  const size_t n = storage_elems(R, C);
  auto v = values(n, -2.0f, 2.0f, 171);
  for (auto& x : v) x = std::round(x * 2.0f) / 2.0f;  // many ties: stability shows
  v[10] = NAN;
  v[50] = NAN;
  for (DType dt : float_dtypes(dev)) {
    auto x = make_pair(dev, dt, v);
    for (const auto& nl : layouts(R, C)) {
      for (bool asc : {true, false}) {
        expect_same_bytes(*x.vk->arg_sort_last_dim(nl.l, asc), *x.cpu->arg_sort_last_dim(nl.l, asc),
                          "arg_sort " + std::string(dtype_name(dt)) + (asc ? " asc " : " desc ") + nl.name);
      }
    }
  }
  auto y = make_pair(dev, DType::F32, values(3 * 1000, -1.0f, 1.0f, 172));
  auto l = Layout::contiguous(Shape{3, 1000});
  expect_same_bytes(*y.vk->arg_sort_last_dim(l, true), *y.cpu->arg_sort_last_dim(l, true),
                    "arg_sort rows of 1000");
}

CANDLE_DEVICE_TEST(Differential, IndexAddRepeatedAndSkippedIds) {
  const size_t n = storage_elems(R, C);
  for (DType dt : float_dtypes(dev)) {
    auto self = make_pair(dev, dt, values(n, -1.0f, 1.0f, 181));
    for (DType idt : {DType::U32, DType::I64}) {
      // dim 0: 5 source rows into rows 3, 0, 3, skip (max id), 36; dim 1: into columns
      std::vector<float> idv{3, 0, 3, 0, 28};
      auto ids = make_pair(dev, idt, idv);
      if (idt == DType::U32) {
        uint32_t skip = 0xffffffffu;
        ids.cpu->data<uint32_t>()[3] = skip;
        ids.vk = dev.backend().from_cpu(*ids.cpu);
      }
      Layout il = Layout::contiguous(Shape{5});
      for (const auto& nl : layouts(R, C)) {
        for (size_t dim : {0, 1}) {
          Shape ss = dim == 0 ? Shape{5, C} : Shape{R, 5};
          auto src = make_pair(dev, dt, values(ss.elem_count() * 2, -1.0f, 1.0f, 182));
          Layout sl = dim == 0 ? Layout(ss, {2 * C, 2}, 1) : Layout::contiguous(ss);  // strided source too
          std::string what = "index_add " + std::string(dtype_name(dt)) + " ids " +
                             std::string(dtype_name(idt)) + " dim " + std::to_string(dim) + " " + nl.name;
          expect_same_bytes(*self.vk->index_add(nl.l, *ids.vk, il, *src.vk, sl, dim),
                            *self.cpu->index_add(nl.l, *ids.cpu, il, *src.cpu, sl, dim), what);
        }
      }
    }
  }
}

CANDLE_DEVICE_TEST(Differential, ScatterSetAndAddCollisionsInOrder) {
  // dst [R, C] (offset 3 in its storage), ids/src [6, C] along dim 0 and [R, 4] along dim 1,
  // ids in a narrow range: many collisions, the last write / in-order sum must win
  std::vector<DType> dts = float_dtypes(dev);
  dts.push_back(DType::U8);
  for (DType dt : dts) {
    for (DType idt : {DType::U32, DType::I64}) {
      for (size_t dim : {0, 1}) {
        Shape is = dim == 0 ? Shape{6, C} : Shape{R, 4};
        auto idv = values(is.elem_count(), 0.0f, dim == 0 ? 4.0f : 3.0f, 191 + dim);
        for (auto& x : idv) x = std::floor(x);
        auto ids = make_pair(dev, idt, idv);
        auto src = make_pair(dev, dt, values(is.elem_count(), 0.0f, 50.0f, 193));
        Layout il = Layout::contiguous(is);
        for (bool add : {false, true}) {
          if (add && dt == DType::U8) continue;  // integer adds: the CPU round-trip
          auto dst = make_pair(dev, dt, values(R * C + 3, -1.0f, 1.0f, 194));
          Layout dl = Layout::contiguous(Shape{R, C}, 3);
          if (add) {
            dst.vk->scatter_add_set(dl, *ids.vk, il, *src.vk, il, dim);
            dst.cpu->scatter_add_set(dl, *ids.cpu, il, *src.cpu, il, dim);
          } else {
            dst.vk->scatter_set(dl, *ids.vk, il, *src.vk, il, dim);
            dst.cpu->scatter_set(dl, *ids.cpu, il, *src.cpu, il, dim);
          }
          expect_same_bytes(*dst.vk, *dst.cpu,
                            std::string(add ? "scatter_add " : "scatter ") + std::string(dtype_name(dt)) +
                                " ids " + std::string(dtype_name(idt)) + " dim " + std::to_string(dim));
        }
      }
    }
  }
}

CANDLE_DEVICE_TEST(Differential, ScatterFromItsOwnStorageReadsTheOldValues) {
  // src = rows 0..1 of dst itself; ids send them to rows 3, 2 (and row 0 -> 1 for one column)
  std::vector<float> idv{3, 3, 1, 3, 3, 2, 2, 2, 2, 2};
  auto ids = make_pair(dev, DType::U32, idv);
  Layout il = Layout::contiguous(Shape{2, 5});
  for (bool add : {false, true}) {
    auto d = make_pair(dev, DType::F32, values(20, -1.0f, 1.0f, 195));
    Layout dl = Layout::contiguous(Shape{4, 5});
    if (add) {
      d.vk->scatter_add_set(dl, *ids.vk, il, *d.vk, il, 0);
      d.cpu->scatter_add_set(dl, *ids.cpu, il, *d.cpu, il, 0);
    } else {
      d.vk->scatter_set(dl, *ids.vk, il, *d.vk, il, 0);
      d.cpu->scatter_set(dl, *ids.cpu, il, *d.cpu, il, 0);
    }
    expect_same_bytes(*d.vk, *d.cpu, add ? "scatter_add in place" : "scatter in place");
  }
}

}  // namespace
}  // namespace candle
