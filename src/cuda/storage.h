// CudaDevice / CudaStorage and the helpers the ops' host code uses (no kernels here: they are
// reached through kernels/cuda/launch.h).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "candle/backend/cpu_storage.h"
#include "context.h"
#include "launch.h"
#include "launch_quant.h"

namespace candle::cuda_backend {

class CudaStorage;
using CuStoragePtr = std::shared_ptr<CudaStorage>;

class CudaDevice final : public BackendDevice, public std::enable_shared_from_this<CudaDevice> {
 public:
  CudaDevice(std::shared_ptr<Context> ctx, size_t ordinal) : ctx_(std::move(ctx)), ordinal_(ordinal) {}
  DeviceKind kind() const override { return DeviceKind::Cuda; }
  size_t ordinal() const override { return ordinal_; }
  std::string name() const override { return ctx_->name(); }
  StoragePtr alloc(DType dtype, size_t n) override;
  StoragePtr from_cpu(const CpuStorage& src) override;
  StoragePtr from_host(const void* data, DType dtype, size_t n) override;
  StoragePtr zeros(DType dtype, size_t n) override;
  void set_seed(uint64_t seed) override;
  StoragePtr rand_uniform(DType dtype, size_t n, double lo, double up) override;
  StoragePtr rand_normal(DType dtype, size_t n, double mean, double stddev) override;
  void synchronize() override { ctx_->synchronize(); }
  DeviceMemory memory() const override { return ctx_->memory(); }
  std::unique_ptr<BackendGraph> capture_graph(const std::function<void()>& work) override;  // graph.cpp
  bool records_graphs() const override { return true; }

  Context& ctx() const { return *ctx_; }
  const std::shared_ptr<Context>& ctx_ptr() const { return ctx_; }
  // A new storage of n elements (uninitialised).
  CuStoragePtr make(DType dtype, size_t n);

 private:
  std::shared_ptr<Context> ctx_;
  size_t ordinal_;
  std::mutex rng_mu_;
  uint64_t seed_ = 299792458, counter_ = 0;
};

// A decode step's activations (`elems` values from element `offset` of the storage they belong to)
// as their producer (rms_norm, add_rms_norm, silu_mul, the attention's decode kernel; `producer`:
// the key of the op and its row length) also wrote them quantized for a quantized matmul, in the
// forms Context::acts_q8_forms gives for it (none until a matmul has taken the producer's
// outputs), so that qmatmul skips its own quantization launch.
struct ActsQ8 {
  uint64_t producer = 0;
  size_t offset = 0, elems = 0;
  BlockPtr block;
  cuda_k::ActsQ8Out forms;
};

class CudaStorage final : public BackendStorage {
 public:
  CudaStorage(std::shared_ptr<CudaDevice> dev, DType dtype, size_t n, BlockPtr block)
      : dev_(std::move(dev)), dtype_(dtype), n_(n), block_(std::move(block)) {}
  DType dtype() const override { return dtype_; }
  size_t elem_count() const override { return n_; }
  BackendDevice& device() const override { return *dev_; }
  std::shared_ptr<CpuStorage> to_cpu() const override;
  void copy_to_host(const Layout& l, void* dst) const override;
  bool shares_memory_with(const BackendStorage& other) const override;
  // Any write into the storage drops its quantized activations (ActsQ8): the ops that write into
  // `this` call it, and the non-const as_cuda, through which every op reaches a storage it writes
  // into (copies, the AdamW step's moments, the CPU round trips' results).
  void written() { acts_q8_.reset(); }
  const std::shared_ptr<const ActsQ8>& acts_q8() const { return acts_q8_; }
  void set_acts_q8(std::shared_ptr<const ActsQ8> a) { acts_q8_ = std::move(a); }

  CudaDevice& cdev() const { return *dev_; }
  Context& ctx() const { return dev_->ctx(); }
  cudaStream_t stream() const { return dev_->ctx().stream(); }
  // The device address of element `elem`.
  void* at(size_t elem) const { return static_cast<char*>(block_->ptr) + elem * dtype_size(dtype_); }
  template <typename T>
  T* ptr(size_t elem = 0) const {
    return static_cast<T*>(at(elem));
  }

  // element-wise (ops_elementwise.cpp)
  StoragePtr unary(UnaryOp op, const Layout& l) const override;
  StoragePtr affine(const Layout& l, double mul, double add) const override;
  StoragePtr powf(const Layout& l, double e) const override;
  StoragePtr elu(const Layout& l, double alpha) const override;
  StoragePtr binary(BinaryOp op, const Layout& lhs_l, const BackendStorage& rhs,
                    const Layout& rhs_l) const override;
  StoragePtr cmp(CmpOp op, const Layout& lhs_l, const BackendStorage& rhs,
                 const Layout& rhs_l) const override;
  StoragePtr where_cond(const Layout& cond_l, const BackendStorage& on_true, const Layout& t_l,
                        const BackendStorage& on_false, const Layout& f_l) const override;
  StoragePtr to_dtype(const Layout& l, DType dtype) const override;
  // copies (ops_copy.cpp)
  void copy_strided_src(BackendStorage& dst, size_t dst_offset, const Layout& src_l) const override;
  void copy2d(BackendStorage& dst, size_t d1, size_t d2, size_t src_s, size_t dst_s, size_t src_o,
              size_t dst_o) const override;
  void const_set(const Scalar& v, const Layout& l) override;
  // matmul through cuBLAS (ops_matmul.cpp)
  StoragePtr matmul(const Layout& lhs_l, const BackendStorage& rhs, const Layout& rhs_l,
                    MatmulDims d) const override;
  // nn (ops_nn.cpp): candle::nn's fused last-dim ops, attention, the AdamW step
  StoragePtr softmax_last_dim(const Layout& l) const override;
  StoragePtr silu_mul(const Layout& l, const BackendStorage& up, const Layout& up_l) const override;
  StoragePtr add_rms_norm(const Layout& l, const BackendStorage& h, const Layout& h_l,
                          const BackendStorage& alpha, const Layout& alpha_l, float eps) const override;
  StoragePtr rms_norm(const Layout& l, const BackendStorage& alpha, const Layout& alpha_l,
                      float eps) const override;
  StoragePtr layer_norm(const Layout& l, const BackendStorage& alpha, const Layout& alpha_l,
                        const BackendStorage& beta, const Layout& beta_l, float eps) const override;
  StoragePtr rope(RopeKind kind, const Layout& l, const BackendStorage& cos, const Layout& cos_l,
                  const BackendStorage& sin, const Layout& sin_l) const override;
  StoragePtr scaled_dot_product_attention(const Layout& q_l, const BackendStorage& k, const Layout& k_l,
                                          const BackendStorage& v, const Layout& v_l,
                                          const AttentionParams& p) const override;
  bool adamw_step_set(const Layout& l, BackendStorage& m, const Layout& m_l, BackendStorage& v,
                      const Layout& v_l, const BackendStorage& g, const Layout& g_l,
                      const AdamWStep& c) override;
  // GGML quantized blocks (ops_quant.cpp): `this` is the U8 storage of a QTensor's blocks
  StoragePtr qmatmul(const Layout& blocks_l, const BackendStorage& x, const Layout& x_l, uint32_t ggml_type,
                     size_t n, size_t k) const override;
  StoragePtr qdequantize(const Layout& blocks_l, uint32_t ggml_type, size_t elems, DType out) const override;
  // qmatmul's f16 / bf16 weights (ops_quant.cpp)
  StoragePtr half_weight_matmul(const Layout& blocks_l, const CudaStorage& x, const Layout& x_l, bool bf16,
                                size_t n, size_t k) const;
  // conv (ops_conv.cpp: convolutions; ops_resize.cpp: pooling, resizing)
  StoragePtr conv1d(const Layout& l, const BackendStorage& kernel, const Layout& kernel_l,
                    const ParamsConv1D& p) const override;
  StoragePtr conv_transpose1d(const Layout& l, const BackendStorage& kernel, const Layout& kernel_l,
                              const ParamsConv1D& p) const override;
  StoragePtr conv2d(const Layout& l, const BackendStorage& kernel, const Layout& kernel_l,
                    const ParamsConv2D& p, const ConvEpilogue& epilogue) const override;
  StoragePtr conv_transpose2d(const Layout& l, const BackendStorage& kernel, const Layout& kernel_l,
                              const ParamsConv2D& p) const override;
  StoragePtr avg_pool2d(const Layout& l, std::array<size_t, 2> kernel,
                        std::array<size_t, 2> stride) const override;
  StoragePtr max_pool2d(const Layout& l, std::array<size_t, 2> kernel,
                        std::array<size_t, 2> stride) const override;
  StoragePtr upsample_nearest1d(const Layout& l, size_t out_l) const override;
  StoragePtr upsample_nearest2d(const Layout& l, size_t out_h, size_t out_w) const override;
  StoragePtr upsample_bilinear2d(const Layout& l, size_t out_h, size_t out_w, bool align_corners,
                                 std::optional<double> scale_h, std::optional<double> scale_w) const override;
  StoragePtr conv1d_grad_kernel(const Layout& x_l, const BackendStorage& grad_out, const Layout& g_l,
                                const ParamsConv1D& p) const override;
  StoragePtr conv2d_grad_kernel(const Layout& x_l, const BackendStorage& grad_out, const Layout& g_l,
                                const ParamsConv2D& p) const override;
  StoragePtr conv1d_grad_input(const Layout& g_l, const BackendStorage& kernel, const Layout& k_l,
                               const ParamsConv1D& p) const override;
  StoragePtr conv2d_grad_input(const Layout& g_l, const BackendStorage& kernel, const Layout& k_l,
                               const ParamsConv2D& p) const override;
  StoragePtr conv_transpose1d_grad_kernel(const Layout& x_l, const BackendStorage& grad_out,
                                          const Layout& g_l, const ParamsConv1D& p) const override;
  StoragePtr conv_transpose2d_grad_kernel(const Layout& x_l, const BackendStorage& grad_out,
                                          const Layout& g_l, const ParamsConv2D& p) const override;
  StoragePtr conv_transpose1d_grad_input(const Layout& g_l, const BackendStorage& kernel, const Layout& k_l,
                                         const ParamsConv1D& p) const override;
  StoragePtr conv_transpose2d_grad_input(const Layout& g_l, const BackendStorage& kernel, const Layout& k_l,
                                         const ParamsConv2D& p) const override;
  StoragePtr conv_bias_grad(const Layout& g_l) const override;
  StoragePtr max_pool2d_grad(const Layout& x_l, const BackendStorage& grad_out, const Layout& g_l,
                             std::array<size_t, 2> kernel, std::array<size_t, 2> stride) const override;
  StoragePtr avg_pool2d_grad(const Layout& g_l, size_t in_h, size_t in_w, std::array<size_t, 2> kernel,
                             std::array<size_t, 2> stride) const override;
  StoragePtr upsample_nearest1d_grad(const Layout& g_l, size_t in_l) const override;
  StoragePtr upsample_nearest2d_grad(const Layout& g_l, size_t in_h, size_t in_w) const override;
  StoragePtr upsample_bilinear2d_grad(const Layout& g_l, size_t in_h, size_t in_w, bool align_corners,
                                      std::optional<double> scale_h,
                                      std::optional<double> scale_w) const override;
  // reductions, scans, sorting and indexing (ops_reduce.cpp, ops_index.cpp)
  StoragePtr reduce(ReduceOp op, const Layout& l, const std::vector<size_t>& dims) const override;
  StoragePtr cumsum(const Layout& l, size_t dim) const override;
  StoragePtr arg_sort_last_dim(const Layout& l, bool ascending) const override;
  StoragePtr index_select(const Layout& l, const BackendStorage& ids, const Layout& ids_l,
                          size_t dim) const override;
  StoragePtr gather(const Layout& l, const BackendStorage& ids, const Layout& ids_l,
                    size_t dim) const override;
  StoragePtr index_add(const Layout& l, const BackendStorage& ids, const Layout& ids_l,
                       const BackendStorage& src, const Layout& src_l, size_t dim) const override;
  void scatter_set(const Layout& l, const BackendStorage& ids, const Layout& ids_l, const BackendStorage& src,
                   const Layout& src_l, size_t dim) override;
  void scatter_add_set(const Layout& l, const BackendStorage& ids, const Layout& ids_l,
                       const BackendStorage& src, const Layout& src_l, size_t dim) override;

 private:
  std::shared_ptr<CudaDevice> dev_;
  DType dtype_;
  size_t n_;
  BlockPtr block_;
  std::shared_ptr<const ActsQ8> acts_q8_;
};

// ---- helpers for the ops' host code (ew.cpp) ----

// Records a CPU round-trip of `op` in cuda::stats() (logged with CANDLE_CUDA_TRACE=1); call it
// right before delegating to BackendStorage's default, which counts backend_stats().
void note_round_trip(const char* op);

const CudaStorage& as_cuda(const BackendStorage& s, const char* op);
CudaStorage& as_cuda(BackendStorage& s, const char* op);  // for writing into: calls written()

inline cuda_k::Dt dt_of(DType d) { return static_cast<cuda_k::Dt>(d); }

// An element-wise op over the common shape of some operands (each a storage's layout): the dims
// merged where every operand allows, at most cuda_k::kMaxDims per launch. `fn` is called once per
// launch (several when the merged rank exceeds kMaxDims: once per index of the outer dims) with
// the shape, each operand's strides and the element offset of its first element (the layout's
// start offset included).
struct EwSlice {
  cuda_k::EwShape shape;
  std::vector<cuda_k::EwStrides> st;
  std::vector<size_t> first;
};
void for_each_ew_slice(const Shape& shape, const std::vector<const Layout*>& layouts,
                       const std::function<void(const EwSlice&)>& fn);

// The elements of layout `l` of `s` contiguously: `s` itself (first element `first`) when l is
// contiguous, else a copy made on the device (kept alive in `keep`, first element 0).
struct Dense {
  const CudaStorage* s;
  size_t first;
  CuStoragePtr keep;
};
Dense dense(const CudaStorage& s, const Layout& l);

// "unsupported dtype <dt> for op <op>" (ErrorKind::UnsupportedOp), as the CPU says it.
[[noreturn]] void unsupported(DType dt, const char* op);

}  // namespace candle::cuda_backend
