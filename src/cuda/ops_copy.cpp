// Copies: copy_strided_src, copy2d (cudaMemcpy2DAsync), const_set; host transfers.
#include <cstring>

#include "storage.h"

namespace candle::cuda_backend {

void CudaStorage::copy_strided_src(BackendStorage& dst_b, size_t dst_offset, const Layout& src_l) const {
  auto& dst = as_cuda(dst_b, "copy_strided_src");
  if (dst.dtype() != dtype_) throw Error(ErrorKind::Internal, "copy_strided_src: dtypes differ");
  const size_t n = src_l.elem_count(), es = dtype_size(dtype_);
  if (dst_offset + n > dst.elem_count() || (n && src_l.max_offset_exclusive() > n_))
    throw Error(ErrorKind::Internal, "copy_strided_src: out of bounds");
  if (n == 0) return;
  if (src_l.is_contiguous()) {
    check(cudaMemcpyAsync(dst.at(dst_offset), at(src_l.start_offset()), n * es, cudaMemcpyDeviceToDevice,
                          stream()),
          "cudaMemcpyAsync (copy_strided_src)");
    return;
  }
  const Layout out_l = Layout::contiguous(src_l.shape(), dst_offset);
  for_each_ew_slice(src_l.shape(), {&src_l, &out_l}, [&](const EwSlice& s) {
    // a transpose of the two inner merged dims (the source's stride 1 on the second to last):
    // tiles in shared memory, both sides coalesced
    const int r = s.shape.rank;
    const auto& st = s.st[0].st;
    if ((r == 2 || r == 3) && st[r - 2] == 1 && st[r - 1] != 1 && s.shape.dims[r - 2] >= 16 &&
        s.shape.dims[r - 1] >= 16 && (r == 2 || s.shape.dims[0] <= 65535) &&
        s.shape.dims[r - 2] <= int64_t{65535} * 32) {
      const int64_t B = r == 3 ? s.shape.dims[0] : 1, sb = r == 3 ? st[0] : 0;
      ctx().launched(cuda_k::copy_transpose(es, at(s.first[0]), sb, st[r - 1], dst.at(s.first[1]), B,
                                            s.shape.dims[r - 2], s.shape.dims[r - 1], stream()),
                     "copy_strided_src (transpose)");
      return;
    }
    ctx().launched(cuda_k::copy_strided(es, at(s.first[0]), s.st[0], dst.at(s.first[1]), s.shape, stream()),
                   "copy_strided_src");
  });
}

void CudaStorage::copy2d(BackendStorage& dst_b, size_t d1, size_t d2, size_t src_s, size_t dst_s,
                         size_t src_o, size_t dst_o) const {
  auto& dst = as_cuda(dst_b, "copy2d");
  if (d1 == 0 || d2 == 0) return;
  if (src_o + (d1 - 1) * src_s + d2 > n_ || dst_o + (d1 - 1) * dst_s + d2 > dst.elem_count())
    throw Error(ErrorKind::Internal, "copy2d: out of bounds");
  const size_t es = dtype_size(dtype_);
  check(cudaMemcpy2DAsync(dst.at(dst_o), dst_s * es, at(src_o), src_s * es, d2 * es, d1,
                          cudaMemcpyDeviceToDevice, stream()),
        "cudaMemcpy2DAsync (copy2d)");
}

void CudaStorage::const_set(const Scalar& v, const Layout& l) {
  written();
  if (l.elem_count() == 0) return;
  if (l.max_offset_exclusive() > n_) throw Error(ErrorKind::Internal, "const_set: out of bounds");
  uint64_t bits = 0;
  dispatch(dtype_, [&]<typename T>() {
    T value = v.as<T>();
    std::memcpy(&bits, &value, sizeof(T));
  });
  const size_t es = dtype_size(dtype_);
  if (bits == 0 && l.is_contiguous()) {
    check(cudaMemsetAsync(at(l.start_offset()), 0, l.elem_count() * es, stream()), "cudaMemsetAsync");
    return;
  }
  for_each_ew_slice(l.shape(), {&l}, [&](const EwSlice& s) {
    ctx().launched(cuda_k::fill(es, bits, at(s.first[0]), s.st[0], s.shape, stream()), "const_set");
  });
}

std::shared_ptr<CpuStorage> CudaStorage::to_cpu() const {
  auto out = CpuStorage::alloc(dtype_, n_);
  ctx().download(out->bytes(), block_->ptr, out->nbytes());
  return out;
}

void CudaStorage::copy_to_host(const Layout& l, void* dst) const {
  const size_t n = l.elem_count(), es = dtype_size(dtype_);
  if (n == 0) return;
  Dense d = dense(*this, l);
  ctx().download(dst, d.s->at(d.first), n * es);
}

bool CudaStorage::shares_memory_with(const BackendStorage& other) const {
  auto* o = dynamic_cast<const CudaStorage*>(&other);
  return o && o->block_ == block_;
}

}  // namespace candle::cuda_backend
