// A dense view of a CPU storage's layout in a compute type: the data itself when it is already
// contiguous and of that type, otherwise a converted copy. Shared by the conv and pooling
// gradients.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <type_traits>

#include "candle/backend/cpu_storage.h"
#include "cpu/strided.h"

namespace candle::cpu {

// The elements of layout `l` of `s` (element type T) as C, row-major; `keep` owns a copy when
// one was needed.
template <typename T, typename C>
const C* dense_as(const CpuStorage& s, const Layout& l, std::unique_ptr<C[]>& keep) {
  if constexpr (std::is_same_v<T, C>) {
    if (l.is_contiguous()) return s.data<T>() + l.start_offset();
  }
  keep.reset(new C[std::max<size_t>(l.elem_count(), 1)]);
  C* dst = keep.get();
  const T* src = s.data<T>();
  for_each_block(l, [&](size_t off, size_t di, size_t len) {
    for (size_t i = 0; i < len; ++i) dst[di + i] = static_cast<C>(src[off + i]);
  });
  return dst;
}

}  // namespace candle::cpu
