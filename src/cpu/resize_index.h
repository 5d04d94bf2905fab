// The source indices of the resizing ops, shared by the CPU forward (pool.cpp), its backward
// (conv_grad_pool.cpp) and the GPU backends' index tables, so every device samples the same
// source positions.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

namespace candle::cpu {

// Nearest: the source index floor(dst * in / out), in exact integer arithmetic, clamped to
// in - 1. candle computes floor(dst * (in / out)) with the ratio rounded to f64, which comes
// out one too small at some exact multiples (in 2, out 98, dst 49 gives 0, not 1); PyTorch's
// 'nearest' gives the exact value there (checked for in <= 64, out <= 128 by
// tools/gen_pool_fixtures.py), and so do we.
std::vector<size_t> nearest_indices(size_t in, size_t out);

// Linear interpolation along one dim: output o reads i0[o] * l0[o] + i1[o] * l1[o].
struct LinearTaps {
  std::vector<size_t> i0, i1;
  std::vector<double> l0, l1;
};
// scale_factor, when given, sets the source-coordinate scale as PyTorch's scale_factor form
// does (instead of in / out).
LinearTaps linear_taps(size_t in, size_t out, bool align_corners, std::optional<double> scale_factor);

}  // namespace candle::cpu
