// Host-side entry points of the reduction, scan, sort and indexing kernels (kernels/cuda/
// reduce*.cu, scan.cu, sort.cu, index.cu). Conventions as launch.h: device pointers with the
// operands' offsets applied, element strides, a stream, and the launch's cudaError_t returned.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "launch.h"

namespace candle::cuda_k {

// Merged dims of one side of a reduction (outermost first), at most kMaxDims.
struct RedDims {
  int32_t rank = 0;
  int64_t size[kMaxDims] = {};
  int64_t stride[kMaxDims] = {};
};

// A reduction: the output is the kept dims row-major (n_out elements); each output reduces the
// R elements of the reduced dims (in their row-major order: the arg ops' indices).
struct ReduceArgs {
  RedDims kept, red;
  int64_t n_out = 0, R = 0;
};

// Scratch bytes that reduce() needs for partials (0 when every output is done by one group).
size_t reduce_scratch_bytes(ReduceOp op, Dt dt, const ReduceArgs& a, int sm_count);
// out: n_out elements of dt (u32 for ArgMin/ArgMax). R >= 1 and n_out >= 1. Sums accumulate
// f32/f64 in f64, f16/bf16/f8 in f32, integers wrap; min/max propagate NaN; arg ops give the
// first NaN, else the first extreme.
cudaError_t reduce(ReduceOp op, Dt dt, const void* x, const ReduceArgs& a, void* out, int sm_count,
                   void* scratch, cudaStream_t s);

// Inclusive prefix sums of a dense [pre, len, post] tensor along len (f32 in f64, f16/bf16/f8
// in f32, integers wrapping).
cudaError_t cumsum(Dt dt, const void* x, void* out, int64_t pre, int64_t len, int64_t post, cudaStream_t s);

// Stable arg-sort of the rows of a dense [rows, len] tensor (NaN largest); out [rows, len] u32.
size_t arg_sort_scratch_bytes(Dt dt, int64_t rows, int64_t len);
cudaError_t arg_sort(Dt dt, const void* x, uint32_t* out, int64_t rows, int64_t len, bool ascending,
                     void* scratch, cudaStream_t s);

// ---- indexing: ids are u8/u32/i16/i32/i64 (dense); the dtype's maximum is "no index" ----
// `bad` is one 8-byte device word owned by the caller. check_ids zeroes it, records the first
// out-of-range id in it, and writes the fault words {tag, position, id low, id high} (atomicCAS
// on word 0 from 0) when there is one; the op kernels given the same `bad` then write nothing.
cudaError_t check_ids(Dt idt, const void* ids, int64_t n, int64_t limit, uint32_t tag, uint32_t* fault,
                      unsigned long long* bad, cudaStream_t s);
// out[l, k, r] = src[l, ids[k], r] (0 for a skipped id); src [left, src_dim, right] dense.
cudaError_t index_select(size_t esize, Dt idt, const void* src, const void* ids, void* out, int64_t left,
                         int64_t src_dim, int64_t n, int64_t right, const unsigned long long* bad,
                         cudaStream_t s);
// out[l, k, r] = src[l, ids[l, k, r], r]; ids/out [left, n, right].
cudaError_t gather(size_t esize, Dt idt, const void* src, const void* ids, void* out, int64_t left,
                   int64_t src_dim, int64_t n, int64_t right, const unsigned long long* bad, cudaStream_t s);
// dst[l, id, r] = (or +=, when add) src[l, k, r] for k = 0..n in order, id = ids[l, k, r]
// (per_elem) or ids[k]; dst [left, dst_dim, right], src [left, n, right], both dense.
cudaError_t scatter(bool add, bool per_elem, Dt dt, Dt idt, void* dst, const void* src, const void* ids,
                    int64_t left, int64_t dst_dim, int64_t n, int64_t right, const unsigned long long* bad,
                    cudaStream_t s);
// The check_ids of a scatter's n ids against [0, limit), given to scatter_checked.
struct IdCheckArgs {
  int64_t n, limit;
  uint32_t tag;
  uint32_t* fault;
  unsigned long long* bad;
};
// check_ids then scatter; a small scatter (up to 4096 ids and destination columns: a decode step's
// KV write) does both in one block, one launch instead of two.
cudaError_t scatter_checked(bool add, bool per_elem, Dt dt, Dt idt, void* dst, const void* src,
                            const void* ids, int64_t left, int64_t dst_dim, int64_t n, int64_t right,
                            const IdCheckArgs& chk, cudaStream_t s);

}  // namespace candle::cuda_k
