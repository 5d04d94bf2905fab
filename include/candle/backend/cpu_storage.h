// The backend SDK: the CPU's storage (host memory) and device, for backend and custom-op authors.
#pragma once

#include <cstddef>
#include <memory>

#include "candle/backend/backend.h"

namespace candle {

// Host memory storage: 64-byte aligned, or a zero-copy view of memory owned elsewhere
// (a memory-mapped safetensors file).
class CpuStorage final : public BackendStorage, public std::enable_shared_from_this<CpuStorage> {
 public:
  // Uninitialised storage for n elements of dtype.
  static std::shared_ptr<CpuStorage> alloc(DType dtype, size_t n);
  static std::shared_ptr<CpuStorage> zeros(DType dtype, size_t n);
  // A view of `data` (n elements) kept alive by `owner`; no copy.
  static std::shared_ptr<CpuStorage> wrap(DType dtype, size_t n, void* data, std::shared_ptr<void> owner);

  DType dtype() const override { return dtype_; }
  size_t elem_count() const override { return n_; }
  size_t nbytes() const { return n_ * dtype_size(dtype_); }
  BackendDevice& device() const override;
  std::shared_ptr<CpuStorage> to_cpu() const override;

  template <typename T>
  T* data() {
    return reinterpret_cast<T*>(data_);
  }
  template <typename T>
  const T* data() const {
    return reinterpret_cast<const T*>(data_);
  }
  std::byte* bytes() { return data_; }
  const std::byte* bytes() const { return data_; }

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
  StoragePtr reduce(ReduceOp op, const Layout& l, const std::vector<size_t>& dims) const override;
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
  StoragePtr cumsum(const Layout& l, size_t dim) const override;
  StoragePtr arg_sort_last_dim(const Layout& l, bool ascending) const override;
  StoragePtr to_dtype(const Layout& l, DType dtype) const override;
  StoragePtr matmul(const Layout& lhs_l, const BackendStorage& rhs, const Layout& rhs_l,
                    MatmulDims d) const override;
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
  void copy_strided_src(BackendStorage& dst, size_t dst_offset, const Layout& src_l) const override;
  void copy2d(BackendStorage& dst, size_t d1, size_t d2, size_t src_s, size_t dst_s, size_t src_o,
              size_t dst_o) const override;
  void const_set(const Scalar& v, const Layout& l) override;

  StoragePtr reduce_mean(const Layout& l, const std::vector<size_t>& dims) const override;
  StoragePtr reduce_var(const Layout& l, size_t dim) const override;
  StoragePtr reduce_log_sum_exp(const Layout& l, const std::vector<size_t>& dims) const override;
  StoragePtr reduce_norm(const Layout& l) const override;
  StoragePtr flip(const Layout& l, const std::vector<size_t>& dims) const override;
  void copy_strided_rows(BackendStorage& dst, const Layout& l, size_t row_len, size_t dst_s,
                         size_t dst_o) const override;
  bool shares_memory_with(const BackendStorage& other) const override;
  bool adamw_step_set(const Layout& l, BackendStorage& m, const Layout& m_l, BackendStorage& v,
                      const Layout& v_l, const BackendStorage& g, const Layout& g_l,
                      const AdamWStep& c) override;

  // gradients of the convolution family (src/cpu/conv_grad*.cpp)
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

  // candle::nn's fused last-dim ops (src/cpu/nn_fused.cpp); strided operands are copied dense
  StoragePtr softmax_last_dim(const Layout& l) const override;
  StoragePtr rms_norm(const Layout& l, const BackendStorage& alpha, const Layout& alpha_l,
                      float eps) const override;
  StoragePtr add_rms_norm(const Layout& l, const BackendStorage& h, const Layout& h_l,
                          const BackendStorage& alpha, const Layout& alpha_l, float eps) const override;
  StoragePtr layer_norm(const Layout& l, const BackendStorage& alpha, const Layout& alpha_l,
                        const BackendStorage& beta, const Layout& beta_l, float eps) const override;
  // silu(gate) * up in one pass (src/cpu/unary.cpp: the unary op's silu, so the composed ops' bits)
  StoragePtr silu_mul(const Layout& l, const BackendStorage& up, const Layout& up_l) const override;
  StoragePtr rope(RopeKind kind, const Layout& l, const BackendStorage& cos, const Layout& cos_l,
                  const BackendStorage& sin, const Layout& sin_l) const override;
  // src/cpu/attention.cpp
  StoragePtr scaled_dot_product_attention(const Layout& q_l, const BackendStorage& k, const Layout& k_l,
                                          const BackendStorage& v, const Layout& v_l,
                                          const AttentionParams& p) const override;

  CpuStorage(DType dtype, size_t n, std::byte* data, std::shared_ptr<void> owner)
      : dtype_(dtype), n_(n), data_(data), owner_(std::move(owner)) {}

 private:
  DType dtype_;
  size_t n_;
  std::byte* data_;
  std::shared_ptr<void> owner_;
};

// The CPU's BackendDevice (one per process).
BackendDevice& cpu_backend_device();

}  // namespace candle
