// cuBLAS status checks shared by the CUDA ops that call cuBLAS (matmul, quantized matmul, the GEMM
// form of prefill attention).
#pragma once

#include <cublas_v2.h>

namespace candle::cuda_backend {

// throws Error(Device) "<what>: <cuBLAS's status string>" unless st is CUBLAS_STATUS_SUCCESS
void check_blas(cublasStatus_t st, const char* what);

}  // namespace candle::cuda_backend
