// CPU kernels of the gather/scatter family: index_select, gather, index_add, scatter_set and
// scatter_add_set.
//
// Every kernel sees its operands as [left, dim, right] blocks (the dims before `dim`
// multiplied together, `dim` itself, the dims after it). As in candle, the largest value of
// the index dtype (u32::MAX, 255 for u8, ...) means "no index": index_select and gather give
// zeros there, scatter, scatter_add and index_add skip it. All ids are checked before anything
// is written, so an out-of-range id leaves the destination untouched. Additions into one
// output element always happen in increasing source position: the parallel loops split the
// (left, right) columns of the output, never the positions summed into one element, so the
// bytes do not depend on the thread count.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "candle/backend/cpu_storage.h"
#include "core/index_split.h"
#include "cpu/parallel.h"

namespace candle {
namespace {

// Unsigned words of each element size that may alias any element type: the pure copies
// (index_select, gather, scatter) only move elements, so they are instantiated per size.
struct __attribute__((may_alias)) Word1 {
  uint8_t v;
};
struct __attribute__((may_alias)) Word2 {
  uint16_t v;
};
struct __attribute__((may_alias)) Word4 {
  uint32_t v;
};
struct __attribute__((may_alias)) Word8 {
  uint64_t v;
};

template <typename Fn>
decltype(auto) dispatch_elem_size(size_t size, Fn&& fn) {
  switch (size) {
    case 1: return fn.template operator()<Word1>();
    case 2: return fn.template operator()<Word2>();
    case 4: return fn.template operator()<Word4>();
    case 8: return fn.template operator()<Word8>();
  }
  throw Error(ErrorKind::Internal, "index kernels: unexpected element size " + std::to_string(size));
}

// Calls fn.template operator()<I>() with the C++ type of an integer index dtype.
template <typename Fn>
decltype(auto) dispatch_index(DType dt, const char* op, Fn&& fn) {
  switch (dt) {
    case DType::U8: return fn.template operator()<uint8_t>();
    case DType::U32: return fn.template operator()<uint32_t>();
    case DType::I16: return fn.template operator()<int16_t>();
    case DType::I32: return fn.template operator()<int32_t>();
    case DType::I64: return fn.template operator()<int64_t>();
    default:
      throw Error(ErrorKind::DTypeMismatch, std::string("unexpected dtype in ") + op +
                                                ": indices must be an integer dtype, got " +
                                                std::string(dtype_name(dt)));
  }
}

using index_util::internal_check;
using index_util::same_dims_except;
using index_util::Split;
using index_util::split_at;

// The elements of (storage, layout) in row-major order, contiguous: a pointer into the storage
// when the layout is already contiguous, else into a private copy. `force_copy` copies anyway
// (for operands that alias the destination of an in-place op).
struct ContiguousInput {
  const std::byte* data = nullptr;
  std::shared_ptr<CpuStorage> owner;
};

ContiguousInput contiguous_input(const CpuStorage& s, const Layout& l, const char* op,
                                 bool force_copy = false) {
  ContiguousInput in;
  if (l.elem_count() == 0) return in;
  internal_check(l.max_offset_exclusive() <= s.elem_count(), op, "layout out of the storage's bounds");
  if (l.is_contiguous() && !force_copy) {
    in.data = s.bytes() + l.start_offset() * dtype_size(s.dtype());
    return in;
  }
  in.owner = CpuStorage::alloc(s.dtype(), l.elem_count());
  s.copy_strided_src(*in.owner, 0, l);
  in.data = in.owner->bytes();
  return in;
}

bool overlaps(const CpuStorage& a, const CpuStorage& b) {
  if (a.nbytes() == 0 || b.nbytes() == 0) return false;
  return a.bytes() < b.bytes() + b.nbytes() && b.bytes() < a.bytes() + a.nbytes();
}

template <typename I>
inline bool is_skip_id(I v) {
  return v == std::numeric_limits<I>::max();
}

template <typename I>
inline bool index_out_of_range(I v, size_t limit) {
  // negative ids of the signed dtypes become huge and fail too
  return !is_skip_id(v) && static_cast<uint64_t>(static_cast<int64_t>(v)) >= limit;
}

[[noreturn]] void throw_index_out_of_range(int64_t value, size_t limit, const char* op, size_t dim,
                                           const Shape& shape) {
  throw Error(ErrorKind::IndexOutOfRange, std::string("index out of range in ") + op + ": index " +
                                              std::to_string(value) + " for dim " + std::to_string(dim) +
                                              " of size " + std::to_string(limit) + " (shape " +
                                              shape.to_string() + ")");
}

// Lowers `first_bad` to `pos` (the first bad id over all threads is reported, for any split).
inline void note_bad_position(std::atomic<size_t>& first_bad, size_t pos) {
  size_t cur = first_bad.load();
  while (pos < cur && !first_bad.compare_exchange_weak(cur, pos)) {
  }
}

// Throws IndexOutOfRange, naming the first offending id, unless every id is in [0, limit).
template <typename I>
void check_ids(const I* ids, size_t n, size_t limit, const char* op, size_t dim, const Shape& shape) {
  std::atomic<size_t> first_bad{n};
  cpu::parallel_for(n, cpu::kParallelGrain, [&](size_t b, size_t e) {
    constexpr size_t kBlock = 1024;
    for (size_t s = b; s < e; s += kBlock) {
      size_t t = std::min(e, s + kBlock);
      bool bad = false;
      for (size_t j = s; j < t; ++j) bad |= index_out_of_range(ids[j], limit);
      if (!bad) continue;
      size_t j = s;
      while (!index_out_of_range(ids[j], limit)) ++j;
      note_bad_position(first_bad, j);
      return;
    }
  });
  size_t bad = first_bad.load();
  if (bad < n) throw_index_out_of_range(static_cast<int64_t>(ids[bad]), limit, op, dim, shape);
}

// Calls fn(l, i_begin, i_end) for the rows [b, e) of a [left, n] row space, one call per
// run of rows that share `l`.
template <typename Fn>
inline void for_each_row_run(size_t b, size_t e, size_t n, Fn&& fn) {
  size_t l = b / n, i = b % n;
  for (size_t row = b; row < e;) {
    size_t i_end = std::min(n, i + (e - row));
    fn(l, i, i_end);
    row += i_end - i;
    i = 0;
    ++l;
  }
}

// dst[l, k, :] = src[l, ids[k], :]; src is [left, src_dim, right], dst [left, n, right].
template <typename W, typename I>
void index_select_kernel(const W* src, const I* ids, W* dst, const Split& sp, size_t n) {
  size_t right = sp.right;
  size_t grain = cpu::kParallelGrain / std::max<size_t>(right, 1) + 1;
  cpu::parallel_for(sp.left * n, grain, [&](size_t b, size_t e) {
    for_each_row_run(b, e, n, [&](size_t l, size_t i0, size_t i1) {
      const W* s = src + l * sp.dim * right;
      W* d = dst + l * n * right;
      if (right == 1) {
        for (size_t k = i0; k < i1; ++k) d[k] = is_skip_id(ids[k]) ? W{} : s[static_cast<size_t>(ids[k])];
      } else if (right * sizeof(W) >= 64) {
        for (size_t k = i0; k < i1; ++k) {
          if (is_skip_id(ids[k])) {
            std::memset(static_cast<void*>(d + k * right), 0, right * sizeof(W));
          } else {
            std::memcpy(d + k * right, s + static_cast<size_t>(ids[k]) * right, right * sizeof(W));
          }
        }
      } else {
        for (size_t k = i0; k < i1; ++k) {
          W* drow = d + k * right;
          if (is_skip_id(ids[k])) {
            for (size_t r = 0; r < right; ++r) drow[r] = W{};
            continue;
          }
          const W* srow = s + static_cast<size_t>(ids[k]) * right;
          for (size_t r = 0; r < right; ++r) drow[r] = srow[r];
        }
      }
    });
  });
}

// dst[l, k, r] = src[l, ids[l, k, r], r]; src is [left, src_dim, right], ids and dst [left, n, right].
// The ids are checked on the way (dst is a new buffer, so a partial write does no harm): returns
// the position of the first out-of-range id, or SIZE_MAX.
template <typename W, typename I>
size_t gather_kernel(const W* src, const I* ids, W* dst, const Split& sp, size_t n) {
  size_t right = sp.right, limit = sp.dim;
  std::atomic<size_t> first_bad{SIZE_MAX};
  size_t grain = cpu::kParallelGrain / std::max<size_t>(right, 1) + 1;
  cpu::parallel_for(sp.left * n, grain, [&](size_t b, size_t e) {
    bool stop = false;
    for_each_row_run(b, e, n, [&](size_t l, size_t i0, size_t i1) {
      if (stop) return;
      const W* s = src + l * limit * right;
      const I* id = ids + l * n * right;
      W* d = dst + l * n * right;
      if (right == 1) {
        for (size_t k = i0; k < i1; ++k) {
          I v = id[k];
          if (index_out_of_range(v, limit)) {
            note_bad_position(first_bad, l * n + k);
            stop = true;
            return;
          }
          d[k] = is_skip_id(v) ? W{} : s[static_cast<size_t>(v)];
        }
        return;
      }
      for (size_t k = i0; k < i1; ++k) {
        for (size_t r = 0; r < right; ++r) {
          size_t j = k * right + r;
          I v = id[j];
          if (index_out_of_range(v, limit)) {
            note_bad_position(first_bad, l * n * right + j);
            stop = true;
            return;
          }
          d[j] = is_skip_id(v) ? W{} : s[static_cast<size_t>(v) * right + r];
        }
      }
    });
  });
  return first_bad.load();
}

template <typename T>
inline void add_into(T& d, T s) {
  if constexpr (is_half_like_v<T>) {
    d = T(static_cast<float>(d) + static_cast<float>(s));
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;  // wraps on overflow, as candle's release builds
    d = static_cast<T>(static_cast<U>(static_cast<U>(d) + static_cast<U>(s)));
  } else {
    d += s;
  }
}

// dst[l, id, r] (+)= src[l, k, r] for k = 0..n in increasing order, where id is ids[l, k, r]
// (kPerElementIds: scatter) or ids[k] (index_add). dst is [left, dst_dim, right], src [left, n, right].
// The parallel split is over the (l, r) columns: one column's updates all run on one thread.
template <bool kAdd, bool kPerElementIds, typename T, typename I>
void scatter_kernel(T* dst, const T* src, const I* ids, const Split& dst_sp, size_t n) {
  size_t right = dst_sp.right;
  if (right == 0 || n == 0) return;
  size_t grain = cpu::kParallelGrain / n + 1;
  cpu::parallel_for(dst_sp.left * right, grain, [&](size_t b, size_t e) {
    for_each_row_run(b, e, right, [&](size_t l, size_t r0, size_t r1) {
      T* d = dst + l * dst_sp.dim * right;
      const T* s = src + l * n * right;
      for (size_t k = 0; k < n; ++k) {
        const T* srow = s + k * right;
        if constexpr (kPerElementIds) {
          const I* idrow = ids + (l * n + k) * right;
          for (size_t r = r0; r < r1; ++r) {
            if (is_skip_id(idrow[r])) continue;
            T& out = d[static_cast<size_t>(idrow[r]) * right + r];
            if constexpr (kAdd)
              add_into(out, srow[r]);
            else
              out = srow[r];
          }
        } else {
          if (is_skip_id(ids[k])) continue;
          T* drow = d + static_cast<size_t>(ids[k]) * right;
          for (size_t r = r0; r < r1; ++r) {
            if constexpr (kAdd)
              add_into(drow[r], srow[r]);
            else
              drow[r] = srow[r];
          }
        }
      }
    });
  });
}

// Shared body of scatter_set and scatter_add_set: checks, then writes into `self` in place.
template <bool kAdd>
void scatter_in_place(CpuStorage& self, const Layout& l, const BackendStorage& ids_base, const Layout& ids_l,
                      const BackendStorage& src_base, const Layout& src_l, size_t dim, const char* op) {
  auto ids = ids_base.to_cpu();
  auto src = src_base.to_cpu();
  internal_check(dim < l.shape().rank(), op, "dim out of range");
  internal_check(src->dtype() == self.dtype(), op, "source dtype differs from the destination's");
  internal_check(same_dims_except(l.shape(), src_l.shape(), dim) && ids_l.shape() == src_l.shape(), op,
                 "shapes do not match, dst: " + l.shape().to_string() +
                     ", ids: " + ids_l.shape().to_string() + ", src: " + src_l.shape().to_string());
  if (!l.is_contiguous()) {
    throw Error(ErrorKind::InvalidArgument,
                std::string(op) + " requires a contiguous destination, got shape " + l.shape().to_string());
  }
  internal_check(l.max_offset_exclusive() <= self.elem_count(), op, "layout out of the storage's bounds");
  size_t n_src = src_l.elem_count();
  if (n_src == 0) return;
  // ids and src are read while self is written: copy them when they share its memory
  ContiguousInput id_in = contiguous_input(*ids, ids_l, op, overlaps(*ids, self));
  ContiguousInput src_in = contiguous_input(*src, src_l, op, overlaps(*src, self));
  Split sp = split_at(l.shape(), dim);
  size_t n = src_l.shape()[dim];
  size_t es = dtype_size(self.dtype());
  std::byte* out = self.bytes() + l.start_offset() * es;
  dispatch_index(ids->dtype(), op, [&]<typename I>() {
    const I* id = reinterpret_cast<const I*>(id_in.data);
    check_ids(id, n_src, sp.dim, op, dim, l.shape());
    if constexpr (kAdd) {
      dispatch(self.dtype(), [&]<typename T>() {
        scatter_kernel<true, true>(reinterpret_cast<T*>(out), reinterpret_cast<const T*>(src_in.data), id, sp,
                                   n);
      });
    } else {
      dispatch_elem_size(es, [&]<typename W>() {
        scatter_kernel<false, true>(reinterpret_cast<W*>(out), reinterpret_cast<const W*>(src_in.data), id,
                                    sp, n);
      });
    }
  });
}

}  // namespace

StoragePtr CpuStorage::index_select(const Layout& l, const BackendStorage& ids_base, const Layout& ids_l,
                                    size_t dim) const {
  const char* op = "index_select";
  auto ids = ids_base.to_cpu();
  internal_check(dim < l.shape().rank(), op, "dim out of range");
  internal_check(ids_l.shape().rank() == 1, op, "ids must be 1-D, got " + ids_l.shape().to_string());
  size_t n = ids_l.shape()[0];
  Split sp = split_at(l.shape(), dim);
  auto out = CpuStorage::alloc(dtype_, sp.left * n * sp.right);
  ContiguousInput id_in = contiguous_input(*ids, ids_l, op);
  dispatch_index(ids->dtype(), op, [&]<typename I>() {
    const I* id = reinterpret_cast<const I*>(id_in.data);
    check_ids(id, n, sp.dim, op, dim, l.shape());
    if (out->elem_count() == 0) return;
    ContiguousInput src = contiguous_input(*this, l, op);
    dispatch_elem_size(dtype_size(dtype_), [&]<typename W>() {
      index_select_kernel(reinterpret_cast<const W*>(src.data), id, reinterpret_cast<W*>(out->bytes()), sp,
                          n);
    });
  });
  return out;
}

StoragePtr CpuStorage::gather(const Layout& l, const BackendStorage& ids_base, const Layout& ids_l,
                              size_t dim) const {
  const char* op = "gather";
  auto ids = ids_base.to_cpu();
  internal_check(dim < l.shape().rank(), op, "dim out of range");
  internal_check(
      same_dims_except(l.shape(), ids_l.shape(), dim), op,
      "shapes do not match, self: " + l.shape().to_string() + ", ids: " + ids_l.shape().to_string());
  size_t count = ids_l.elem_count();
  auto out = CpuStorage::alloc(dtype_, count);
  if (count == 0) return out;
  Split sp = split_at(l.shape(), dim);
  size_t n = ids_l.shape()[dim];
  ContiguousInput id_in = contiguous_input(*ids, ids_l, op);
  dispatch_index(ids->dtype(), op, [&]<typename I>() {
    const I* id = reinterpret_cast<const I*>(id_in.data);
    ContiguousInput src = contiguous_input(*this, l, op);
    size_t bad = dispatch_elem_size(dtype_size(dtype_), [&]<typename W>() {
      return gather_kernel(reinterpret_cast<const W*>(src.data), id, reinterpret_cast<W*>(out->bytes()), sp,
                           n);
    });
    if (bad != SIZE_MAX) throw_index_out_of_range(static_cast<int64_t>(id[bad]), sp.dim, op, dim, l.shape());
  });
  return out;
}

StoragePtr CpuStorage::index_add(const Layout& l, const BackendStorage& ids_base, const Layout& ids_l,
                                 const BackendStorage& src_base, const Layout& src_l, size_t dim) const {
  const char* op = "index_add";
  auto ids = ids_base.to_cpu();
  auto src = src_base.to_cpu();
  internal_check(dim < l.shape().rank(), op, "dim out of range");
  internal_check(src->dtype() == dtype_, op, "source dtype differs from self's");
  internal_check(ids_l.shape().rank() == 1 && same_dims_except(l.shape(), src_l.shape(), dim) &&
                     src_l.shape()[dim] == ids_l.shape()[0],
                 op,
                 "shapes do not match, self: " + l.shape().to_string() +
                     ", ids: " + ids_l.shape().to_string() + ", src: " + src_l.shape().to_string());
  size_t n = ids_l.shape()[0];
  Split sp = split_at(l.shape(), dim);
  ContiguousInput id_in = contiguous_input(*ids, ids_l, op);
  auto out = CpuStorage::alloc(dtype_, l.elem_count());
  dispatch_index(ids->dtype(), op, [&]<typename I>() {
    const I* id = reinterpret_cast<const I*>(id_in.data);
    check_ids(id, n, sp.dim, op, dim, l.shape());
    if (out->elem_count() == 0) return;
    copy_strided_src(*out, 0, l);
    if (src_l.elem_count() == 0) return;
    ContiguousInput src_in = contiguous_input(*src, src_l, op);
    dispatch(dtype_, [&]<typename T>() {
      scatter_kernel<true, false>(out->data<T>(), reinterpret_cast<const T*>(src_in.data), id, sp, n);
    });
  });
  return out;
}

void CpuStorage::scatter_set(const Layout& l, const BackendStorage& ids, const Layout& ids_l,
                             const BackendStorage& src, const Layout& src_l, size_t dim) {
  scatter_in_place<false>(*this, l, ids, ids_l, src, src_l, dim, "scatter");
}

void CpuStorage::scatter_add_set(const Layout& l, const BackendStorage& ids, const Layout& ids_l,
                                 const BackendStorage& src, const Layout& src_l, size_t dim) {
  scatter_in_place<true>(*this, l, ids, ids_l, src, src_l, dim, "scatter_add");
}

}  // namespace candle
