// Reductions, cumsum and arg-sort (kernels/cuda/reduce*.cu, scan.cu, sort.cu). The checks and
// their messages are the CPU's (src/cpu/reduce.cpp).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <limits>

#include "launch_reduce.h"
#include "storage.h"

namespace candle::cuda_backend {
namespace {

const char* reduce_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Min: return "min";
    case ReduceOp::Max: return "max";
    case ReduceOp::ArgMin: return "argmin";
    case ReduceOp::ArgMax: return "argmax";
  }
  return "reduce";
}

void check_bounds(const CudaStorage& s, const Layout& l, const char* op) {
  if (l.elem_count() && l.max_offset_exclusive() > s.elem_count())
    throw Error(ErrorKind::Internal, std::string(op) + ": layout out of the storage's bounds");
}

struct DimS {
  size_t size, stride;
};

std::vector<DimS> merge_dims(const std::vector<DimS>& ds) {
  std::vector<DimS> out;
  for (const DimS& d : ds) {
    if (d.size == 1) continue;
    if (!out.empty() && out.back().stride == d.stride * d.size) {
      out.back().size *= d.size;
      out.back().stride = d.stride;
    } else {
      out.push_back(d);
    }
  }
  return out;
}

cuda_k::RedDims to_red_dims(const std::vector<DimS>& ds) {
  cuda_k::RedDims r;
  r.rank = static_cast<int32_t>(ds.size());
  for (size_t i = 0; i < ds.size(); ++i) {
    r.size[i] = static_cast<int64_t>(ds[i].size);
    r.stride[i] = static_cast<int64_t>(ds[i].stride);
  }
  return r;
}

}  // namespace

StoragePtr CudaStorage::reduce(ReduceOp op, const Layout& l, const std::vector<size_t>& dims) const {
  const char* name = reduce_name(op);
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] >= l.dims().size() || (i > 0 && dims[i] <= dims[i - 1]))
      throw Error(ErrorKind::DimOutOfRange, std::string("invalid reduce dims in ") + name +
                                                ", dims: " + Shape(dims).to_string() +
                                                ", shape: " + l.shape().to_string());
  }
  check_bounds(*this, l, name);
  const bool is_arg = op == ReduceOp::ArgMin || op == ReduceOp::ArgMax;
  if (is_arg && dims.size() != 1)
    throw Error(ErrorKind::InvalidArgument,
                std::string(name) + " reduces exactly one dim, got dims " + Shape(dims).to_string());
  // kept and reduced dims, as the CPU plans them (the reduced ones by decreasing stride unless
  // an arg op needs their order)
  std::vector<DimS> kept, red;
  size_t n_out = 1, R = 1;
  for (size_t i = 0, j = 0; i < l.dims().size(); ++i) {
    DimS d{l.dims()[i], l.stride()[i]};
    if (j < dims.size() && dims[j] == i) {
      red.push_back(d);
      R *= d.size;
      ++j;
    } else {
      kept.push_back(d);
      n_out *= d.size;
    }
  }
  if (!is_arg)
    std::stable_sort(red.begin(), red.end(),
                     [](const DimS& a, const DimS& b) { return a.stride > b.stride; });
  if (op != ReduceOp::Sum && R == 0)
    throw Error(ErrorKind::InvalidArgument, std::string("cannot apply ") + name +
                                                " over an empty dim, dims: " + Shape(dims).to_string() +
                                                ", shape: " + l.shape().to_string());
  if (is_arg && R > std::numeric_limits<uint32_t>::max())
    throw Error(
        ErrorKind::InvalidArgument,
        std::string(name) + ": the reduced dim does not fit u32 indices, shape: " + l.shape().to_string());
  const DType out_dt = is_arg ? DType::U32 : dtype_;
  auto out = cdev().make(out_dt, n_out);
  if (n_out == 0) return out;
  if (R == 0) {  // a sum over nothing: zeros
    check(cudaMemsetAsync(out->at(0), 0, n_out * dtype_size(out_dt), stream()), "cudaMemsetAsync (sum)");
    return out;
  }
  std::vector<DimS> mk = merge_dims(kept), mr = merge_dims(red);
  if (mr.empty()) mr.push_back(DimS{1, 0});
  const CudaStorage* src = this;
  size_t base = l.start_offset();
  CuStoragePtr keep;
  if (mk.size() > size_t(cuda_k::kMaxDims) || mr.size() > size_t(cuda_k::kMaxDims)) {
    // too many dims for the kernel: a copy with the kept dims first and the reduced ones last
    std::vector<size_t> shape, stride;
    for (const DimS& d : kept) shape.push_back(d.size), stride.push_back(d.stride);
    for (const DimS& d : red) shape.push_back(d.size), stride.push_back(d.stride);
    keep = cdev().make(dtype_, l.elem_count());
    copy_strided_src(*keep, 0, Layout(Shape(shape), stride, l.start_offset()));
    src = keep.get();
    base = 0;
    mk = n_out > 1 ? std::vector<DimS>{DimS{n_out, R}} : std::vector<DimS>{};
    mr = {DimS{R, 1}};
  }
  cuda_k::ReduceArgs a;
  a.kept = to_red_dims(mk);
  a.red = to_red_dims(mr);
  a.n_out = static_cast<int64_t>(n_out);
  a.R = static_cast<int64_t>(R);
  const int sms = ctx().sm_count();
  const size_t scratch_bytes = cuda_k::reduce_scratch_bytes(op, dt_of(dtype_), a, sms);
  CuStoragePtr scratch = scratch_bytes ? cdev().make(DType::U8, scratch_bytes) : nullptr;
  ctx().launched(cuda_k::reduce(op, dt_of(dtype_), src->at(base), a, out->at(0), sms,
                                scratch ? scratch->at(0) : nullptr, stream()),
                 name);
  return out;
}

StoragePtr CudaStorage::cumsum(const Layout& l, size_t dim) const {
  if (dim >= l.dims().size())
    throw Error(ErrorKind::DimOutOfRange, "dim out of range in cumsum, dim: " + std::to_string(dim) +
                                              ", shape: " + l.shape().to_string());
  check_bounds(*this, l, "cumsum");
  const size_t n = l.elem_count();
  auto out = cdev().make(dtype_, n);
  if (n == 0) return out;
  size_t pre = 1, post = 1;
  for (size_t i = 0; i < dim; ++i) pre *= l.dims()[i];
  for (size_t i = dim + 1; i < l.dims().size(); ++i) post *= l.dims()[i];
  const Dense d = dense(*this, l);
  ctx().launched(cuda_k::cumsum(dt_of(dtype_), d.s->at(d.first), out->at(0), static_cast<int64_t>(pre),
                                static_cast<int64_t>(l.dims()[dim]), static_cast<int64_t>(post), stream()),
                 "cumsum");
  return out;
}

StoragePtr CudaStorage::arg_sort_last_dim(const Layout& l, bool ascending) const {
  if (l.dims().empty())
    throw Error(ErrorKind::DimOutOfRange, "dim out of range in arg_sort_last_dim, dim: -1, shape: []");
  check_bounds(*this, l, "arg_sort_last_dim");
  const size_t len = l.dims().back();
  if (len > std::numeric_limits<uint32_t>::max())
    throw Error(ErrorKind::InvalidArgument,
                "arg_sort_last_dim: the last dim does not fit u32 indices, shape: " + l.shape().to_string());
  const size_t n = l.elem_count();
  auto out = cdev().make(DType::U32, n);
  if (n == 0) return out;
  const int64_t rows = static_cast<int64_t>(n / len);
  const Dense d = dense(*this, l);
  const size_t scratch_bytes = cuda_k::arg_sort_scratch_bytes(dt_of(dtype_), rows, static_cast<int64_t>(len));
  CuStoragePtr scratch = scratch_bytes ? cdev().make(DType::U8, scratch_bytes) : nullptr;
  ctx().launched(
      cuda_k::arg_sort(dt_of(dtype_), d.s->at(d.first), out->ptr<uint32_t>(), rows, static_cast<int64_t>(len),
                       ascending, scratch ? scratch->at(0) : nullptr, stream()),
      "arg_sort_last_dim");
  return out;
}

}  // namespace candle::cuda_backend
