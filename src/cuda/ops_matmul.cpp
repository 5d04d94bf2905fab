// matmul through cuBLAS: one strided-batched GEMM per call (f32, TF32 when asked, f16, bf16, f64),
// reading row-major operands as their column-major transposes, so that a transposed operand is a
// cuBLAS transpose flag rather than a copy.
#include <cublas_v2.h>

#include <atomic>
#include <climits>

#include "blas.h"
#include "candle/cuda.h"
#include "storage.h"

namespace candle::cuda {

namespace {
std::atomic<bool> reduced_f32{false}, reduced_f16{false}, reduced_bf16{false};
}

void set_gemm_reduced_precision_f32(bool on) { reduced_f32 = on; }
bool gemm_reduced_precision_f32() { return reduced_f32; }
void set_gemm_reduced_precision_f16(bool on) { reduced_f16 = on; }
bool gemm_reduced_precision_f16() { return reduced_f16; }
void set_gemm_reduced_precision_bf16(bool on) { reduced_bf16 = on; }
bool gemm_reduced_precision_bf16() { return reduced_bf16; }

}  // namespace candle::cuda

namespace candle::cuda_backend {
namespace {

// An operand of C^T = B^T A^T in cuBLAS's column-major terms: a rows x cols matrix (rows the
// fastest dim of the product's column-major view) read with `op` and leading dimension `ld`.
struct BlasOperand {
  cublasOperation_t op;
  int64_t ld;
};

// The column-major reading of a row-major [outer, inner] operand whose strides are (so, si):
// the product needs the [inner, outer] column-major matrix. nullopt when neither dim is dense.
std::optional<BlasOperand> blas_operand(size_t outer, size_t inner, size_t so, size_t si) {
  if (outer == 1) so = inner;  // the stride of a dim of size 1 is free
  if (inner == 1) si = 1;
  if (si == 1 && so >= std::max<size_t>(inner, 1)) return BlasOperand{CUBLAS_OP_N, static_cast<int64_t>(so)};
  if (so == 1 && si >= std::max<size_t>(outer, 1)) return BlasOperand{CUBLAS_OP_T, static_cast<int64_t>(si)};
  return std::nullopt;
}

}  // namespace

StoragePtr CudaStorage::matmul(const Layout& lhs_l, const BackendStorage& rhs_b, const Layout& rhs_l,
                               MatmulDims d) const {
  const CudaStorage& rhs = as_cuda(rhs_b, "matmul");
  cudaDataType_t type;
  cublasComputeType_t compute;
  switch (dtype_) {
    case DType::F32:
      type = CUDA_R_32F;
      compute = cuda::gemm_reduced_precision_f32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
      break;
    case DType::F16:
      type = CUDA_R_16F;
      compute = cuda::gemm_reduced_precision_f16() ? CUBLAS_COMPUTE_32F_FAST_16F : CUBLAS_COMPUTE_32F;
      break;
    case DType::BF16:
      type = CUDA_R_16BF;
      compute = cuda::gemm_reduced_precision_bf16() ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F;
      break;
    case DType::F64:
      type = CUDA_R_64F;
      compute = CUBLAS_COMPUTE_64F;
      break;
    default: unsupported(dtype_, "matmul");
  }
  auto out = cdev().make(dtype_, d.batch * d.m * d.n);
  if (d.batch * d.m * d.n == 0) return out;
  if (d.k == 0) {
    check(cudaMemsetAsync(out->at(0), 0, d.batch * d.m * d.n * dtype_size(dtype_), stream()),
          "cudaMemsetAsync");
    return out;
  }
  // A [m, k] with strides (sa[1], sa[2]); B [k, n] with (sb[1], sb[2]).
  Dense a{this, lhs_l.start_offset(), nullptr}, b{&rhs, rhs_l.start_offset(), nullptr};
  Layout al = lhs_l, bl = rhs_l;
  auto oa = blas_operand(d.m, d.k, al.stride()[1], al.stride()[2]);
  if (!oa) {
    a = dense(*this, lhs_l);
    al = Layout::contiguous(lhs_l.shape());
    oa = blas_operand(d.m, d.k, d.k, 1);
  }
  // B^T is [n, k] column-major: B's dims read as (outer k, inner n)
  auto ob = blas_operand(d.k, d.n, bl.stride()[1], bl.stride()[2]);
  if (!ob) {
    b = dense(rhs, rhs_l);
    bl = Layout::contiguous(rhs_l.shape());
    ob = blas_operand(d.k, d.n, d.n, 1);
  }
  const int64_t sa = d.batch == 1 ? 0 : static_cast<int64_t>(al.stride()[0]);
  const int64_t sb = d.batch == 1 ? 0 : static_cast<int64_t>(bl.stride()[0]);
  Context& c = ctx();
  DeviceGuard g(c.ordinal());
  cublasHandle_t h = c.cublas();
  const float one_f = 1.0f, zero_f = 0.0f;
  const double one_d = 1.0, zero_d = 0.0;
  const void* alpha = dtype_ == DType::F64 ? static_cast<const void*>(&one_d) : &one_f;
  const void* beta = dtype_ == DType::F64 ? static_cast<const void*>(&zero_d) : &zero_f;
  const auto n = static_cast<int64_t>(d.n), m = static_cast<int64_t>(d.m), k = static_cast<int64_t>(d.k);
  check_blas(
      cublasGemmStridedBatchedEx_64(h, ob->op, oa->op, n, m, k, alpha, b.s->at(b.first), type, ob->ld, sb,
                                    a.s->at(a.first), type, oa->ld, sa, beta, out->at(0), type, n, m * n,
                                    static_cast<int64_t>(d.batch), compute, CUBLAS_GEMM_DEFAULT),
      "cublasGemmStridedBatchedEx");
  counters().launches++;
  return out;
}

}  // namespace candle::cuda_backend
