// GGML quantized blocks on CUDA (candle::quantized's QTensor / QMatMul through BackendStorage's
// qdequantize / qmatmul; kernels: kernels/cuda/qdequant.cu, qmatmul.cu, quant.cuh).
//  - qdequantize: every block type and f32 / f16 / bf16, the CPU dequantizer's values exactly.
//  - qmatmul, m <= kQmvMaxRows (decoding): the activations quantized to 8-bit blocks of 32, then a
//    dp4a matrix-vector kernel over the weight's blocks, every quantized type.
//  - qmatmul, larger m (prefill): the weight dequantized to f16 in a scratch buffer and one cuBLAS
//    GEMM, f16 operands (x rounded to f16 on the GPU), f32 accumulation and output. Against the
//    exact product of the dequantized weight, the two f16 roundings bound the error by about
//    2^-10 sum_i |w_i x_i| (the tests allow 2e-3 of it), well below what the weight's own
//    quantization already costs, so f32 operands (SGEMM, twice the scratch and a slower GEMM)
//    would buy nothing visible. The limit: an f32 activation beyond f16's range (65504) becomes
//    infinite here.
#include <cublas_v2.h>

#include <cstdlib>
#include <string>

#include "blas.h"
#include "candle/backend/qblocks.h"
#include "launch_quant.h"
#include "storage.h"

namespace candle::cuda_backend {
namespace {

[[noreturn]] void internal(const std::string& msg) { throw Error(ErrorKind::Internal, "cuda: " + msg); }

// The device address of the first of `need` block bytes of the U8 storage s under layout l,
// checked to lie inside it and to be 16-byte aligned (the kernels' vector loads).
const void* checked_blocks(const CudaStorage& s, const Layout& l, size_t need, const char* op) {
  const void* p = s.at(checked_block_offset(s, l, need, op));
  if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
    internal(std::string(op) + ": the blocks are not 16-byte aligned");
  return p;
}

}  // namespace

// x (m, k) times an f16 / bf16 weight (n, k) stored as these bytes. Decode rows (m <= kQmvMaxRows):
// cuda_k::half_matvec, the weight read once at the card's bandwidth, x in f32. Prefill: one
// cublasGemmEx with the weight as it is, x converted to the weight's type on the GPU, f32
// accumulation and output (llama.cpp's CUDA path for F16 weights does the same conversion of x).
StoragePtr CudaStorage::half_weight_matmul(const Layout& blocks_l, const CudaStorage& x, const Layout& x_l,
                                           bool bf16, size_t n, size_t k) const {
  const DType wdt = bf16 ? DType::BF16 : DType::F16;
  const void* w =
      checked_blocks(*this, blocks_l, checked_mul(checked_mul(n, k, "qmatmul"), 2, "qmatmul"), "qmatmul");
  if (k == 0 || x_l.elem_count() % k != 0)
    internal("qmatmul: the input's " + std::to_string(x_l.elem_count()) + " elements are not rows of " +
             std::to_string(k));
  const size_t m = x_l.elem_count() / k;
  auto out = cdev().make(DType::F32, checked_mul(m, n, "qmatmul"));
  if (m == 0 || n == 0) return out;
  Context& c = ctx();
  // decode rows: the f32 matrix-vector kernel (CANDLE_CUDA_HALF_MATVEC=0, read once: cuBLAS for every m)
  static const bool matvec = [] {
    const char* e = std::getenv("CANDLE_CUDA_HALF_MATVEC");
    return !(e && e[0] == '0');
  }();
  if (m <= cuda_k::kQmvMaxRows && k % 8 == 0 && matvec) {
    StoragePtr xf;
    const void* xq = x.at(x_l.start_offset());
    if (x.dtype() != DType::F32 || !x_l.is_contiguous() || reinterpret_cast<uintptr_t>(xq) % 16 != 0) {
      xf = x.to_dtype(x_l, DType::F32);
      xq = as_cuda(*xf, "qmatmul").at(0);
    }
    c.launched(
        cuda_k::half_matvec(bf16, w, n, k, m, static_cast<const float*>(xq), out->ptr<float>(), stream()),
        "half_matvec");
    return out;
  }
  StoragePtr xh;
  const void* xp = nullptr;
  if (x.dtype() == wdt && x_l.is_contiguous()) {
    xp = x.at(x_l.start_offset());
  } else {
    xh = x.to_dtype(x_l, wdt);
    xp = as_cuda(*xh, "qmatmul").at(0);
  }
  DeviceGuard g(c.ordinal());
  const float one = 1.0f, zero = 0.0f;
  const auto n64 = static_cast<int64_t>(n), m64 = static_cast<int64_t>(m), k64 = static_cast<int64_t>(k);
  const cudaDataType t = bf16 ? CUDA_R_16BF : CUDA_R_16F;
  check_blas(cublasGemmEx_64(c.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, n64, m64, k64, &one, w, t, k64, xp, t, k64,
                             &zero, out->at(0), CUDA_R_32F, n64, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
             "cublasGemmEx (f16 weight)");
  counters().launches++;
  return out;
}

StoragePtr CudaStorage::qdequantize(const Layout& blocks_l, uint32_t ggml_type, size_t elems,
                                    DType out) const {
  size_t qk = 0, bytes = 0;
  if ((out != DType::F32 && out != DType::F16) || !cuda_k::qtype_layout(ggml_type, qk, bytes)) return nullptr;
  if (elems % qk != 0)
    internal("qdequantize: " + std::to_string(elems) + " values are not whole blocks of " +
             std::to_string(qk));
  const void* src =
      checked_blocks(*this, blocks_l, checked_mul(elems / qk, bytes, "qdequantize"), "qdequantize");
  auto o = cdev().make(out, elems);
  if (elems == 0) return o;
  ctx().launched(cuda_k::qdequantize(ggml_type, src, elems, out == DType::F16, o->at(0), stream()),
                 "qdequantize");
  return o;
}

StoragePtr CudaStorage::qmatmul(const Layout& blocks_l, const BackendStorage& x_b, const Layout& x_l,
                                uint32_t ggml_type, size_t n, size_t k) const {
  size_t qk = 0, bytes = 0;
  if (!cuda_k::qtype_layout(ggml_type, qk, bytes)) return nullptr;
  const CudaStorage& x = as_cuda(x_b, "qmatmul");
  const DType xdt = x.dtype();
  if (xdt != DType::F32 && xdt != DType::F16 && xdt != DType::BF16) return nullptr;
  // f16 / bf16 weights (GGML types 1 and 30): cuBLAS on the weight's bytes as they are
  if (ggml_type == 1 || ggml_type == 30) return half_weight_matmul(blocks_l, x, x_l, ggml_type == 30, n, k);
  if (qk == 1) return nullptr;  // f32 weights are plain tensors (QMatMul multiplies them with matmul)
  if (k == 0 || k % qk != 0)
    internal("qmatmul: k = " + std::to_string(k) + " is not a positive multiple of the block size " +
             std::to_string(qk));
  const size_t row_bytes = k / qk * bytes;
  const void* w = checked_blocks(*this, blocks_l, checked_mul(n, row_bytes, "qmatmul"), "qmatmul");
  if (x_l.elem_count() % k != 0)
    internal("qmatmul: the input's " + std::to_string(x_l.elem_count()) + " elements are not rows of " +
             std::to_string(k));
  const size_t m = x_l.elem_count() / k;
  auto out = cdev().make(DType::F32, checked_mul(m, n, "qmatmul"));
  if (m == 0 || n == 0) return out;
  Dense xd = dense(x, x_l);
  Context& c = ctx();
  if (m <= cuda_k::kQmvMaxRows) {
    const size_t group = qk == 256 ? 256 : 32;
    // x as its producer also wrote it quantized (ActsQ8), when it is all of those values: the
    // producer learns the form taken (for its next outputs), and the form is used where it is made
    const auto& made = x.acts_q8();
    const int f = group == 32 ? 0 : 1;
    const bool whole =
        made && x_l.is_contiguous() && x_l.start_offset() == made->offset && x_l.elem_count() == made->elems;
    if (whole) c.acts_q8_taken(made->producer, group);
    if (whole && made->forms.q[f]) {
      c.launched(cuda_k::qmatvec(ggml_type, w, row_bytes, n, k, m, made->forms.q[f], made->forms.d[f],
                                 made->forms.sums[f], out->ptr<float>(), stream()),
                 "qmatvec");
      return out;
    }
    // scratch: the quants (m k bytes), then the scales and the sums of 16 (k is a multiple of 32,
    // so every part starts 4-byte aligned and the quants' rows 16-byte aligned)
    const size_t nq = m * k, nd = nq / 32, ns = nq / 16;
    BlockPtr scratch = c.alloc(nq + 4 * nd + 4 * ns);
    auto* q = static_cast<int8_t*>(scratch->ptr);
    auto* d = reinterpret_cast<float*>(q + nq);
    auto* sums = reinterpret_cast<int32_t*>(d + nd);
    // quantized as the CPU quantizes them for this weight type (per 256 for the K-quants), so that
    // the integer dot products are the CPU's
    c.launched(cuda_k::quantize_acts_q8(dt_of(xdt), xd.s->at(xd.first), m, k, group, q, d, sums, stream()),
               "quantize_acts_q8");
    c.launched(cuda_k::qmatvec(ggml_type, w, row_bytes, n, k, m, q, d, sums, out->ptr<float>(), stream()),
               "qmatvec");
    return out;
  }
  // prefill: f16 weight scratch and x in f16, one GEMM: out (m, n) row-major is the column-major
  // (n, m) = W (n, k) X^T, W read as its column-major transpose (k, n)
  const size_t wn = checked_mul(n, k, "qmatmul");
  BlockPtr wh = c.alloc(checked_mul(wn, 2, "qmatmul"));
  c.launched(cuda_k::qdequantize(ggml_type, w, wn, true, wh->ptr, stream()), "qdequantize");
  StoragePtr x16;
  const void* xp = xd.s->at(xd.first);
  if (xdt != DType::F16) {
    x16 = x.to_dtype(x_l, DType::F16);
    xp = as_cuda(*x16, "qmatmul").at(0);
  }
  DeviceGuard g(c.ordinal());
  cublasHandle_t h = c.cublas();
  const float one = 1.0f, zero = 0.0f;
  const auto n64 = static_cast<int64_t>(n), m64 = static_cast<int64_t>(m), k64 = static_cast<int64_t>(k);
  check_blas(cublasGemmEx_64(h, CUBLAS_OP_T, CUBLAS_OP_N, n64, m64, k64, &one, wh->ptr, CUDA_R_16F, k64, xp,
                             CUDA_R_16F, k64, &zero, out->at(0), CUDA_R_32F, n64, CUBLAS_COMPUTE_32F,
                             CUBLAS_GEMM_DEFAULT),
             "cublasGemmEx (qmatmul)");
  counters().launches++;
  return out;
}

}  // namespace candle::cuda_backend
