// GGML quantized blocks on Vulkan (candle::quantized's QTensor / QMatMul through BackendStorage's
// qdequantize / qmatmul; kernels: kernels/vulkan/quant.glsl, qdequant.comp, qmatvec.comp).
//  - qdequantize: f16, bf16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K .. Q6_K, IQ4_NL, IQ4_XS to f32 or
//    f16, the CPU dequantizer's values bit for bit (same f32 operations, unfused).
//  - qmatmul, m <= kQmvMaxRows (decoding): a matrix-vector kernel reading the blocks directly,
//    f32 activations and accumulation (x converted to f32 first where it is f16 / bf16).
//  - qmatmul, larger m (prefill): the weight dequantized into an f32 scratch storage, then the
//    backend's f32 matmul (ops_matmul.cpp).
// The blocks are bound as uint words and read by byte, so they may start at any byte; a weight
// past one binding is split into dispatches of whole rows (matvec) or blocks (dequantize).
#include <algorithm>
#include <cstdint>
#include <string>

#include "candle/backend/qblocks.h"
#include "storage.h"

namespace candle::vk_backend {
namespace {

constexpr size_t kQmvMaxRows = 8;

struct QType {
  const char* suffix;  // kernel variant: qdequant_<suffix>, qmatvec_<suffix>
  size_t qk;           // values per block
  size_t bytes;        // bytes per block
};

// The types with kernels, by ggml id (quantized::GgmlDType); nullptr for the others (f32 weights
// are plain tensors; Q8_1 / Q8_K are activation types).
const QType* qtype(uint32_t id) {
  static const QType f16{"f16", 1, 2}, bf16{"bf16", 1, 2}, q4_0{"q4_0", 32, 18}, q4_1{"q4_1", 32, 20},
      q5_0{"q5_0", 32, 22}, q5_1{"q5_1", 32, 24}, q8_0{"q8_0", 32, 34}, q2_k{"q2_k", 256, 84},
      q3_k{"q3_k", 256, 110}, q4_k{"q4_k", 256, 144}, q5_k{"q5_k", 256, 176}, q6_k{"q6_k", 256, 210},
      iq4_nl{"iq4_nl", 32, 18}, iq4_xs{"iq4_xs", 256, 136};
  switch (id) {
    case 1: return &f16;
    case 2: return &q4_0;
    case 3: return &q4_1;
    case 6: return &q5_0;
    case 7: return &q5_1;
    case 8: return &q8_0;
    case 10: return &q2_k;
    case 11: return &q3_k;
    case 12: return &q4_k;
    case 13: return &q5_k;
    case 14: return &q6_k;
    case 20: return &iq4_nl;
    case 23: return &iq4_xs;
    case 30: return &bf16;
    default: return nullptr;
  }
}

[[noreturn]] void internal(const std::string& msg) { throw Error(ErrorKind::Internal, "vulkan: " + msg); }

struct DequantPush {
  uint32_t w_off, o_off, n, f16out;
};

struct MatvecPush {
  uint32_t w_off, row_bytes, rows, row0;
  uint32_t n, k, m;
  uint32_t x_off, y_off;
};

// Dequantizes `nblocks` blocks from byte `first` of `blocks` into out (f32 or f16) from element 0.
void run_dequant(const VulkanStorage& blocks, size_t first, size_t nblocks, const QType& q,
                 VulkanStorage& out) {
  Context& ctx = blocks.ctx();
  const bool f16 = out.dtype() == DType::F16;
  const std::string kname = std::string("qdequant_") + q.suffix;
  // blocks per dispatch: both bindings within their budgets, the values within 2^31; a multiple
  // of 8 so that every dispatch's first value is 8-aligned (f16 pairs)
  size_t per = std::min({bind_budget(ctx, 1) / q.bytes, bind_budget(ctx, dtype_size(out.dtype())) / q.qk,
                         (size_t(1) << 31) / q.qk});
  per = std::max<size_t>(per / 8 * 8, 8);
  for (size_t b0 = 0; b0 < nblocks; b0 += per) {
    const size_t nb = std::min(per, nblocks - b0);
    auto wb = bind_range(blocks, first + b0 * q.bytes, first + (b0 + nb) * q.bytes);
    auto ob = bind_range(out, b0 * q.qk, (b0 + nb) * q.qk);
    DequantPush pc{wb.first, ob.first, static_cast<uint32_t>(nb * q.qk), f16 ? 1u : 0u};
    uint32_t gx, gy;
    grid_for(ctx, nb * q.qk, size_t{8} * kWorkGroup, gx, gy);
    ctx.dispatch(kname.c_str(), {wb.b, ob.b}, &pc, sizeof(pc), gx, gy);
  }
}

}  // namespace

StoragePtr VulkanStorage::qdequantize(const Layout& blocks_l, uint32_t ggml_type, size_t elems,
                                      DType out) const {
  const QType* q = qtype(ggml_type);
  if (!q || (out != DType::F32 && out != DType::F16) || !storage_ok(ctx(), out)) return nullptr;
  if (elems % q->qk != 0)
    internal("qdequantize: " + std::to_string(elems) + " values are not whole blocks of " +
             std::to_string(q->qk));
  const size_t nblocks = elems / q->qk;
  const size_t first =
      checked_block_offset(*this, blocks_l, checked_mul(nblocks, q->bytes, "qdequantize"), "qdequantize");
  auto o = vdev().make(out, elems);
  if (elems != 0) run_dequant(*this, first, nblocks, *q, *o);
  return o;
}

StoragePtr VulkanStorage::qmatmul(const Layout& blocks_l, const BackendStorage& x_b, const Layout& x_l,
                                  uint32_t ggml_type, size_t n, size_t k) const {
  const QType* q = qtype(ggml_type);
  if (!q) return nullptr;
  const VulkanStorage& x = as_vk(x_b, "qmatmul");
  const DType xdt = x.dtype();
  if (xdt != DType::F32 && xdt != DType::F16 && xdt != DType::BF16) return nullptr;
  if (k == 0 || k % q->qk != 0)
    internal("qmatmul: k = " + std::to_string(k) + " is not a positive multiple of the block size " +
             std::to_string(q->qk));
  const size_t row_bytes = k / q->qk * q->bytes;
  const size_t first = checked_block_offset(*this, blocks_l, checked_mul(n, row_bytes, "qmatmul"), "qmatmul");
  if (x_l.elem_count() % k != 0)
    internal("qmatmul: the input's " + std::to_string(x_l.elem_count()) + " elements are not rows of " +
             std::to_string(k));
  const size_t m = x_l.elem_count() / k;
  Context& c = ctx();
  if (m == 0 || n == 0) return vdev().make(DType::F32, checked_mul(m, n, "qmatmul"));
  // x as dense f32
  StoragePtr xf;
  Dense xd{};
  if (xdt != DType::F32) {
    xf = x.to_dtype(x_l, DType::F32);
    xd = {&as_vk(*xf, "qmatmul"), 0, nullptr};
  } else {
    xd = dense(x, x_l);
  }
  if (m > kQmvMaxRows) {
    // prefill: the weight as f32 (n, k), then x (m, k) @ w^T with the backend's GEMM
    auto w = vdev().make(DType::F32, checked_mul(n, k, "qmatmul"));
    run_dequant(*this, first, n * k / q->qk, *q, *w);
    const Layout lhs(Shape{1, m, k}, {m * k, k, 1}, xd.first);
    const Layout rhs(Shape{1, k, n}, {n * k, 1, k}, 0);
    return xd.s->matmul(lhs, *w, rhs, MatmulDims{1, m, n, k});
  }
  const size_t budget = bind_budget(c, 1);
  if (row_bytes > budget || m * k > bind_budget(c, 4) || m * n > bind_budget(c, 4) ||
      std::max({n, k, m * k, m * n}) > 0xffffffffu)
    return nullptr;  // past one binding: the caller dequantizes on the host
  auto out = vdev().make(DType::F32, m * n);
  auto xb = bind_range(*xd.s, xd.first, xd.first + m * k);
  auto ob = bind_range(*out, 0, m * n);
  const std::string kname = std::string("qmatvec_") + q->suffix;
  const size_t per = budget / row_bytes;
  for (size_t r0 = 0; r0 < n; r0 += per) {
    const size_t nr = std::min(per, n - r0);
    auto wb = bind_range(*this, first + r0 * row_bytes, first + (r0 + nr) * row_bytes);
    MatvecPush pc{wb.first,
                  static_cast<uint32_t>(row_bytes),
                  static_cast<uint32_t>(nr),
                  static_cast<uint32_t>(r0),
                  static_cast<uint32_t>(n),
                  static_cast<uint32_t>(k),
                  static_cast<uint32_t>(m),
                  xb.first,
                  ob.first};
    uint32_t gx, gy;
    grid_for(c, nr, 1, gx, gy);
    c.dispatch(kname.c_str(), {wb.b, xb.b, ob.b}, &pc, sizeof(pc), gx, gy);
  }
  return out;
}

}  // namespace candle::vk_backend
