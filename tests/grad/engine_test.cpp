// The backward engine: which tensors get gradients, tracking rules, errors, deep graphs,
// determinism across thread counts, and memory across training steps.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "candle/backprop.h"
#include "candle/candle.h"
#include "candle/utils.h"
#include "candle/var.h"
#include "core/tensor_impl.h"
#include "test_util.h"

using namespace candle;

namespace {

const Device& cpu() {
  static Device d = Device::cpu();
  return d;
}

using test_util::bytes_of;

struct ThreadCountGuard {
  ~ThreadCountGuard() { set_num_threads(0); }
};

}  // namespace

TEST(GradEngine, OnlyVarsReachedGetGradients) {
  Var x = Var::from_tensor(Tensor::new_({1.f, 2.f, 3.f}, cpu()));
  Var unused = Var::ones({3}, DType::F32, cpu());
  Tensor c = Tensor::new_({4.f, 5.f, 6.f}, cpu());
  Tensor mid = x.as_tensor().mul(c);
  Tensor loss = mid.add(c.exp()).sum_all();
  GradStore gs = loss.backward();
  ASSERT_TRUE(gs.get(x).has_value());
  EXPECT_EQ(gs.get(x)->to_vec1<float>(), (std::vector<float>{4.f, 5.f, 6.f}));
  EXPECT_FALSE(gs.get(c).has_value());
  EXPECT_FALSE(gs.get(unused).has_value());
  // intermediate gradients are dropped once propagated: only the Var's is left
  EXPECT_FALSE(gs.get(mid).has_value());
  EXPECT_FALSE(gs.get(loss).has_value());
  EXPECT_EQ(gs.size(), 1u);
}

TEST(GradEngine, UntrackedInputsRecordNothing) {
  Tensor a = Tensor::new_({1.f, 2.f}, cpu());
  Tensor y = a.exp().mul(a).sum_all();
  EXPECT_FALSE(y.track_op());
  EXPECT_EQ(y.impl()->op, nullptr);
  EXPECT_TRUE(y.backward().empty());
}

TEST(GradEngine, GradientsAreUntracked) {
  Var x = Var::from_tensor(Tensor::new_({1.f, 2.f}, cpu()));
  GradStore gs = x.as_tensor().sqr().sum_all().backward();
  EXPECT_FALSE(gs.get(x)->track_op());
}

TEST(GradEngine, IntegerResultsAreNotTracked) {
  Var x = Var::from_tensor(Tensor::new_({1.f, -2.f, 3.f}, cpu()));
  EXPECT_TRUE(x.as_tensor().exp().track_op());
  EXPECT_FALSE(x.as_tensor().argmax(0).track_op());
  EXPECT_FALSE(x.as_tensor().gt(Scalar(0.f)).track_op());
  EXPECT_FALSE(x.as_tensor().to_dtype(DType::I64).track_op());
  EXPECT_FALSE(x.as_tensor().arg_sort_last_dim(true).track_op());
}

TEST(GradEngine, DetachCutsTheGraph) {
  Var x = Var::from_tensor(Tensor::new_({1.f, 2.f, 3.f}, cpu()));
  Tensor d = x.as_tensor().sqr().detach();
  EXPECT_FALSE(d.track_op());
  // loss = sum(detach(x^2) * x): only the direct path counts, the gradient is x^2
  GradStore gs = d.mul(x).sum_all().backward();
  EXPECT_EQ(gs.get(x)->to_vec1<float>(), (std::vector<float>{1.f, 4.f, 9.f}));
}

TEST(GradEngine, NonScalarRootIsAnError) {
  Var x = Var::from_tensor(Tensor::new_({1.f, 2.f}, cpu()));
  try {
    x.as_tensor().sqr().backward();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::ShapeMismatch);
    EXPECT_NE(std::string(e.what()).find("single-element"), std::string::npos) << e.what();
  }
}

TEST(GradEngine, SingleElementNonScalarRootIsAccepted) {
  Var x = Var::from_tensor(Tensor::new_({3.f}, cpu()));
  GradStore gs = x.as_tensor().sqr().reshape({1, 1}).backward();
  EXPECT_EQ(gs.get(x)->to_vec1<float>(), (std::vector<float>{6.f}));
}

TEST(GradEngine, VarRootGetsOnes) {
  Var x = Var::from_tensor(Tensor::new_(2.0, cpu()));
  GradStore gs = x.as_tensor().backward();
  EXPECT_EQ(gs.get(x)->to_scalar<double>(), 1.0);
}

TEST(GradEngine, SharedSubgraphAccumulates) {
  // y = (x + x) * x: dy/dx = 4x, both paths through the shared x
  Var x = Var::from_tensor(Tensor::new_({1.5, -2.0}, cpu()));
  const Tensor& t = x;
  GradStore gs = t.add(t).mul(t).sum_all().backward();
  EXPECT_EQ(gs.get(x)->to_vec1<double>(), (std::vector<double>{6.0, -8.0}));
}

TEST(GradEngine, NoOpViewsReturnTheInput) {
  // ops that return self (full narrow, same-dtype to_dtype, ...) must not record a node on it
  Var x = Var::from_tensor(Tensor::new_({1.f, 2.f}, cpu()));
  Tensor same = x.as_tensor().narrow(0, 0, 2).to_dtype(DType::F32).contiguous().broadcast_as({2});
  EXPECT_EQ(same.impl(), x.as_tensor().impl());
  EXPECT_EQ(x.as_tensor().impl()->op, nullptr);
}

TEST(GradEngine, DeepChainDoesNotOverflowTheStack) {
  // 100k recorded ops: the topological walk and the graph's destruction are iterative
  Var x = Var::from_tensor(Tensor::new_({1.0, 2.0}, cpu()));
  Tensor y = x;
  for (int i = 0; i < 100000; ++i) y = y.affine(1.0, 0.0);
  GradStore gs = y.sum_all().backward();
  EXPECT_EQ(gs.get(x)->to_vec1<double>(), (std::vector<double>{1.0, 1.0}));
  y = Tensor();  // releases the 100k-node chain
  SUCCEED();
}

TEST(GradEngine, DeepChainOfDuplicatedInputsIsReleased) {
  // each node reads its input twice (x * x): the teardown must still not recurse
  Var x = Var::from_tensor(Tensor::new_({1.0}, cpu()));
  const int64_t before = live_tensor_impls();
  {
    Tensor y = x;
    for (int i = 0; i < 100000; ++i) y = y.mul(y).affine(0.0, 1.0);
  }
  EXPECT_EQ(live_tensor_impls(), before);
}

namespace {

struct SmallNet {
  Var w1, b1, w2, b2;
  static Var param(Device dev, uint64_t seed, double sd, const Shape& s) {
    dev.set_seed(seed);
    return Var::randn(0.0, sd, s, DType::F32, dev);
  }
  explicit SmallNet(const Device& dev)
      : w1(param(dev, 11, 0.3, {8, 3, 3, 3})),
        b1(param(dev, 12, 0.1, {8})),
        w2(param(dev, 13, 0.3, {4, 8, 3, 3})),
        b2(param(dev, 14, 0.1, {4})) {}
  Tensor loss(const Tensor& x, const Tensor& target) const {
    Tensor h = x.conv2d_fused(w1, b1.as_tensor(), 1, 1, 1, 1, UnaryOp::Relu);
    h = h.max_pool2d_with_stride({3, 3}, {2, 2});
    h = h.conv2d(w2, 1, 1, 1, 1).broadcast_add(b2.as_tensor().reshape({1, 4, 1, 1})).silu();
    h = h.upsample_bilinear2d(target.dim(2), target.dim(3), false);
    return h.sub(target).sqr().mean_all();
  }
  std::vector<const Var*> vars() const { return {&w1, &b1, &w2, &b2}; }
};

}  // namespace

TEST(GradEngine, ConvNetGradientsSameBytesForAnyThreadCount) {
  ThreadCountGuard guard;
  Device dev = Device::cpu();
  dev.set_seed(3);
  Tensor x = Tensor::randn(0.0, 1.0, {2, 3, 96, 96}, DType::F32, dev);
  Tensor target = Tensor::randn(0.0, 1.0, {2, 4, 96, 96}, DType::F32, dev);
  std::vector<std::vector<uint8_t>> ref;
  for (size_t threads : {1, 2, 3}) {
    set_num_threads(threads);
    SmallNet net(dev);
    GradStore gs = net.loss(x, target).backward();
    std::vector<std::vector<uint8_t>> got;
    for (const Var* v : net.vars()) {
      auto g = gs.get(*v);
      ASSERT_TRUE(g.has_value());
      got.push_back(bytes_of(*g));
    }
    if (ref.empty()) {
      ref = got;
    } else {
      for (size_t i = 0; i < ref.size(); ++i)
        EXPECT_TRUE(ref[i] == got[i]) << "var " << i << ", " << threads << " threads";
    }
  }
}

TEST(GradEngine, TrainingStepsDoNotGrowMemory) {
  Device dev = Device::cpu();
  dev.set_seed(5);
  Tensor x = Tensor::randn(0.0, 1.0, {1, 3, 16, 16}, DType::F32, dev);
  Tensor target = Tensor::randn(0.0, 1.0, {1, 4, 16, 16}, DType::F32, dev);
  SmallNet net(dev);
  auto step = [&]() {
    GradStore gs = net.loss(x, target).backward();
    for (const Var* v : net.vars()) v->set(v->as_tensor() - gs.get(*v)->affine(0.01, 0.0));
  };
  step();  // warm-up
  const int64_t before = live_tensor_impls();
  float first = net.loss(x, target).detach().to_scalar<float>();
  for (int i = 0; i < 50; ++i) step();
  EXPECT_EQ(live_tensor_impls(), before);
  EXPECT_LT(net.loss(x, target).to_scalar<float>(), first);  // and the steps did train
}
