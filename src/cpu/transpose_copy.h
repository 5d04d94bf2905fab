// Cache-blocked copy of transposed views: the fast path for contiguous() of x.t() and friends.
#pragma once

#include <cstddef>

#include "candle/backend/cpu_storage.h"
#include "candle/layout.h"

namespace candle::cpu {

// If `src_l` (ignoring size-1 dims) is a batch of transposed matrices, i.e. its second-to-last
// dim has stride 1 and its last dim a larger stride, copies its elements row-major into dst
// starting at dst_offset with a tiled, multi-threaded transpose and returns true. Returns false
// (copying nothing) for any other layout or when the matrices are too small to gain.
bool try_transpose_copy(const CpuStorage& src, const Layout& src_l, CpuStorage& dst, size_t dst_offset);

}  // namespace candle::cpu
