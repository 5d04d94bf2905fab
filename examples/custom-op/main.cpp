// A user kernel as a candle custom op: softplus (log(1 + e^x)) with a CPU forward written by
// hand and a backward, used as the activation of a small network fitted to sin(x) with SGD.
//
//   candle-custom-op [steps]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "candle/candle.h"
#include "candle/custom_op.h"
#include "candle/nn/optim.h"

using namespace candle;

namespace {

// y = log(1 + e^x), computed as max(x, 0) + log1p(e^-|x|) so that large |x| neither
// overflows nor loses the small term. dy/dx = sigmoid(x).
class Softplus final : public CustomOp1 {
 public:
  std::string name() const override { return "softplus"; }

  CpuOpResult cpu_fwd(const CpuStorage& s, const Layout& l) const override {
    if (s.dtype() != DType::F32)
      throw Error(ErrorKind::UnsupportedOp, "softplus: f32 only, got " + std::string(dtype_name(s.dtype())));
    auto out = CpuStorage::alloc(DType::F32, l.elem_count());  // custom-op SDK
    const float* x = s.data<float>();
    float* y = out->data<float>();
    // the layout may be strided: read element i (row-major) at its storage offset
    for (size_t i = 0; i < l.elem_count(); ++i) {
      float v = x[l.offset_of(i)];
      y[i] = std::max(v, 0.0f) + std::log1p(std::exp(-std::abs(v)));
    }
    return {out, l.shape()};
  }

  std::optional<Tensor> bwd(const Tensor& arg, const Tensor&, const Tensor& grad_res) const override {
    return arg.sigmoid() * grad_res;
  }
};

}  // namespace

int main(int argc, char** argv) {
  try {
    const int steps = argc > 1 ? std::atoi(argv[1]) : 3000;
    Device dev = Device::cpu();
    dev.set_seed(7);

    // 64 points of sin(x) on [-3, 3], as a column [64, 1]
    const size_t n = 64, hidden = 16;
    Tensor x = Tensor::arange_step<float>(-3.0f, 3.0f, 6.0f / n, dev).reshape({n, 1});
    Tensor y = x.sin();

    // y_hat = softplus(x w1 + b1) w2 + b2
    Var w1 = Var::randn(0.0, 1.0, {1, hidden}, DType::F32, dev);
    Var b1 = Var::randn(0.0, 1.0, {hidden}, DType::F32, dev);
    Var w2 = Var::randn(0.0, 0.3, {hidden, 1}, DType::F32, dev);
    Var b2 = Var::zeros({1}, DType::F32, dev);
    auto forward = [&](const Tensor& in) {
      Tensor h = in.matmul(w1).broadcast_add(b1).apply_op1(Softplus{});
      return h.matmul(w2).broadcast_add(b2);
    };

    std::printf("fitting sin(x) on [-3, 3] with softplus(x w1 + b1) w2 + b2, %zu hidden units;\n", hidden);
    std::printf("softplus is a custom op (hand-written CPU forward, bwd = sigmoid(x) * grad)\n\n");
    nn::SGD sgd({w1, b1, w2, b2}, 0.05, 0.9);
    for (int step = 0; step <= steps; ++step) {
      Tensor loss = (forward(x) - y).sqr().mean_all();
      if (step % (steps / 10 > 0 ? steps / 10 : 1) == 0)
        std::printf("step %5d  mse %.6f\n", step, static_cast<double>(loss.to_scalar<float>()));
      if (step < steps) sgd.step(loss.backward());
    }

    std::printf("\n     x    sin(x)  network\n");
    Tensor probe = Tensor::new_<float>({-2.5f, -1.0f, 0.0f, 0.5f, 2.0f}, dev).reshape({5, 1});
    std::vector<float> want = probe.sin().flatten_to_vec<float>();
    std::vector<float> got = forward(probe).flatten_to_vec<float>();
    std::vector<float> xs = probe.flatten_to_vec<float>();
    for (size_t i = 0; i < xs.size(); ++i)
      std::printf("%6.2f  %8.4f  %7.4f\n", static_cast<double>(xs[i]), static_cast<double>(want[i]),
                  static_cast<double>(got[i]));
    return 0;
  } catch (const Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
