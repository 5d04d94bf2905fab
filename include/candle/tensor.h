// Tensor: candle's eager tensor, a cheap handle to an immutable node (storage + layout).
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "candle/device.h"
#include "candle/dtype.h"
#include "candle/error.h"
#include "candle/layout.h"
#include "candle/op_kinds.h"
#include "candle/scalar.h"
#include "candle/shape.h"

namespace candle {

struct TensorImpl;
class BackendStorage;
using StoragePtr = std::shared_ptr<BackendStorage>;
class Tensor;
class GradStore;
// candle/custom_op.h
class CustomOp1;
class CustomOp2;
class CustomOp3;
class InplaceOp1;
class InplaceOp2;
class InplaceOp3;

// A range along one dim for Tensor::i: Slice(1, 4), Slice::all(), Slice::from(2), Slice::to(3).
// Negative bounds count from the end; an empty range (start == end) is allowed.
struct Slice {
  std::optional<int64_t> start, end;
  Slice(std::optional<int64_t> s, std::optional<int64_t> e) : start(s), end(e) {}
  static Slice all() { return Slice(std::nullopt, std::nullopt); }
  static Slice from(int64_t s) { return Slice(s, std::nullopt); }
  static Slice to(int64_t e) { return Slice(std::nullopt, e); }
};

// One item of a Tensor::i index: an integer (removes the dim), a Slice, or a list/tensor
// of indices (index_select along the dim).
class IndexItem {
 public:
  IndexItem(int v) : v_(static_cast<int64_t>(v)) {}            // NOLINT
  IndexItem(int64_t v) : v_(v) {}                              // NOLINT
  IndexItem(size_t v) : v_(static_cast<int64_t>(v)) {}         // NOLINT
  IndexItem(Slice s) : v_(s) {}                                // NOLINT
  IndexItem(std::vector<int64_t> ids) : v_(std::move(ids)) {}  // NOLINT
  IndexItem(const Tensor& ids);                                // NOLINT
  const auto& value() const { return v_; }

 private:
  std::variant<int64_t, Slice, std::vector<int64_t>, std::shared_ptr<const Tensor>> v_;
};

using TensorId = uint64_t;

class Tensor {
 public:
  // ---- creation -------------------------------------------------------------------------
  static Tensor zeros(const Shape& shape, DType dtype, const Device& device);
  static Tensor ones(const Shape& shape, DType dtype, const Device& device);
  // dtype: the value's own (1.0 -> f64, 1.0f -> f32, 1 -> i64) unless given.
  static Tensor full(const Scalar& value, const Shape& shape, const Device& device);
  static Tensor full(const Scalar& value, const Shape& shape, DType dtype, const Device& device);
  Tensor zeros_like() const;
  Tensor ones_like() const;
  Tensor full_like(const Scalar& value) const;
  Tensor rand_like(double lo, double up) const;
  Tensor randn_like(double mean, double stddev) const;

  // Copies `data` (whose length must equal shape's element count) into a new tensor.
  template <typename T>
  static Tensor from_vec(const std::vector<T>& data, const Shape& shape, const Device& device) {
    return from_slice(std::span<const T>(data), shape, device);
  }
  template <typename T>
  static Tensor from_slice(std::span<const T> data, const Shape& shape, const Device& device) {
    return from_raw(data.data(), data.size(), dtype_of<T>, shape, device);
  }
  // `bytes` holds elem_count(shape) little-endian elements of dtype.
  static Tensor from_raw_buffer(std::span<const std::byte> bytes, DType dtype, const Shape& shape,
                                const Device& device);
  // Typed copy of `count` elements at `data`; the count must equal shape's element count.
  static Tensor from_raw(const void* data, size_t count, DType dtype, const Shape& shape,
                         const Device& device);

  // candle's Tensor::new from a scalar or nested lists:
  //   Tensor::new_({{1.f, 2.f}, {3.f, 4.f}}, dev)  -> Tensor[[2, 2], f32]
  template <typename T>
  static Tensor new_(T value, const Device& device) {
    return from_raw(&value, 1, dtype_of<T>, Shape{}, device);
  }
  template <typename T>
  static Tensor new_(std::initializer_list<T> v, const Device& device) {
    return from_raw(std::data(v), v.size(), dtype_of<T>, Shape{v.size()}, device);
  }
  template <typename T>
  static Tensor new_(std::initializer_list<std::initializer_list<T>> v, const Device& device) {
    std::vector<T> flat;
    std::vector<size_t> dims{v.size(), v.size() ? v.begin()->size() : 0};
    for (auto& row : v) {
      check_nested_len(row.size(), dims[1]);
      flat.insert(flat.end(), row.begin(), row.end());
    }
    return from_raw(flat.data(), flat.size(), dtype_of<T>, Shape(dims), device);
  }
  template <typename T>
  static Tensor new_(std::initializer_list<std::initializer_list<std::initializer_list<T>>> v,
                     const Device& device) {
    std::vector<T> flat;
    size_t d1 = v.size() ? v.begin()->size() : 0;
    size_t d2 = d1 ? v.begin()->begin()->size() : 0;
    for (auto& a : v) {
      check_nested_len(a.size(), d1);
      for (auto& b : a) {
        check_nested_len(b.size(), d2);
        flat.insert(flat.end(), b.begin(), b.end());
      }
    }
    return from_raw(flat.data(), flat.size(), dtype_of<T>, Shape{v.size(), d1, d2}, device);
  }

  // [start, end) with step 1 / `step` (which may be negative, not zero); dtype from T.
  template <typename T>
  static Tensor arange(T start, T end, const Device& device) {
    return arange_step<T>(start, end, T(1), device);
  }
  template <typename T>
  static Tensor arange_step(T start, T end, T step, const Device& device) {
    return arange_impl(Scalar(start), Scalar(end), Scalar(step), dtype_of<T>, device);
  }
  // Uniform in [lo, up) / normal(mean, stddev); dtype from T (f32 or f64, or given);
  // reproducible with device.set_seed().
  template <typename T>
  static Tensor rand(T lo, T up, const Shape& shape, const Device& device) {
    return rand(static_cast<double>(lo), static_cast<double>(up), shape, dtype_of<T>, device);
  }
  template <typename T>
  static Tensor randn(T mean, T stddev, const Shape& shape, const Device& device) {
    return randn(static_cast<double>(mean), static_cast<double>(stddev), shape, dtype_of<T>, device);
  }
  static Tensor rand(double lo, double up, const Shape& shape, DType dtype, const Device& device);
  static Tensor randn(double mean, double stddev, const Shape& shape, DType dtype, const Device& device);
  static Tensor eye(size_t n, DType dtype, const Device& device);
  // Lower / upper triangular n x n matrices of ones (diagonal included).
  static Tensor tril2(size_t n, DType dtype, const Device& device);
  static Tensor triu2(size_t n, DType dtype, const Device& device);
  // Grids from 1-D tensors; xy_indexing swaps the first two output dims (numpy's "xy").
  static std::vector<Tensor> meshgrid(const std::vector<Tensor>& args, bool xy_indexing);

  // ---- accessors -------------------------------------------------------------------------
  const Shape& shape() const;
  const std::vector<size_t>& dims() const { return shape().dims(); }
  size_t dim(int64_t d) const;
  size_t rank() const { return dims().size(); }
  size_t elem_count() const { return shape().elem_count(); }
  DType dtype() const;
  const Device& device() const;
  const Layout& layout() const;
  const std::vector<size_t>& stride() const { return layout().stride(); }
  bool is_contiguous() const { return layout().is_contiguous(); }
  bool is_fortran_contiguous() const { return layout().is_fortran_contiguous(); }
  TensorId id() const;
  bool is_variable() const;
  // Whether operations on this tensor are recorded for backprop (a Var, or made from one).
  bool track_op() const;

  // Copies out the elements (row-major); T must be this tensor's dtype and the rank must match.
  template <typename T>
  T to_scalar() const {
    T v{};
    copy_out(&v, dtype_of<T>, 0, "to_scalar");
    return v;
  }
  // candle's to_vec0: the value of a rank-0 tensor (the same as to_scalar).
  template <typename T>
  T to_vec0() const {
    T v{};
    copy_out(&v, dtype_of<T>, 0, "to_vec0");
    return v;
  }
  template <typename T>
  std::vector<T> to_vec1() const {
    std::vector<T> v(elem_count());
    copy_out(v.data(), dtype_of<T>, 1, "to_vec1");
    return v;
  }
  template <typename T>
  std::vector<std::vector<T>> to_vec2() const {
    std::vector<T> flat(elem_count());
    copy_out(flat.data(), dtype_of<T>, 2, "to_vec2");
    std::vector<std::vector<T>> out(dims()[0]);
    size_t n = dims()[1];
    for (size_t i = 0; i < out.size(); ++i) out[i].assign(flat.begin() + i * n, flat.begin() + (i + 1) * n);
    return out;
  }
  template <typename T>
  std::vector<std::vector<std::vector<T>>> to_vec3() const {
    std::vector<T> flat(elem_count());
    copy_out(flat.data(), dtype_of<T>, 3, "to_vec3");
    std::vector<std::vector<std::vector<T>>> out(dims()[0]);
    size_t d1 = dims()[1], d2 = dims()[2];
    for (size_t i = 0; i < out.size(); ++i) {
      out[i].resize(d1);
      for (size_t j = 0; j < d1; ++j) {
        auto b = flat.begin() + static_cast<std::ptrdiff_t>((i * d1 + j) * d2);
        out[i][j].assign(b, b + static_cast<std::ptrdiff_t>(d2));
      }
    }
    return out;
  }
  // All elements, any rank, row-major.
  template <typename T>
  std::vector<T> flatten_to_vec() const {
    std::vector<T> v(elem_count());
    copy_out(v.data(), dtype_of<T>, -1, "flatten_to_vec");
    return v;
  }

  // ---- shape and views -----------------------------------------------------------------
  // A view when the tensor is contiguous, else a contiguous copy; element counts must match.
  Tensor reshape(const Shape& shape) const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim, int64_t end_dim) const;
  Tensor flatten_all() const;
  Tensor flatten_to(int64_t end_dim) const;
  Tensor flatten_from(int64_t start_dim) const;
  // Transposes the last two dims.
  Tensor t() const;
  Tensor transpose(int64_t dim1, int64_t dim2) const;
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor narrow(int64_t dim, size_t start, size_t len) const;
  std::vector<Tensor> chunk(size_t chunks, int64_t dim) const;
  // The i-th slice along dim 0 (the dim removed) / along `dim`.
  Tensor get(size_t i) const;
  Tensor get_on_dim(int64_t dim, size_t i) const;
  Tensor broadcast_as(const Shape& shape) const;
  Tensor expand(const Shape& shape) const { return broadcast_as(shape); }
  // Adds `left` dims in front: shape left ++ dims().
  Tensor broadcast_left(const Shape& left) const;
  // Tiles the tensor: each dim d is repeated shape[d] times.
  Tensor repeat(const Shape& shape) const;
  static Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);
  static Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);
  Tensor pad_with_zeros(int64_t dim, size_t left, size_t right) const;
  Tensor pad_with_same(int64_t dim, size_t left, size_t right) const;
  // Rotates by `shift` (may be negative) along dim.
  Tensor roll(int64_t shift, int64_t dim) const;
  Tensor flip(const std::vector<int64_t>& dims) const;
  // Sliding windows of `size` with `step` along dim, as a new last dim (PyTorch's unfold).
  Tensor unfold(int64_t dim, size_t size, size_t step) const;
  // The same tensor when contiguous, else a contiguous copy.
  Tensor contiguous() const;
  // A new tensor with its own storage.
  Tensor copy() const;
  // candle's force_contiguous: a contiguous copy, also when this tensor is contiguous already.
  Tensor force_contiguous() const { return copy(); }
  // Indexing, one item per leading dim: t.i({1, Slice(0, 2), std::vector<int64_t>{0, 2}}).
  Tensor i(std::initializer_list<IndexItem> items) const;
  Tensor i(const IndexItem& item) const { return i({item}); }

  // ---- unary ---------------------------------------------------------------------------
  Tensor recip() const;
  Tensor neg() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor tanh() const;
  Tensor abs() const;
  Tensor sqr() const;
  Tensor sqrt() const;
  Tensor gelu() const;  // tanh approximation
  Tensor gelu_erf() const;
  Tensor erf() const;
  Tensor relu() const;
  Tensor silu() const;
  Tensor sigmoid() const;
  Tensor ceil() const;
  Tensor floor() const;
  Tensor round() const;
  Tensor sign() const;
  // self * mul + add
  Tensor affine(double mul, double add) const;
  Tensor elu(double alpha) const;
  Tensor powf(double e) const;
  Tensor clamp(const Scalar& min, const Scalar& max) const;
  Tensor clamp(const Tensor& min, const Tensor& max) const;
  // Rounds to `decimals` decimal places.
  Tensor round_to(int32_t decimals) const;

  // ---- binary (same shape) and broadcast_ forms ------------------------------------------
  Tensor add(const Tensor& rhs) const;
  Tensor sub(const Tensor& rhs) const;
  Tensor mul(const Tensor& rhs) const;
  Tensor div(const Tensor& rhs) const;
  Tensor maximum(const Tensor& rhs) const;
  Tensor minimum(const Tensor& rhs) const;
  Tensor pow(const Tensor& rhs) const;
  Tensor broadcast_add(const Tensor& rhs) const;
  Tensor broadcast_sub(const Tensor& rhs) const;
  Tensor broadcast_mul(const Tensor& rhs) const;
  Tensor broadcast_div(const Tensor& rhs) const;
  Tensor broadcast_maximum(const Tensor& rhs) const;
  Tensor broadcast_minimum(const Tensor& rhs) const;
  Tensor broadcast_pow(const Tensor& rhs) const;
  // Scalar forms (the scalar is converted to this tensor's dtype).
  Tensor maximum(const Scalar& rhs) const;
  Tensor minimum(const Scalar& rhs) const;

  // ---- comparisons -> u8 ---------------------------------------------------------------
  Tensor eq(const Tensor& rhs) const;
  Tensor ne(const Tensor& rhs) const;
  Tensor lt(const Tensor& rhs) const;
  Tensor le(const Tensor& rhs) const;
  Tensor gt(const Tensor& rhs) const;
  Tensor ge(const Tensor& rhs) const;
  Tensor eq(const Scalar& rhs) const;
  Tensor ne(const Scalar& rhs) const;
  Tensor lt(const Scalar& rhs) const;
  Tensor le(const Scalar& rhs) const;
  Tensor gt(const Scalar& rhs) const;
  Tensor ge(const Scalar& rhs) const;
  Tensor broadcast_eq(const Tensor& rhs) const;
  Tensor broadcast_ne(const Tensor& rhs) const;
  Tensor broadcast_lt(const Tensor& rhs) const;
  Tensor broadcast_le(const Tensor& rhs) const;
  Tensor broadcast_gt(const Tensor& rhs) const;
  Tensor broadcast_ge(const Tensor& rhs) const;
  Tensor cmp(CmpOp op, const Tensor& rhs) const;
  // self is the condition (integer dtype); on_true/on_false broadcast to its shape.
  Tensor where_cond(const Tensor& on_true, const Tensor& on_false) const;

  // ---- reductions ----------------------------------------------------------------------
  Tensor sum_keepdim(int64_t dim) const;
  Tensor sum_keepdim(const std::vector<int64_t>& dims) const;
  Tensor sum(int64_t dim) const;
  Tensor sum(const std::vector<int64_t>& dims) const;
  Tensor mean_keepdim(int64_t dim) const;
  Tensor mean_keepdim(const std::vector<int64_t>& dims) const;
  Tensor mean(int64_t dim) const;
  Tensor mean(const std::vector<int64_t>& dims) const;
  Tensor max_keepdim(int64_t dim) const;
  Tensor max(int64_t dim) const;
  Tensor min_keepdim(int64_t dim) const;
  Tensor min(int64_t dim) const;
  Tensor argmax_keepdim(int64_t dim) const;
  Tensor argmax(int64_t dim) const;
  Tensor argmin_keepdim(int64_t dim) const;
  Tensor argmin(int64_t dim) const;
  // Unbiased variance (divides by n - 1), as candle.
  Tensor var_keepdim(int64_t dim) const;
  Tensor var(int64_t dim) const;
  Tensor sum_all() const;
  Tensor mean_all() const;
  Tensor max_all() const;
  Tensor min_all() const;
  Tensor log_sum_exp(const std::vector<int64_t>& dims) const;
  Tensor log_sum_exp(int64_t dim) const { return log_sum_exp(std::vector<int64_t>{dim}); }
  Tensor cumsum(int64_t dim) const;
  // sqrt of the sum of squares of all elements (a scalar tensor).
  Tensor norm() const;
  // (sorted values, u32 indices) along the last dim.
  std::pair<Tensor, Tensor> sort_last_dim(bool ascending) const;
  Tensor arg_sort_last_dim(bool ascending) const;

  // ---- convolutions, pooling, resizing (candle's signatures) ------------------------------
  // [b, c_in, l] * [c_out, c_in / groups, k] -> [b, c_out, l_out]
  Tensor conv1d(const Tensor& kernel, size_t padding, size_t stride, size_t dilation, size_t groups) const;
  // [b, c_in, l] * [c_in, c_out / groups, k] -> [b, c_out, l_out]
  Tensor conv_transpose1d(const Tensor& kernel, size_t padding, size_t output_padding, size_t stride,
                          size_t dilation, size_t groups) const;
  // [b, c_in, h, w] * [c_out, c_in / groups, k_h, k_w] -> [b, c_out, h_out, w_out]
  Tensor conv2d(const Tensor& kernel, size_t padding, size_t stride, size_t dilation, size_t groups) const;
  // conv2d with a bias ([c_out]) add and an activation fused into the output pass (what
  // candle::nn's Conv2d uses); activation: any unary op (Relu, Silu, Gelu, ...).
  Tensor conv2d_fused(const Tensor& kernel, const std::optional<Tensor>& bias, size_t padding, size_t stride,
                      size_t dilation, size_t groups, std::optional<UnaryOp> activation) const;
  // [b, c_in, h, w] * [c_in, c_out, k_h, k_w] -> [b, c_out, h_out, w_out]
  Tensor conv_transpose2d(const Tensor& kernel, size_t padding, size_t output_padding, size_t stride,
                          size_t dilation) const;
  Tensor avg_pool2d(size_t k) const { return avg_pool2d_with_stride({k, k}, {k, k}); }
  Tensor avg_pool2d(std::array<size_t, 2> k) const { return avg_pool2d_with_stride(k, k); }
  Tensor avg_pool2d_with_stride(std::array<size_t, 2> kernel, std::array<size_t, 2> stride) const;
  Tensor max_pool2d(size_t k) const { return max_pool2d_with_stride({k, k}, {k, k}); }
  Tensor max_pool2d(std::array<size_t, 2> k) const { return max_pool2d_with_stride(k, k); }
  Tensor max_pool2d_with_stride(std::array<size_t, 2> kernel, std::array<size_t, 2> stride) const;
  Tensor upsample_nearest1d(size_t target_l) const;
  Tensor upsample_nearest2d(size_t target_h, size_t target_w) const;
  Tensor interpolate1d(size_t target_l) const { return upsample_nearest1d(target_l); }
  Tensor interpolate2d(size_t target_h, size_t target_w) const {
    return upsample_nearest2d(target_h, target_w);
  }
  Tensor upsample_bilinear2d(size_t target_h, size_t target_w, bool align_corners) const;
  // Output size floor(in * scale); source coordinates use the given scale (PyTorch's
  // scale_factor with recompute_scale_factor=False).
  Tensor upsample_bilinear2d_with_scale(double scale_h, double scale_w, bool align_corners) const;

  // ---- matmul --------------------------------------------------------------------------
  // [.., m, k] x [.., k, n]; batch dims must be equal.
  Tensor matmul(const Tensor& rhs) const;
  // As matmul, broadcasting the batch dims.
  Tensor broadcast_matmul(const Tensor& rhs) const;
  // 1-D x 1-D -> scalar.
  Tensor dot(const Tensor& rhs) const;
  // [m, k] x [k] -> [m].
  Tensor mv(const Tensor& rhs) const;

  // ---- indexing ------------------------------------------------------------------------
  Tensor index_select(const Tensor& ids, int64_t dim) const;
  Tensor gather(const Tensor& ids, int64_t dim) const;
  // New tensors: a copy of self with src scattered (or added) at ids along dim.
  Tensor scatter(const Tensor& ids, const Tensor& src, int64_t dim) const;
  Tensor scatter_add(const Tensor& ids, const Tensor& src, int64_t dim) const;
  Tensor index_add(const Tensor& ids, const Tensor& src, int64_t dim) const;
  // A copy of self with src written at [start, start + src.dim(dim)) along dim.
  Tensor slice_scatter(const Tensor& src, int64_t dim, size_t start) const;
  Tensor slice_scatter0(const Tensor& src, size_t start) const { return slice_scatter(src, 0, start); }
  // In place (self must be contiguous): writes src at offset along dim / scatters src.
  void slice_set(const Tensor& src, int64_t dim, size_t offset) const;
  void scatter_set(const Tensor& ids, const Tensor& src, int64_t dim) const;
  void scatter_add_set(const Tensor& ids, const Tensor& src, int64_t dim) const;
  // Rows of self ([vocab, hidden]) selected by ids (any shape) -> ids.shape ++ [hidden].
  Tensor embedding(const Tensor& ids) const;
  // In place: sets every element of this view.
  void const_set(const Scalar& v) const;
  void zero_set() const { const_set(Scalar(0)); }
  void one_set() const { const_set(Scalar(1)); }

  // ---- dtype, device, autograd -------------------------------------------------------------
  Tensor to_dtype(DType dtype) const;
  Tensor to_device(const Device& device) const;
  // Shares the storage but is not tracked by autograd.
  Tensor detach() const;
  // Backpropagation from this scalar (one element) tensor: the gradients of every tensor
  // on a path to a Var (include <candle/backprop.h>).
  GradStore backward() const;

  // ---- custom ops (candle/custom_op.h) ------------------------------------------------------
  // apply_opN runs the op's forward for this tensor's device and records a backward node that
  // calls op.bwd; the node shares ownership of the op (an op given by value is copied into a
  // shared_ptr), so the op outlives the graph. The _no_bwd forms record nothing and borrow the
  // op for the call only. All operands must be on one device.
  template <std::derived_from<CustomOp1> C>
  Tensor apply_op1(C c) const {
    return apply_op1_arc(std::make_shared<C>(std::move(c)));
  }
  template <std::derived_from<CustomOp1> C>
  Tensor apply_op1(std::shared_ptr<C> c) const {
    return apply_op1_arc(std::move(c));
  }
  Tensor apply_op1_arc(std::shared_ptr<const CustomOp1> c) const;
  Tensor apply_op1_no_bwd(const CustomOp1& c) const;
  template <std::derived_from<CustomOp2> C>
  Tensor apply_op2(const Tensor& rhs, C c) const {
    return apply_op2_arc(rhs, std::make_shared<C>(std::move(c)));
  }
  template <std::derived_from<CustomOp2> C>
  Tensor apply_op2(const Tensor& rhs, std::shared_ptr<C> c) const {
    return apply_op2_arc(rhs, std::move(c));
  }
  Tensor apply_op2_arc(const Tensor& rhs, std::shared_ptr<const CustomOp2> c) const;
  Tensor apply_op2_no_bwd(const Tensor& rhs, const CustomOp2& c) const;
  template <std::derived_from<CustomOp3> C>
  Tensor apply_op3(const Tensor& t2, const Tensor& t3, C c) const {
    return apply_op3_arc(t2, t3, std::make_shared<C>(std::move(c)));
  }
  template <std::derived_from<CustomOp3> C>
  Tensor apply_op3(const Tensor& t2, const Tensor& t3, std::shared_ptr<C> c) const {
    return apply_op3_arc(t2, t3, std::move(c));
  }
  Tensor apply_op3_arc(const Tensor& t2, const Tensor& t3, std::shared_ptr<const CustomOp3> c) const;
  Tensor apply_op3_no_bwd(const Tensor& t2, const Tensor& t3, const CustomOp3& c) const;
  // Writes into this tensor's storage (through its layout); not recorded for autograd.
  void inplace_op1(const InplaceOp1& c) const;
  void inplace_op2(const Tensor& rhs, const InplaceOp2& c) const;
  void inplace_op3(const Tensor& t2, const Tensor& t3, const InplaceOp3& c) const;

  // ---- files -------------------------------------------------------------------------------
  void save_safetensors(const std::string& name, const std::string& path) const;

  // ---- internals (for src/ops and backends) ---------------------------------------------
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}
  const std::shared_ptr<TensorImpl>& impl() const { return impl_; }
  bool defined() const { return impl_ != nullptr; }
  const StoragePtr& storage() const;
  // A tensor over `storage` with `layout`; a new id.
  static Tensor from_storage(StoragePtr storage, Layout layout, DType dtype, const Device& device,
                             bool track_op = false);
  static Tensor arange_impl(const Scalar& start, const Scalar& end, const Scalar& step, DType dtype,
                            const Device& device);

 private:
  static void check_nested_len(size_t got, size_t want);
  // Copies the elements row-major to dst, checking dtype and rank (-1: any rank).
  void copy_out(void* dst, DType want, int rank, const char* op) const;
  std::shared_ptr<TensorImpl> impl_;
};

// Operators follow candle: tensor op tensor needs equal shapes; tensor op double is affine.
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
Tensor operator-(const Tensor& a);

// candle's Display format (see display.h for the print options).
std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace candle
