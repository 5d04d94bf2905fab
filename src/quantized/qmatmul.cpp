// QMatMul: x @ w^T for a quantized weight. On the CPU it is a custom op over the block kernels
// (qmatmul_cpu.h); devices without quantized kernels dequantize the weight and multiply there
// (counted in backend_stats() as "qmatmul_dequantize").
#include <string>
#include <vector>

#include "candle/backend/backend.h"
#include "candle/custom_op.h"
#include "candle/error.h"
#include "candle/quantized/quantized.h"
#include "qmatmul_cpu.h"

namespace candle::quantized {

namespace {

// the matmul as candle's QTensor custom op: the input (..., k) f32, the result (..., n) f32
class QMatMulOp final : public CustomOp1 {
 public:
  explicit QMatMulOp(const QTensor& w) : w_(w) {}
  std::string name() const override { return "qmatmul"; }
  CpuOpResult cpu_fwd(const CpuStorage& s, const Layout& l) const override {
    const auto& wd = w_.shape().dims();
    size_t n = wd[0], k = wd[1];
    const auto& xd = l.shape().dims();
    if (xd.empty() || xd.back() != k)
      throw Error(ErrorKind::ShapeMismatch,
                  "qmatmul: the input's last dim is " +
                      (xd.empty() ? std::string("missing") : std::to_string(xd.back())) + ", the weight's " +
                      std::to_string(k));
    if (s.dtype() != DType::F32 || !l.is_contiguous())
      throw Error(ErrorKind::Internal, "qmatmul: the input must be contiguous f32 here");
    size_t m = l.shape().elem_count() / k;
    auto out = CpuStorage::alloc(DType::F32, m * n);
    qmatmul_cpu(w_.dtype(), w_.data().data(), n, k, s.data<float>() + l.start_offset(), m,
                out->data<float>());
    std::vector<size_t> od(xd.begin(), xd.end());
    od.back() = n;
    return {out, Shape(od)};
  }

 private:
  const QTensor& w_;
};

}  // namespace

QMatMul QMatMul::from_qtensor(const QTensor& w) { return from_arc(std::make_shared<const QTensor>(w)); }

QMatMul QMatMul::from_arc(std::shared_ptr<const QTensor> w) {
  if (w->shape().rank() != 2)
    throw Error(ErrorKind::ShapeMismatch,
                "QMatMul needs a 2-d weight (n, k), not rank " + std::to_string(w->shape().rank()));
  QMatMul q;
  if (ggml_is_quantized(w->dtype()))
    q.w_ = std::move(w);
  else
    q.w_ = w->dequantize(w->device());
  return q;
}

GgmlDType QMatMul::dtype() const {
  if (const auto* q = std::get_if<std::shared_ptr<const QTensor>>(&w_)) return (*q)->dtype();
  return GgmlDType::F32;
}

Tensor QMatMul::forward(const Tensor& x) const {
  if (const auto* t = std::get_if<Tensor>(&w_)) return x.broadcast_matmul(t->to_dtype(x.dtype()).t());
  const QTensor& w = **std::get_if<std::shared_ptr<const QTensor>>(&w_);
  if (!x.device().is_cpu()) {
    count_cpu_fallback("qmatmul_dequantize");
    return x.broadcast_matmul(w.dequantize(x.device()).to_dtype(x.dtype()).t());
  }
  Tensor xf = x.to_dtype(DType::F32).contiguous();
  Tensor y = xf.apply_op1_no_bwd(QMatMulOp(w));
  return x.dtype() == DType::F32 ? y : y.to_dtype(x.dtype());
}

}  // namespace candle::quantized
