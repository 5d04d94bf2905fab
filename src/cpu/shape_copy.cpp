#include "cpu/shape_copy.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "cpu/parallel.h"

namespace candle::cpu {
namespace {

// Elements are moved as raw bytes: one unsigned type per element size.
template <typename Fn>
void dispatch_elem_size(size_t es, Fn&& fn) {
  switch (es) {
    case 1: fn.template operator()<uint8_t>(); break;
    case 2: fn.template operator()<uint16_t>(); break;
    case 4: fn.template operator()<uint32_t>(); break;
    case 8: fn.template operator()<uint64_t>(); break;
    default: throw Error(ErrorKind::Internal, "shape copy: unexpected element size " + std::to_string(es));
  }
}

void check_same_dtype(const CpuStorage& src, const CpuStorage& dst, const char* op) {
  if (src.dtype() != dst.dtype()) {
    throw Error(ErrorKind::Internal, std::string(op) + ": source and destination dtypes differ");
  }
}

template <typename E>
void copy_rows_typed(const E* s, const Layout& l, size_t row_len, E* d, size_t dst_s, size_t dst_o) {
  size_t n = l.elem_count();
  size_t bl = l.block_len();
  size_t nblocks = n / bl;
  parallel_for(nblocks, kParallelGrain / bl + 1, [&](size_t b, size_t e) {
    StridedBlocks it(l, b * bl);
    size_t first = b * bl;
    size_t row_base = dst_o + (first / row_len) * dst_s;
    size_t c = first % row_len;
    for (size_t blk = b; blk < e; ++blk) {
      const E* sp = s + it.offset();
      if (bl == 1) {
        d[row_base + c] = *sp;
        if (++c == row_len) {
          c = 0;
          row_base += dst_s;
        }
      } else {
        size_t len = bl;
        while (len) {
          size_t take = std::min(len, row_len - c);
          std::memcpy(d + row_base + c, sp, take * sizeof(E));
          sp += take;
          len -= take;
          c += take;
          if (c == row_len) {
            c = 0;
            row_base += dst_s;
          }
        }
      }
      it.next();
    }
  });
}

// One row of the innermost dim: len elements from src + off with signed stride st.
template <typename E>
inline void copy_signed_row(const E* s, int64_t off, int64_t st, size_t len, E* d) {
  if (st == 1) {
    std::memcpy(d, s + off, len * sizeof(E));
  } else if (st == -1) {
    const E* p = s + off;
    for (size_t j = 0; j < len; ++j) d[j] = *(p - static_cast<int64_t>(j));
  } else {
    for (size_t j = 0; j < len; ++j) d[j] = s[off + static_cast<int64_t>(j) * st];
  }
}

template <typename E>
void copy_signed_typed(const E* s, int64_t offset, const std::vector<size_t>& dims,
                       const std::vector<int64_t>& strides, E* d) {
  size_t rank = dims.size();
  size_t len = dims[rank - 1];
  int64_t st = strides[rank - 1];
  size_t outer = rank - 1;
  size_t rows = 1;
  for (size_t k = 0; k < outer; ++k) rows *= dims[k];
  parallel_for(rows, kParallelGrain / len + 1, [&](size_t b, size_t e) {
    std::vector<size_t> idx(outer, 0);
    int64_t off = offset;
    size_t rem = b;
    for (size_t k = outer; k-- > 0;) {
      idx[k] = rem % dims[k];
      rem /= dims[k];
      off += static_cast<int64_t>(idx[k]) * strides[k];
    }
    for (size_t r = b; r < e; ++r) {
      copy_signed_row(s, off, st, len, d + r * len);
      for (size_t k = outer; k-- > 0;) {
        if (++idx[k] < dims[k]) {
          off += strides[k];
          break;
        }
        off -= static_cast<int64_t>(dims[k] - 1) * strides[k];
        idx[k] = 0;
      }
    }
  });
}

}  // namespace

void copy_strided_rows(const CpuStorage& src, const Layout& src_l, size_t row_len, CpuStorage& dst,
                       size_t dst_s, size_t dst_o) {
  check_same_dtype(src, dst, "copy_strided_rows");
  size_t n = src_l.elem_count();
  if (n == 0) return;
  if (row_len == 0 || n % row_len != 0 || dst_s < row_len) {
    throw Error(ErrorKind::Internal, "copy_strided_rows: bad row length");
  }
  size_t rows = n / row_len;
  if (src_l.max_offset_exclusive() > src.elem_count() ||
      dst_o + (rows - 1) * dst_s + row_len > dst.elem_count()) {
    throw Error(ErrorKind::Internal, "copy_strided_rows: out of bounds");
  }
  dispatch_elem_size(dtype_size(src.dtype()), [&]<typename E>() {
    copy_rows_typed<E>(src.data<E>(), src_l, row_len, dst.data<E>(), dst_s, dst_o);
  });
}

void copy_signed_strided(const CpuStorage& src, int64_t offset, const std::vector<size_t>& dims,
                         const std::vector<int64_t>& strides, CpuStorage& dst, size_t dst_o) {
  check_same_dtype(src, dst, "copy_signed_strided");
  if (dims.size() != strides.size()) throw Error(ErrorKind::Internal, "copy_signed_strided: rank mismatch");
  size_t n = 1;
  for (size_t v : dims) n *= v;
  if (n == 0) return;
  // Drop size-1 dims and merge neighbours that form one arithmetic run (also when reversed).
  std::vector<size_t> md;
  std::vector<int64_t> ms;
  int64_t lo = offset, hi = offset;
  for (size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] == 1) continue;
    int64_t span = static_cast<int64_t>(dims[k] - 1) * strides[k];
    (span < 0 ? lo : hi) += span;
    if (!md.empty() && ms.back() == strides[k] * static_cast<int64_t>(dims[k])) {
      md.back() *= dims[k];
      ms.back() = strides[k];
    } else {
      md.push_back(dims[k]);
      ms.push_back(strides[k]);
    }
  }
  if (lo < 0 || static_cast<size_t>(hi) >= src.elem_count() || dst_o + n > dst.elem_count()) {
    throw Error(ErrorKind::Internal, "copy_signed_strided: out of bounds");
  }
  if (md.empty()) {
    md.push_back(1);
    ms.push_back(1);
  }
  size_t es = dtype_size(src.dtype());
  dispatch_elem_size(
      es, [&]<typename E>() { copy_signed_typed<E>(src.data<E>(), offset, md, ms, dst.data<E>() + dst_o); });
}

}  // namespace candle::cpu

namespace candle {

// Our strides are unsigned, so a flip is a copy through negative strides.
StoragePtr CpuStorage::flip(const Layout& l, const std::vector<size_t>& dims) const {
  const size_t rank = l.dims().size();
  std::vector<int64_t> st(rank);
  auto offset = static_cast<int64_t>(l.start_offset());
  for (size_t k = 0; k < rank; ++k) st[k] = static_cast<int64_t>(l.stride()[k]);
  for (size_t d : dims) {
    if (d >= rank) throw Error(ErrorKind::Internal, "flip: dim out of range");
    if (l.dims()[d] > 1) {
      offset += st[d] * static_cast<int64_t>(l.dims()[d] - 1);
      st[d] = -st[d];
    }
  }
  auto out = CpuStorage::alloc(dtype(), l.elem_count());
  cpu::copy_signed_strided(*this, offset, l.dims(), st, *out, 0);
  return out;
}

void CpuStorage::copy_strided_rows(BackendStorage& dst, const Layout& l, size_t row_len, size_t dst_s,
                                   size_t dst_o) const {
  auto* d = dynamic_cast<CpuStorage*>(&dst);
  if (!d) throw Error(ErrorKind::Internal, "copy_strided_rows: destination is not a cpu storage");
  cpu::copy_strided_rows(*this, l, row_len, *d, dst_s, dst_o);
}

}  // namespace candle
