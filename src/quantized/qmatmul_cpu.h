// The CPU's quantized matrix multiplication: y[i][j] = sum_k x[i][k] * W[j][k], with W given as
// n rows of k elements of GgmlDType t (k a multiple of its block size). The activations are
// quantized once to the 8-bit block type that t's dot product takes (Q8_0, Q8_1 or Q8_K), then
// integer dot products run; m == 1 is the decode path, m > 1 the batched (prefill) path. The
// kernels are chosen at run time (AVX-512 / VNNI, AVX2, plain C++) and the result does not
// depend on the thread count.
//
// The numbers (the contract the tests check): each super-block b of a weight row (32 or 256
// elements) gives exact integers isum_b = sum_s sc_s * sum_{i in s} q_i * xq_i and, for the types
// with a min, msum_b = sum_s mn_s * sum_{i in s} xq_i (W = d * sc_s * q_i + mcoef * mn_s, xq the
// 8-bit activations of scale dx_b), and the output is the chain, in increasing b,
//   acc = fma(d_b * dx_b, float(isum_b), acc);  acc = fma(mcoef_b * dx_b, float(msum_b), acc)
// from acc = 0. Integer sums are exact in any order, so every ISA gives the scalar reference's
// bits exactly, for any m, tile position and thread count.
#pragma once

#include <cstddef>

#include "candle/quantized/ggml_dtype.h"

namespace candle::quantized {

// x: m rows of k f32 (row stride k); y: m rows of n f32 (row stride n)
void qmatmul_cpu(GgmlDType t, const void* w, size_t n, size_t k, const float* x, size_t m, float* y);
// the kernel family qmatmul_cpu uses for t at this CPU's ISA, e.g. "avx2" (benchmarks print it)
const char* qmatmul_cpu_kernel_name(GgmlDType t);

// The kernel families, lowest first. qmatmul_cpu uses qmatmul_isa(): CANDLE_QMATMUL_ISA=
// scalar|avx2|avx512|amx (read once; a value that is unknown or that this CPU lacks throws from
// every call), else the best one this CPU has up to Avx512. Amx is Avx512 with AMX tiles for the
// packed Q4_0 / Q8_0 / Q4_K weights at m >= 8 (Intel Xeon since Sapphire Rapids, where Linux grants
// the tile state); for now only CANDLE_QMATMUL_ISA=amx (or an explicit isa) chooses it.
enum class QmmIsa { Scalar, Avx2, Avx512, Amx };
const char* qmm_isa_name(QmmIsa isa);
bool qmm_isa_supported(QmmIsa isa);
QmmIsa qmm_isa();
// the same product with the kernels of one ISA (tests compare them); throws when unsupported
void qmatmul_cpu(GgmlDType t, const void* w, size_t n, size_t k, const float* x, size_t m, float* y,
                 QmmIsa isa);

// The float weight types (F32, F16, BF16, read in place): output (i, j) is 16 lane sums (lane l
// takes the elements e = l mod 16 of the row by fma, in increasing e) reduced in a fixed order, so
// every ISA and thread count gives the same bits (qmatmul_float.cpp); qmatmul_cpu calls it for them.
void qmatmul_cpu_float(GgmlDType t, const void* w, size_t n, size_t k, const float* x, size_t m, float* y,
                       QmmIsa isa);

// Packed weights: rows of Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS,
// kPackRows (16) at a time, rearranged so that a SIMD dot product leaves each row's sum in its own 32-bit
// lane (no horizontal sums per block). Per group of 16 rows and (super-)block b, 4-byte runs of the 16 rows
// side by side (qmatmul_pack.cpp gives each type's order); the results are qmatmul_cpu's bits (the contract
// above). qmm_packable: t is packable, n a multiple of 16, and isa has packed kernels (AVX2 and up)
bool qmm_packable(GgmlDType t, size_t n, size_t k, QmmIsa isa);
// the bytes of one packed row of k elements (the 32-element types and Q2_K: the plain row's; Q3_K: 114
// per 256, Q4_K: 148, Q5_K: 180, Q6_K: 210, IQ4_XS: 138)
size_t qmm_packed_row_bytes(GgmlDType t, size_t k);
// w: n rows of k elements in t's blocks (n a multiple of 16); out: qmm_packed_row_bytes(t, k) * n bytes
void qmm_pack(GgmlDType t, const void* w, size_t n, size_t k, void* out);
// qmatmul_cpu over packed weights (qmm_packable(t, n, k, isa) must hold, else Error(InvalidArgument))
void qmatmul_cpu_packed(GgmlDType t, const void* packed, size_t n, size_t k, const float* x, size_t m,
                        float* y, QmmIsa isa);

// Several weights of block types of one block size (32 or 256: one quantization of x) multiplying the
// same x: part p's n rows of type t (its blocks, or packed as qmm_pack gives them when `packed`) give
// columns [c_p, c_p + n) of y, m rows of sum n (c_p: the earlier parts' n added up), the bits
// qmatmul_cpu / qmatmul_cpu_packed give each part alone. x is quantized once and one pass over the
// threads takes every part's rows (a decoder's q / k / v or gate / up: one quantization and one
// wake-up of the threads instead of three or two).
struct QmmPart {
  GgmlDType t;
  const void* w;
  size_t n;
  bool packed;
};
void qmatmul_cpu_parts(const QmmPart* parts, size_t count, size_t k, const float* x, size_t m, float* y,
                       QmmIsa isa);

// Tests only: qmatmul_cpu_packed with the AMX kernels' tile instructions done in C++ (their data
// flow, checked on CPUs without AMX); Q4_0 / Q8_0, needs qmm_packable(t, n, k, QmmIsa::Avx512)
void qmatmul_cpu_packed_amx_emulated(GgmlDType t, const void* packed, size_t n, size_t k, const float* x,
                                     size_t m, float* y);

}  // namespace candle::quantized
