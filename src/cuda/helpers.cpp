// Helpers of the ops' host code: operand checks, element-wise slicing, dense copies, round-trips.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>

#include "blas.h"
#include "storage.h"

namespace candle::cuda_backend {

namespace {
struct RoundTrips {
  std::mutex mu;
  std::map<std::string, size_t> counts;
};
}  // namespace

RoundTrips& round_trips() {
  static RoundTrips r;
  return r;
}

std::map<std::string, size_t> round_trip_counts() {
  auto& r = round_trips();
  std::lock_guard lock(r.mu);
  return r.counts;
}

void clear_round_trips() {
  auto& r = round_trips();
  std::lock_guard lock(r.mu);
  r.counts.clear();
}

void note_round_trip(const char* op) {
  {
    auto& r = round_trips();
    std::lock_guard lock(r.mu);
    ++r.counts[op];
  }
  static const bool trace = env_flag("CANDLE_CUDA_TRACE");
  if (trace) std::fprintf(stderr, "candle cuda: CPU round-trip for %s\n", op);
}

const CudaStorage& as_cuda(const BackendStorage& s, const char* op) {
  auto* c = dynamic_cast<const CudaStorage*>(&s);
  if (!c)
    throw Error(ErrorKind::DeviceMismatch, std::string("cuda: ") + op + " got an operand on " +
                                               std::string(device_kind_name(s.device().kind())));
  return *c;
}

CudaStorage& as_cuda(BackendStorage& s, const char* op) {
  auto& c = const_cast<CudaStorage&>(as_cuda(static_cast<const BackendStorage&>(s), op));
  c.written();  // taken to be written
  return c;
}

void unsupported(DType dt, const char* op) {
  throw Error(ErrorKind::UnsupportedOp, "unsupported dtype " + std::string(dtype_name(dt)) + " for op " + op);
}

void for_each_ew_slice(const Shape& shape, const std::vector<const Layout*>& layouts,
                       const std::function<void(const EwSlice&)>& fn) {
  const size_t nops = layouts.size();
  if (shape.elem_count() == 0) return;
  // merged dims, outermost first; size-1 dims dropped
  std::vector<size_t> dims;
  std::vector<std::vector<size_t>> st(nops);
  const auto& sd = shape.dims();
  for (size_t d = 0; d < sd.size(); ++d) {
    if (sd[d] == 1) continue;
    bool merge = !dims.empty();
    for (size_t k = 0; k < nops && merge; ++k) merge = st[k].back() == layouts[k]->stride()[d] * sd[d];
    if (merge) {
      dims.back() *= sd[d];
      for (size_t k = 0; k < nops; ++k) st[k].back() = layouts[k]->stride()[d];
    } else {
      dims.push_back(sd[d]);
      for (size_t k = 0; k < nops; ++k) st[k].push_back(layouts[k]->stride()[d]);
    }
  }
  const size_t rank = dims.size();
  const size_t outer = rank > size_t(cuda_k::kMaxDims) ? rank - cuda_k::kMaxDims : 0;
  EwSlice sl;
  sl.st.resize(nops);
  sl.first.resize(nops);
  sl.shape.rank = static_cast<int32_t>(rank - outer);
  sl.shape.n = 1;
  for (size_t d = outer; d < rank; ++d) {
    sl.shape.dims[d - outer] = static_cast<int64_t>(dims[d]);
    sl.shape.n *= static_cast<int64_t>(dims[d]);
  }
  for (size_t k = 0; k < nops; ++k) {
    int64_t dense_st = 1;
    bool dense = true;
    for (size_t d = rank; d-- > outer;) {
      sl.st[k].st[d - outer] = static_cast<int64_t>(st[k][d]);
      dense = dense && static_cast<int64_t>(st[k][d]) == dense_st;
      dense_st *= static_cast<int64_t>(dims[d]);
    }
    sl.st[k].dense = dense;
  }
  // the largest offset any operand reaches inside a slice decides the index width
  uint64_t max_off = 0;
  for (size_t k = 0; k < nops; ++k) {
    uint64_t o = 0;
    for (size_t d = outer; d < rank; ++d) o += static_cast<uint64_t>(dims[d] - 1) * st[k][d];
    max_off = std::max(max_off, o);
  }
  sl.shape.wide = max_off >= (uint64_t(1) << 32) || sl.shape.n > int64_t(UINT32_MAX);
  cuda_k::set_fast_div(sl.shape);
  std::vector<size_t> idx(outer, 0);
  while (true) {
    for (size_t k = 0; k < nops; ++k) {
      size_t o = layouts[k]->start_offset();
      for (size_t d = 0; d < outer; ++d) o += idx[d] * st[k][d];
      sl.first[k] = o;
    }
    fn(sl);
    size_t d = outer;
    while (d > 0) {
      --d;
      if (++idx[d] < dims[d]) break;
      idx[d] = 0;
      if (d == 0) return;
    }
    if (outer == 0) return;
  }
}

Dense dense(const CudaStorage& s, const Layout& l) {
  if (l.is_contiguous()) return {&s, l.start_offset(), nullptr};
  auto out = s.cdev().make(s.dtype(), l.elem_count());
  s.copy_strided_src(*out, 0, l);
  return {out.get(), 0, out};
}

void check_blas(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS) fail(std::string(what) + ": " + cublasGetStatusString(st));
}

}  // namespace candle::cuda_backend
