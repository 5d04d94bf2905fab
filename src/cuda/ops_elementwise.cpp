// Element-wise ops: unary, affine, powf, elu, binary, cmp, where_cond, to_dtype (kernels/cuda/ew_*.cu).
#include <cmath>
#include <limits>

#include "core/unary_traits.h"
#include "storage.h"

namespace candle::cuda_backend {
namespace {

// Runs `launch(slice)` over the shape of `l`, with the operands' layouts and a dense output last.
template <typename F>
void over(Context& ctx, const char* kernel, const Shape& shape, std::vector<const Layout*> ls, F&& launch) {
  const Layout out_l = Layout::contiguous(shape);
  ls.push_back(&out_l);
  for_each_ew_slice(shape, ls, [&](const EwSlice& sl) { ctx.launched(launch(sl), kernel); });
}

bool is_integral_in(double v, double lo, double hi) {
  return std::isfinite(v) && std::trunc(v) == v && v >= lo && v <= hi;
}

// The range of an integer dtype, as doubles.
std::pair<double, double> int_range(DType dt) {
  switch (dt) {
    case DType::U8: return {0, 255};
    case DType::U32: return {0, 4294967295.0};
    case DType::I16: return {-32768, 32767};
    case DType::I32: return {-2147483648.0, 2147483647.0};
    default:
      return {static_cast<double>(std::numeric_limits<int64_t>::lowest()),
              static_cast<double>(std::numeric_limits<int64_t>::max())};
  }
}

}  // namespace

StoragePtr CudaStorage::unary(UnaryOp op, const Layout& l) const {
  if (dtype_is_int(dtype_) && !unary_op_supports_int(op)) unsupported(dtype_, unary_op_name(op));
  auto out = cdev().make(dtype_, l.elem_count());
  over(ctx(), unary_op_name(op), l.shape(), {&l}, [&](const EwSlice& s) {
    return cuda_k::unary(op, dt_of(dtype_), at(s.first[0]), s.st[0], out->at(s.first[1]), s.shape, stream());
  });
  return out;
}

StoragePtr CudaStorage::affine(const Layout& l, double mul, double add) const {
  bool exact = true;
  if (dtype_is_int(dtype_)) {
    auto [lo, hi] = int_range(dtype_);
    exact = is_integral_in(mul, lo, hi) && is_integral_in(add, lo, hi);
  }
  auto out = cdev().make(dtype_, l.elem_count());
  over(ctx(), "affine", l.shape(), {&l}, [&](const EwSlice& s) {
    return cuda_k::affine(dt_of(dtype_), at(s.first[0]), s.st[0], out->at(s.first[1]), s.shape, mul, add,
                          exact, stream());
  });
  return out;
}

StoragePtr CudaStorage::powf(const Layout& l, double e) const {
  if (!dtype_is_float(dtype_)) unsupported(dtype_, "powf");
  auto out = cdev().make(dtype_, l.elem_count());
  over(ctx(), "powf", l.shape(), {&l}, [&](const EwSlice& s) {
    return cuda_k::powf(dt_of(dtype_), at(s.first[0]), s.st[0], out->at(s.first[1]), s.shape, e, stream());
  });
  return out;
}

StoragePtr CudaStorage::elu(const Layout& l, double alpha) const {
  if (!dtype_is_float(dtype_)) unsupported(dtype_, "elu");
  auto out = cdev().make(dtype_, l.elem_count());
  over(ctx(), "elu", l.shape(), {&l}, [&](const EwSlice& s) {
    return cuda_k::elu(dt_of(dtype_), at(s.first[0]), s.st[0], out->at(s.first[1]), s.shape, alpha, stream());
  });
  return out;
}

StoragePtr CudaStorage::binary(BinaryOp op, const Layout& lhs_l, const BackendStorage& rhs_b,
                               const Layout& rhs_l) const {
  const char* name = binary_op_name(op);
  const CudaStorage& rhs = as_cuda(rhs_b, name);
  if (op == BinaryOp::Pow && dtype_is_int(dtype_)) unsupported(dtype_, "pow");
  auto out = cdev().make(dtype_, lhs_l.elem_count());
  over(ctx(), name, lhs_l.shape(), {&lhs_l, &rhs_l}, [&](const EwSlice& s) {
    return cuda_k::binary(op, dt_of(dtype_), at(s.first[0]), s.st[0], rhs.at(s.first[1]), s.st[1],
                          out->at(s.first[2]), s.shape, stream());
  });
  return out;
}

StoragePtr CudaStorage::cmp(CmpOp op, const Layout& lhs_l, const BackendStorage& rhs_b,
                            const Layout& rhs_l) const {
  const char* name = cmp_op_name(op);
  const CudaStorage& rhs = as_cuda(rhs_b, name);
  auto out = cdev().make(DType::U8, lhs_l.elem_count());
  over(ctx(), name, lhs_l.shape(), {&lhs_l, &rhs_l}, [&](const EwSlice& s) {
    return cuda_k::cmp(op, dt_of(dtype_), at(s.first[0]), s.st[0], rhs.at(s.first[1]), s.st[1],
                       out->ptr<uint8_t>(s.first[2]), s.shape, stream());
  });
  return out;
}

StoragePtr CudaStorage::where_cond(const Layout& cond_l, const BackendStorage& t_b, const Layout& t_l,
                                   const BackendStorage& f_b, const Layout& f_l) const {
  const CudaStorage& t = as_cuda(t_b, "where_cond");
  const CudaStorage& f = as_cuda(f_b, "where_cond");
  if (!dtype_is_int(dtype_)) unsupported(dtype_, "where_cond (condition)");
  auto out = cdev().make(t.dtype(), cond_l.elem_count());
  over(ctx(), "where_cond", cond_l.shape(), {&cond_l, &t_l, &f_l}, [&](const EwSlice& s) {
    return cuda_k::where_cond(dt_of(dtype_), at(s.first[0]), s.st[0], dtype_size(t.dtype()), t.at(s.first[1]),
                              s.st[1], f.at(s.first[2]), s.st[2], out->at(s.first[3]), s.shape, stream());
  });
  return out;
}

StoragePtr CudaStorage::to_dtype(const Layout& l, DType dtype) const {
  auto out = cdev().make(dtype, l.elem_count());
  over(ctx(), "to_dtype", l.shape(), {&l}, [&](const EwSlice& s) {
    return cuda_k::cast(dt_of(dtype_), dt_of(dtype), at(s.first[0]), s.st[0], out->at(s.first[1]), s.shape,
                        stream());
  });
  return out;
}

}  // namespace candle::cuda_backend
