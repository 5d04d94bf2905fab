// QMatMul: x @ w^T for a quantized weight. On the CPU it is a custom op over the block kernels
// (qmatmul_cpu.h); on another device it is the backend's qmatmul over the blocks uploaded there
// (QTensor::device_data()), and devices without a kernel for the type dequantize the weight and
// multiply there (counted in backend_stats() as "qmatmul_dequantize").
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "candle/backend/backend.h"
#include "candle/custom_op.h"
#include "candle/error.h"
#include "candle/quantized/quantized.h"
#include "quantized/qmatmul_cpu.h"
#include "quantized/qmatmul_kernels.h"

namespace candle::quantized {

namespace {

// The matmul as candle's QTensor custom op: the input (..., k) f32, the result (..., n) f32, n the
// parts' rows added up (QMatMul::group's outputs side by side, from one quantization of the input:
// qmatmul_cpu_parts; a float weight is one part, qmatmul_cpu reads it)
class QMatMulOp final : public CustomOp1 {
 public:
  QMatMulOp(size_t k, std::vector<QmmPart> parts) : k_(k), parts_(std::move(parts)) {}
  std::string name() const override { return "qmatmul"; }
  CpuOpResult cpu_fwd(const CpuStorage& s, const Layout& l) const override {
    const auto& xd = l.shape().dims();
    if (xd.empty() || xd.back() != k_)
      throw Error(ErrorKind::ShapeMismatch,
                  "qmatmul: the input's last dim is " +
                      (xd.empty() ? std::string("missing") : std::to_string(xd.back())) + ", the weight's " +
                      std::to_string(k_));
    if (s.dtype() != DType::F32 || !l.is_contiguous())
      throw Error(ErrorKind::Internal, "qmatmul: the input must be contiguous f32 here");
    size_t n = 0;
    for (const QmmPart& p : parts_) n += p.n;
    const size_t m = l.shape().elem_count() / k_;
    auto out = CpuStorage::alloc(DType::F32, m * n);
    const float* x = s.data<float>() + l.start_offset();
    if (parts_.size() == 1 && !ggml_is_quantized(parts_[0].t))
      qmatmul_cpu(parts_[0].t, parts_[0].w, n, k_, x, m, out->data<float>());
    else
      qmatmul_cpu_parts(parts_.data(), parts_.size(), k_, x, m, out->data<float>(), qmm_isa());
    std::vector<size_t> od(xd.begin(), xd.end() - 1);  // (xd is not empty: checked above)
    od.push_back(n);
    return {out, Shape(od)};
  }

 private:
  size_t k_;
  std::vector<QmmPart> parts_;
};

// x (..., k) times the parts on the CPU: (..., sum of their n) in x's dtype
Tensor cpu_qmatmul(const Tensor& x, size_t k, std::vector<QmmPart> parts) {
  Tensor xf = x.to_dtype(DType::F32).contiguous();
  Tensor y = xf.apply_op1_no_bwd(QMatMulOp(k, std::move(parts)));
  return x.dtype() == DType::F32 ? y : y.to_dtype(x.dtype());
}

}  // namespace

QMatMul QMatMul::from_qtensor(const QTensor& w) { return from_arc(std::make_shared<const QTensor>(w)); }

QMatMul QMatMul::from_arc(std::shared_ptr<const QTensor> w) {
  if (w->shape().rank() != 2)
    throw Error(ErrorKind::ShapeMismatch,
                "QMatMul needs a 2-d weight (n, k), not rank " + std::to_string(w->shape().rank()));
  QMatMul q;
  // f16 / bf16 weights stay in their own type where their bytes are: on a GPU the backend multiplies
  // them directly, on the CPU qmatmul_cpu_float reads them in place (a mapped file's pages: no f32
  // copy, half the bytes every decode step reads); elsewhere (f32, a backend without the kernel)
  // they become a plain f32 tensor, candle's QMatMul::Tensor. The QTensor forms have no gradient.
  const bool half = w->dtype() == GgmlDType::F16 || w->dtype() == GgmlDType::BF16;
  const bool half_here = w->device_data().defined() || (w->device().is_cpu() && !w->data().empty());
  if (ggml_is_quantized(w->dtype()) || (half && half_here))
    q.w_ = std::move(w);
  else
    q.w_ = w->dequantize(w->device());
  return q;
}

namespace {

// The packed copies of the weights, in transparent huge pages where the system gives them: decode
// and prefill then take far fewer TLB misses. Weights of up to 64 MiB share 64 MiB chunks (2 MiB
// aligned), one after the other, so that a model's tensors waste no partly used huge page each
// (TinyLlama Q4_0, 2 threads, tg64: 48 tok/s in 4 KiB pages, 53 with a 2 MiB-rounded allocation
// per tensor, which took 46 MiB more, 70 in shared chunks); a chunk is freed with the last weight in it, and
// the unused end of a chunk is never touched (no memory). Larger weights get their own allocation.
class PackArena {
 public:
  std::shared_ptr<const uint8_t> alloc(size_t bytes) {
    bytes = (bytes + 63) / 64 * 64;
    if (bytes > kChunk) return fresh(bytes);
    std::lock_guard lock(mu_);
    std::shared_ptr<uint8_t> chunk = chunk_.lock();
    if (!chunk || used_ + bytes > kChunk) {
      chunk = fresh(kChunk);
      chunk_ = chunk;
      used_ = 0;
    }
    std::shared_ptr<const uint8_t> out(chunk, chunk.get() + used_);
    used_ += bytes;
    return out;
  }

 private:
  static constexpr size_t kHuge = size_t{2} << 20, kChunk = size_t{64} << 20;
  static std::shared_ptr<uint8_t> fresh(size_t bytes) {
    const size_t size = (bytes + kHuge - 1) / kHuge * kHuge;
    void* p = std::aligned_alloc(kHuge, size);
    if (!p) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    madvise(p, size, MADV_HUGEPAGE);
#endif
    return {static_cast<uint8_t*>(p), [](uint8_t* b) { std::free(b); }};
  }
  std::mutex mu_;
  std::weak_ptr<uint8_t> chunk_;
  size_t used_ = 0;
};

std::shared_ptr<const uint8_t> packed_alloc(size_t bytes) {
  static PackArena* arena = new PackArena();  // never destroyed: weights may outlive static destruction
  return arena->alloc(bytes);
}

}  // namespace

QMatMul QMatMul::from_arc_repacked(std::shared_ptr<const QTensor> w,
                                   const std::function<void(const void*, size_t)>& packed) {
  QMatMul q = from_arc(std::move(w));
  static const bool enabled = [] {
    const char* e = std::getenv("CANDLE_QMM_REPACK");
    return !(e && std::string(e) == "0");
  }();
  const QTensor* t = q.qtensor();
  if (!enabled || !t || !t->device().is_cpu() || t->data().empty()) return q;
  const size_t n = t->shape().dims()[0], k = t->shape().dims()[1];
  if (!qmm_packable(t->dtype(), n, k, qmm_isa())) return q;
  const size_t bytes = qmm_packed_row_bytes(t->dtype(), k) * n;
  q.packed_ = packed_alloc(bytes);
  void* p = const_cast<uint8_t*>(q.packed_.get());
  // in parts of about 4 MiB of blocks (whole 16-row groups), each handed to `packed` once copied
  const size_t row = ggml_row_bytes(t->dtype(), k), prow = qmm_packed_row_bytes(t->dtype(), k);
  const size_t part = std::max<size_t>(1, (size_t{4} << 20) / (row * qmm::kPackRows)) * qmm::kPackRows;
  const uint8_t* src = t->data().data();
  for (size_t r0 = 0; r0 < n; r0 += part) {
    const size_t rows = std::min(part, n - r0);
    qmm_pack(t->dtype(), src + r0 * row, rows, k, static_cast<uint8_t*>(p) + r0 * prow);
    if (packed) packed(src + r0 * row, rows * row);
  }
  return q;
}

QMatMul QMatMul::group(std::vector<QMatMul> parts) {
  if (parts.empty()) throw Error(ErrorKind::ShapeMismatch, "QMatMul::group: no parts");
  size_t k = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const QMatMul& p = parts[i];
    if (p.parts_) throw Error(ErrorKind::InvalidArgument, "QMatMul::group: a part is itself a group");
    const QTensor* t = p.qtensor();
    const size_t pk = t ? t->shape().dims()[1] : p.weight().dim(1);
    if (i > 0 && pk != k)
      throw Error(ErrorKind::ShapeMismatch, "QMatMul::group: part " + std::to_string(i) + " takes " +
                                                std::to_string(pk) + " inputs, part 0 " + std::to_string(k));
    k = pk;
  }
  QMatMul q;
  q.w_ = Tensor();
  q.parts_ = std::make_shared<const std::vector<QMatMul>>(std::move(parts));
  return q;
}

const std::vector<QMatMul>& QMatMul::parts() const {
  static const std::vector<QMatMul> none;
  return parts_ ? *parts_ : none;
}

bool QMatMul::is_quantized() const {
  if (!parts_) return std::holds_alternative<std::shared_ptr<const QTensor>>(w_);
  return std::all_of(parts_->begin(), parts_->end(), [](const QMatMul& p) { return p.is_quantized(); });
}

const QTensor* QMatMul::qtensor() const {
  const auto* q = std::get_if<std::shared_ptr<const QTensor>>(&w_);
  return q ? q->get() : nullptr;
}

Tensor QMatMul::weight() const {
  const auto* t = std::get_if<Tensor>(&w_);
  return t ? *t : Tensor();
}

GgmlDType QMatMul::dtype() const {
  if (parts_) {
    const GgmlDType t = parts_->front().dtype();
    for (const QMatMul& p : *parts_)
      if (p.dtype() != t) return GgmlDType::F32;
    return t;
  }
  if (const auto* q = std::get_if<std::shared_ptr<const QTensor>>(&w_)) return (*q)->dtype();
  return GgmlDType::F32;
}

namespace {

// The backend's product of x (..., k) with the blocks on the weight's device, as (..., n) in x's
// dtype; undefined where the backend has no kernel for the type.
Tensor device_qmatmul(const QTensor& w, const Tensor& x) {
  const size_t n = w.shape().dims()[0], k = w.shape().dims()[1];
  const auto& xd = x.dims();
  if (xd.empty() || xd.back() != k)
    throw Error(ErrorKind::ShapeMismatch,
                "qmatmul: the input's last dim is " +
                    (xd.empty() ? std::string("missing") : std::to_string(xd.back())) + ", the weight's " +
                    std::to_string(k));
  const Tensor& blocks = w.device_data();
  DType dt = x.dtype();
  Tensor xc = (dt == DType::F32 || dt == DType::F16 || dt == DType::BF16) ? x : x.to_dtype(DType::F32);
  xc = xc.contiguous();
  StoragePtr s = blocks.storage()->qmatmul(blocks.layout(), *xc.storage(), xc.layout(),
                                           static_cast<uint32_t>(w.dtype()), n, k);
  if (!s) return {};
  std::vector<size_t> od(xd.begin(), xd.end() - 1);
  od.push_back(n);
  Shape shape(od);
  Tensor y = Tensor::from_storage(std::move(s), Layout::contiguous(shape), DType::F32, x.device());
  return dt == DType::F32 ? y : y.to_dtype(dt);
}

}  // namespace

Tensor QMatMul::forward(const Tensor& x) const {
  if (parts_) return forward_group(x);
  if (const auto* t = std::get_if<Tensor>(&w_)) return x.broadcast_matmul(t->to_dtype(x.dtype()).t());
  const QTensor& w = **std::get_if<std::shared_ptr<const QTensor>>(&w_);
  if (!x.device().same_device(w.device()))
    throw Error(ErrorKind::DeviceMismatch, "QMatMul::forward: the input is on " + x.device().to_string() +
                                               ", the " + std::string(ggml_dtype_name(w.dtype())) +
                                               " weight on " + w.device().to_string());
  if (!x.device().is_cpu()) {
    if (w.device_data().defined())
      if (Tensor y = device_qmatmul(w, x); y.defined()) return y;
    // (a weight without elements has no blocks on the device, and nothing to compute)
    if (w.shape().elem_count() != 0) count_cpu_fallback("qmatmul_dequantize");
    return x.broadcast_matmul(w.dequantize(x.device()).to_dtype(x.dtype()).t());
  }
  const uint8_t* bytes = packed_ ? packed_.get() : w.data().data();
  return cpu_qmatmul(x, w.shape().dims()[1],
                     {QmmPart{w.dtype(), bytes, w.shape().dims()[0], packed_ != nullptr}});
}

Tensor QMatMul::forward_group(const Tensor& x) const {
  const std::vector<QMatMul>& ps = *parts_;
  // one pass on the CPU: every part a QTensor of a block type in host memory (or its packed copy),
  // the types of one block size (one quantization of x serves them all)
  bool one_pass = x.device().is_cpu();
  std::vector<QmmPart> cpu_parts;
  for (const QMatMul& p : ps) {
    const QTensor* w = p.qtensor();
    if (!one_pass || !w || !ggml_is_quantized(w->dtype()) || !w->device().is_cpu() ||
        (!p.packed_ && w->data().empty()) || ggml_block_size(w->dtype()) != ggml_block_size(ps[0].dtype())) {
      one_pass = false;
      break;
    }
    const uint8_t* bytes = p.packed_ ? p.packed_.get() : w->data().data();
    cpu_parts.push_back(QmmPart{w->dtype(), bytes, w->shape().dims()[0], p.packed_ != nullptr});
  }
  if (!one_pass) {
    std::vector<Tensor> ys;
    ys.reserve(ps.size());
    for (const QMatMul& p : ps) ys.push_back(p.forward(x));
    return Tensor::cat(ys, ys[0].rank() - 1);
  }
  return cpu_qmatmul(x, ps[0].qtensor()->shape().dims()[1], std::move(cpu_parts));
}

}  // namespace candle::quantized
