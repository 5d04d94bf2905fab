// Ops x dtypes x layouts against PyTorch references (tests/data/ops_grid.safetensors,
// made by tools/gen_fixtures.py with Debian's PyTorch 1.13), on every device
// (tests/test_device.h): OpsGrid.<dtype>/<device>. The inputs are moved to the device and viewed
// there in each layout; every device is held to the same tolerance (the fixture's, below). On a
// non-CPU device every op must run without a CPU round-trip, and a dtype the device has no
// kernels for (found by a probe, e.g. f64 and bf16 on Vulkan) is skipped with the reason.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "candle/candle.h"
#include "test_device.h"

using namespace candle;

namespace {

const std::unordered_map<std::string, Tensor>& grid() {
  static const auto tensors =
      safetensors::load(std::string(CANDLE_TEST_DATA_DIR) + "/ops_grid.safetensors", Device::cpu());
  return tensors;
}

Tensor apply_layout(const Tensor& x, const std::string& layout) {
  if (layout == "contig") return x;
  if (layout == "transposed") return x.t();
  if (layout == "narrowed") return x.narrow(1, 1, 6);
  if (layout == "offset") return x.narrow(0, 2, 3);
  if (layout == "broadcast") return x.narrow(0, 1, 1).broadcast_as({6, 8});
  throw std::runtime_error("unknown layout " + layout);
}

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

const std::map<std::string, Fn>& ops() {
  static const std::map<std::string, Fn> m = {
      {"exp", [](auto& v) { return v[0].exp(); }},
      {"log", [](auto& v) { return v[0].log(); }},
      {"sin", [](auto& v) { return v[0].sin(); }},
      {"cos", [](auto& v) { return v[0].cos(); }},
      {"tanh", [](auto& v) { return v[0].tanh(); }},
      {"abs", [](auto& v) { return v[0].abs(); }},
      {"sqr", [](auto& v) { return v[0].sqr(); }},
      {"sqrt", [](auto& v) { return v[0].sqrt(); }},
      {"gelu", [](auto& v) { return v[0].gelu(); }},
      {"gelu_erf", [](auto& v) { return v[0].gelu_erf(); }},
      {"erf", [](auto& v) { return v[0].erf(); }},
      {"relu", [](auto& v) { return v[0].relu(); }},
      {"silu", [](auto& v) { return v[0].silu(); }},
      {"sigmoid", [](auto& v) { return v[0].sigmoid(); }},
      {"ceil", [](auto& v) { return v[0].ceil(); }},
      {"floor", [](auto& v) { return v[0].floor(); }},
      {"round", [](auto& v) { return v[0].round(); }},
      {"neg", [](auto& v) { return v[0].neg(); }},
      {"recip", [](auto& v) { return v[0].recip(); }},
      {"sign", [](auto& v) { return v[0].sign(); }},
      {"affine", [](auto& v) { return v[0].affine(2.5, -1.0); }},
      {"powf", [](auto& v) { return v[0].powf(2.5); }},
      {"elu", [](auto& v) { return v[0].elu(0.7); }},
      {"add", [](auto& v) { return v[0].add(v[1]); }},
      {"sub", [](auto& v) { return v[0].sub(v[1]); }},
      {"mul", [](auto& v) { return v[0].mul(v[1]); }},
      {"div", [](auto& v) { return v[0].div(v[1]); }},
      {"maximum", [](auto& v) { return v[0].maximum(v[1]); }},
      {"minimum", [](auto& v) { return v[0].minimum(v[1]); }},
      {"eq", [](auto& v) { return v[0].round().eq(v[1].round()); }},
      {"ne", [](auto& v) { return v[0].round().ne(v[1].round()); }},
      {"lt", [](auto& v) { return v[0].round().lt(v[1].round()); }},
      {"le", [](auto& v) { return v[0].round().le(v[1].round()); }},
      {"gt", [](auto& v) { return v[0].round().gt(v[1].round()); }},
      {"ge", [](auto& v) { return v[0].round().ge(v[1].round()); }},
      {"sum0", [](auto& v) { return v[0].sum_keepdim(0); }},
      {"sum1", [](auto& v) { return v[0].sum_keepdim(1); }},
      {"sum01",
       [](auto& v) {
         return v[0].sum_keepdim(std::vector<int64_t>{0, 1});
       }},
      {"max1", [](auto& v) { return v[0].max_keepdim(1); }},
      {"min0", [](auto& v) { return v[0].min_keepdim(0); }},
      {"argmax1", [](auto& v) { return v[0].argmax_keepdim(1); }},
      {"argmin0", [](auto& v) { return v[0].argmin_keepdim(0); }},
      {"mean1", [](auto& v) { return v[0].mean_keepdim(1); }},
      {"cumsum1", [](auto& v) { return v[0].cumsum(1); }},
      {"log_sum_exp1", [](auto& v) { return v[0].log_sum_exp(std::vector<int64_t>{1}).unsqueeze(1); }},
      {"var1", [](auto& v) { return v[0].var_keepdim(1); }},
      {"matmul", [](auto& v) { return v[0].matmul(v[1].t()); }},
      {"where_cond", [](auto& v) { return v[0].gt(Scalar(0)).where_cond(v[1], v[2]); }},
      {"to_f32", [](auto& v) { return v[0].to_dtype(DType::F32); }},
  };
  return m;
}

double tolerance(DType dt, const std::string& op) {
  bool accum = op == "matmul" || op.rfind("sum", 0) == 0 || op == "mean1" || op == "cumsum1" ||
               op == "var1" || op == "log_sum_exp1";
  switch (dt) {
    case DType::F64: return 1e-10;
    case DType::F32: return accum ? 2e-5 : 1e-5;
    case DType::F16: return accum ? 2e-2 : 4e-3;
    case DType::BF16: return accum ? 1.5e-1 : 1.6e-2;
    default: return 0;
  }
}

struct Case {
  std::string op, dtype, layout;
};

std::vector<Case> cases(const std::string& dtype) {
  std::vector<Case> out;
  for (auto& [name, t] : grid()) {
    auto a = name.find('/'), b = name.rfind('/');
    std::string layout = name.substr(b + 1);
    if (layout.rfind("in", 0) == 0 || name.substr(a + 1, b - a - 1) != dtype) continue;
    out.push_back({name.substr(0, a), dtype, layout});
  }
  return out;
}

// Why `dev` has no kernels for dt (a plain add, and exp for floats, take a CPU round-trip), or
// nothing: the grid is then skipped for that dtype on that device.
std::optional<std::string> no_kernels(const Device& dev, DType dt) {
  if (dev.is_cpu()) return std::nullopt;
  reset_backend_stats();
  Tensor x = Tensor::ones({4}, DType::F32, dev).to_dtype(dt);
  Tensor y = x.add(x);
  if (dtype_is_float(dt)) y = y.exp();
  y.to_device(Device::cpu());
  auto trips = test_device::unexpected_round_trips();
  reset_backend_stats();
  if (trips.empty()) return std::nullopt;
  std::string ops;
  for (const auto& [op, n] : trips) ops += (ops.empty() ? "" : ", ") + op;
  return dev.to_string() + " has no " + std::string(dtype_name(dt)) + " kernels (" + ops +
         " took a CPU round-trip)";
}

void check_grid(const Device& dev, const std::string& dtype, size_t min_cases) {
  auto all = cases(dtype);
  ASSERT_GE(all.size(), min_cases);
  const DType dt = grid().at(all.front().op + "/" + dtype + "/in0").dtype();
  if (auto why = no_kernels(dev, dt)) GTEST_SKIP() << *why;
  size_t checked = 0;
  std::set<std::string> missing_ops;
  for (const Case& c : all) {
    auto it = ops().find(c.op);
    if (it == ops().end()) {
      missing_ops.insert(c.op);
      continue;
    }
    SCOPED_TRACE(c.op + "/" + c.dtype + "/" + c.layout);
    std::vector<Tensor> ins;
    for (int i = 0; i < 3; ++i) {
      auto f = grid().find(c.op + "/" + c.dtype + "/in" + std::to_string(i));
      if (f == grid().end()) break;
      ins.push_back(apply_layout(f->second.to_device(dev), c.layout));
    }
    const Tensor& want = grid().at(c.op + "/" + c.dtype + "/" + c.layout);
    Tensor got;
    reset_backend_stats();
    try {
      got = it->second(ins);
      if (want.dtype() == DType::I64 && got.dtype() == DType::U32) got = got.to_dtype(DType::I64);
    } catch (const Error& e) {
      ADD_FAILURE() << "threw: " << e.what();
      continue;
    }
    test_device::expect_no_round_trips(dev, c.op + "/" + c.dtype + "/" + c.layout);
    ASSERT_EQ(got.shape(), want.shape());
    ASSERT_EQ(got.dtype(), want.dtype());
    // |got - want| <= tol max(1, |want|); the fixture has no NaN or infinity, and one in the
    // result fails
    double tol = tolerance(want.dtype(), c.op);
    test_device::expect_close(got, want, tol, tol, "values");
    ++checked;
  }
  EXPECT_TRUE(missing_ops.empty()) << "fixture ops without a C++ mapping: " << *missing_ops.begin();
  EXPECT_EQ(checked, all.size());
}

}  // namespace

CANDLE_DEVICE_TEST_SUITE(OpsGrid);

// One test per fixture dtype, so that a dtype a device lacks is a visible skip.
CANDLE_DEVICE_TEST(OpsGrid, f32) { check_grid(dev, "f32", 200); }
CANDLE_DEVICE_TEST(OpsGrid, f16) { check_grid(dev, "f16", 200); }
CANDLE_DEVICE_TEST(OpsGrid, bf16) { check_grid(dev, "bf16", 200); }
CANDLE_DEVICE_TEST(OpsGrid, f64) { check_grid(dev, "f64", 200); }
CANDLE_DEVICE_TEST(OpsGrid, i64) { check_grid(dev, "i64", 50); }
CANDLE_DEVICE_TEST(OpsGrid, i32) { check_grid(dev, "i32", 40); }
CANDLE_DEVICE_TEST(OpsGrid, u8) { check_grid(dev, "u8", 20); }

// Every fixture dtype has its test above, and the grid is the size it was made with.
TEST(OpsGridFixture, EveryDtypeHasATest) {
  std::set<std::string> dtypes;
  size_t n = 0;
  for (auto& [name, t] : grid()) {
    auto a = name.find('/'), b = name.rfind('/');
    if (name.substr(b + 1).rfind("in", 0) == 0) continue;
    dtypes.insert(name.substr(a + 1, b - a - 1));
    ++n;
  }
  EXPECT_EQ(dtypes, (std::set<std::string>{"bf16", "f16", "f32", "f64", "i32", "i64", "u8"}));
  EXPECT_GT(n, 1000u);
}
