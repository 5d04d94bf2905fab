// candle's custom ops (candle/custom_op.h): CustomOp1/2/3 forwards on the CPU, InplaceOp1/2/3,
// the backward through an op's bwd (inside an SGD step), and the errors for a missing bwd and
// a wrong result shape.
#include "candle/custom_op.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "candle/candle.h"
#include "test_util.h"

using namespace candle;
using candle::test_util::error_of;

namespace {

// The f32 elements of layout l of s, row-major.
std::vector<float> read_f32(const CpuStorage& s, const Layout& l) {
  if (s.dtype() != DType::F32) throw Error(ErrorKind::DTypeMismatch, "test ops take f32");
  std::vector<float> v(l.elem_count());
  for (size_t i = 0; i < v.size(); ++i) v[i] = s.data<float>()[l.offset_of(i)];
  return v;
}

std::shared_ptr<CpuStorage> f32_storage(const std::vector<float>& v) {
  auto s = CpuStorage::alloc(DType::F32, v.size());
  std::copy(v.begin(), v.end(), s->data<float>());
  return s;
}

// y = x^3, without a backward.
struct CubeNoBwd : CustomOp1 {
  std::string name() const override { return "cube-no-bwd"; }
  CpuOpResult cpu_fwd(const CpuStorage& s, const Layout& l) const override {
    std::vector<float> x = read_f32(s, l);
    for (float& v : x) v = v * v * v;
    return {f32_storage(x), l.shape()};
  }
};

// y = x^3 with its backward 3 x^2.
struct Cube final : CubeNoBwd {
  std::string name() const override { return "cube"; }
  std::optional<Tensor> bwd(const Tensor& arg, const Tensor&, const Tensor& grad_res) const override {
    return arg.sqr() * 3.0 * grad_res;
  }
};

// x [n, k] x w [k, m] -> [n, m], a matmul written as a loop; grad_x = g w^T, grad_w = x^T g.
struct CustomLinear final : CustomOp2 {
  std::string name() const override { return "custom-linear"; }
  CpuOpResult cpu_fwd(const CpuStorage& s1, const Layout& l1, const CpuStorage& s2,
                      const Layout& l2) const override {
    size_t n = l1.dims()[0], k = l1.dims()[1], m = l2.dims()[1];
    std::vector<float> x = read_f32(s1, l1), w = read_f32(s2, l2), y(n * m, 0.0f);
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < m; ++j)
        for (size_t p = 0; p < k; ++p) y[i * m + j] += x[i * k + p] * w[p * m + j];
    return {f32_storage(y), Shape{n, m}};
  }
  std::pair<std::optional<Tensor>, std::optional<Tensor>> bwd(const Tensor& x, const Tensor& w, const Tensor&,
                                                              const Tensor& g) const override {
    return {g.matmul(w.t()), x.t().matmul(g)};
  }
};

// a * b (same shapes); the gradient flows to a only.
struct MulFirstOnly final : CustomOp2 {
  std::string name() const override { return "mul-first-only"; }
  CpuOpResult cpu_fwd(const CpuStorage& s1, const Layout& l1, const CpuStorage& s2,
                      const Layout& l2) const override {
    std::vector<float> a = read_f32(s1, l1), b = read_f32(s2, l2);
    for (size_t i = 0; i < a.size(); ++i) a[i] *= b[i];
    return {f32_storage(a), l1.shape()};
  }
  std::pair<std::optional<Tensor>, std::optional<Tensor>> bwd(const Tensor&, const Tensor& b, const Tensor&,
                                                              const Tensor& g) const override {
    return {g * b, std::nullopt};
  }
};

// a * b + c (same shapes).
struct Fma final : CustomOp3 {
  std::string name() const override { return "fma"; }
  CpuOpResult cpu_fwd(const CpuStorage& s1, const Layout& l1, const CpuStorage& s2, const Layout& l2,
                      const CpuStorage& s3, const Layout& l3) const override {
    std::vector<float> a = read_f32(s1, l1), b = read_f32(s2, l2), c = read_f32(s3, l3);
    for (size_t i = 0; i < a.size(); ++i) a[i] = a[i] * b[i] + c[i];
    return {f32_storage(a), l1.shape()};
  }
};

// Claims a shape of 3 elements for a storage of x's (4 in the test).
struct WrongShape final : CustomOp1 {
  std::string name() const override { return "wrong-shape"; }
  CpuOpResult cpu_fwd(const CpuStorage& s, const Layout& l) const override {
    return {f32_storage(read_f32(s, l)), Shape{3}};
  }
};

// In place: x *= 2 / x += y / x += y * z, through x's layout.
struct DoubleInPlace final : InplaceOp1 {
  std::string name() const override { return "double-in-place"; }
  void cpu_fwd(CpuStorage& s, const Layout& l) const override {
    for (size_t i = 0; i < l.elem_count(); ++i) s.data<float>()[l.offset_of(i)] *= 2.0f;
  }
};
struct AddInPlace final : InplaceOp2 {
  std::string name() const override { return "add-in-place"; }
  void cpu_fwd(CpuStorage& s1, const Layout& l1, const CpuStorage& s2, const Layout& l2) const override {
    std::vector<float> y = read_f32(s2, l2);
    for (size_t i = 0; i < l1.elem_count(); ++i) s1.data<float>()[l1.offset_of(i)] += y[i];
  }
};
struct AddMulInPlace final : InplaceOp3 {
  std::string name() const override { return "add-mul-in-place"; }
  void cpu_fwd(CpuStorage& s1, const Layout& l1, const CpuStorage& s2, const Layout& l2, const CpuStorage& s3,
               const Layout& l3) const override {
    std::vector<float> y = read_f32(s2, l2), z = read_f32(s3, l3);
    for (size_t i = 0; i < l1.elem_count(); ++i) s1.data<float>()[l1.offset_of(i)] += y[i] * z[i];
  }
};

const Device& cpu() {
  static Device d = Device::cpu();
  return d;
}

}  // namespace

TEST(CustomOp, Op1ForwardOnCpu) {
  Tensor x = Tensor::new_<float>({{1.f, 2.f}, {3.f, -1.f}}, cpu());
  Tensor y = x.apply_op1_no_bwd(Cube{});
  EXPECT_EQ(y.shape(), Shape({2, 2}));
  EXPECT_EQ(y.dtype(), DType::F32);
  EXPECT_EQ(y.to_vec2<float>(), (std::vector<std::vector<float>>{{1.f, 8.f}, {27.f, -1.f}}));
}

TEST(CustomOp, Op1ReadsTheInputsLayout) {
  // a transposed view: the forward gets the strides, not a copy
  Tensor x = Tensor::new_<float>({{1.f, 2.f}, {3.f, -1.f}}, cpu()).t();
  EXPECT_EQ(x.apply_op1(Cube{}).to_vec2<float>(),
            (std::vector<std::vector<float>>{{1.f, 27.f}, {8.f, -1.f}}));
}

TEST(CustomOp, Op2ForwardOnCpuGivesTheOpsShape) {
  Tensor x = Tensor::new_<float>({{1.f, 2.f}, {3.f, 4.f}, {5.f, 6.f}}, cpu());
  Tensor w = Tensor::new_<float>({{1.f}, {-1.f}}, cpu());
  Tensor y = x.apply_op2_no_bwd(w, CustomLinear{});
  EXPECT_EQ(y.shape(), Shape({3, 1}));
  EXPECT_EQ(y.to_vec2<float>(), (std::vector<std::vector<float>>{{-1.f}, {-1.f}, {-1.f}}));
}

TEST(CustomOp, Op3ForwardOnCpu) {
  Tensor a = Tensor::new_<float>({1.f, 2.f, 3.f}, cpu());
  Tensor b = Tensor::new_<float>({4.f, 5.f, 6.f}, cpu());
  Tensor c = Tensor::new_<float>({0.5f, -1.f, 2.f}, cpu());
  EXPECT_EQ(a.apply_op3_no_bwd(b, c, Fma{}).to_vec1<float>(), (std::vector<float>{4.5f, 9.f, 20.f}));
  EXPECT_EQ(a.apply_op3(b, c, Fma{}).to_vec1<float>(), (std::vector<float>{4.5f, 9.f, 20.f}));
}

TEST(CustomOp, InplaceOp1WritesThroughTheViewsLayout) {
  Tensor x = Tensor::new_<float>({{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}}, cpu());
  x.narrow(1, 1, 2).inplace_op1(DoubleInPlace{});  // columns 1 and 2 only
  EXPECT_EQ(x.to_vec2<float>(), (std::vector<std::vector<float>>{{1.f, 4.f, 6.f}, {4.f, 10.f, 12.f}}));
}

TEST(CustomOp, InplaceOp2AddsIntoTheFirstStorage) {
  Tensor x = Tensor::new_<float>({1.f, 2.f, 3.f}, cpu());
  Tensor y = Tensor::new_<float>({10.f, 20.f, 30.f}, cpu());
  x.inplace_op2(y, AddInPlace{});
  EXPECT_EQ(x.to_vec1<float>(), (std::vector<float>{11.f, 22.f, 33.f}));
  EXPECT_EQ(y.to_vec1<float>(), (std::vector<float>{10.f, 20.f, 30.f}));
}

TEST(CustomOp, InplaceOp3AddsTheProduct) {
  Tensor x = Tensor::new_<float>({1.f, 2.f, 3.f}, cpu());
  Tensor y = Tensor::new_<float>({1.f, 2.f, 3.f}, cpu());
  Tensor z = Tensor::new_<float>({2.f, 2.f, -1.f}, cpu());
  x.inplace_op3(y, z, AddMulInPlace{});
  EXPECT_EQ(x.to_vec1<float>(), (std::vector<float>{3.f, 6.f, 0.f}));
}

TEST(CustomOp, BackwardCallsTheOpsBwd) {
  Var x = Var::from_tensor(Tensor::new_<float>({1.f, -2.f, 0.5f}, cpu()));
  Tensor y = x.as_tensor().apply_op1(Cube{});
  EXPECT_TRUE(y.track_op());
  GradStore grads = y.sum_all().backward();
  // d/dx sum(x^3) = 3 x^2
  EXPECT_EQ(grads.get(x)->to_vec1<float>(), (std::vector<float>{3.f, 12.f, 0.75f}));
}

TEST(CustomOp, SgdStepThroughACustomLinearFollowsTheAnalyticGradient) {
  // fit w to y = x [2, -1]^T: loss = mean((x w - y)^2), dloss/dw = 2/n x^T (x w - y)
  Tensor x = Tensor::new_<float>({{1.f, 0.f}, {0.f, 1.f}, {1.f, 1.f}, {2.f, 1.f}}, cpu());
  Tensor y = Tensor::new_<float>({{2.f}, {-1.f}, {1.f}, {3.f}}, cpu());
  Var w = Var::zeros({2, 1}, DType::F32, cpu());
  const double lr = 0.1;
  float prev_loss = 0.0f;
  for (int step = 0; step < 100; ++step) {
    Tensor loss = (x.apply_op2(w.as_tensor(), CustomLinear{}) - y).sqr().mean_all();
    GradStore grads = loss.backward();
    std::optional<Tensor> g = grads.get(w);
    ASSERT_TRUE(g.has_value());
    float l = loss.to_scalar<float>();
    if (step == 0) {
      // w = 0: loss = mean(y^2) = 15 / 4; gradient -2/4 x^T y = -0.5 [9, 3]
      EXPECT_FLOAT_EQ(l, 3.75f);
      EXPECT_EQ(g->to_vec2<float>(), (std::vector<std::vector<float>>{{-4.5f}, {-1.5f}}));
    } else {
      EXPECT_LT(l, prev_loss) << "step " << step;
    }
    prev_loss = l;
    w.set(w.as_tensor() - *g * lr);
  }
  EXPECT_LT(prev_loss, 1e-3f);
  auto wv = w.as_tensor().flatten_to_vec<float>();
  EXPECT_NEAR(wv[0], 2.0f, 0.05f);
  EXPECT_NEAR(wv[1], -1.0f, 0.05f);
}

TEST(CustomOp, BwdMayLeaveAnInputWithoutGradient) {
  Var a = Var::from_tensor(Tensor::new_<float>({1.f, 2.f}, cpu()));
  Var b = Var::from_tensor(Tensor::new_<float>({3.f, 4.f}, cpu()));
  GradStore grads = a.as_tensor().apply_op2(b.as_tensor(), MulFirstOnly{}).sum_all().backward();
  EXPECT_EQ(grads.get(a)->to_vec1<float>(), (std::vector<float>{3.f, 4.f}));
  EXPECT_FALSE(grads.get(b).has_value());
}

TEST(CustomOp, MissingBwdFailsAtBackwardNamingTheOp) {
  Var x = Var::from_tensor(Tensor::new_<float>({1.f, 2.f}, cpu()));
  Tensor loss = x.as_tensor().apply_op1(CubeNoBwd{}).sum_all();  // the forward works
  EXPECT_EQ(loss.to_scalar<float>(), 9.f);
  std::string msg = error_of([&] { loss.backward(); });
  EXPECT_NE(msg.find("custom op 'cube-no-bwd' has no backward"), std::string::npos) << msg;
}

TEST(CustomOp, MissingBwdIsFineWhereNoGradientFlows) {
  // the op's input is a constant: no node is recorded, the Var's gradient comes out
  Var w = Var::from_tensor(Tensor::new_<float>({1.f, 2.f}, cpu()));
  Tensor c = Tensor::new_<float>({1.f, 2.f}, cpu());
  Tensor loss = (w.as_tensor() * 2.0).sum_all() + c.apply_op1(CubeNoBwd{}).sum_all();
  GradStore grads = loss.backward();
  EXPECT_EQ(grads.get(w)->to_vec1<float>(), (std::vector<float>{2.f, 2.f}));
}

TEST(CustomOp, NoBwdRecordsNothing) {
  Var x = Var::from_tensor(Tensor::new_<float>({1.f, 2.f}, cpu()));
  Tensor y = x.as_tensor().apply_op1_no_bwd(Cube{});
  EXPECT_FALSE(y.track_op());
  EXPECT_TRUE(y.sum_all().backward().empty());
}

TEST(CustomOp, TheGraphKeepsTheOpAlive) {
  auto op = std::make_shared<Cube>();
  std::weak_ptr<Cube> alive = op;
  Var x = Var::from_tensor(Tensor::new_<float>({2.f}, cpu()));
  Tensor loss = x.as_tensor().apply_op1(op).sum_all();
  op.reset();
  EXPECT_FALSE(alive.expired());
  EXPECT_EQ(loss.backward().get(x)->to_vec1<float>(), (std::vector<float>{12.f}));
  loss = Tensor();
  EXPECT_TRUE(alive.expired());
}

TEST(CustomOp, AResultShapeThatDoesNotFitTheStorageIsAnError) {
  Tensor x = Tensor::new_<float>({1.f, 2.f, 3.f, 4.f}, cpu());
  try {
    x.apply_op1_no_bwd(WrongShape{});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::ShapeMismatch);
    EXPECT_NE(
        std::string(e.what()).find("custom op 'wrong-shape' returned shape [3] (3 elements) for a storage "
                                   "of 4 elements"),
        std::string::npos)
        << e.what();
  }
}
