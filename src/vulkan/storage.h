// VulkanDevice / VulkanStorage and the helpers kernels' host code uses (no vulkan.hpp here).
#pragma once

#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "candle/backend/cpu_storage.h"
#include "context.h"

namespace candle::vk_backend {

class VulkanStorage;
using VkStoragePtr = std::shared_ptr<VulkanStorage>;

class VulkanDevice final : public BackendDevice, public std::enable_shared_from_this<VulkanDevice> {
 public:
  VulkanDevice(std::shared_ptr<Context> ctx, size_t ordinal) : ctx_(std::move(ctx)), ordinal_(ordinal) {}
  DeviceKind kind() const override { return DeviceKind::Vulkan; }
  size_t ordinal() const override { return ordinal_; }
  std::string name() const override { return ctx_->name(); }
  StoragePtr alloc(DType dtype, size_t n) override;
  StoragePtr from_cpu(const CpuStorage& src) override;
  void set_seed(uint64_t seed) override;
  StoragePtr rand_uniform(DType dtype, size_t n, double lo, double up) override;
  StoragePtr rand_normal(DType dtype, size_t n, double mean, double stddev) override;
  void synchronize() override { ctx_->synchronize(); }
  DeviceMemory memory() const override { return ctx_->memory(); }

  Context& ctx() const { return *ctx_; }
  // A new storage of n elements (uninitialised).
  VkStoragePtr make(DType dtype, size_t n);

 private:
  std::shared_ptr<Context> ctx_;
  size_t ordinal_;
  std::mutex rng_mu_;
  std::mt19937_64 rng_{299792458};
};

class VulkanStorage final : public BackendStorage {
 public:
  VulkanStorage(std::shared_ptr<VulkanDevice> dev, DType dtype, size_t n, BlockPtr block)
      : dev_(std::move(dev)), dtype_(dtype), n_(n), block_(std::move(block)) {}
  DType dtype() const override { return dtype_; }
  size_t elem_count() const override { return n_; }
  BackendDevice& device() const override { return *dev_; }
  std::shared_ptr<CpuStorage> to_cpu() const override;
  void copy_to_host(const Layout& l, void* dst) const override;

  VulkanDevice& vdev() const { return *dev_; }
  Context& ctx() const { return dev_->ctx(); }
  const Block& block() const { return *block_; }

  // ops with kernels (ops_*.cpp)
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
  StoragePtr to_dtype(const Layout& l, DType dtype) const override;
  StoragePtr matmul(const Layout& lhs_l, const BackendStorage& rhs, const Layout& rhs_l,
                    MatmulDims d) const override;
  StoragePtr index_select(const Layout& l, const BackendStorage& ids, const Layout& ids_l,
                          size_t dim) const override;
  StoragePtr gather(const Layout& l, const BackendStorage& ids, const Layout& ids_l,
                    size_t dim) const override;
  void copy_strided_src(BackendStorage& dst, size_t dst_offset, const Layout& src_l) const override;
  void copy2d(BackendStorage& dst, size_t d1, size_t d2, size_t src_s, size_t dst_s, size_t src_o,
              size_t dst_o) const override;
  void const_set(const Scalar& v, const Layout& l) override;

  // ops that may take the CPU round-trip for some cases (counted and traced by note_round_trip)
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
  StoragePtr index_add(const Layout& l, const BackendStorage& ids, const Layout& ids_l,
                       const BackendStorage& src, const Layout& src_l, size_t dim) const override;
  void scatter_set(const Layout& l, const BackendStorage& ids, const Layout& ids_l, const BackendStorage& src,
                   const Layout& src_l, size_t dim) override;
  void scatter_add_set(const Layout& l, const BackendStorage& ids, const Layout& ids_l,
                       const BackendStorage& src, const Layout& src_l, size_t dim) override;

  // nn fused ops (ops_nn.cpp; nullptr: no kernel for the case, candle::nn composes)
  StoragePtr softmax_last_dim(const Layout& l) const override;
  StoragePtr rms_norm(const Layout& l, const BackendStorage& alpha, const Layout& alpha_l,
                      float eps) const override;
  StoragePtr layer_norm(const Layout& l, const BackendStorage& alpha, const Layout& alpha_l,
                        const BackendStorage& beta, const Layout& beta_l, float eps) const override;
  StoragePtr rope(RopeKind kind, const Layout& l, const BackendStorage& cos, const Layout& cos_l,
                  const BackendStorage& sin, const Layout& sin_l) const override;

  // GGML quantized blocks (ops_quant.cpp; nullptr: no kernel for the type)
  StoragePtr qmatmul(const Layout& blocks_l, const BackendStorage& x, const Layout& x_l, uint32_t ggml_type,
                     size_t n, size_t k) const override;
  StoragePtr qdequantize(const Layout& blocks_l, uint32_t ggml_type, size_t elems, DType out) const override;

 private:
  std::shared_ptr<VulkanDevice> dev_;
  DType dtype_;
  size_t n_;
  BlockPtr block_;
};

// ---- helpers for kernels' host code (kernels.cpp) ---------------------------------------------

// Records a CPU round-trip of `op` in vulkan::stats() (and logs it with CANDLE_VULKAN_TRACE=1);
// call it right before delegating to BackendStorage's default, which counts backend_stats().
void note_round_trip(const char* op);

const VulkanStorage& as_vk(const BackendStorage& s, const char* op);
VulkanStorage& as_vk(BackendStorage& s, const char* op);

// Whether the device's kernels can read/write elements of this dtype: 4/8-byte types always,
// 2-byte ones with 16-bit storage, 1-byte ones with 8-bit storage.
bool storage_ok(const Context& ctx, DType dt);
// "f32" or "f16" (f16 only with shaderFloat16); nullptr for dtypes without float kernels.
const char* float_suffix(const Context& ctx, DType dt);
// "u8" (with 8-bit storage and arithmetic), "u32", "i64" (with shaderInt64): the integer
// variants of the arithmetic kernels; nullptr for other dtypes or without the feature.
const char* int_suffix(const Context& ctx, DType dt);
// float_suffix, else int_suffix: the variant of an arithmetic kernel for dt.
const char* num_suffix(const Context& ctx, DType dt);
// "b1", "b2", "b4", "b8" by element size (nullptr when storage_ok is false).
const char* bytes_suffix(const Context& ctx, DType dt);

// Push constants of the strided element-wise kernels (EwPush in kernels/vulkan/common.glsl).
struct EwPush {
  uint32_t n;        // elements of this dispatch
  uint32_t rank_op;  // rank | op << 8
  uint32_t p0, p1;   // two 32-bit parameters (float bits or integers)
  uint32_t off[4];   // first element of operand i, relative to its binding
  uint32_t dims[6];
  uint32_t st[3][6];  // strides of the strided operands 0..2
};
static_assert(sizeof(EwPush) == 128);

constexpr size_t kMaxRank = 6;
constexpr uint32_t kWorkGroup = 256;

// One operand: a storage and the layout it is read (or written) through.
struct Operand {
  const VulkanStorage* s;
  Layout l;
};

// Runs an element-wise kernel (local_size_x = 256, index from ew_index(), see common.glsl) over
// the common shape of `ops`: operands [0, n_strided) get strides in EwPush::st, the others must
// be laid out contiguously (a dense output). Dims are merged, and the work is split into
// dispatches whose bindings fit maxStorageBufferRange. Returns false (nothing recorded) when
// the merged rank exceeds 6.
bool run_elementwise(const char* kernel, const std::vector<Operand>& ops, size_t n_strided, uint32_t op,
                     uint32_t p0 = 0, uint32_t p1 = 0);

// A binding of elements [lo, hi) of a storage (elements of `esize` bytes), and the element
// offset of `lo` inside it.
struct RangeBinding {
  Binding b;
  uint32_t first;
};
RangeBinding bind_range(const VulkanStorage& s, size_t lo, size_t hi);
// The storage elements [lo, hi) that layout l reads (at least one, so that it can be bound).
std::pair<size_t, size_t> layout_span(const Layout& l);
// The largest element span (of esize bytes) that bind_range can always bind.
size_t bind_budget(const Context& ctx, size_t esize);

// Work-groups for `n` items of `per_group` each, as a 2-D grid (x * y >= groups).
void grid_for(const Context& ctx, size_t n, size_t per_group, uint32_t& gx, uint32_t& gy);

uint32_t f32_bits(float v);

// A new u32 storage holding `v` (small tables the host computes: conv taps, resize indices).
VkStoragePtr upload_u32(VulkanDevice& dev, const std::vector<uint32_t>& v);

// Checks n ids (u32 or i64, bound by `ids` from element ids.first) against [0, limit) on the
// device before an indexing op: registers the check (Context::register_id_check, whose error
// names op, dim and the operand's shape) and dispatches ids_check.comp. Returns the tag to pass
// to the op's kernel, which writes nothing when the check failed.
uint32_t check_ids(Context& ctx, DType ids_dtype, const RangeBinding& ids, size_t n, size_t limit,
                   const char* op, size_t dim, const Shape& shape);

// The elements of layout `l` of `s` contiguously: `s` itself (first element `first`) when l
// is contiguous, else a copy made on the device (kept alive in `keep`, first element 0).
struct Dense {
  const VulkanStorage* s;
  size_t first;
  VkStoragePtr keep;
};
Dense dense(const VulkanStorage& s, const Layout& l);

}  // namespace candle::vk_backend
