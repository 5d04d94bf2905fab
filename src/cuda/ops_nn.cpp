// candle::nn's fused ops on CUDA: softmax_last_dim, rms_norm, layer_norm (kernels/cuda/nn_rows.cu),
// rope (nn_rope.cu), scaled_dot_product_attention (attention.cu) and the AdamW step (optim.cu).
// Semantics and refusals follow the CPU (src/cpu/nn_fused.cpp, attention.cpp, optim.cpp):
// nullptr / false where the CPU has no kernel either (mixed dtypes, wrong ranks) and where these
// kernels have none (attention with d or dv beyond kAttnMaxD, odd rope dims), so that
// candle::nn composes tensor ops on the device; non-float dtypes throw as the CPU does.
#include <algorithm>
#include <bit>
#include <cstdlib>
#include <initializer_list>
#include <optional>

#include "blas.h"
#include "core/row_layout.h"
#include "launch_nn.h"
#include "storage.h"

namespace candle::cuda_backend {
namespace {

bool same_dtype(DType dt, std::initializer_list<const BackendStorage*> others) {
  for (const BackendStorage* o : others)
    if (o->dtype() != dt) return false;
  return true;
}

int64_t i64(size_t v) { return static_cast<int64_t>(v); }

// The rows of x as the row kernels read them: read in place when the last dim is adjacent (or
// of length 1) and the other dims fold into one row stride (narrowed last dims, broadcast
// rows); else a dense copy.
struct Rows {
  Dense src;
  size_t n_rows, d, row_stride;
};

Rows rows_of(const CudaStorage& x, const Layout& l) {
  const size_t d = l.dims().back();
  const size_t n_rows = d ? l.elem_count() / d : 0;
  if (auto rs = uniform_row_stride(l)) return {{&x, l.start_offset(), nullptr}, n_rows, d, *rs};
  return {dense(x, l), n_rows, d, d};
}

// A vector of d elements (alpha / beta): its first element and stride; a layout of another
// rank with d elements is made dense. nullopt when it does not hold d elements.
struct Vec {
  Dense src;
  size_t stride;
};
std::optional<Vec> vec_of(const CudaStorage& v, const Layout& l, size_t d) {
  if (l.elem_count() != d) return std::nullopt;
  if (l.dims().size() == 1) return Vec{{&v, l.start_offset(), nullptr}, d > 1 ? l.stride()[0] : 0};
  return Vec{dense(v, l), 1};
}

// The quantized forms of n_rows rows of d activations (at element `offset` of their storage) for
// the op that makes them (`op`) to write: those the quantized matmuls have taken of its outputs
// (Context::acts_q8_forms; with none, the ActsQ8 only names the producer, for the matmul to record
// what it takes). Null where the rows are too many for a matrix-vector product, not whole blocks,
// or of another dtype. The form of blocks of 256 is left out where the rows are not whole units of
// 256, or the producer's runs of values (`span`, if not the rows) are not.
std::shared_ptr<ActsQ8> acts_q8_for(Context& c, ActsProducer op, DType dt, size_t n_rows, size_t d,
                                    size_t offset, size_t span = 0) {
  if (n_rows == 0 || n_rows > cuda_k::kQmvMaxRows || d % 32 != 0 ||
      (dt != DType::F32 && dt != DType::F16 && dt != DType::BF16))
    return nullptr;
  auto a = std::make_shared<ActsQ8>();
  a->producer = static_cast<uint64_t>(op) << 48 | d;  // the op, then the row length
  a->offset = offset;
  a->elems = n_rows * d;
  unsigned forms = c.acts_q8_forms(a->producer);
  if (d % 256 != 0 || (span ? span : d) % 256 != 0) forms &= 1u;
  if (forms == 0) return a;
  // each form: the quants, the scales of 32, the sums of 16; every form 256-byte aligned
  const size_t form_bytes = (a->elems + a->elems / 8 + a->elems / 4 + 255) / 256 * 256;
  a->block = c.alloc(form_bytes * static_cast<size_t>(std::popcount(forms)));
  char* p = static_cast<char*>(a->block->ptr);
  for (int f = 0; f < 2; ++f) {
    if (!(forms & (1u << f))) continue;
    a->forms.q[f] = reinterpret_cast<int8_t*>(p);
    a->forms.d[f] = reinterpret_cast<float*>(p + a->elems);
    a->forms.sums[f] = reinterpret_cast<int32_t*>(p + a->elems + a->elems / 8);
    p += form_bytes;
  }
  return a;
}

StoragePtr run_rows(const CudaStorage& x, const Layout& l, cuda_k::RowOp op, const char* name, const Vec* a,
                    const Vec* b, float eps) {
  auto out = x.cdev().make(x.dtype(), l.elem_count());
  if (l.elem_count() == 0) return out;
  Rows rows = rows_of(x, l);
  const void* ap = a ? a->src.s->at(a->src.first) : nullptr;
  const void* bp = b ? b->src.s->at(b->src.first) : nullptr;
  auto q8 = op == cuda_k::RowOp::RmsNorm
                ? acts_q8_for(x.ctx(), ActsProducer::RmsNorm, x.dtype(), rows.n_rows, rows.d, 0)
                : nullptr;
  x.ctx().launched(
      cuda_k::row_op(op, dt_of(x.dtype()), rows.src.s->at(rows.src.first), i64(rows.n_rows), i64(rows.d),
                     i64(rows.row_stride), ap, a ? i64(a->stride) : 0, bp, b ? i64(b->stride) : 0, eps,
                     out->at(0), x.stream(), q8 ? q8->forms : cuda_k::ActsQ8Out{}),
      name);
  if (q8) out->set_acts_q8(std::move(q8));
  return out;
}

// A [b, h, t, d] operand of attention: its first element and strides over the first three
// dims, read in place when the last dim is adjacent, else a dense copy.
struct Op4 {
  Dense src;
  int64_t s[3];
};
Op4 op4(const CudaStorage& x, const Layout& l) {
  const auto& d = l.dims();
  const auto& st = l.stride();
  if (d[3] <= 1 || st[3] == 1) return {{&x, l.start_offset(), nullptr}, {i64(st[0]), i64(st[1]), i64(st[2])}};
  return {dense(x, l), {i64(d[1] * d[2] * d[3]), i64(d[2] * d[3]), i64(d[3])}};
}

// Prefill attention in f32 as two cuBLAS GEMMs per kv head with the scores between them
// (cuda_k::attention_softmax_rows): S = scale Q K^T for the query rows of the heads that share the
// kv head, then S's rows become probabilities and O = P V. The fused kernel stages 32 keys for 4
// query rows at a time, 503 us a layer for TinyLlama's 512-token prefill on the H200 (70% of the
// prefill). The scores of one call stay within CANDLE_CUDA_ATTN_GEMM_MB (default 256): the query
// rows go in chunks where a prompt is longer, each with the keys its last row sees.
size_t attn_gemm_budget() {
  const char* e = std::getenv("CANDLE_CUDA_ATTN_GEMM_MB");
  const long v = e ? std::strtol(e, nullptr, 10) : 256;
  return static_cast<size_t>(v > 0 ? std::min(v, 1L << 24) : 256) << 20;  // (at most 16 TiB: no wrap)
}

// query rows from which prefill attention takes the GEMMs (CANDLE_CUDA_ATTN_GEMM=0: never; both
// read at each call, which is a prompt's, so that tests and measurements can switch them)
bool attn_gemm_wanted(int64_t tq) {
  if (tq < 64) return false;  // (decode steps: no environment read)
  const char* e = std::getenv("CANDLE_CUDA_ATTN_GEMM");
  return !(e && e[0] == '0');
}

void gemm_attention(const CudaStorage& self, const Op4& q, const Op4& k, const Op4& v,
                    const cuda_k::AttnGeo& g, const cuda_k::AttnOpts& o, CudaStorage& out) {
  Context& c = self.ctx();
  const int64_t group = g.h / g.hkv, offset = g.tk - g.tq;
  const size_t budget = attn_gemm_budget();
  const auto score_bytes = [&](int64_t rows, int64_t keys) {
    return static_cast<size_t>(g.hkv) * static_cast<size_t>(rows) * static_cast<size_t>(keys) * sizeof(float);
  };
  // one call a batch row where the group's heads are consecutive rows of q and their scores fit
  const bool whole = q.s[1] == g.tq * q.s[2] && score_bytes(group * g.tq, g.tk) <= budget;
  int64_t chunk = g.tq;
  if (!whole)
    while (chunk > 1 && score_bytes(chunk, g.tk) > budget) chunk = (chunk + 1) / 2;
  const int64_t max_rows = whole ? group * g.tq : chunk;
  BlockPtr scores = c.alloc(score_bytes(max_rows, g.tk));
  auto* sp = static_cast<float*>(scores->ptr);
  const auto* qb = static_cast<const float*>(q.src.s->at(q.src.first));
  const auto* kb = static_cast<const float*>(k.src.s->at(k.src.first));
  const auto* vb = static_cast<const float*>(v.src.s->at(v.src.first));
  auto* ob = out.ptr<float>();
  DeviceGuard guard(c.ordinal());
  cublasHandle_t h = c.cublas();
  const float one = 1.0f, zero = 0.0f;
  const auto i32 = [](int64_t x) { return static_cast<int>(x); };
  for (int64_t bi = 0; bi < g.b; ++bi)
    for (int64_t gi = 0; gi < (whole ? 1 : group); ++gi)
      for (int64_t c0 = 0; c0 < g.tq; c0 += whole ? g.tq : chunk) {
        const int64_t m = whole ? group * g.tq : std::min(chunk, g.tq - c0);
        // the keys the call's last query sees (all of them for the whole group's rows)
        const int64_t n = o.causal && !whole ? std::min(g.tk, offset + c0 + m) : g.tk;
        const float* qp = qb + bi * q.s[0] + gi * q.s[1] + c0 * q.s[2];
        const float* kp = kb + bi * k.s[0];
        const float* vp = vb + bi * v.s[0];
        float* op = ob + ((bi * g.h + gi) * g.tq + c0) * g.dv;
        check_blas(cublasSgemmStridedBatched(h, CUBLAS_OP_T, CUBLAS_OP_N, i32(n), i32(m), i32(g.d), &o.scale,
                                             kp, i32(k.s[2]), k.s[1], qp, i32(q.s[2]), group * q.s[1], &zero,
                                             sp, i32(n), m * n, i32(g.hkv)),
                   "cublasSgemmStridedBatched (attention scores)");
        c.launched(cuda_k::attention_softmax_rows(sp, g.hkv, m, n, c0, g.tq, offset, o, self.stream()),
                   "scaled_dot_product_attention (softmax)");
        check_blas(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, i32(g.dv), i32(m), i32(n), &one, vp,
                                             i32(v.s[2]), v.s[1], sp, i32(n), m * n, &zero, op, i32(g.dv),
                                             group * g.tq * g.dv, i32(g.hkv)),
                   "cublasSgemmStridedBatched (attention output)");
        counters().launches += 2;
      }
}

bool dense_in(const BackendStorage& s, const Layout& l, size_t n) {
  return l.is_contiguous() && l.elem_count() == n && l.start_offset() + n <= s.elem_count();
}

}  // namespace

StoragePtr CudaStorage::softmax_last_dim(const Layout& l) const {
  if (l.dims().empty()) return nullptr;
  if (!dtype_is_float(dtype_)) unsupported(dtype_, "softmax_last_dim");
  return run_rows(*this, l, cuda_k::RowOp::Softmax, "softmax_last_dim", nullptr, nullptr, 0.0f);
}

StoragePtr CudaStorage::silu_mul(const Layout& l, const BackendStorage& up, const Layout& up_l) const {
  if (l.dims().empty() || !same_dtype(dtype_, {&up}) || !dtype_is_float(dtype_) || l.dims() != up_l.dims())
    return nullptr;
  const CudaStorage& u = as_cuda(up, "silu_mul");
  auto out = cdev().make(dtype_, l.elem_count());
  if (l.elem_count() == 0) return out;
  const Rows g = rows_of(*this, l), r = rows_of(u, up_l);
  auto q8 = acts_q8_for(ctx(), ActsProducer::SiluMul, dtype_, g.n_rows, g.d, 0);
  ctx().launched(cuda_k::silu_mul(dt_of(dtype_), g.src.s->at(g.src.first), i64(g.row_stride),
                                  r.src.s->at(r.src.first), i64(r.row_stride), i64(g.n_rows), i64(g.d),
                                  out->at(0), stream(), q8 ? q8->forms : cuda_k::ActsQ8Out{}),
                 "silu_mul");
  if (q8) out->set_acts_q8(std::move(q8));
  return out;
}

StoragePtr CudaStorage::rms_norm(const Layout& l, const BackendStorage& alpha, const Layout& alpha_l,
                                 float eps) const {
  if (l.dims().empty() || !same_dtype(dtype_, {&alpha})) return nullptr;
  const CudaStorage& a = as_cuda(alpha, "rms_norm");
  if (!dtype_is_float(dtype_)) unsupported(dtype_, "rms_norm");
  auto av = vec_of(a, alpha_l, l.dims().back());
  if (!av) return nullptr;
  return run_rows(*this, l, cuda_k::RowOp::RmsNorm, "rms_norm", &*av, nullptr, eps);
}

StoragePtr CudaStorage::add_rms_norm(const Layout& l, const BackendStorage& h, const Layout& h_l,
                                     const BackendStorage& alpha, const Layout& alpha_l, float eps) const {
  if (l.dims().empty() || l.dims() != h_l.dims() || !same_dtype(dtype_, {&h, &alpha})) return nullptr;
  if (!dtype_is_float(dtype_)) unsupported(dtype_, "add_rms_norm");
  const CudaStorage& hs = as_cuda(h, "add_rms_norm");
  auto av = vec_of(as_cuda(alpha, "add_rms_norm"), alpha_l, l.dims().back());
  if (!av) return nullptr;
  auto out = cdev().make(dtype_, 2 * l.elem_count());
  if (l.elem_count() == 0) return out;
  const Rows xr = rows_of(*this, l), hr = rows_of(hs, h_l);
  // the normed rows (the second half of out) quantized too where a quantized matmul follows
  auto q8 = acts_q8_for(ctx(), ActsProducer::AddRmsNorm, dtype_, xr.n_rows, xr.d, l.elem_count());
  ctx().launched(cuda_k::row_op(cuda_k::RowOp::AddRmsNorm, dt_of(dtype_), xr.src.s->at(xr.src.first),
                                i64(xr.n_rows), i64(xr.d), i64(xr.row_stride), av->src.s->at(av->src.first),
                                i64(av->stride), hr.src.s->at(hr.src.first), i64(hr.row_stride), eps,
                                out->at(0), stream(), q8 ? q8->forms : cuda_k::ActsQ8Out{}),
                 "add_rms_norm");
  if (q8) out->set_acts_q8(std::move(q8));
  return out;
}

StoragePtr CudaStorage::layer_norm(const Layout& l, const BackendStorage& alpha, const Layout& alpha_l,
                                   const BackendStorage& beta, const Layout& beta_l, float eps) const {
  if (l.dims().empty() || !same_dtype(dtype_, {&alpha, &beta})) return nullptr;
  const CudaStorage& a = as_cuda(alpha, "layer_norm");
  const CudaStorage& b = as_cuda(beta, "layer_norm");
  if (!dtype_is_float(dtype_)) unsupported(dtype_, "layer_norm");
  const size_t d = l.dims().back();
  auto av = vec_of(a, alpha_l, d);
  auto bv = vec_of(b, beta_l, d);
  if (!av || !bv) return nullptr;
  return run_rows(*this, l, cuda_k::RowOp::LayerNorm, "layer_norm", &*av, &*bv, eps);
}

StoragePtr CudaStorage::rope(RopeKind kind, const Layout& l, const BackendStorage& cos_s, const Layout& cos_l,
                             const BackendStorage& sin_s, const Layout& sin_l) const {
  if (l.dims().size() != 4 || cos_l.dims() != sin_l.dims() || !same_dtype(dtype_, {&cos_s, &sin_s}))
    return nullptr;
  const CudaStorage& c = as_cuda(cos_s, "rope");
  const CudaStorage& s = as_cuda(sin_s, "rope");
  if (!dtype_is_float(dtype_)) unsupported(dtype_, "rope");
  const auto& xd = l.dims();
  const size_t b = xd[0], d = xd[3], half = d / 2;
  const size_t t = kind == RopeKind::HalvesThd ? xd[1] : xd[2];
  const auto& cd = cos_l.dims();
  const bool batched = cd.size() == 3;
  if (d % 2 != 0 || (cd.size() != 2 && !batched) || cd.back() != half || cd[batched ? 1 : 0] < t ||
      (batched && cd[0] != b))
    return nullptr;
  auto out = cdev().make(dtype_, l.elem_count());
  if (l.elem_count() == 0) return out;
  cuda_k::RopeGeo g{};
  for (size_t i = 0; i < 4; ++i) {
    g.dims[i] = i64(xd[i]);
    g.xs[i] = xd[i] > 1 ? i64(l.stride()[i]) : 0;
  }
  auto cs_strides = [&](const Layout& ly, int64_t* dst) {
    const auto& st = ly.stride();
    const auto& dm = ly.dims();
    const size_t o = batched ? 1 : 0;
    dst[0] = batched && dm[0] > 1 ? i64(st[0]) : 0;
    dst[1] = dm[o] > 1 ? i64(st[o]) : 0;
    dst[2] = dm[o + 1] > 1 ? i64(st[o + 1]) : 0;
  };
  cs_strides(cos_l, g.cs);
  cs_strides(sin_l, g.ss);
  ctx().launched(cuda_k::rope(kind, dt_of(dtype_), at(l.start_offset()), c.at(cos_l.start_offset()),
                              s.at(sin_l.start_offset()), g, out->at(0), stream()),
                 "rope");
  return out;
}

StoragePtr CudaStorage::scaled_dot_product_attention(const Layout& q_l, const BackendStorage& k_s,
                                                     const Layout& k_l, const BackendStorage& v_s,
                                                     const Layout& v_l, const AttentionParams& p) const {
  const auto* kc = dynamic_cast<const CudaStorage*>(&k_s);
  const auto* vc = dynamic_cast<const CudaStorage*>(&v_s);
  if (!kc || !vc || k_s.dtype() != dtype_ || v_s.dtype() != dtype_) return nullptr;
  if (q_l.dims().size() != 4 || k_l.dims().size() != 4 || v_l.dims().size() != 4) return nullptr;
  // a key count on the device (decode graphs): a u32 the kernel reads
  const auto* lc = dynamic_cast<const CudaStorage*>(p.kv_len);
  if (p.kv_len && (!lc || lc->dtype() != DType::U32 || p.kv_len_offset >= lc->elem_count())) return nullptr;
  const auto &qd = q_l.dims(), &kd = k_l.dims(), &vd = v_l.dims();
  cuda_k::AttnGeo g{};
  g.b = i64(qd[0]);
  g.h = i64(qd[1]);
  g.hkv = i64(kd[1]);
  g.tq = i64(qd[2]);
  g.tk = i64(kd[2]);
  g.d = i64(qd[3]);
  g.dv = i64(vd[3]);
  if (kd[0] != qd[0] || vd[0] != qd[0] || vd[1] != kd[1] || vd[2] != kd[2] || kd[3] != qd[3] || kd[1] == 0 ||
      qd[1] % kd[1] != 0 || qd[2] > kd[2])
    return nullptr;
  if (!dtype_is_float(dtype_)) unsupported(dtype_, "scaled_dot_product_attention");
  const size_t n = qd[0] * qd[1] * qd[2] * vd[3];
  if (n == 0) return cdev().make(dtype_, 0);
  // no kernel for heads this wide: candle::nn composes matmuls and a softmax instead
  if (g.d > cuda_k::kAttnMaxD || g.dv > cuda_k::kAttnMaxD) return nullptr;
  const Op4 q = op4(*this, q_l), k = op4(*kc, k_l), v = op4(*vc, v_l);
  for (int i = 0; i < 3; ++i) {
    g.qs[i] = q.s[i];
    g.ks[i] = k.s[i];
    g.vs[i] = v.s[i];
  }
  cuda_k::AttnOpts o{p.scale, p.causal, i64(p.sliding_window), p.softcap};
  if (lc) {
    const auto chk =
        ctx().register_count_check("scaled_dot_product_attention_kv_len", qd[2], kd[2], "the key count");
    o.kv_len = lc->ptr<uint32_t>(p.kv_len_offset);
    o.fault_tag = chk.tag;
    o.fault = chk.fault;
  }
  auto out = cdev().make(dtype_, n);
  if (!lc && dtype_ == DType::F32 && attn_gemm_wanted(g.tq) && g.tk <= INT32_MAX) {
    gemm_attention(*this, q, k, v, g, o, *out);
    return out;
  }
  // a grid too small for the card (a decode step over a long cache): the keys split over more
  // blocks, their partial results merged by the last one (the decode kernel) or a second kernel
  const void *qp = q.src.s->at(q.src.first), *kp = k.src.s->at(k.src.first), *vp = v.src.s->at(v.src.first);
  const cuda_k::AttnPlan plan = cuda_k::attention_plan(dt_of(dtype_), kp, vp, g, ctx().sm_count());
  CuStoragePtr part;
  if (plan.splits > 1) part = cdev().make(DType::F32, cuda_k::attention_part_floats(g, plan.splits));
  // a decode step's output quantized by the decode kernel for the matmul after it (the output
  // projection: [b, 1, h dv] rows), each kv head's rows by its own block
  std::shared_ptr<ActsQ8> q8;
  if (plan.decode != cuda_k::AttnPlan::Decode::None && g.tq == 1)
    q8 = acts_q8_for(ctx(), ActsProducer::Attention, dtype_, static_cast<size_t>(g.b),
                     static_cast<size_t>(g.h * g.dv), 0, static_cast<size_t>(g.h / g.hkv * g.dv));
  ctx().launched(cuda_k::attention(dt_of(dtype_), qp, kp, vp, g, o, plan, part ? part->ptr<float>() : nullptr,
                                   ctx().attention_counters(), out->at(0), stream(),
                                   q8 ? q8->forms : cuda_k::ActsQ8Out{}),
                 "scaled_dot_product_attention");
  if (q8) out->set_acts_q8(std::move(q8));
  if (plan.decode == cuda_k::AttnPlan::Decode::None && plan.splits > 1)
    counters().launches++;  // its merge kernel
  return out;
}

bool CudaStorage::adamw_step_set(const Layout& l, BackendStorage& m_base, const Layout& m_l,
                                 BackendStorage& v_base, const Layout& v_l, const BackendStorage& g_base,
                                 const Layout& g_l, const AdamWStep& c) {
  auto* m = dynamic_cast<CudaStorage*>(&m_base);
  auto* v = dynamic_cast<CudaStorage*>(&v_base);
  auto* g = dynamic_cast<const CudaStorage*>(&g_base);
  const DType dt = dtype_;
  if (!m || !v || !g || (dt != DType::F32 && dt != DType::F64)) return false;
  written();
  m->written();
  v->written();
  if (m->dtype() != dt || v->dtype() != dt || g->dtype() != dt) return false;
  const size_t n = l.elem_count();
  if (!dense_in(*this, l, n) || !dense_in(*m, m_l, n) || !dense_in(*v, v_l, n) || g_l.elem_count() != n ||
      g_l.max_offset_exclusive() > g->elem_count())
    return false;
  if (n == 0) return true;
  const Dense gd = dense(*g, g_l);
  // The CPU's adamw_range is target-cloned; its avx512f clone, chosen where the CPU has
  // AVX-512F, is compiled with the three multiply-adds contracted: the same roundings here keep
  // the results the CPU's bytes on either kind of host.
  static const bool cpu_contracts = __builtin_cpu_supports("avx512f");
  const cuda_k::AdamWConsts k{c.beta1,   1.0 - c.beta1, c.beta2, 1.0 - c.beta2, c.scale_m,
                              c.scale_v, c.decay,       c.lr,    c.eps,         cpu_contracts};
  ctx().launched(
      cuda_k::adamw(dt_of(dt), at(l.start_offset()), m->at(m_l.start_offset()), v->at(v_l.start_offset()),
                    gd.s->at(gd.first), static_cast<int64_t>(n), k, stream()),
      "adamw_step");
  return true;
}

}  // namespace candle::cuda_backend
