// Op names, the CPU round-trip counters and the default (CPU round-trip) op implementations.
#include <cstdint>
#include <mutex>
#include <string>

#include "candle/backend/cpu_storage.h"
#include "candle/backend/qblocks.h"

namespace candle {

const char* unary_op_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::Neg: return "neg";
    case UnaryOp::Recip: return "recip";
    case UnaryOp::Exp: return "exp";
    case UnaryOp::Log: return "log";
    case UnaryOp::Sin: return "sin";
    case UnaryOp::Cos: return "cos";
    case UnaryOp::Tanh: return "tanh";
    case UnaryOp::Abs: return "abs";
    case UnaryOp::Sqr: return "sqr";
    case UnaryOp::Sqrt: return "sqrt";
    case UnaryOp::Gelu: return "gelu";
    case UnaryOp::GeluErf: return "gelu_erf";
    case UnaryOp::Erf: return "erf";
    case UnaryOp::Relu: return "relu";
    case UnaryOp::Silu: return "silu";
    case UnaryOp::Ceil: return "ceil";
    case UnaryOp::Floor: return "floor";
    case UnaryOp::Round: return "round";
    case UnaryOp::Sign: return "sign";
    case UnaryOp::Sigmoid: return "sigmoid";
  }
  return "unknown";
}
const char* binary_op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "add";
    case BinaryOp::Sub: return "sub";
    case BinaryOp::Mul: return "mul";
    case BinaryOp::Div: return "div";
    case BinaryOp::Maximum: return "maximum";
    case BinaryOp::Minimum: return "minimum";
    case BinaryOp::Pow: return "pow";
  }
  return "unknown";
}
const char* cmp_op_name(CmpOp op) {
  switch (op) {
    case CmpOp::Eq: return "eq";
    case CmpOp::Ne: return "ne";
    case CmpOp::Lt: return "lt";
    case CmpOp::Le: return "le";
    case CmpOp::Gt: return "gt";
    case CmpOp::Ge: return "ge";
  }
  return "unknown";
}
const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Min: return "min";
    case ReduceOp::Max: return "max";
    case ReduceOp::ArgMin: return "argmin";
    case ReduceOp::ArgMax: return "argmax";
  }
  return "unknown";
}

namespace {
struct Stats {
  std::mutex mu;
  std::map<std::string, size_t> counts;
};
Stats& stats() {
  static Stats s;
  return s;
}
std::shared_ptr<CpuStorage> as_cpu(const StoragePtr& s) { return std::static_pointer_cast<CpuStorage>(s); }
}  // namespace

std::map<std::string, size_t> backend_stats() {
  std::lock_guard lock(stats().mu);
  return stats().counts;
}
void reset_backend_stats() {
  std::lock_guard lock(stats().mu);
  stats().counts.clear();
}
void count_cpu_fallback(const char* op) {
  std::lock_guard lock(stats().mu);
  ++stats().counts[op];
}

// (src by value: the interface hands the storage over; the CPU keeps it)
StoragePtr BackendDevice::adopt_host(
    std::shared_ptr<CpuStorage> src) {  // NOLINT(performance-unnecessary-value-param)
  return from_cpu(*src);
}
StoragePtr BackendDevice::from_host(const void* data, DType dtype, size_t n) {
  auto view = CpuStorage::wrap(dtype, n, const_cast<void*>(data), nullptr);
  return from_cpu(*view);
}
StoragePtr BackendDevice::zeros(DType dtype, size_t n) {
  StoragePtr s = alloc(dtype, n);
  s->const_set(Scalar(0), Layout::contiguous(Shape{n}));
  return s;
}

void BackendStorage::copy_to_host(const Layout& l, void* dst) const {
  if (l.elem_count() == 0) return;
  auto cpu = to_cpu();
  auto out = CpuStorage::wrap(dtype(), l.elem_count(), dst, nullptr);
  cpu->copy_strided_src(*out, 0, l);
}

StoragePtr BackendStorage::upload(const std::shared_ptr<CpuStorage>& cpu, const char* op) const {
  count_cpu_fallback(op);
  return device().from_cpu(*cpu);
}

StoragePtr BackendStorage::unary(UnaryOp op, const Layout& l) const {
  return upload(as_cpu(to_cpu()->unary(op, l)), unary_op_name(op));
}
StoragePtr BackendStorage::affine(const Layout& l, double mul, double add) const {
  return upload(as_cpu(to_cpu()->affine(l, mul, add)), "affine");
}
StoragePtr BackendStorage::powf(const Layout& l, double e) const {
  return upload(as_cpu(to_cpu()->powf(l, e)), "powf");
}
StoragePtr BackendStorage::elu(const Layout& l, double alpha) const {
  return upload(as_cpu(to_cpu()->elu(l, alpha)), "elu");
}
StoragePtr BackendStorage::binary(BinaryOp op, const Layout& lhs_l, const BackendStorage& rhs,
                                  const Layout& rhs_l) const {
  return upload(as_cpu(to_cpu()->binary(op, lhs_l, *rhs.to_cpu(), rhs_l)), binary_op_name(op));
}
StoragePtr BackendStorage::cmp(CmpOp op, const Layout& lhs_l, const BackendStorage& rhs,
                               const Layout& rhs_l) const {
  return upload(as_cpu(to_cpu()->cmp(op, lhs_l, *rhs.to_cpu(), rhs_l)), cmp_op_name(op));
}
StoragePtr BackendStorage::where_cond(const Layout& cond_l, const BackendStorage& on_true, const Layout& t_l,
                                      const BackendStorage& on_false, const Layout& f_l) const {
  return upload(as_cpu(to_cpu()->where_cond(cond_l, *on_true.to_cpu(), t_l, *on_false.to_cpu(), f_l)),
                "where_cond");
}
StoragePtr BackendStorage::reduce(ReduceOp op, const Layout& l, const std::vector<size_t>& dims) const {
  return upload(as_cpu(to_cpu()->reduce(op, l, dims)), reduce_op_name(op));
}
StoragePtr BackendStorage::conv1d(const Layout& l, const BackendStorage& kernel, const Layout& kernel_l,
                                  const ParamsConv1D& p) const {
  return upload(as_cpu(to_cpu()->conv1d(l, *kernel.to_cpu(), kernel_l, p)), "conv1d");
}
StoragePtr BackendStorage::conv_transpose1d(const Layout& l, const BackendStorage& kernel,
                                            const Layout& kernel_l, const ParamsConv1D& p) const {
  return upload(as_cpu(to_cpu()->conv_transpose1d(l, *kernel.to_cpu(), kernel_l, p)), "conv_transpose1d");
}
StoragePtr BackendStorage::conv2d(const Layout& l, const BackendStorage& kernel, const Layout& kernel_l,
                                  const ParamsConv2D& p, const ConvEpilogue& epilogue) const {
  std::shared_ptr<CpuStorage> bias_cpu;
  ConvEpilogue cpu_epi = epilogue;
  if (epilogue.bias) {
    bias_cpu = epilogue.bias->to_cpu();
    cpu_epi.bias = bias_cpu.get();
  }
  return upload(as_cpu(to_cpu()->conv2d(l, *kernel.to_cpu(), kernel_l, p, cpu_epi)), "conv2d");
}
StoragePtr BackendStorage::conv_transpose2d(const Layout& l, const BackendStorage& kernel,
                                            const Layout& kernel_l, const ParamsConv2D& p) const {
  return upload(as_cpu(to_cpu()->conv_transpose2d(l, *kernel.to_cpu(), kernel_l, p)), "conv_transpose2d");
}
StoragePtr BackendStorage::avg_pool2d(const Layout& l, std::array<size_t, 2> kernel,
                                      std::array<size_t, 2> stride) const {
  return upload(as_cpu(to_cpu()->avg_pool2d(l, kernel, stride)), "avg_pool2d");
}
StoragePtr BackendStorage::max_pool2d(const Layout& l, std::array<size_t, 2> kernel,
                                      std::array<size_t, 2> stride) const {
  return upload(as_cpu(to_cpu()->max_pool2d(l, kernel, stride)), "max_pool2d");
}
StoragePtr BackendStorage::upsample_nearest1d(const Layout& l, size_t out_l) const {
  return upload(as_cpu(to_cpu()->upsample_nearest1d(l, out_l)), "upsample_nearest1d");
}
StoragePtr BackendStorage::upsample_nearest2d(const Layout& l, size_t out_h, size_t out_w) const {
  return upload(as_cpu(to_cpu()->upsample_nearest2d(l, out_h, out_w)), "upsample_nearest2d");
}
StoragePtr BackendStorage::upsample_bilinear2d(const Layout& l, size_t out_h, size_t out_w,
                                               bool align_corners, std::optional<double> scale_h,
                                               std::optional<double> scale_w) const {
  return upload(as_cpu(to_cpu()->upsample_bilinear2d(l, out_h, out_w, align_corners, scale_h, scale_w)),
                "upsample_bilinear2d");
}
StoragePtr BackendStorage::cumsum(const Layout& l, size_t dim) const {
  return upload(as_cpu(to_cpu()->cumsum(l, dim)), "cumsum");
}
StoragePtr BackendStorage::arg_sort_last_dim(const Layout& l, bool ascending) const {
  return upload(as_cpu(to_cpu()->arg_sort_last_dim(l, ascending)), "arg_sort_last_dim");
}
StoragePtr BackendStorage::to_dtype(const Layout& l, DType dtype) const {
  return upload(as_cpu(to_cpu()->to_dtype(l, dtype)), "to_dtype");
}
StoragePtr BackendStorage::matmul(const Layout& lhs_l, const BackendStorage& rhs, const Layout& rhs_l,
                                  MatmulDims d) const {
  return upload(as_cpu(to_cpu()->matmul(lhs_l, *rhs.to_cpu(), rhs_l, d)), "matmul");
}
StoragePtr BackendStorage::index_select(const Layout& l, const BackendStorage& ids, const Layout& ids_l,
                                        size_t dim) const {
  return upload(as_cpu(to_cpu()->index_select(l, *ids.to_cpu(), ids_l, dim)), "index_select");
}
StoragePtr BackendStorage::gather(const Layout& l, const BackendStorage& ids, const Layout& ids_l,
                                  size_t dim) const {
  return upload(as_cpu(to_cpu()->gather(l, *ids.to_cpu(), ids_l, dim)), "gather");
}
StoragePtr BackendStorage::index_add(const Layout& l, const BackendStorage& ids, const Layout& ids_l,
                                     const BackendStorage& src, const Layout& src_l, size_t dim) const {
  return upload(as_cpu(to_cpu()->index_add(l, *ids.to_cpu(), ids_l, *src.to_cpu(), src_l, dim)), "index_add");
}

namespace {
// Runs an in-place op on a CPU copy of `self`, then copies the result back on the device.
template <typename Fn>
void in_place_round_trip(BackendStorage& self, const char* op, Fn&& fn) {
  auto cpu = self.to_cpu();
  auto copy = CpuStorage::alloc(cpu->dtype(), cpu->elem_count());
  std::memcpy(copy->bytes(), cpu->bytes(), copy->nbytes());
  fn(*copy);
  count_cpu_fallback(op);
  StoragePtr back = self.device().from_cpu(*copy);
  back->copy_strided_src(self, 0, Layout::contiguous(Shape{copy->elem_count()}));
}
}  // namespace

void BackendStorage::scatter_set(const Layout& l, const BackendStorage& ids, const Layout& ids_l,
                                 const BackendStorage& src, const Layout& src_l, size_t dim) {
  in_place_round_trip(*this, "scatter_set", [&](CpuStorage& c) {
    c.scatter_set(l, *ids.to_cpu(), ids_l, *src.to_cpu(), src_l, dim);
  });
}
void BackendStorage::scatter_add_set(const Layout& l, const BackendStorage& ids, const Layout& ids_l,
                                     const BackendStorage& src, const Layout& src_l, size_t dim) {
  in_place_round_trip(*this, "scatter_add_set", [&](CpuStorage& c) {
    c.scatter_add_set(l, *ids.to_cpu(), ids_l, *src.to_cpu(), src_l, dim);
  });
}
void BackendStorage::copy_strided_src(BackendStorage& dst, size_t dst_offset, const Layout& src_l) const {
  in_place_round_trip(dst, "copy_strided_src",
                      [&](CpuStorage& c) { to_cpu()->copy_strided_src(c, dst_offset, src_l); });
}
void BackendStorage::copy2d(BackendStorage& dst, size_t d1, size_t d2, size_t src_s, size_t dst_s,
                            size_t src_o, size_t dst_o) const {
  in_place_round_trip(dst, "copy2d",
                      [&](CpuStorage& c) { to_cpu()->copy2d(c, d1, d2, src_s, dst_s, src_o, dst_o); });
}
void BackendStorage::const_set(const Scalar& v, const Layout& l) {
  in_place_round_trip(*this, "const_set", [&](CpuStorage& c) { c.const_set(v, l); });
}

// ---- gradients of the convolution family ----------------------------------------------------

StoragePtr BackendStorage::conv1d_grad_kernel(const Layout& x_l, const BackendStorage& grad_out,
                                              const Layout& g_l, const ParamsConv1D& p) const {
  return upload(as_cpu(to_cpu()->conv1d_grad_kernel(x_l, *grad_out.to_cpu(), g_l, p)), "conv1d_grad_kernel");
}
StoragePtr BackendStorage::conv2d_grad_kernel(const Layout& x_l, const BackendStorage& grad_out,
                                              const Layout& g_l, const ParamsConv2D& p) const {
  return upload(as_cpu(to_cpu()->conv2d_grad_kernel(x_l, *grad_out.to_cpu(), g_l, p)), "conv2d_grad_kernel");
}
StoragePtr BackendStorage::conv1d_grad_input(const Layout& g_l, const BackendStorage& kernel,
                                             const Layout& k_l, const ParamsConv1D& p) const {
  return upload(as_cpu(to_cpu()->conv1d_grad_input(g_l, *kernel.to_cpu(), k_l, p)), "conv1d_grad_input");
}
StoragePtr BackendStorage::conv2d_grad_input(const Layout& g_l, const BackendStorage& kernel,
                                             const Layout& k_l, const ParamsConv2D& p) const {
  return upload(as_cpu(to_cpu()->conv2d_grad_input(g_l, *kernel.to_cpu(), k_l, p)), "conv2d_grad_input");
}
StoragePtr BackendStorage::conv_transpose1d_grad_kernel(const Layout& x_l, const BackendStorage& grad_out,
                                                        const Layout& g_l, const ParamsConv1D& p) const {
  return upload(as_cpu(to_cpu()->conv_transpose1d_grad_kernel(x_l, *grad_out.to_cpu(), g_l, p)),
                "conv_transpose1d_grad_kernel");
}
StoragePtr BackendStorage::conv_transpose2d_grad_kernel(const Layout& x_l, const BackendStorage& grad_out,
                                                        const Layout& g_l, const ParamsConv2D& p) const {
  return upload(as_cpu(to_cpu()->conv_transpose2d_grad_kernel(x_l, *grad_out.to_cpu(), g_l, p)),
                "conv_transpose2d_grad_kernel");
}
StoragePtr BackendStorage::conv_transpose1d_grad_input(const Layout& g_l, const BackendStorage& kernel,
                                                       const Layout& k_l, const ParamsConv1D& p) const {
  return upload(as_cpu(to_cpu()->conv_transpose1d_grad_input(g_l, *kernel.to_cpu(), k_l, p)),
                "conv_transpose1d_grad_input");
}
StoragePtr BackendStorage::conv_transpose2d_grad_input(const Layout& g_l, const BackendStorage& kernel,
                                                       const Layout& k_l, const ParamsConv2D& p) const {
  return upload(as_cpu(to_cpu()->conv_transpose2d_grad_input(g_l, *kernel.to_cpu(), k_l, p)),
                "conv_transpose2d_grad_input");
}
StoragePtr BackendStorage::conv_bias_grad(const Layout& g_l) const {
  return upload(as_cpu(to_cpu()->conv_bias_grad(g_l)), "conv_bias_grad");
}
StoragePtr BackendStorage::max_pool2d_grad(const Layout& x_l, const BackendStorage& grad_out,
                                           const Layout& g_l, std::array<size_t, 2> kernel,
                                           std::array<size_t, 2> stride) const {
  return upload(as_cpu(to_cpu()->max_pool2d_grad(x_l, *grad_out.to_cpu(), g_l, kernel, stride)),
                "max_pool2d_grad");
}
StoragePtr BackendStorage::avg_pool2d_grad(const Layout& g_l, size_t in_h, size_t in_w,
                                           std::array<size_t, 2> kernel, std::array<size_t, 2> stride) const {
  return upload(as_cpu(to_cpu()->avg_pool2d_grad(g_l, in_h, in_w, kernel, stride)), "avg_pool2d_grad");
}
StoragePtr BackendStorage::upsample_nearest1d_grad(const Layout& g_l, size_t in_l) const {
  return upload(as_cpu(to_cpu()->upsample_nearest1d_grad(g_l, in_l)), "upsample_nearest1d_grad");
}
StoragePtr BackendStorage::upsample_nearest2d_grad(const Layout& g_l, size_t in_h, size_t in_w) const {
  return upload(as_cpu(to_cpu()->upsample_nearest2d_grad(g_l, in_h, in_w)), "upsample_nearest2d_grad");
}
StoragePtr BackendStorage::upsample_bilinear2d_grad(const Layout& g_l, size_t in_h, size_t in_w,
                                                    bool align_corners, std::optional<double> scale_h,
                                                    std::optional<double> scale_w) const {
  return upload(as_cpu(to_cpu()->upsample_bilinear2d_grad(g_l, in_h, in_w, align_corners, scale_h, scale_w)),
                "upsample_bilinear2d_grad");
}

// The nn fused ops have no generic kernel: nullptr lets candle::nn compose tensor ops.
StoragePtr BackendStorage::softmax_last_dim(const Layout&) const { return nullptr; }
StoragePtr BackendStorage::silu_mul(const Layout&, const BackendStorage&, const Layout&) const {
  return nullptr;
}
StoragePtr BackendStorage::add_rms_norm(const Layout&, const BackendStorage&, const Layout&,
                                        const BackendStorage&, const Layout&, float) const {
  return nullptr;
}
StoragePtr BackendStorage::rms_norm(const Layout&, const BackendStorage&, const Layout&, float) const {
  return nullptr;
}
StoragePtr BackendStorage::layer_norm(const Layout&, const BackendStorage&, const Layout&,
                                      const BackendStorage&, const Layout&, float) const {
  return nullptr;
}
StoragePtr BackendStorage::rope(RopeKind, const Layout&, const BackendStorage&, const Layout&,
                                const BackendStorage&, const Layout&) const {
  return nullptr;
}
// Quantized blocks have no generic kernel: nullptr lets candle::quantized dequantize on the host
// (and keep no copy of the blocks on this device).
StoragePtr BackendStorage::qmatmul(const Layout&, const BackendStorage&, const Layout&, uint32_t, size_t,
                                   size_t) const {
  return nullptr;
}
StoragePtr BackendStorage::qdequantize(const Layout&, uint32_t, size_t, DType) const { return nullptr; }
StoragePtr BackendStorage::scaled_dot_product_attention(const Layout&, const BackendStorage&, const Layout&,
                                                        const BackendStorage&, const Layout&,
                                                        const AttentionParams&) const {
  return nullptr;
}

size_t checked_mul(size_t a, size_t b, const char* op) {
  if (a != 0 && b > SIZE_MAX / a) throw Error(ErrorKind::Internal, std::string(op) + ": size overflow");
  return a * b;
}

size_t checked_block_offset(const BackendStorage& s, const Layout& l, size_t need, const char* op) {
  const std::string where = std::string(device_kind_name(s.device().kind())) + ": " + op + ": ";
  if (s.dtype() != DType::U8)
    throw Error(ErrorKind::Internal,
                where + "the blocks are a " + std::string(dtype_name(s.dtype())) + " storage, not u8");
  if (!l.is_contiguous() || l.elem_count() < need || l.start_offset() > s.elem_count() ||
      l.elem_count() > s.elem_count() - l.start_offset())
    throw Error(ErrorKind::Internal,
                where + std::to_string(need) + " block bytes do not lie in a storage of " +
                    std::to_string(s.elem_count()) + " bytes (layout of " + std::to_string(l.elem_count()) +
                    " from " + std::to_string(l.start_offset()) + ")");
  return l.start_offset();
}

}  // namespace candle
