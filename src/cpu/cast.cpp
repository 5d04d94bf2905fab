// to_dtype on the CPU: every pair of dtypes.
#include "candle/backend/cpu_storage.h"
#include "cpu/strided.h"

namespace candle {

StoragePtr CpuStorage::to_dtype(const Layout& l, DType dtype) const {
  auto out = CpuStorage::alloc(dtype, l.elem_count());
  dispatch(dtype_, [&]<typename S>() {
    dispatch(dtype, [&]<typename D>() {
      const S* s = data<S>();
      D* d = out->data<D>();
      cpu::for_each_block(l, [&](size_t so, size_t di, size_t len) {
        for (size_t i = 0; i < len; ++i) d[di + i] = cast_value<D>(s[so + i]);
      });
    });
  });
  return out;
}

}  // namespace candle
