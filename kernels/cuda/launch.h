// The host-side entry points of the CUDA kernels (kernels/cuda/*.cu): plain functions over device
// pointers, shapes and a stream, called by the backend's host code (src/cuda/ops_*.cpp), which is
// compiled by the C++ compiler and never sees a kernel. Shared later with ROCm through one shim
// header (cudaStream_t -> hipStream_t).
//
// Conventions:
//  - Pointers are device pointers with the operand's start offset already applied; strides and
//    shapes are in elements; outputs are dense (row-major) unless said otherwise.
//  - Dims are merged by the caller (src/cuda/ew.h) to at most kMaxDims.
//  - Dt codes are candle::DType's values (checked by a static_assert in src/cuda/ew.cpp).
//  - Every launcher returns the launch's cudaError_t (cudaGetLastError after the launch); the
//    host code turns a failure into a candle::Error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "candle/op_kinds.h"

namespace candle::cuda_k {

constexpr int kMaxDims = 6;

enum class Dt : uint8_t { U8, U32, I16, I32, I64, BF16, F16, F32, F64, F8E4M3 };

// The common shape of an element-wise op (merged dims, rank 0..kMaxDims) and its element count.
struct EwShape {
  int32_t rank = 0;
  int64_t dims[kMaxDims] = {};
  int64_t n = 0;
  // Division by dims[d] as a multiply-high and a shift (q = (umulhi(i, mag) + i) >> shr), valid for
  // i < 2^31: set by set_fast_div() when n and every dim are below 2^31; the 32-bit index path then
  // divides without a hardware division.
  bool fast = false;
  // Some operand's offsets reach 2^32 (or n does): the kernels index in 64 bits.
  bool wide = false;
  uint32_t mag[kMaxDims] = {};
  uint32_t shr[kMaxDims] = {};
};

// Fills EwShape's fast-division constants (when n < 2^31 and no offset needs 64 bits).
inline void set_fast_div(EwShape& sh) {
  sh.fast = !sh.wide && sh.n < (int64_t(1) << 31);
  for (int d = 0; d < sh.rank && sh.fast; ++d) {
    const uint64_t dv = static_cast<uint64_t>(sh.dims[d]);
    uint32_t s = 0;
    while ((uint64_t(1) << s) < dv) ++s;
    sh.shr[d] = s;
    sh.mag[d] = static_cast<uint32_t>(((uint64_t(1) << 32) * ((uint64_t(1) << s) - dv)) / dv + 1);
  }
}

// One strided operand of an element-wise op: its strides over EwShape's dims, and whether they
// are the dense row-major ones (the kernel then skips the index arithmetic).
struct EwStrides {
  int64_t st[kMaxDims] = {};
  bool dense = false;
};

// ---- element-wise (ew.cu) ----
cudaError_t unary(UnaryOp op, Dt dt, const void* x, const EwStrides& xs, void* out, const EwShape& sh,
                  cudaStream_t s);
// out = x * mul + add (integers: exact wrapping when `int_exact`, else via f64 truncated and
// saturated, as the CPU).
cudaError_t affine(Dt dt, const void* x, const EwStrides& xs, void* out, const EwShape& sh, double mul,
                   double add, bool int_exact, cudaStream_t s);
cudaError_t powf(Dt dt, const void* x, const EwStrides& xs, void* out, const EwShape& sh, double e,
                 cudaStream_t s);
cudaError_t elu(Dt dt, const void* x, const EwStrides& xs, void* out, const EwShape& sh, double alpha,
                cudaStream_t s);
cudaError_t binary(BinaryOp op, Dt dt, const void* a, const EwStrides& as, const void* b, const EwStrides& bs,
                   void* out, const EwShape& sh, cudaStream_t s);
cudaError_t cmp(CmpOp op, Dt dt, const void* a, const EwStrides& as, const void* b, const EwStrides& bs,
                uint8_t* out, const EwShape& sh, cudaStream_t s);
// out = cond != 0 ? t : f; values of `esize` bytes.
cudaError_t where_cond(Dt cond_dt, const void* cond, const EwStrides& cs, size_t esize, const void* t,
                       const EwStrides& ts, const void* f, const EwStrides& fs, void* out, const EwShape& sh,
                       cudaStream_t s);
cudaError_t cast(Dt from, Dt to, const void* x, const EwStrides& xs, void* out, const EwShape& sh,
                 cudaStream_t s);

// ---- copies (copy.cu) ----
// out (dense) = the elements of x's strided layout; elements of `esize` bytes (1, 2, 4 or 8).
cudaError_t copy_strided(size_t esize, const void* x, const EwStrides& xs, void* out, const EwShape& sh,
                         cudaStream_t s);
// out [B, R, C] (dense) = x read with strides (sb, 1, sc): a transposing copy through shared-memory
// tiles (B <= 65535, R <= 65535 * 32).
cudaError_t copy_transpose(size_t esize, const void* x, int64_t sb, int64_t sc, void* out, int64_t B,
                           int64_t R, int64_t C, cudaStream_t s);
// Writes the `esize`-byte pattern `bits` to every element of the strided layout of `out`.
cudaError_t fill(size_t esize, uint64_t bits, void* out, const EwStrides& os, const EwShape& sh,
                 cudaStream_t s);

// ---- random numbers (rand.cu): counter-based Philox4x32-10; element i of a draw is a function
// of (seed, counter + i / 4), so a seeded device gives the same numbers on every run ----
cudaError_t rand_uniform(Dt dt, void* out, size_t n, uint64_t seed, uint64_t counter, double lo, double up,
                         cudaStream_t s);
cudaError_t rand_normal(Dt dt, void* out, size_t n, uint64_t seed, uint64_t counter, double mean,
                        double stddev, cudaStream_t s);

}  // namespace candle::cuda_k
