// CpuStorage: allocation, zero-copy views, strided copies and const_set.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "candle/backend/cpu_storage.h"
#include "cpu/host_alloc.h"
#include "cpu/parallel.h"
#include "cpu/strided.h"
#include "cpu/transpose_copy.h"

namespace candle {

std::shared_ptr<CpuStorage> CpuStorage::alloc(DType dtype, size_t n) {
  std::shared_ptr<void> owner = cpu::host_alloc(n * dtype_size(dtype));
  auto* p = static_cast<std::byte*>(owner.get());
  return std::make_shared<CpuStorage>(dtype, n, p, std::move(owner));
}

std::shared_ptr<CpuStorage> CpuStorage::zeros(DType dtype, size_t n) {
  auto s = alloc(dtype, n);
  size_t bytes = s->nbytes();
  cpu::parallel_for(bytes, 1 << 20, [&](size_t b, size_t e) { std::memset(s->bytes() + b, 0, e - b); });
  return s;
}

std::shared_ptr<CpuStorage> CpuStorage::wrap(DType dtype, size_t n, void* data, std::shared_ptr<void> owner) {
  return std::make_shared<CpuStorage>(dtype, n, static_cast<std::byte*>(data), std::move(owner));
}

BackendDevice& CpuStorage::device() const { return cpu_backend_device(); }

std::shared_ptr<CpuStorage> CpuStorage::to_cpu() const {
  return std::const_pointer_cast<CpuStorage>(shared_from_this());
}

namespace {

template <size_t N>
struct Bytes {
  unsigned char b[N];
};

template <size_t ESize>
void copy_strided_typed(const std::byte* src, std::byte* dst, const Layout& l) {
  using E = Bytes<ESize>;
  const E* s = reinterpret_cast<const E*>(src);
  E* d = reinterpret_cast<E*>(dst);
  cpu::for_each_block(l, [&](size_t so, size_t di, size_t len) {
    if (len == 1)
      d[di] = s[so];
    else
      std::memcpy(d + di, s + so, len * ESize);
  });
}

}  // namespace

void CpuStorage::copy_strided_src(BackendStorage& dst_base, size_t dst_offset, const Layout& src_l) const {
  auto* dst = dynamic_cast<CpuStorage*>(&dst_base);
  if (!dst || dst->dtype() != dtype_) {
    throw Error(ErrorKind::Internal, "copy_strided_src: destination is not a cpu storage of the same dtype");
  }
  if (dst_offset + src_l.elem_count() > dst->elem_count() || src_l.max_offset_exclusive() > n_) {
    throw Error(ErrorKind::Internal, "copy_strided_src: out of bounds");
  }
  if (cpu::try_transpose_copy(*this, src_l, *dst, dst_offset)) return;
  size_t es = dtype_size(dtype_);
  std::byte* d = dst->bytes() + dst_offset * es;
  switch (es) {
    case 1: copy_strided_typed<1>(data_, d, src_l); break;
    case 2: copy_strided_typed<2>(data_, d, src_l); break;
    case 4: copy_strided_typed<4>(data_, d, src_l); break;
    default: copy_strided_typed<8>(data_, d, src_l); break;
  }
}

void CpuStorage::copy2d(BackendStorage& dst_base, size_t d1, size_t d2, size_t src_s, size_t dst_s,
                        size_t src_o, size_t dst_o) const {
  auto* dst = dynamic_cast<CpuStorage*>(&dst_base);
  if (!dst || dst->dtype() != dtype_) {
    throw Error(ErrorKind::Internal, "copy2d: destination is not a cpu storage of the same dtype");
  }
  if (d1 == 0 || d2 == 0) return;
  if (src_o + (d1 - 1) * src_s + d2 > n_ || dst_o + (d1 - 1) * dst_s + d2 > dst->elem_count()) {
    throw Error(ErrorKind::Internal, "copy2d: out of bounds");
  }
  size_t es = dtype_size(dtype_);
  const std::byte* s = data_;
  std::byte* d = dst->bytes();
  const size_t threads = get_num_threads();
  if (threads > 1 && d1 < threads && d2 >= 2 * cpu::kParallelGrain) {
    // a few long rows: fan out over pieces of rows so that every thread copies
    const size_t chunk = cpu::kParallelGrain, per_row = (d2 + chunk - 1) / chunk;
    cpu::parallel_for(d1 * per_row, 1, [&](size_t b, size_t e) {
      for (size_t p = b; p < e; ++p) {
        const size_t r = p / per_row, c0 = (p % per_row) * chunk, len = std::min(chunk, d2 - c0);
        std::memcpy(d + (dst_o + r * dst_s + c0) * es, s + (src_o + r * src_s + c0) * es, len * es);
      }
    });
    return;
  }
  size_t grain_rows = cpu::kParallelGrain / d2 + 1;
  cpu::parallel_for(d1, grain_rows, [&](size_t b, size_t e) {
    for (size_t r = b; r < e; ++r) {
      std::memcpy(d + (dst_o + r * dst_s) * es, s + (src_o + r * src_s) * es, d2 * es);
    }
  });
}

bool CpuStorage::shares_memory_with(const BackendStorage& other) const {
  if (this == &other) return true;
  auto* o = dynamic_cast<const CpuStorage*>(&other);
  if (!o || nbytes() == 0 || o->nbytes() == 0) return false;
  return bytes() < o->bytes() + o->nbytes() && o->bytes() < bytes() + nbytes();
}

void CpuStorage::const_set(const Scalar& v, const Layout& l) {
  if (l.elem_count() && l.max_offset_exclusive() > n_)
    throw Error(ErrorKind::Internal, "const_set: out of bounds");
  dispatch(dtype_, [&]<typename T>() {
    T value = v.as<T>();
    T* d = data<T>();
    cpu::for_each_block(l, [&](size_t so, size_t, size_t len) {
      for (size_t i = 0; i < len; ++i) d[so + i] = value;
    });
  });
}

}  // namespace candle
