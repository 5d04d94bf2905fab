// Walking K same-shape strided operands of an elementwise op in output row-major order.
//
// The dims are first coalesced (size-1 dims dropped, neighbours merged where every operand is
// contiguous across them), so a contiguous op becomes one long run and a row broadcast
// [N, C] * [1, C] becomes N runs whose rhs stride is 0 or 1. Runs are handed to a kernel with
// per-operand inner strides; counters advance the outer dims (no div/mod per element).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <vector>

#include "candle/layout.h"
#include "cpu/clones.h"
#include "cpu/parallel.h"

// Hot loops: one clone per ISA level, picked at load time. The files that use it start with
//   #pragma GCC optimize("fp-contract=off", "no-trapping-math", "no-math-errno")
// before any #include: fp-contract=off keeps a*b+c as two roundings in every clone (the
// avx512f clone would otherwise fuse it), so a result does not depend on the clone, the vector
// width or where a thread's chunk starts; no-trapping-math lets GCC if-convert the selects of
// cpu/vec_math.h (FP exception flags are not part of candle's semantics); no-math-errno lets
// sqrt vectorize. (As a function attribute, optimize(...) stops the loops from vectorizing.)
#define CANDLE_EW_KERNEL CANDLE_TARGET_CLONES

namespace candle::cpu::ew {

template <size_t K>
struct Walk {
  std::vector<size_t> dims;                   // outer dims, outermost first
  std::vector<std::array<size_t, K>> stride;  // per outer dim, per operand
  size_t inner = 1;                           // length of the innermost (merged) dim
  std::array<size_t, K> inner_stride{};
  std::array<size_t, K> start{};
};

// Coalesces `shape` as seen through the K layouts (all of that shape).
template <size_t K>
Walk<K> make_walk(const Shape& shape, const std::array<const Layout*, K>& ls) {
  Walk<K> w;
  for (size_t k = 0; k < K; ++k) w.start[k] = ls[k]->start_offset();
  std::vector<size_t> dims;
  std::vector<std::array<size_t, K>> strides;  // innermost first
  for (size_t i = shape.rank(); i-- > 0;) {
    size_t d = shape[i];
    if (d == 1) continue;
    std::array<size_t, K> s;
    for (size_t k = 0; k < K; ++k) s[k] = ls[k]->stride()[i];
    if (!dims.empty()) {
      bool merge = true;
      for (size_t k = 0; k < K; ++k) merge = merge && s[k] == strides.back()[k] * dims.back();
      if (merge) {
        dims.back() *= d;
        continue;
      }
    }
    dims.push_back(d);
    strides.push_back(s);
  }
  if (!dims.empty()) {
    w.inner = dims.front();
    w.inner_stride = strides.front();
    w.dims.assign(dims.rbegin(), dims.rend() - 1);
    w.stride.assign(strides.rbegin(), strides.rend() - 1);
  }
  return w;
}

// Calls fn(offsets, out_index, len) for runs of the inner dim covering elements [0, n) of the
// output in row-major order: operand k's elements are at offsets[k] + i * inner_stride[k] for
// i < len, the outputs at out_index + i. Chunks of at least kParallelGrain elements run in
// parallel; each output element is written by one call.
template <size_t K, typename Fn>
void for_each_run(const Walk<K>& w, size_t n, Fn&& fn) {
  if (n == 0) return;
  parallel_for(n, kParallelGrain, [&](size_t b, size_t e) {
    size_t nd = w.dims.size();
    std::vector<size_t> idx(nd, 0);
    size_t row = b / w.inner;
    size_t col = b - row * w.inner;
    std::array<size_t, K> base = w.start;
    for (size_t d = nd; d-- > 0;) {
      idx[d] = row % w.dims[d];
      row /= w.dims[d];
      for (size_t k = 0; k < K; ++k) base[k] += idx[d] * w.stride[d][k];
    }
    size_t pos = b;
    while (pos < e) {
      size_t len = std::min(w.inner - col, e - pos);
      std::array<size_t, K> offs;
      for (size_t k = 0; k < K; ++k) offs[k] = base[k] + col * w.inner_stride[k];
      fn(offs, pos, len);
      pos += len;
      col = 0;
      for (size_t d = nd; d-- > 0;) {
        if (++idx[d] < w.dims[d]) {
          for (size_t k = 0; k < K; ++k) base[k] += w.stride[d][k];
          break;
        }
        for (size_t k = 0; k < K; ++k) base[k] -= (w.dims[d] - 1) * w.stride[d][k];
        idx[d] = 0;
      }
    }
  });
}

}  // namespace candle::cpu::ew
