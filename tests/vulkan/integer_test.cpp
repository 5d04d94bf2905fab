// Integer ops on Vulkan (u8, u32, i64) against the CPU backend, at the storage level with
// identical layouts: bit-identical bytes for every op x dtype x layout (contiguous, transposed,
// narrowed with an offset, broadcast), on values that overflow (u8 200 + 100, u32 near 2^32,
// i64 beyond 2^32, negative, MIN/MAX), with zeros and -1 as divisors; and no CPU round-trip
// (vulkan::stats()) for each op with a kernel. Where the CPU raises an error (pow, exp, powf,
// elu on integers) Vulkan raises the same one.
//
// The kernels need shaderInt8 + 8-bit storage (u8) and shaderInt64 (i64), which lavapipe and
// the NVIDIA driver have; the no-round-trip checks assume them.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <limits>

#include "candle/backend/cpu_storage.h"
#include "vk_util.h"

namespace candle {
namespace {

using namespace vk_test;

constexpr size_t R = 37, C = 29;  // odd sizes: partial work-groups

const std::vector<DType> kIntDtypes{DType::U8, DType::U32, DType::I64};

std::string dt_name(DType dt) { return std::string(dtype_name(dt)); }

// n elements of dt: every 5th one of the dtype's edge values (0 first), every 5th a small
// value, the others random bit patterns of the whole type (an LCG).
std::shared_ptr<CpuStorage> int_values(DType dt, size_t n, uint32_t seed) {
  auto c = CpuStorage::alloc(dt, n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 12345;
  auto next = [&] {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return s ^ (s >> 29);
  };
  dispatch(dt, [&]<typename T>() {
    if constexpr (std::is_same_v<T, uint8_t> || std::is_same_v<T, uint32_t> || std::is_same_v<T, int64_t>) {
      std::vector<T> edge;
      if constexpr (std::is_same_v<T, uint8_t>)
        edge = {0, 200, 100, 255, 1, 128, 127, 56};
      else if constexpr (std::is_same_v<T, uint32_t>)
        edge = {0, 0xffffffffu, 4000000000u, 0xfffffff0u, 1, 0x80000000u, 0x7fffffffu, 300000u};
      else
        edge = {0,
                -1,
                std::numeric_limits<int64_t>::min(),
                std::numeric_limits<int64_t>::max(),
                5000000000ll,
                -5000000000ll,
                4294967296ll,
                -4294967297ll,
                1,
                3037000500ll};
      T* d = c->template data<T>();
      for (size_t k = 0; k < n; ++k) {
        uint64_t r = next();
        if (k % 5 == 0)
          d[k] = edge[(k / 5 + seed) % edge.size()];
        else if (k % 5 == 1)
          d[k] = std::is_signed_v<T> ? static_cast<T>(static_cast<int64_t>(r % 2001) - 1000)
                                     : static_cast<T>(r % 200);
        else
          d[k] = static_cast<T>(r);
      }
    }
  });
  return c;
}

Pair int_pair(const Device& dev, DType dt, size_t n, uint32_t seed) {
  auto c = int_values(dt, n, seed);
  return {c, dev.backend().from_cpu(*c)};
}

// Expects no CPU round-trip since the last reset_stats().
void expect_no_round_trip(const std::string& what) {
  auto s = vulkan::stats();
  EXPECT_TRUE(s.round_trips.empty()) << what << ": round-trip "
                                     << (s.round_trips.empty() ? "" : s.round_trips.begin()->first);
}

// op (a storage -> its result) on the Vulkan copy with no round-trip, the CPU's bytes.
template <typename Op>
void expect_kernel_matches(const Pair& p, const std::string& what, Op op) {
  vulkan::reset_stats();
  auto got = op(*p.vk);
  expect_no_round_trip(what);
  expect_same_bytes(*got, *op(*p.cpu), what);
}

// A storage holding `v` (dtype of T) on dev.
template <typename T>
StoragePtr upload(const Device& dev, const std::vector<T>& v) {
  auto c = CpuStorage::alloc(dtype_of<T>, v.size());
  std::copy(v.begin(), v.end(), c->template data<T>());
  return dev.backend().from_cpu(*c);
}

template <typename T>
std::vector<T> download(const BackendStorage& s) {
  auto c = s.to_cpu();
  return std::vector<T>(c->template data<T>(), c->template data<T>() + c->elem_count());
}

// ---- explicit values -------------------------------------------------------------------------

TEST(VulkanInteger, U8ArithmeticWraps) {
  VK_DEVICE_OR_SKIP(dev);
  auto a = upload<uint8_t>(dev, {200, 3, 16, 0});
  auto b = upload<uint8_t>(dev, {100, 5, 16, 1});
  auto l = Layout::contiguous(Shape{4});
  EXPECT_EQ(download<uint8_t>(*a->binary(BinaryOp::Add, l, *b, l)), (std::vector<uint8_t>{44, 8, 32, 1}));
  EXPECT_EQ(download<uint8_t>(*a->binary(BinaryOp::Sub, l, *b, l)), (std::vector<uint8_t>{100, 254, 0, 255}));
  EXPECT_EQ(download<uint8_t>(*a->binary(BinaryOp::Mul, l, *b, l)), (std::vector<uint8_t>{32, 15, 0, 0}));
  EXPECT_EQ(download<uint8_t>(*a->unary(UnaryOp::Neg, l)), (std::vector<uint8_t>{56, 253, 240, 0}));
}

TEST(VulkanInteger, DivisionByZeroGivesZeroAndMinByMinusOneWraps) {
  VK_DEVICE_OR_SKIP(dev);
  const int64_t mn = std::numeric_limits<int64_t>::min();
  auto a = upload<int64_t>(dev, {7, -7, 7, -7, 5, mn, mn, -9000000000ll});
  auto b = upload<int64_t>(dev, {2, 2, -2, -2, 0, -1, 1, 4});
  auto l = Layout::contiguous(Shape{8});
  EXPECT_EQ(download<int64_t>(*a->binary(BinaryOp::Div, l, *b, l)),
            (std::vector<int64_t>{3, -3, -3, 3, 0, mn, mn, -2250000000ll}));
  auto u = upload<uint32_t>(dev, {0xffffffffu, 9, 4});
  auto z = upload<uint32_t>(dev, {0, 0, 3});
  auto l3 = Layout::contiguous(Shape{3});
  EXPECT_EQ(download<uint32_t>(*u->binary(BinaryOp::Div, l3, *z, l3)), (std::vector<uint32_t>{0, 0, 1}));
}

TEST(VulkanInteger, I64SumBeyond32BitsAndNegative) {
  VK_DEVICE_OR_SKIP(dev);
  auto a = upload<int64_t>(dev, {5000000000ll, -7000000000ll, 3, 4294967296ll});
  auto s = a->reduce(ReduceOp::Sum, Layout::contiguous(Shape{4}), {0});
  EXPECT_EQ(download<int64_t>(*s), (std::vector<int64_t>{2294967299ll}));
}

// ---- every op x dtype x layout against the CPU -----------------------------------------------

// Every op code 0..last x integer dtype x layout pair: `run(op, lhs, lhs layout, rhs, rhs layout)`
// on Vulkan with no round-trip, the same bytes as on the CPU.
template <typename Op, typename Run>
void every_op_layout_pair(const Device& dev, int last, uint32_t seed_a, uint32_t seed_b,
                          const char* (*op_name)(Op), Run run) {
  const size_t n = storage_elems(R, C);
  for (DType dt : kIntDtypes) {
    auto a = int_pair(dev, dt, n, seed_a);
    auto b = int_pair(dev, dt, n, seed_b);
    for (int o = 0; o <= last; ++o) {
      auto op = static_cast<Op>(o);
      for (const auto& la : layouts(R, C)) {
        for (const auto& lb : layouts(R, C)) {
          std::string what = std::string(op_name(op)) + " " + dt_name(dt) + " " + la.name + " x " + lb.name;
          vulkan::reset_stats();
          auto got = run(op, *a.vk, la.l, *b.vk, lb.l);
          expect_no_round_trip(what);
          expect_same_bytes(*got, *run(op, *a.cpu, la.l, *b.cpu, lb.l), what);
        }
      }
    }
  }
}

TEST(VulkanInteger, BinaryEveryOpLayoutPair) {
  VK_DEVICE_OR_SKIP(dev);
  every_op_layout_pair<BinaryOp>(
      dev, static_cast<int>(BinaryOp::Minimum), 11, 12, binary_op_name,
      [](BinaryOp op, const BackendStorage& a, const Layout& la, const BackendStorage& b, const Layout& lb) {
        return a.binary(op, la, b, lb);
      });
}

TEST(VulkanInteger, CmpEveryOpLayoutPair) {
  VK_DEVICE_OR_SKIP(dev);
  // seeds 21 and 26 share edge values at some positions: equal pairs
  every_op_layout_pair<CmpOp>(dev, static_cast<int>(CmpOp::Ge), 21, 26, cmp_op_name,
                              [](CmpOp op, const BackendStorage& a, const Layout& la, const BackendStorage& b,
                                 const Layout& lb) { return a.cmp(op, la, b, lb); });
}

TEST(VulkanInteger, UnaryEveryIntegerOpLayout) {
  VK_DEVICE_OR_SKIP(dev);
  const size_t n = storage_elems(R, C);
  const UnaryOp ops[] = {UnaryOp::Neg,  UnaryOp::Abs,  UnaryOp::Sqr,   UnaryOp::Relu,
                         UnaryOp::Sign, UnaryOp::Ceil, UnaryOp::Floor, UnaryOp::Round};
  for (DType dt : kIntDtypes) {
    auto p = int_pair(dev, dt, n, 31);
    for (UnaryOp op : ops) {
      for (const auto& nl : layouts(R, C)) {
        std::string what = std::string(unary_op_name(op)) + " " + dt_name(dt) + " " + nl.name;
        expect_kernel_matches(p, what, [&](const BackendStorage& s) { return s.unary(op, nl.l); });
      }
    }
  }
}

TEST(VulkanInteger, AffineIntegralWraps) {
  VK_DEVICE_OR_SKIP(dev);
  const size_t n = storage_elems(R, C);
  const std::vector<std::pair<double, double>> params[] = {
      {{3, 100}, {255, 255}, {0, 7}, {1, 0}},                              // u8
      {{3, 4000000000.0}, {4294967295.0, 1}, {65537, 0}},                  // u32
      {{-3, 7}, {2147483647.0, -2147483648.0}, {-1, 0}, {65536, 65536}}};  // i64
  for (size_t d = 0; d < kIntDtypes.size(); ++d) {
    DType dt = kIntDtypes[d];
    auto p = int_pair(dev, dt, n, 41);
    for (auto [mul, add] : params[d]) {
      for (const auto& nl : layouts(R, C)) {
        std::string what =
            "affine " + std::to_string(mul) + " " + std::to_string(add) + " " + dt_name(dt) + " " + nl.name;
        expect_kernel_matches(
            p, what, [&, m = mul, a = add](const BackendStorage& s) { return s.affine(nl.l, m, a); });
      }
    }
  }
}

// A fractional mul or add is computed in f64 by the CPU: no kernel (no shaderFloat64 here),
// a counted round-trip with the CPU's bytes.
TEST(VulkanInteger, AffineFractionalRoundTripsWithCpuBytes) {
  VK_DEVICE_OR_SKIP(dev);
  const size_t n = storage_elems(R, C);
  for (DType dt : kIntDtypes) {
    auto p = int_pair(dev, dt, n, 43);
    auto l = layouts(R, C)[1].l;
    vulkan::reset_stats();
    auto got = p.vk->affine(l, 0.5, 0.25);
    EXPECT_EQ(vulkan::stats().round_trips["affine"], 1u) << dt_name(dt);
    expect_same_bytes(*got, *p.cpu->affine(l, 0.5, 0.25), "affine 0.5 " + dt_name(dt));
  }
}

TEST(VulkanInteger, CastsBetweenIntegersAndToFloats) {
  VK_DEVICE_OR_SKIP(dev);
  const size_t n = storage_elems(R, C);
  std::vector<DType> targets = kIntDtypes;
  for (DType f : float_dtypes(dev)) targets.push_back(f);
  targets.push_back(DType::BF16);
  for (DType dt : kIntDtypes) {
    auto p = int_pair(dev, dt, n, 51);
    for (DType to : targets) {
      if (to == dt) continue;
      for (const auto& nl : layouts(R, C)) {
        std::string what = "to_dtype " + dt_name(dt) + " -> " + dt_name(to) + " " + nl.name;
        expect_kernel_matches(p, what, [&](const BackendStorage& s) { return s.to_dtype(nl.l, to); });
      }
    }
  }
}

TEST(VulkanInteger, ReduceEveryOpDimsLayout) {
  VK_DEVICE_OR_SKIP(dev);
  const size_t n = storage_elems(R, C);
  const std::vector<std::vector<size_t>> all_dims{{0}, {1}, {0, 1}};
  for (DType dt : kIntDtypes) {
    auto p = int_pair(dev, dt, n, 61);
    for (int o = 0; o <= static_cast<int>(ReduceOp::ArgMax); ++o) {
      auto op = static_cast<ReduceOp>(o);
      const bool is_arg = op == ReduceOp::ArgMin || op == ReduceOp::ArgMax;
      for (const auto& dims : all_dims) {
        if (is_arg && dims.size() != 1) continue;
        for (const auto& nl : layouts(R, C)) {
          std::string what = std::string(reduce_op_name(op)) + " " + dt_name(dt) + " dims " +
                             Shape(dims).to_string() + " " + nl.name;
          expect_kernel_matches(p, what, [&](const BackendStorage& s) { return s.reduce(op, nl.l, dims); });
        }
      }
    }
  }
}

// Rows long enough for the two-pass reduction (partials in u32 / i64), with many ties (u8).
TEST(VulkanInteger, ReduceLongRowsTwoPasses) {
  VK_DEVICE_OR_SKIP(dev);
  const size_t rows = 3, len = 20000;
  for (DType dt : kIntDtypes) {
    auto p = int_pair(dev, dt, rows * len, 71);
    auto l = Layout::contiguous(Shape{rows, len});
    for (int o = 0; o <= static_cast<int>(ReduceOp::ArgMax); ++o) {
      auto op = static_cast<ReduceOp>(o);
      std::string what = std::string(reduce_op_name(op)) + " " + dt_name(dt) + " long rows";
      expect_kernel_matches(p, what, [&](const BackendStorage& s) { return s.reduce(op, l, {1}); });
    }
    expect_kernel_matches(p, "sum_all " + dt_name(dt), [&](const BackendStorage& s) {
      return s.reduce(ReduceOp::Sum, l, {0, 1});
    });
  }
}

TEST(VulkanInteger, CumsumEveryDimLayout) {
  VK_DEVICE_OR_SKIP(dev);
  const size_t n = storage_elems(R, C);
  for (DType dt : kIntDtypes) {
    auto p = int_pair(dev, dt, n, 81);
    for (size_t dim : {0, 1}) {
      for (const auto& nl : layouts(R, C)) {
        std::string what = "cumsum " + dt_name(dt) + " dim " + std::to_string(dim) + " " + nl.name;
        expect_kernel_matches(p, what, [&](const BackendStorage& s) { return s.cumsum(nl.l, dim); });
      }
    }
  }
}

// Dims longer than one dispatch's segment (32768 steps): the running sum carries over.
TEST(VulkanInteger, CumsumLongDimCarriesAcrossDispatches) {
  VK_DEVICE_OR_SKIP(dev);
  const size_t len = 40000;
  for (DType dt : kIntDtypes) {
    auto p = int_pair(dev, dt, 2 * len, 83);
    for (auto [shape, dim] : {std::pair{Shape{len, 2}, size_t(0)}, std::pair{Shape{2, len}, size_t(1)}}) {
      auto l = Layout::contiguous(shape);
      std::string what = "cumsum " + dt_name(dt) + " " + shape.to_string();
      expect_kernel_matches(p, what, [&, d = dim](const BackendStorage& s) { return s.cumsum(l, d); });
    }
  }
}

// ids in [0, bound) with repeats (several updates of one element, in order).
template <typename I>
std::shared_ptr<CpuStorage> ids_storage(size_t n, size_t bound, uint32_t seed) {
  auto c = CpuStorage::alloc(dtype_of<I>, n);
  uint32_t s = seed;
  for (size_t k = 0; k < n; ++k) {
    s = s * 1664525u + 1013904223u;
    c->template data<I>()[k] = static_cast<I>((s >> 8) % bound);
  }
  return c;
}

TEST(VulkanInteger, IndexAddEveryDimLayoutIdType) {
  VK_DEVICE_OR_SKIP(dev);
  const size_t n = storage_elems(R, C), m = 50;
  for (DType dt : kIntDtypes) {
    auto dst = int_pair(dev, dt, n, 91);
    for (DType it : {DType::U32, DType::I64}) {
      for (size_t dim : {0, 1}) {
        const size_t bound = dim == 0 ? R : C;
        auto ic = it == DType::U32 ? ids_storage<uint32_t>(m, bound, 5) : ids_storage<int64_t>(m, bound, 5);
        auto iv = dev.backend().from_cpu(*ic);
        Shape src_shape = dim == 0 ? Shape{m, C} : Shape{R, m};
        auto src = int_pair(dev, dt, src_shape.elem_count(), 93);
        auto sl = Layout::contiguous(src_shape);
        auto il = Layout::contiguous(Shape{m});
        for (const auto& nl : layouts(R, C)) {
          std::string what = "index_add " + dt_name(dt) + " ids " + dt_name(it) + " dim " +
                             std::to_string(dim) + " " + nl.name;
          vulkan::reset_stats();
          auto got = dst.vk->index_add(nl.l, *iv, il, *src.vk, sl, dim);
          expect_no_round_trip(what);
          expect_same_bytes(*got, *dst.cpu->index_add(nl.l, *ic, il, *src.cpu, sl, dim), what);
        }
      }
    }
  }
}

TEST(VulkanInteger, ScatterAddEveryDimIdTypeSourceLayout) {
  VK_DEVICE_OR_SKIP(dev);
  const size_t m = 45;
  for (DType dt : kIntDtypes) {
    for (DType it : {DType::U32, DType::I64}) {
      for (size_t dim : {0, 1}) {
        const Shape ids_shape = dim == 0 ? Shape{m, C} : Shape{R, m};
        const size_t bound = dim == 0 ? R : C, k = ids_shape.elem_count();
        auto ic = it == DType::U32 ? ids_storage<uint32_t>(k, bound, 7) : ids_storage<int64_t>(k, bound, 7);
        auto iv = dev.backend().from_cpu(*ic);
        auto src = int_pair(dev, dt, k, 95);
        // the source contiguous, and transposed (the same logical shape over another order)
        const Layout src_ls[] = {Layout::contiguous(ids_shape), Layout(ids_shape, {1, ids_shape[0]}, 0)};
        for (const auto& sl : src_ls) {
          auto dst = int_pair(dev, dt, R * C, 97);
          auto l = Layout::contiguous(Shape{R, C});
          std::string what = "scatter_add " + dt_name(dt) + " ids " + dt_name(it) + " dim " +
                             std::to_string(dim) + (sl.is_contiguous() ? " contiguous" : " transposed");
          vulkan::reset_stats();
          dst.vk->scatter_add_set(l, *iv, Layout::contiguous(ids_shape), *src.vk, sl, dim);
          expect_no_round_trip(what);
          dst.cpu->scatter_add_set(l, *ic, Layout::contiguous(ids_shape), *src.cpu, sl, dim);
          expect_same_bytes(*dst.vk, *dst.cpu, what);
        }
      }
    }
  }
}

// ---- errors: what the CPU refuses, Vulkan refuses ----------------------------------------------

void expect_same_error(const std::function<void()>& vk, const std::function<void()>& cpu,
                       const std::string& what) {
  std::string vk_msg, cpu_msg;
  ErrorKind vk_kind = ErrorKind::Internal, cpu_kind = ErrorKind::Internal;
  try {
    cpu();
    ADD_FAILURE() << what << ": the CPU raised no error";
  } catch (const Error& e) {
    cpu_msg = e.what();
    cpu_kind = e.kind();
  }
  try {
    vk();
    ADD_FAILURE() << what << ": Vulkan raised no error";
  } catch (const Error& e) {
    vk_msg = e.what();
    vk_kind = e.kind();
  }
  EXPECT_EQ(vk_kind, cpu_kind) << what;
  EXPECT_EQ(vk_msg, cpu_msg) << what;
}

TEST(VulkanInteger, OpsTheCpuRefusesRaiseItsError) {
  VK_DEVICE_OR_SKIP(dev);
  auto l = Layout::contiguous(Shape{R, C});
  for (DType dt : kIntDtypes) {
    auto p = int_pair(dev, dt, R * C, 101);
    const std::string d = " " + dt_name(dt);
    expect_same_error([&] { p.vk->binary(BinaryOp::Pow, l, *p.vk, l); },
                      [&] { p.cpu->binary(BinaryOp::Pow, l, *p.cpu, l); }, "pow" + d);
    expect_same_error([&] { p.vk->unary(UnaryOp::Exp, l); }, [&] { p.cpu->unary(UnaryOp::Exp, l); },
                      "exp" + d);
    expect_same_error([&] { p.vk->unary(UnaryOp::Sqrt, l); }, [&] { p.cpu->unary(UnaryOp::Sqrt, l); },
                      "sqrt" + d);
    expect_same_error([&] { p.vk->powf(l, 2.0); }, [&] { p.cpu->powf(l, 2.0); }, "powf" + d);
    expect_same_error([&] { p.vk->elu(l, 1.0); }, [&] { p.cpu->elu(l, 1.0); }, "elu" + d);
  }
}

}  // namespace
}  // namespace candle
