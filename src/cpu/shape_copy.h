// CPU copy kernels used by the shape ops (cat, pad, repeat, flip): strided sources written
// into row-strided destinations, and copies through signed (negative) strides.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "candle/backend/cpu_storage.h"
#include "candle/layout.h"

namespace candle::cpu {

// Writes the elements of `src_l` (row-major) into `dst` as rows of `row_len` elements: the
// element with row-major index i goes to dst[dst_o + (i / row_len) * dst_s + i % row_len].
// Any source layout (strided, offset, stride-0 broadcast); parallel and deterministic.
void copy_strided_rows(const CpuStorage& src, const Layout& src_l, size_t row_len, CpuStorage& dst,
                       size_t dst_s, size_t dst_o);

// Copies the elements of the signed-stride layout (dims, strides, start offset `offset`,
// every visited offset inside the source) row-major into dst starting at dst_o.
// Used by flip: a flipped dim has a negative stride.
void copy_signed_strided(const CpuStorage& src, int64_t offset, const std::vector<size_t>& dims,
                         const std::vector<int64_t>& strides, CpuStorage& dst, size_t dst_o);

}  // namespace candle::cpu
