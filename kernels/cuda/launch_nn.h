// The host-side entry points of candle::nn's fused ops on CUDA (kernels/cuda/nn_rows.cu,
// nn_rope.cu, attention.cu, optim.cu), called by src/cuda/ops_nn.cpp. Conventions of launch.h:
// device pointers with the operands' offsets applied, strides in elements, dense outputs, the
// launch's cudaError_t returned. Storage dtypes BF16, F16, F32, F64 and F8E4M3 (the small
// floats compute in f32, f64 in f64); other codes give cudaErrorInvalidValue.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "candle/op_kinds.h"
#include "launch.h"
#include "launch_quant.h"

namespace candle::cuda_k {

// ---- last-dim row ops (nn_rows.cu) ----
enum class RowOp : uint8_t { Softmax, RmsNorm, LayerNorm, AddRmsNorm };

// `n_rows` rows of `d` elements; row r starts at x + r * row_stride (its elements adjacent);
// out is dense [n_rows, d]. alpha / beta: vectors of d elements with strides a_st / b_st (0:
// one element broadcast), read by the norms only (beta by LayerNorm only). AddRmsNorm: `beta` is
// the rows h added to x (row r at beta + r * b_st, elements adjacent) and out is dense
// [2, n_rows, d]: the sums x + h rounded to the dtype, then their rms_norm. q8 (RmsNorm and
// AddRmsNorm of F32 / F16 / BF16 rows of a multiple of 32; of 256 for q8.q[1]): the normed rows
// also quantized as quantize_acts_q8 quantizes them (launch_quant.h), in the same launch.
cudaError_t row_op(RowOp op, Dt dt, const void* x, int64_t n_rows, int64_t d, int64_t row_stride,
                   const void* alpha, int64_t a_st, const void* beta, int64_t b_st, float eps, void* out,
                   cudaStream_t s, const ActsQ8Out& q8 = {});

// out[r, i] = silu(gate[r, i]) * up[r, i] over n_rows rows of d (row r of gate at gate + r *
// g_stride, of up at up + r * u_stride, elements adjacent); out dense. silu is rounded to the
// dtype before the product, as the two element-wise ops round it. q8 (F32 / F16 / BF16, d a
// multiple of 32; of 256 for q8.q[1]): out also quantized as quantize_acts_q8 quantizes it.
cudaError_t silu_mul(Dt dt, const void* gate, int64_t g_stride, const void* up, int64_t u_stride,
                     int64_t n_rows, int64_t d, void* out, cudaStream_t s, const ActsQ8Out& q8 = {});

// ---- rotary embeddings (nn_rope.cu) ----
// x: dims [d0, d1, d2, d] with strides xs ([b, h, t, d], HalvesThd: [b, t, h, d]); cos / sin:
// element (bi, t, i) at bi * cs[0] + t * cs[1] + i * cs[2] (cs[0] = 0 when not batched).
struct RopeGeo {
  int64_t dims[4];
  int64_t xs[4];
  int64_t cs[3];
  int64_t ss[3];
};
cudaError_t rope(RopeKind kind, Dt dt, const void* x, const void* cos, const void* sin, const RopeGeo& g,
                 void* out, cudaStream_t s);

// ---- scaled dot-product attention (attention.cu) ----
// q [b, h, tq, d], k [b, hkv, tk, d], v [b, hkv, tk, dv], each with strides s[0..2] over its
// first three dims (the last dim adjacent); out dense [b, h, tq, dv]. Needs d, dv <= kAttnMaxD,
// tq <= tk, h a multiple of hkv > 0.
constexpr int64_t kAttnMaxD = 256;
struct AttnGeo {
  int64_t b, h, hkv, tq, tk, d, dv;
  int64_t qs[3], ks[3], vs[3];
};
struct AttnOpts {
  float scale;
  bool causal;
  int64_t window;  // 0: none
  float softcap;   // 0: none
  // Set: the key count, a u32 on the device read by the kernel (k and v hold g.tk positions, a
  // capacity; keys 0..count-1, query i at count - tq + i). A count outside [tq, tk] is clamped
  // to it and reported once as {fault_tag, 0, count, 0} in the fault words.
  const uint32_t* kv_len = nullptr;
  uint32_t fault_tag = 0;
  uint32_t* fault = nullptr;
};
// How a call runs. `decode`: few query rows per kv head (group x tq <= 8: a decode step, GQA or
// not) with aligned keys and values take a decode kernel (CANDLE_CUDA_ATTN_DECODE: the tile form by
// default, "rows" the row form, "0" neither). With splits > 1 the visible keys of each kv head are
// cut into `splits` ranges run by separate blocks (a grid too small to fill the SMs: decode steps),
// which write their partial running max, sum and accumulator to `part` (attention_part_floats
// floats); a decode kernel's last block of a head merges them (`counters`: kAttnCounters zeroed
// words that it leaves zeroed), the general kernel's are merged by a second kernel. q8 (a decode
// kernel, tq 1; q8.q[1] only where a kv head's rows are whole units of 256): the output also
// quantized as quantize_acts_q8 quantizes it (launch_quant.h), in the same launch.
struct AttnPlan {
  enum class Decode { None, Tile, Rows };
  int splits = 1;
  Decode decode = Decode::None;
};
constexpr int64_t kAttnCounters = 16384;
AttnPlan attention_plan(Dt dt, const void* k, const void* v, const AttnGeo& g, int sm_count);
size_t attention_part_floats(const AttnGeo& g, int splits);
cudaError_t attention(Dt dt, const void* q, const void* k, const void* v, const AttnGeo& g, const AttnOpts& o,
                      const AttnPlan& plan, float* part, uint32_t* counters, void* out, cudaStream_t s,
                      const ActsQ8Out& q8 = {});
// The softmax between the two GEMMs of prefill attention (src/cuda/ops_nn.cpp): s holds
// `blocks` x `rows` rows of n scores (row stride n, the scale already applied); row r of each block
// is the query at index (q0 + r) % tq, at position offset + that index, and sees keys as AttnOpts
// says (causal, window; o.kv_len unused). Each row becomes its probabilities in place: softcap,
// the keys it does not see 0, exp(x - max) / sum over the rest; a row that sees no key all zeros.
cudaError_t attention_softmax_rows(float* s, int64_t blocks, int64_t rows, int64_t n, int64_t q0, int64_t tq,
                                   int64_t offset, const AttnOpts& o, cudaStream_t st);

// ---- optimizer steps (optim.cu) ----
// AdamW in place over n dense elements (F32 or F64), in the CPU's order of operations:
// m = m b1 + g (1 - b1); v = v b2 + (g g)(1 - b2);
// theta = theta decay - ((m scale_m) / (sqrt(v scale_v) + eps)) lr;
// each operation rounded on its own, or with `contract` the three outer additions fused with
// their left product (fma(m, b1, g (1 - b1)), fma(v, b2, ..), fma(theta, decay, -..)): the two
// roundings of the CPU kernel's builds (gcc 12 contracts exactly those in its avx512f clone).
struct AdamWConsts {
  double b1, one_b1, b2, one_b2, scale_m, scale_v, decay, lr, eps;
  bool contract;
};
cudaError_t adamw(Dt dt, void* theta, void* m, void* v, const void* g, int64_t n, const AdamWConsts& c,
                  cudaStream_t s);

}  // namespace candle::cuda_k
