// Walking strided layouts on the CPU, in parallel and deterministically.
#pragma once

#include <cstddef>

#include "candle/layout.h"
#include "cpu/parallel.h"

namespace candle::cpu {

// Calls fn(src_offset, dst_index, len) for each contiguous run of `l` in row-major order:
// the run's elements are storage[src_offset .. src_offset + len) and they are the output
// elements [dst_index, dst_index + len). Runs are spread over threads when the layout has
// more than `grain` elements.
template <typename Fn>
void for_each_block(const Layout& l, Fn&& fn, size_t grain = kParallelGrain) {
  size_t n = l.elem_count();
  if (n == 0) return;
  size_t bl = l.block_len();
  size_t nblocks = n / bl;
  size_t grain_blocks = grain / bl + 1;
  parallel_for(nblocks, grain_blocks, [&](size_t b, size_t e) {
    StridedBlocks it(l, b * bl);
    for (size_t i = b; i < e; ++i) {
      fn(it.offset(), i * bl, bl);
      it.next();
    }
  });
}

}  // namespace candle::cpu
