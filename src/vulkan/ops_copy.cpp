// Copies and fills: copy_strided_src, copy2d (cat, narrow, pad, transpose and contiguous go
// through these) and const_set.
#include <cstring>
#include <string>
#include <vector>

#include "storage.h"

namespace candle::vk_backend {

void VulkanStorage::copy_strided_src(BackendStorage& dst_base, size_t dst_offset, const Layout& src_l) const {
  auto& dst = as_vk(dst_base, "copy_strided_src");
  if (dst.dtype() != dtype_) throw Error(ErrorKind::Internal, "copy_strided_src: dtypes differ");
  if (dst_offset + src_l.elem_count() > dst.elem_count())
    throw Error(ErrorKind::Internal, "copy_strided_src: out of bounds");
  const size_t es = dtype_size(dtype_);
  if (src_l.elem_count() == 0) return;
  if (src_l.is_contiguous()) {  // one buffer copy (any dtype, any size)
    Context::CopyRegion r{src_l.start_offset() * es, dst_offset * es, src_l.elem_count() * es};
    ctx().copy(block(), dst.block(), &r, 1);
    return;
  }
  if (const char* sfx = bytes_suffix(ctx(), dtype_)) {
    std::string k = std::string("copy_") + sfx;
    if (run_elementwise(k.c_str(), {{this, src_l}, {&dst, Layout::contiguous(src_l.shape(), dst_offset)}}, 2,
                        0))
      return;
  }
  note_round_trip("copy_strided_src");
  BackendStorage::copy_strided_src(dst_base, dst_offset, src_l);
}

void VulkanStorage::copy2d(BackendStorage& dst_base, size_t d1, size_t d2, size_t src_s, size_t dst_s,
                           size_t src_o, size_t dst_o) const {
  auto& dst = as_vk(dst_base, "copy2d");
  if (dst.dtype() != dtype_) throw Error(ErrorKind::Internal, "copy2d: dtypes differ");
  if (d1 == 0 || d2 == 0) return;
  if (src_o + (d1 - 1) * src_s + d2 > n_ || dst_o + (d1 - 1) * dst_s + d2 > dst.elem_count())
    throw Error(ErrorKind::Internal, "copy2d: out of bounds");
  const size_t es = dtype_size(dtype_);
  if (d1 <= 16 || !bytes_suffix(ctx(), dtype_)) {  // a few long rows: buffer copies
    std::vector<Context::CopyRegion> r(d1);
    for (size_t i = 0; i < d1; ++i) r[i] = {(src_o + i * src_s) * es, (dst_o + i * dst_s) * es, d2 * es};
    ctx().copy(block(), dst.block(), r.data(), r.size());
    return;
  }
  if (const char* sfx = bytes_suffix(ctx(), dtype_)) {
    std::string k = std::string("copy_") + sfx;
    Layout sl(Shape{d1, d2}, {src_s, 1}, src_o), dl(Shape{d1, d2}, {dst_s, 1}, dst_o);
    if (run_elementwise(k.c_str(), {{this, sl}, {&dst, dl}}, 2, 0)) return;
  }
  // rank > 6 cannot happen for a 2-D layout
  throw Error(ErrorKind::Internal, "copy2d: no kernel");
}

void VulkanStorage::const_set(const Scalar& v, const Layout& l) {
  if (l.elem_count() && l.max_offset_exclusive() > n_)
    throw Error(ErrorKind::Internal, "const_set: out of bounds");
  if (const char* sfx = bytes_suffix(ctx(), dtype_)) {
    uint64_t bits = 0;
    dispatch(dtype_, [&]<typename T>() {
      T value = v.as<T>();
      std::memcpy(&bits, &value, sizeof(T));
    });
    std::string k = std::string("fill_") + sfx;
    if (run_elementwise(k.c_str(), {{this, l}}, 1, 0, static_cast<uint32_t>(bits),
                        static_cast<uint32_t>(bits >> 32)))
      return;
  }
  note_round_trip("const_set");
  BackendStorage::const_set(v, l);
}

}  // namespace candle::vk_backend
