#include "cpu/transpose_copy.h"

#include <algorithm>
#include <vector>

#include "cpu/parallel.h"

namespace candle::cpu {
namespace {

// Output tile edge: 32 x 32 elements keeps the strided source lines of one tile in L1.
constexpr size_t kTile = 32;

template <typename E>
void transpose_batches(const E* s, const std::vector<size_t>& batch_off, size_t m, size_t n, size_t sn,
                       E* d) {
  size_t row_tiles = (m + kTile - 1) / kTile;
  size_t tasks = batch_off.size() * row_tiles;
  size_t grain = kParallelGrain / (kTile * n) + 1;
  parallel_for(tasks, grain, [&](size_t b, size_t e) {
    for (size_t task = b; task < e; ++task) {
      size_t batch = task / row_tiles;
      size_t i0 = (task % row_tiles) * kTile;
      size_t i1 = std::min(m, i0 + kTile);
      const E* sb = s + batch_off[batch];
      E* db = d + batch * m * n;
      for (size_t j0 = 0; j0 < n; j0 += kTile) {
        size_t j1 = std::min(n, j0 + kTile);
        for (size_t i = i0; i < i1; ++i) {
          E* drow = db + i * n;
          const E* scol = sb + i;
          for (size_t j = j0; j < j1; ++j) drow[j] = scol[j * sn];
        }
      }
    }
  });
}

}  // namespace

bool try_transpose_copy(const CpuStorage& src, const Layout& src_l, CpuStorage& dst, size_t dst_offset) {
  if (src.dtype() != dst.dtype()) return false;
  size_t count = src_l.elem_count();
  if (count == 0) return false;
  std::vector<size_t> dims, strides;
  for (size_t k = 0; k < src_l.dims().size(); ++k) {
    if (src_l.dims()[k] == 1) continue;
    dims.push_back(src_l.dims()[k]);
    strides.push_back(src_l.stride()[k]);
  }
  size_t r = dims.size();
  if (r < 2) return false;
  size_t m = dims[r - 2], n = dims[r - 1], sn = strides[r - 1];
  if (strides[r - 2] != 1 || sn <= 1 || m < 8 || n < 8) return false;
  if (src_l.max_offset_exclusive() > src.elem_count() || dst_offset + count > dst.elem_count()) return false;

  // Start offsets of the batch matrices, in row-major order of the batch dims.
  size_t nb = count / (m * n);
  std::vector<size_t> batch_off(nb);
  std::vector<size_t> idx(r - 2, 0);
  size_t off = src_l.start_offset();
  for (size_t b = 0; b < nb; ++b) {
    batch_off[b] = off;
    for (size_t k = r - 2; k-- > 0;) {
      if (++idx[k] < dims[k]) {
        off += strides[k];
        break;
      }
      off -= (dims[k] - 1) * strides[k];
      idx[k] = 0;
    }
  }
  size_t es = dtype_size(src.dtype());
  auto run = [&]<typename E>() {
    transpose_batches<E>(src.data<E>(), batch_off, m, n, sn, dst.data<E>() + dst_offset);
  };
  switch (es) {
    case 1: run.template operator()<uint8_t>(); break;
    case 2: run.template operator()<uint16_t>(); break;
    case 4: run.template operator()<uint32_t>(); break;
    case 8: run.template operator()<uint64_t>(); break;
    default: return false;
  }
  return true;
}

}  // namespace candle::cpu
