// The CPU thread pool (OpenMP's, shared with OpenBLAS) and deterministic parallel loops.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>

#include "candle/utils.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace candle::cpu {

#ifdef _OPENMP
// The team every parallel loop starts: all of get_num_threads(), whatever the loop's width (see
// parallel_for).
inline size_t team_size() { return get_num_threads(); }
#endif

// Calls fn(begin, end) on disjoint chunks covering [0, n), each at least `grain` long (but
// the last). The split depends only on n, grain and the thread count, and each index is
// handled by exactly one call, so a kernel that computes each output from its inputs in a
// fixed order gives the same bytes for any thread count. Exceptions propagate to the caller.
template <typename Fn>
void parallel_for(size_t n, size_t grain, Fn&& fn) {
  if (n == 0) return;
  grain = std::max<size_t>(grain, 1);
  size_t chunks = std::min(get_num_threads(), (n + grain - 1) / grain);
#ifdef _OPENMP
  if (chunks <= 1 || omp_in_parallel()) {
    fn(size_t{0}, n);
    return;
  }
  std::exception_ptr err;
  // The whole pool every time (threads past the chunks do nothing): libgomp ends the threads a
  // smaller team leaves out and creates new ones for the next larger team, a pthread_create with
  // its stack and TLS (page faults) per thread and region, so loops of varying widths spent their
  // time starting threads. 100 MNIST CNN training steps at 16 threads (2 cores): 86.6k -> 25.4k
  // page faults, 5.4 -> 2.5 s; one built-in GEMM of the conv1 shape with 16 threads: 2.76 ms ->
  // 0.42 ms (bench/matmul_bench BM_gemm_mnist/0/1/0).
#pragma omp parallel num_threads(static_cast <int>(team_size()))
  {
    size_t t = static_cast<size_t>(omp_get_thread_num());
    size_t nt = std::min(chunks, static_cast<size_t>(omp_get_num_threads()));
    size_t b = t < nt ? n * t / nt : n, e = t < nt ? n * (t + 1) / nt : n;
    try {
      if (b < e) fn(b, e);
    } catch (...) {
#pragma omp critical(candle_parallel_for_error)
      if (!err) err = std::current_exception();
    }
  }
  if (err) std::rethrow_exception(err);
#else
  (void)chunks;
  fn(size_t{0}, n);
#endif
}

// Calls fn(begin, end) on the chunks [c * chunk, min(n, (c + 1) * chunk)) of [0, n), handed to
// the threads as they become free (an atomic counter), so a slow or preempted thread does not
// hold the others up. Which thread computes a chunk varies from run to run: only for kernels
// whose every output is computed by one call, from its inputs alone, in a fixed order (then the
// bytes still do not depend on the schedule or the thread count). Exceptions propagate.
template <typename Fn>
void parallel_for_dynamic(size_t n, size_t chunk, Fn&& fn) {
  if (n == 0) return;
  chunk = std::max<size_t>(chunk, 1);
  const size_t n_chunks = (n + chunk - 1) / chunk;
  const size_t threads = std::min(get_num_threads(), n_chunks);
#ifdef _OPENMP
  if (threads <= 1 || omp_in_parallel()) {
    fn(size_t{0}, n);
    return;
  }
  std::exception_ptr err;
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
#pragma omp parallel num_threads(static_cast <int>(team_size()))
  if (static_cast<size_t>(omp_get_thread_num()) < threads) {
    for (size_t c = next.fetch_add(1, std::memory_order_relaxed); c < n_chunks && !failed.load();
         c = next.fetch_add(1, std::memory_order_relaxed)) {
      try {
        fn(c * chunk, std::min(n, (c + 1) * chunk));
      } catch (...) {
#pragma omp critical(candle_parallel_for_error)
        if (!err) err = std::current_exception();
        failed.store(true);
      }
    }
  }
  if (err) std::rethrow_exception(err);
#else
  (void)threads;
  fn(size_t{0}, n);
#endif
}

// Elements below which copies and elementwise kernels stay on one thread.
inline constexpr size_t kParallelGrain = 32 * 1024;
// The same for the fused row ops (norms, rope, softmax, silu_mul: several passes or a
// transcendental per element): a 128 x 256 norm (a small model's prompt) took ~35 us on one
// thread while 15 others waited, where a parallel region costs a few us
inline constexpr size_t kRowOpGrain = 8 * 1024;

// Rows of `dim` elements per parallel chunk of a fused row op (at least one).
inline size_t row_op_grain(size_t dim) { return std::max<size_t>(1, kRowOpGrain / std::max<size_t>(dim, 1)); }

}  // namespace candle::cpu
