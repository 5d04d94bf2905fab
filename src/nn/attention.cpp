// candle::nn::ops::scaled_dot_product_attention: a custom op whose forwards call the device's
// fused kernel (BackendStorage::scaled_dot_product_attention; the CPU's: src/cpu/attention.cpp),
// and the same math with tensor ops where a device has none and under autograd.
#include "candle/nn/attention.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "candle/nn/ops.h"
#include "check.h"
#include "fused_op.h"

namespace candle::nn::ops {
namespace {

struct AttnShape {
  size_t b, h, hkv, tq, tk, d, dv;
};

AttnShape check_attention(const Tensor& q, const Tensor& k, const Tensor& v, const char* op) {
  detail::check_float(q, op);
  detail::check_same_device(q, k, op);
  detail::check_same_device(q, v, op);
  auto bad = [&](const char* why) {
    return Error(ErrorKind::ShapeMismatch, std::string(op) + ": " + why + ", q: " + q.shape().to_string() +
                                               ", k: " + k.shape().to_string() +
                                               ", v: " + v.shape().to_string());
  };
  if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4) throw bad("expected [b, h, t, d] operands");
  if (k.dtype() != q.dtype() || v.dtype() != q.dtype())
    throw Error(ErrorKind::DTypeMismatch, std::string(op) + ": q, k and v must have one dtype");
  AttnShape s{q.dim(0), q.dim(1), k.dim(1), q.dim(2), k.dim(2), q.dim(3), v.dim(3)};
  if (k.dim(0) != s.b || v.dim(0) != s.b) throw bad("batch sizes differ");
  if (v.dim(1) != s.hkv || v.dim(2) != s.tk) throw bad("k and v differ in heads or length");
  if (k.dim(3) != s.d) throw bad("q and k differ in head size");
  if (s.hkv == 0 || s.h % s.hkv != 0) throw bad("the query heads are not a multiple of the kv heads");
  if (s.tq > s.tk) throw bad("more queries than keys");
  return s;
}

AttentionParams params(double scale, bool causal, std::optional<size_t> window, std::optional<double> softcap,
                       const char* op) {
  if (window && *window == 0)
    throw Error(ErrorKind::InvalidArgument, std::string(op) + ": the sliding window must be > 0");
  if (softcap && !(*softcap > 0.0))
    throw Error(ErrorKind::InvalidArgument, std::string(op) + ": softcap must be > 0");
  return AttentionParams{static_cast<float>(scale), causal, window.value_or(0),
                         static_cast<float>(softcap.value_or(0.0))};
}

}  // namespace

Tensor scaled_dot_product_attention_slow(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                                         bool causal, std::optional<size_t> sliding_window,
                                         std::optional<double> softcap) {
  const char* op = "scaled_dot_product_attention";
  AttnShape s = check_attention(q, k, v, op);
  AttentionParams p = params(scale, causal, sliding_window, softcap, op);
  const size_t g = s.h / s.hkv;
  // grouped heads: query head kvh * g + j is row (j, t) of kv head kvh's [g * tq, d] block
  Tensor q2 = q.contiguous().reshape({s.b, s.hkv, g * s.tq, s.d});
  Tensor scores = q2.matmul(k.transpose(2, 3)).to_dtype(DType::F32) * scale;
  if (p.softcap > 0.0f)
    scores = (scores / static_cast<double>(p.softcap)).tanh() * static_cast<double>(p.softcap);
  if (p.causal || p.sliding_window > 0) {
    std::vector<float> mask(s.tq * s.tk, 0.0f);
    const float neg_inf = -std::numeric_limits<float>::infinity();
    for (size_t i = 0; i < s.tq; ++i) {
      const size_t pos = s.tk - s.tq + i;
      for (size_t j = 0; j < s.tk; ++j) {
        const bool future = p.causal && j > pos;
        const bool outside = p.sliding_window > 0 && j + p.sliding_window <= pos;
        if (future || outside) mask[i * s.tk + j] = neg_inf;
      }
    }
    Tensor m = Tensor::from_vec(mask, {s.tq, s.tk}, q.device());
    scores =
        scores.reshape({s.b, s.hkv, g, s.tq, s.tk}).broadcast_add(m).reshape({s.b, s.hkv, g * s.tq, s.tk});
  }
  Tensor probs = softmax_last_dim(scores).to_dtype(q.dtype());
  return probs.matmul(v.contiguous()).reshape({s.b, s.h, s.tq, s.dv});
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                                    bool causal, std::optional<size_t> sliding_window,
                                    std::optional<double> softcap) {
  const char* op = "scaled_dot_product_attention";
  if (q.track_op() || k.track_op() || v.track_op())
    return scaled_dot_product_attention_slow(q, k, v, scale, causal, sliding_window, softcap);
  AttnShape s = check_attention(q, k, v, op);
  AttentionParams p = params(scale, causal, sliding_window, softcap, op);
  auto composed = [&] {
    return scaled_dot_product_attention_slow(q, k, v, scale, causal, sliding_window, softcap);
  };
  auto kernel = [p](const BackendStorage& q_s, const Layout& q_l, const BackendStorage& k_s,
                    const Layout& k_l, const BackendStorage& v_s, const Layout& v_l) {
    return q_s.scaled_dot_product_attention(q_l, k_s, k_l, v_s, v_l, p);
  };
  return q.apply_op3_no_bwd(
      k, v, detail::FusedOp3("scaled-dot-product-attention", kernel, composed, Shape{s.b, s.h, s.tq, s.dv}));
}

Tensor scaled_dot_product_attention_kv_len(const Tensor& q, const Tensor& k, const Tensor& v,
                                           const Tensor& kv_len, double scale, bool causal,
                                           std::optional<size_t> sliding_window,
                                           std::optional<double> softcap) {
  const char* op = "scaled_dot_product_attention_kv_len";
  AttnShape s = check_attention(q, k, v, op);
  detail::check_same_device(q, kv_len, op);
  if (kv_len.dtype() != DType::U32 || kv_len.elem_count() != 1)
    throw Error(ErrorKind::InvalidArgument, std::string(op) + ": the key count must be one u32 value, not " +
                                                kv_len.shape().to_string() + " " +
                                                std::string(dtype_name(kv_len.dtype())));
  AttentionParams p = params(scale, causal, sliding_window, softcap, op);
  // the device's kernel where it reads the count itself; else the count read here and the
  // buffers narrowed to it
  auto composed = [&] {
    const size_t len = kv_len.flatten_all().to_vec1<uint32_t>()[0];
    if (len < s.tq || len > s.tk)
      throw Error(ErrorKind::InvalidArgument, std::string(op) + ": the key count " + std::to_string(len) +
                                                  " is not between the " + std::to_string(s.tq) +
                                                  " queries and the buffers' " + std::to_string(s.tk) +
                                                  " positions");
    return scaled_dot_product_attention(q, k.narrow(2, 0, len), v.narrow(2, 0, len), scale, causal,
                                        sliding_window, softcap);
  };
  if (q.track_op() || k.track_op() || v.track_op()) return composed();
  const StoragePtr len_s = kv_len.storage();
  p.kv_len = len_s.get();
  p.kv_len_offset = kv_len.layout().start_offset();
  auto kernel = [p, len_s](const BackendStorage& q_s, const Layout& q_l, const BackendStorage& k_s,
                           const Layout& k_l, const BackendStorage& v_s, const Layout& v_l) {
    return q_s.scaled_dot_product_attention(q_l, k_s, k_l, v_s, v_l, p);
  };
  return q.apply_op3_no_bwd(
      k, v, detail::FusedOp3("scaled-dot-product-attention", kernel, composed, Shape{s.b, s.h, s.tq, s.dv}));
}

}  // namespace candle::nn::ops
