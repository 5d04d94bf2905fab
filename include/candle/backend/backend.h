// The backend SDK: the interface (candle's BackendDevice / BackendStorage): one method per op family.
//
// ABI: GPU backends are separate shared libraries checked at load time against
// CANDLE_BACKEND_ABI_VERSION (candle/backend/plugin.h). Bump that number whenever the virtual
// interface here or in cpu_storage.h changes (a method added, removed, reordered or given
// other parameters; a parameter struct changed), so that a plugin built against the old one is
// refused with a clear error instead of calling through a stale vtable.
//
// Conventions for every op method:
//  - inputs are given as (storage, layout); layouts may be strided, offset or broadcast
//    (stride 0); the op layer has already checked shapes, dtypes and devices;
//  - the result is a new storage holding the output contiguously (row-major);
//  - methods ending in _set write into `this` storage in place.
// A backend may leave an op out: the default implementation copies the operands to the
// CPU, runs the CPU kernel and uploads the result, counting the round-trip in
// backend_stats() so that missing native kernels show.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "candle/device.h"
#include "candle/dtype.h"
#include "candle/layout.h"
#include "candle/op_kinds.h"
#include "candle/scalar.h"

namespace candle {

class BackendStorage;

struct MatmulDims {
  size_t batch, m, n, k;
};

// Scaled dot-product attention (candle::nn::ops::scaled_dot_product_attention): keys are at
// positions 0..tk-1 and query i at tk - tq + i (the queries are the last tq positions).
struct AttentionParams {
  float scale = 1.0f;
  // a query sees only the keys at or before its position
  bool causal = false;
  // 0: none; else a query at p sees only the keys at positions > p - sliding_window
  size_t sliding_window = 0;
  // 0: none; else scores = softcap * tanh(scores / softcap) (after the scale)
  float softcap = 0.0f;
  // Set: a U32 scalar on the operands' device (element kv_len_offset of that storage) giving how
  // many key positions k and v hold; their length is then a capacity, the keys are 0..kv_len-1 and
  // query i is at kv_len - tq + i (tq <= kv_len <= the capacity). The count is read by the device,
  // so the work does not depend on it (a CUDA graph replays it for every position). A backend
  // without support returns nullptr (the composed op reads the count).
  const BackendStorage* kv_len = nullptr;
  size_t kv_len_offset = 0;
};

// A 1-D convolution: input [b, c_in, l_in]; kernel [c_out, c_in / groups, k] (conv1d) or
// [c_in, c_out / groups, k] (conv_transpose1d). Channel counts are the full ones.
struct ParamsConv1D {
  size_t b_size, l_in, c_out, c_in, k_size;
  size_t padding, output_padding, stride, dilation, groups;
  size_t l_out() const { return (l_in + 2 * padding - dilation * (k_size - 1) - 1) / stride + 1; }
  size_t l_out_transpose() const {
    return (l_in - 1) * stride - 2 * padding + dilation * (k_size - 1) + output_padding + 1;
  }
};

// A 2-D convolution: input [b, c_in, i_h, i_w]; kernel [c_out, c_in / groups, k_h, k_w]
// (conv2d) or [c_in, c_out / groups, k_h, k_w] (conv_transpose2d).
struct ParamsConv2D {
  size_t b_size, i_h, i_w, k_h, k_w, c_out, c_in;
  size_t padding, output_padding, stride, dilation, groups;
  size_t out_h() const { return (i_h + 2 * padding - dilation * (k_h - 1) - 1) / stride + 1; }
  size_t out_w() const { return (i_w + 2 * padding - dilation * (k_w - 1) - 1) / stride + 1; }
  size_t out_h_transpose() const {
    return (i_h - 1) * stride - 2 * padding + dilation * (k_h - 1) + output_padding + 1;
  }
  size_t out_w_transpose() const {
    return (i_w - 1) * stride - 2 * padding + dilation * (k_w - 1) + output_padding + 1;
  }
};

class BackendStorage;

// Work fused into a convolution's output pass: out = activation(conv + bias[c_out]).
struct ConvEpilogue {
  const BackendStorage* bias = nullptr;  // [c_out], same dtype as the output
  Layout bias_layout;
  std::optional<UnaryOp> activation;
};

// The per-step constants of candle's AdamW: m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2,
// theta = theta decay - lr (m scale_m) / (sqrt(v scale_v) + eps), in the element type.
struct AdamWStep {
  double lr, beta1, beta2, eps;
  double decay;             // 1 - lr * weight_decay
  double scale_m, scale_v;  // 1 / (1 - beta^t)
};

class BackendStorage;
class CpuStorage;
using StoragePtr = std::shared_ptr<BackendStorage>;

// Held by a backend while it records a graph (capture_graph, cuda::Graph::capture), around every
// run of the work it makes: candle::Graph::recording() is then true on the calling thread.
class GraphRecordingScope {
 public:
  GraphRecordingScope();
  ~GraphRecordingScope();
  GraphRecordingScope(const GraphRecordingScope&) = delete;
  GraphRecordingScope& operator=(const GraphRecordingScope&) = delete;
};

// A device's work recorded once and replayed with one submission (candle::Graph).
class BackendGraph {
 public:
  virtual ~BackendGraph() = default;
  // Queues the recorded work on the device (asynchronous, like any op).
  virtual void replay() const = 0;
  // Kernels and library calls recorded.
  virtual size_t nodes() const = 0;
};

class BackendDevice {
 public:
  virtual ~BackendDevice() = default;
  virtual DeviceKind kind() const = 0;
  virtual size_t ordinal() const = 0;
  // Human-readable adapter name.
  virtual std::string name() const = 0;
  // Uninitialised storage of n elements.
  virtual StoragePtr alloc(DType dtype, size_t n) = 0;
  // Copies a CPU storage to this device.
  virtual StoragePtr from_cpu(const CpuStorage& src) = 0;
  // A CPU storage made for this device (the CPU takes it as it is; others copy it over).
  virtual StoragePtr adopt_host(std::shared_ptr<CpuStorage> src);
  // n elements of dtype copied from host memory. Default: one from_cpu of a view of `data`.
  virtual StoragePtr from_host(const void* data, DType dtype, size_t n);
  // n zeros. Default: alloc + const_set.
  virtual StoragePtr zeros(DType dtype, size_t n);
  virtual void set_seed(uint64_t seed) = 0;
  virtual StoragePtr rand_uniform(DType dtype, size_t n, double lo, double up) = 0;
  virtual StoragePtr rand_normal(DType dtype, size_t n, double mean, double stddev) = 0;
  virtual void synchronize() {}
  // Free / total tensor memory (Device::memory()). Default: unknown (zeros).
  virtual DeviceMemory memory() const { return {}; }
  // Records `work` (candle::Graph::capture gives the contract); nullptr: this device records no
  // graphs, and candle::Graph then runs the work at each replay instead. Default: nullptr.
  virtual std::unique_ptr<BackendGraph> capture_graph(const std::function<void()>& work);
  // Whether capture_graph records (a caller may choose a graph-friendly path only then).
  virtual bool records_graphs() const { return false; }
};

class BackendStorage {
 public:
  virtual ~BackendStorage() = default;
  virtual DType dtype() const = 0;
  // Number of elements the storage holds.
  virtual size_t elem_count() const = 0;
  virtual BackendDevice& device() const = 0;
  // A CPU copy of the whole storage (CpuStorage returns a handle to itself).
  virtual std::shared_ptr<CpuStorage> to_cpu() const = 0;
  // The elements of layout l, row-major, into host memory dst (l.elem_count() elements of this
  // dtype). Default: to_cpu() then a strided copy; a GPU backend downloads straight into dst.
  virtual void copy_to_host(const Layout& l, void* dst) const;

  virtual StoragePtr unary(UnaryOp op, const Layout& l) const;
  virtual StoragePtr affine(const Layout& l, double mul, double add) const;
  virtual StoragePtr powf(const Layout& l, double e) const;
  virtual StoragePtr elu(const Layout& l, double alpha) const;
  // lhs_l and rhs_l have the same shape (broadcasting is expressed by stride-0 layouts).
  virtual StoragePtr binary(BinaryOp op, const Layout& lhs_l, const BackendStorage& rhs,
                            const Layout& rhs_l) const;
  // Result dtype u8 (1 where true).
  virtual StoragePtr cmp(CmpOp op, const Layout& lhs_l, const BackendStorage& rhs, const Layout& rhs_l) const;
  // `this` is the condition (any integer dtype, non-zero is true); all layouts share one shape.
  virtual StoragePtr where_cond(const Layout& cond_l, const BackendStorage& on_true, const Layout& t_l,
                                const BackendStorage& on_false, const Layout& f_l) const;
  // Reduces over `dims` (sorted, unique); the output has the input shape with those dims
  // set to 1. ArgMin/ArgMax need exactly one dim and give u32.
  virtual StoragePtr reduce(ReduceOp op, const Layout& l, const std::vector<size_t>& dims) const;
  // Convolutions (see ParamsConv1D/2D for the layouts); `this` is the input.
  virtual StoragePtr conv1d(const Layout& l, const BackendStorage& kernel, const Layout& kernel_l,
                            const ParamsConv1D& p) const;
  virtual StoragePtr conv_transpose1d(const Layout& l, const BackendStorage& kernel, const Layout& kernel_l,
                                      const ParamsConv1D& p) const;
  virtual StoragePtr conv2d(const Layout& l, const BackendStorage& kernel, const Layout& kernel_l,
                            const ParamsConv2D& p, const ConvEpilogue& epilogue) const;
  virtual StoragePtr conv_transpose2d(const Layout& l, const BackendStorage& kernel, const Layout& kernel_l,
                                      const ParamsConv2D& p) const;
  // Pooling over [b, c, h, w] with kernel (k_h, k_w) and stride (s_h, s_w), no padding.
  virtual StoragePtr avg_pool2d(const Layout& l, std::array<size_t, 2> kernel,
                                std::array<size_t, 2> stride) const;
  virtual StoragePtr max_pool2d(const Layout& l, std::array<size_t, 2> kernel,
                                std::array<size_t, 2> stride) const;
  // Nearest-neighbour resizing of [b, c, l] / [b, c, h, w] to the target size.
  virtual StoragePtr upsample_nearest1d(const Layout& l, size_t out_l) const;
  virtual StoragePtr upsample_nearest2d(const Layout& l, size_t out_h, size_t out_w) const;
  // Bilinear resizing of [b, c, h, w]; scale_h/scale_w, when given, set the source-coordinate
  // scale as PyTorch's scale_factor form does (instead of in/out).
  virtual StoragePtr upsample_bilinear2d(const Layout& l, size_t out_h, size_t out_w, bool align_corners,
                                         std::optional<double> scale_h, std::optional<double> scale_w) const;
  // Inclusive prefix sum along `dim`.
  virtual StoragePtr cumsum(const Layout& l, size_t dim) const;
  // Indices (u32) that sort each row of the last dim (stable).
  virtual StoragePtr arg_sort_last_dim(const Layout& l, bool ascending) const;
  virtual StoragePtr to_dtype(const Layout& l, DType dtype) const;
  // lhs [batch, m, k] x rhs [batch, k, n] -> [batch, m, n]; the layouts give the operands'
  // strides (the op layer folds batch dims so that each is one strided batch dim).
  virtual StoragePtr matmul(const Layout& lhs_l, const BackendStorage& rhs, const Layout& rhs_l,
                            MatmulDims d) const;
  // ids: an integer dtype; out shape: l's shape with dim replaced by ids' length.
  virtual StoragePtr index_select(const Layout& l, const BackendStorage& ids, const Layout& ids_l,
                                  size_t dim) const;
  // out shape: ids' shape.
  virtual StoragePtr gather(const Layout& l, const BackendStorage& ids, const Layout& ids_l,
                            size_t dim) const;
  // out = copy of self with src rows added at ids along dim.
  virtual StoragePtr index_add(const Layout& l, const BackendStorage& ids, const Layout& ids_l,
                               const BackendStorage& src, const Layout& src_l, size_t dim) const;
  // In place on `this` (whose layout `l` is contiguous): self[.., ids[i], ..] = src[i] along dim.
  virtual void scatter_set(const Layout& l, const BackendStorage& ids, const Layout& ids_l,
                           const BackendStorage& src, const Layout& src_l, size_t dim);
  virtual void scatter_add_set(const Layout& l, const BackendStorage& ids, const Layout& ids_l,
                               const BackendStorage& src, const Layout& src_l, size_t dim);
  // Copies the elements of `src_l` (row-major) into dst starting at element dst_offset.
  virtual void copy_strided_src(BackendStorage& dst, size_t dst_offset, const Layout& src_l) const;
  // d1 rows of d2 elements from this (row stride src_s, first at src_o) into dst.
  virtual void copy2d(BackendStorage& dst, size_t d1, size_t d2, size_t src_s, size_t dst_s, size_t src_o,
                      size_t dst_o) const;
  // Sets every element of the layout to v, in place.
  virtual void const_set(const Scalar& v, const Layout& l);

  // ---- gradients of the convolution family (CPU: src/cpu/conv_grad*.cpp; checks and shapes:
  // src/ops/conv_grad.cpp). `this` is the first operand named; the op layer has checked
  // that the layouts match the parameters. Results are contiguous.
  // conv: `this` = forward input x, grad_out [b, c_out, ...] -> [c_out, c_in / groups, k...].
  virtual StoragePtr conv1d_grad_kernel(const Layout& x_l, const BackendStorage& grad_out, const Layout& g_l,
                                        const ParamsConv1D& p) const;
  virtual StoragePtr conv2d_grad_kernel(const Layout& x_l, const BackendStorage& grad_out, const Layout& g_l,
                                        const ParamsConv2D& p) const;
  // conv: `this` = grad_out, kernel [c_out, c_in / groups, k...] -> x's shape [b, c_in, ...].
  virtual StoragePtr conv1d_grad_input(const Layout& g_l, const BackendStorage& kernel, const Layout& k_l,
                                       const ParamsConv1D& p) const;
  virtual StoragePtr conv2d_grad_input(const Layout& g_l, const BackendStorage& kernel, const Layout& k_l,
                                       const ParamsConv2D& p) const;
  // conv_transpose: `this` = forward input x [b, c_in, ...], grad_out [b, c_out, ...] ->
  // [c_in, c_out / groups, k...].
  virtual StoragePtr conv_transpose1d_grad_kernel(const Layout& x_l, const BackendStorage& grad_out,
                                                  const Layout& g_l, const ParamsConv1D& p) const;
  virtual StoragePtr conv_transpose2d_grad_kernel(const Layout& x_l, const BackendStorage& grad_out,
                                                  const Layout& g_l, const ParamsConv2D& p) const;
  // conv_transpose: `this` = grad_out, kernel [c_in, c_out / groups, k...] -> [b, c_in, ...].
  virtual StoragePtr conv_transpose1d_grad_input(const Layout& g_l, const BackendStorage& kernel,
                                                 const Layout& k_l, const ParamsConv1D& p) const;
  virtual StoragePtr conv_transpose2d_grad_input(const Layout& g_l, const BackendStorage& kernel,
                                                 const Layout& k_l, const ParamsConv2D& p) const;
  // `this` = grad_out [b, c, ...] (rank >= 2) -> [c]: the sum over every dim but 1.
  virtual StoragePtr conv_bias_grad(const Layout& g_l) const;
  // `this` = forward input x [b, c, h, w]; grad_out [b, c, oh, ow] -> x's shape.
  virtual StoragePtr max_pool2d_grad(const Layout& x_l, const BackendStorage& grad_out, const Layout& g_l,
                                     std::array<size_t, 2> kernel, std::array<size_t, 2> stride) const;
  // `this` = grad_out [b, c, oh, ow] -> [b, c, in_h, in_w] (resp. [b, c, in_l]).
  virtual StoragePtr avg_pool2d_grad(const Layout& g_l, size_t in_h, size_t in_w,
                                     std::array<size_t, 2> kernel, std::array<size_t, 2> stride) const;
  virtual StoragePtr upsample_nearest1d_grad(const Layout& g_l, size_t in_l) const;
  virtual StoragePtr upsample_nearest2d_grad(const Layout& g_l, size_t in_h, size_t in_w) const;
  virtual StoragePtr upsample_bilinear2d_grad(const Layout& g_l, size_t in_h, size_t in_w, bool align_corners,
                                              std::optional<double> scale_h,
                                              std::optional<double> scale_w) const;

  // ---- fused last-dim ops of candle::nn (its custom ops softmax-last-dim, rms-norm,
  // layer-norm, rotary-emb call these from every device's forward; CPU kernels:
  // src/cpu/nn_fused.cpp, whose semantics these follow). Default: nullptr, meaning "no kernel
  // here": the op composes tensor ops instead (not a round-trip). The nn layer has checked
  // shapes and devices, and gives the operands in the dtype of `this`; f16/bf16 compute in
  // f32. Results are contiguous with l's shape.
  // xs [..., d]: softmax over the last dim (the row max subtracted first).
  virtual StoragePtr softmax_last_dim(const Layout& l) const;
  // gate [..., d] (this) and up of its shape: silu(gate) * up, silu rounded to the dtype first as
  // the composed ops round it (the SwiGLU MLP of decoding: one kernel instead of two).
  virtual StoragePtr silu_mul(const Layout& l, const BackendStorage& up, const Layout& up_l) const;
  // xs [..., d], alpha [d]: x / sqrt(mean(x^2) + eps) * alpha.
  virtual StoragePtr rms_norm(const Layout& l, const BackendStorage& alpha, const Layout& alpha_l,
                              float eps) const;
  // xs [..., d] (this) and h of its shape, alpha [d]: s = xs + h (rounded to the dtype, as the add
  // rounds it) and rms_norm(s), as one storage [2, ...]: s, then the normed rows (a transformer's
  // residual add and the next norm in one kernel).
  virtual StoragePtr add_rms_norm(const Layout& l, const BackendStorage& h, const Layout& h_l,
                                  const BackendStorage& alpha, const Layout& alpha_l, float eps) const;
  // xs [..., d], alpha/beta [d]: (x - mean) / sqrt(var + eps) * alpha + beta (biased variance).
  virtual StoragePtr layer_norm(const Layout& l, const BackendStorage& alpha, const Layout& alpha_l,
                                const BackendStorage& beta, const Layout& beta_l, float eps) const;
  // xs [b, h, t, d] ([b, t, h, d] for HalvesThd); cos/sin [t_max, d/2] or [b, t_max, d/2]
  // (t <= t_max; rows [0, t) are used).
  virtual StoragePtr rope(RopeKind kind, const Layout& l, const BackendStorage& cos, const Layout& cos_l,
                          const BackendStorage& sin, const Layout& sin_l) const;
  // `this` = q [b, h, tq, d]; k [b, hkv, tk, d], v [b, hkv, tk, dv] with h a multiple of hkv
  // (query head i reads kv head i / (h / hkv)); result [b, h, tq, dv]. CPU kernel:
  // src/cpu/attention.cpp (online softmax over key blocks, f32 accumulation).
  virtual StoragePtr scaled_dot_product_attention(const Layout& q_l, const BackendStorage& k,
                                                  const Layout& k_l, const BackendStorage& v,
                                                  const Layout& v_l, const AttentionParams& p) const;

  // ---- ops with a composed default: the default runs this device's own kernels (tensor ops
  // on untracked views of the operands: sum, max, affine, exp, index_select, ...), so a backend
  // that has those needs no kernel of its own and takes no CPU round-trip; the CPU overrides
  // them with single-pass kernels (src/cpu/reduce.cpp, shape_copy.cpp). Results are contiguous.
  // Mean over `dims` (sorted, unique); output: l's shape with those dims set to 1. Integers:
  // the exact mean truncated toward zero.
  virtual StoragePtr reduce_mean(const Layout& l, const std::vector<size_t>& dims) const;
  // Unbiased variance (divides by n - 1) along `dim`; float dtypes.
  virtual StoragePtr reduce_var(const Layout& l, size_t dim) const;
  // log(sum(exp(x))) over `dims`, shifted by the max (an infinite max is not subtracted).
  virtual StoragePtr reduce_log_sum_exp(const Layout& l, const std::vector<size_t>& dims) const;
  // sqrt of the sum of squares of every element (one element); float dtypes.
  virtual StoragePtr reduce_norm(const Layout& l) const;
  // The elements of l with the order of `dims` (sorted, unique) reversed.
  virtual StoragePtr flip(const Layout& l, const std::vector<size_t>& dims) const;
  // Writes the elements of `l` (row-major) into dst as rows of `row_len` elements: element i
  // goes to dst[dst_o + (i / row_len) * dst_s + i % row_len]. Default: a dense copy on this
  // device, then copy2d.
  virtual void copy_strided_rows(BackendStorage& dst, const Layout& l, size_t row_len, size_t dst_s,
                                 size_t dst_o) const;
  // Whether this storage and `other` may hold the same memory (in-place ops refuse that).
  virtual bool shares_memory_with(const BackendStorage& other) const { return this == &other; }

  // ---- GGML quantized blocks (candle::quantized, src/quantized). `this` is a U8 storage holding
  // the blocks of a weight of ggml type `ggml_type` (quantized::GgmlDType's value) as GGUF lays
  // them out, from blocks_l's start offset. Default: nullptr, meaning "no kernel here" (the
  // caller dequantizes on the host and multiplies, counted as "qmatmul_dequantize").
  // x (m, k) contiguous, f32 / f16 / bf16, times the weight (n rows of k) as x @ w^T -> (m, n)
  // f32, m = x_l.elem_count() / k.
  virtual StoragePtr qmatmul(const Layout& blocks_l, const BackendStorage& x, const Layout& x_l,
                             uint32_t ggml_type, size_t n, size_t k) const;
  // The first `elems` values of the blocks as `out` (F32 or F16), the CPU dequantizer's values.
  // candle::quantized asks for 0 values (of a small scratch storage) before it uploads blocks:
  // nullptr then means that this backend has no kernels for the type at all, and nothing is
  // uploaded.
  virtual StoragePtr qdequantize(const Layout& blocks_l, uint32_t ggml_type, size_t elems, DType out) const;

  // ---- optimizer steps, in place. Return false when this backend has no kernel for the case
  // (the caller composes tensor ops). `this` is theta; m, v and g have its shape.
  virtual bool adamw_step_set(const Layout& l, BackendStorage& m, const Layout& m_l, BackendStorage& v,
                              const Layout& v_l, const BackendStorage& g, const Layout& g_l,
                              const AdamWStep& c);

 protected:
  // Runs `fn` on CPU copies and uploads the result; counts the round-trip under `op`.
  StoragePtr upload(const std::shared_ptr<CpuStorage>& cpu, const char* op) const;
};

// Counts one CPU round-trip of `op` in backend_stats() (device.h).
void count_cpu_fallback(const char* op);

}  // namespace candle
