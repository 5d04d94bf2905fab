// nn::ops::scaled_dot_product_attention (the fused CPU kernel against the tensor-op version)
// and nn::KvCache.
#include "candle/nn/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "candle/candle.h"
#include "candle/nn/kv_cache.h"
#include "candle/utils.h"

using namespace candle;
namespace ops = candle::nn::ops;

namespace {

Tensor randn(const Shape& s, uint64_t seed) {
  Device::cpu().set_seed(seed);
  return Tensor::randn(0.0f, 1.0f, s, Device::cpu());
}

float max_abs_diff(const Tensor& a, const Tensor& b) {
  return (a.to_dtype(DType::F32) - b.to_dtype(DType::F32)).abs().flatten_all().max(0).to_scalar<float>();
}

struct Case {
  size_t b, h, hkv, tq, tk, d;
  bool causal;
  std::optional<size_t> window;
  std::optional<double> softcap;
};

// decode (tq 1), prefill with an offset (tq < tk), GQA, windows, soft-capping, tiles beyond one
// block of queries (16) and keys (64), head sizes of 8 to 128
const Case kCases[] = {
    {1, 4, 4, 1, 1, 8, true, {}, {}},
    {1, 4, 2, 1, 37, 16, true, {}, {}},
    {2, 8, 2, 5, 5, 16, true, {}, {}},
    {1, 6, 3, 19, 150, 32, true, {}, {}},
    {1, 4, 1, 70, 70, 64, true, {}, {}},
    {2, 4, 2, 33, 100, 16, false, {}, {}},
    {1, 4, 2, 40, 90, 16, true, 7, {}},
    {1, 2, 2, 1, 200, 8, true, 64, {}},
    {1, 4, 2, 12, 30, 16, true, {}, 5.0},
    {1, 4, 4, 130, 130, 8, true, 50, 20.0},
    // head sizes off the kernel's vector widths: a tail of 4 after 8s, 64 + 4 x 8, 2 x 64
    {1, 2, 1, 20, 70, 12, true, {}, {}},
    {1, 2, 2, 17, 80, 96, true, {}, {}},
    {1, 2, 1, 3, 140, 128, true, {}, {}},
};

// The fused op's values (as f32) for case c with the environment variable `name` set to `value`.
std::vector<float> fused_with_env(const Case& c, const Tensor& q, const Tensor& k, const Tensor& v,
                                  double scale, const char* name, const char* value) {
  setenv(name, value, 1);
  Tensor y = ops::scaled_dot_product_attention(q, k, v, scale, c.causal, c.window, c.softcap);
  unsetenv(name);
  return y.to_dtype(DType::F32).flatten_all().to_vec1<float>();
}

}  // namespace

// The fused kernel equals the tensor-op version within 2e-5 (f32: the two sum in different
// orders, the kernel block by block with an online softmax).
TEST(Attention, FusedEqualsSlowF32) {
  for (const Case& c : kCases) {
    Tensor q = randn({c.b, c.h, c.tq, c.d}, 1), k = randn({c.b, c.hkv, c.tk, c.d}, 2),
           v = randn({c.b, c.hkv, c.tk, c.d}, 3);
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
    Tensor fused = ops::scaled_dot_product_attention(q, k, v, scale, c.causal, c.window, c.softcap);
    Tensor slow = ops::scaled_dot_product_attention_slow(q, k, v, scale, c.causal, c.window, c.softcap);
    ASSERT_EQ(fused.shape(), (Shape{c.b, c.h, c.tq, c.d}));
    EXPECT_LT(max_abs_diff(fused, slow), 2e-5f)
        << "tq " << c.tq << " tk " << c.tk << " h " << c.h << "/" << c.hkv;
  }
}

// f16 and bf16 inputs: the kernel computes in f32 and rounds once, so it is within one rounding
// of the slow version run on the same values in f32.
TEST(Attention, FusedHalfPrecisionMatchesF32Reference) {
  for (DType dt : {DType::F16, DType::BF16}) {
    for (const Case& c : kCases) {
      Tensor q = randn({c.b, c.h, c.tq, c.d}, 4).to_dtype(dt),
             k = randn({c.b, c.hkv, c.tk, c.d}, 5).to_dtype(dt),
             v = randn({c.b, c.hkv, c.tk, c.d}, 6).to_dtype(dt);
      Tensor fused = ops::scaled_dot_product_attention(q, k, v, 0.25, c.causal, c.window, c.softcap);
      ASSERT_EQ(fused.dtype(), dt);
      Tensor want =
          ops::scaled_dot_product_attention_slow(q.to_dtype(DType::F32), k.to_dtype(DType::F32),
                                                 v.to_dtype(DType::F32), 0.25, c.causal, c.window, c.softcap);
      const float tol = dt == DType::F16 ? 2e-3f : 1.6e-2f;
      EXPECT_LT(max_abs_diff(fused, want), tol) << dtype_name(dt) << " tq " << c.tq << " tk " << c.tk;
    }
  }
}

// Written out: one query, two keys, no mask: softmax([0, 1]) mixes the values.
TEST(Attention, SmallExampleByHand) {
  Tensor q = Tensor::from_vec(std::vector<float>{1.f, 0.f}, {1, 1, 1, 2}, Device::cpu());
  Tensor k = Tensor::from_vec(std::vector<float>{0.f, 1.f, 1.f, 0.f}, {1, 1, 2, 2}, Device::cpu());
  Tensor v = Tensor::from_vec(std::vector<float>{10.f, 0.f, 0.f, 10.f}, {1, 1, 2, 2}, Device::cpu());
  auto y = ops::scaled_dot_product_attention(q, k, v, 1.0, false).flatten_all().to_vec1<float>();
  const double p1 = std::exp(1.0) / (1.0 + std::exp(1.0));
  EXPECT_NEAR(y[0], 10.0 * (1.0 - p1), 1e-5);
  EXPECT_NEAR(y[1], 10.0 * p1, 1e-5);
  // causal with tq = tk = 2: the first query sees only the first key
  Tensor q2 = Tensor::cat({q, q}, 2);
  auto y2 = ops::scaled_dot_product_attention(q2, k, v, 1.0, true).flatten_all().to_vec1<float>();
  EXPECT_NEAR(y2[0], 10.0, 1e-5);
  EXPECT_NEAR(y2[1], 0.0, 1e-5);
  // a window of 1: every query sees only its own key
  auto y3 = ops::scaled_dot_product_attention(q2, k, v, 1.0, true, 1).flatten_all().to_vec1<float>();
  EXPECT_NEAR(y3[2], 0.0, 1e-5);
  EXPECT_NEAR(y3[3], 10.0, 1e-5);
}

// Strided operands (k/v as views of a larger cache buffer, a transposed q) give the same values.
TEST(Attention, StridedViews) {
  Tensor q = randn({1, 7, 4, 16}, 7).transpose(1, 2);  // [1, 4, 7, 16], strided
  Tensor kbuf = randn({1, 2, 64, 16}, 8), vbuf = randn({1, 2, 64, 16}, 9);
  Tensor k = kbuf.narrow(2, 0, 20), v = vbuf.narrow(2, 0, 20);
  Tensor fused = ops::scaled_dot_product_attention(q, k, v, 0.25, true);
  Tensor slow =
      ops::scaled_dot_product_attention_slow(q.contiguous(), k.contiguous(), v.contiguous(), 0.25, true);
  EXPECT_LT(max_abs_diff(fused, slow), 2e-5f);
}

// The same bytes for 1 and 2 threads.
TEST(Attention, DeterministicAcrossThreadCounts) {
  Tensor q = randn({2, 8, 33, 32}, 10), k = randn({2, 2, 90, 32}, 11), v = randn({2, 2, 90, 32}, 12);
  const size_t before = get_num_threads();
  set_num_threads(1);
  auto a = ops::scaled_dot_product_attention(q, k, v, 0.2, true, 40).flatten_all().to_vec1<float>();
  set_num_threads(2);
  auto b = ops::scaled_dot_product_attention(q, k, v, 0.2, true, 40).flatten_all().to_vec1<float>();
  set_num_threads(before);
  EXPECT_EQ(a, b);
}

// Choices of the kernel give the same bytes, f32 (values read in place) and f16 (converted), every
// case's shape (decode, GQA, windows, soft-capping, head sizes off the vector widths): the keys
// transposed once per kv head (the default) or by each work item for itself (over
// CANDLE_CPU_ATTN_SHARED_MB, here 0); the 4-row 16-lane kernels or the 2-row 8-lane ones
// (CANDLE_CPU_ATTN_NARROW=1: a row's sums are the same).
TEST(Attention, KernelChoicesGiveTheSameBits) {
  struct Choice {
    const char *name, *a, *b;
  };
  for (const Choice& ch :
       {Choice{"CANDLE_CPU_ATTN_SHARED_MB", "64", "0"}, Choice{"CANDLE_CPU_ATTN_NARROW", "0", "1"}})
    for (DType dt : {DType::F32, DType::F16})
      for (const Case& c : kCases) {
        Tensor q = randn({c.b, c.h, c.tq, c.d}, 21).to_dtype(dt),
               k = randn({c.b, c.hkv, c.tk, c.d}, 22).to_dtype(dt),
               v = randn({c.b, c.hkv, c.tk, c.d}, 23).to_dtype(dt);
        const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
        EXPECT_EQ(fused_with_env(c, q, k, v, scale, ch.name, ch.a),
                  fused_with_env(c, q, k, v, scale, ch.name, ch.b))
            << ch.name << " " << dtype_name(dt) << " tq " << c.tq << " tk " << c.tk << " d " << c.d;
      }
}

// A prompt's row is the same bits as that query decoded alone over the keys up to it (no window: the
// blocks of 64 keys are the same grid), whatever tile and rows of 4 / 2 / 1 the kernel put it in:
// GQA groups of 1, 3 and 8 heads, head sizes 16, 64 and 72 (a tail of 8), more keys than one block.
TEST(Attention, PromptRowsEqualTheirDecode) {
  struct Shape4 {
    size_t h, hkv, tq, tk, d;
  };
  // the kernels of 4 rows in 16-float vectors (AVX-512) and of 2 rows in 8-float ones (elsewhere)
  for (const char* narrow : {"0", "1"})
    for (const Shape4& c : {Shape4{4, 4, 21, 90, 16}, Shape4{6, 2, 19, 150, 64}, Shape4{8, 1, 9, 70, 72}}) {
      setenv("CANDLE_CPU_ATTN_NARROW", narrow, 1);
      Tensor q = randn({1, c.h, c.tq, c.d}, 31), k = randn({1, c.hkv, c.tk, c.d}, 32),
             v = randn({1, c.hkv, c.tk, c.d}, 33);
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
      Tensor all = ops::scaled_dot_product_attention(q, k, v, scale, true);
      for (size_t t = 0; t < c.tq; ++t) {
        const size_t keys = c.tk - c.tq + t + 1;
        Tensor one = ops::scaled_dot_product_attention(q.narrow(2, t, 1), k.narrow(2, 0, keys),
                                                       v.narrow(2, 0, keys), scale, true);
        EXPECT_EQ(all.narrow(2, t, 1).flatten_all().to_vec1<float>(), one.flatten_all().to_vec1<float>())
            << "h " << c.h << "/" << c.hkv << " d " << c.d << " query " << t << " narrow " << narrow;
      }
      // and the same values as the tensor-op version
      EXPECT_LT(max_abs_diff(all, ops::scaled_dot_product_attention_slow(q, k, v, scale, true)), 2e-5f);
      unsetenv("CANDLE_CPU_ATTN_NARROW");
    }
}

// Under autograd the op takes the tensor-op path, so gradients flow to q, k and v.
TEST(Attention, GradientsFlowThroughTheSlowPath) {
  Var q = Var::from_tensor(randn({1, 2, 3, 4}, 13));
  Tensor k = randn({1, 1, 3, 4}, 14), v = randn({1, 1, 3, 4}, 15);
  Tensor y = ops::scaled_dot_product_attention(q.as_tensor(), k, v, 0.5, true);
  auto grads = y.sqr().sum_all().backward();
  auto g = grads.get(q.as_tensor());
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->shape(), (Shape{1, 2, 3, 4}));
  EXPECT_GT(g->abs().sum_all().to_scalar<float>(), 0.0f);
}

TEST(Attention, RejectsBadShapes) {
  Tensor q = randn({1, 3, 2, 8}, 1), k = randn({1, 2, 4, 8}, 2), v = randn({1, 2, 4, 8}, 3);
  EXPECT_THROW(ops::scaled_dot_product_attention(q, k, v, 1.0, true), Error);  // 3 heads over 2 kv heads
  Tensor q4 = randn({1, 2, 5, 8}, 1);
  EXPECT_THROW(ops::scaled_dot_product_attention(q4, k, v, 1.0, true), Error);  // more queries than keys
  EXPECT_THROW(ops::scaled_dot_product_attention(randn({1, 2, 2, 8}, 1), k, v, 1.0, true, 0), Error);
}

// ---- KvCache --------------------------------------------------------------------------------

// Buffers of a whole capacity holding kv_len keys (a u32 tensor): the same bytes as attention over
// the buffers narrowed to kv_len (the CPU kernel reads the count itself), for decode and prefill
// rows, windows and soft-capping; a count outside [tq, capacity] is an error naming it.
TEST(Attention, KeyCountOnTheDeviceEqualsNarrowedBuffers) {
  for (const Case& c : kCases) {
    const size_t cap = c.tk + 23;
    Tensor q = randn({c.b, c.h, c.tq, c.d}, 4), k = randn({c.b, c.hkv, cap, c.d}, 5),
           v = randn({c.b, c.hkv, cap, c.d}, 6);
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
    Tensor len = Tensor::from_vec(std::vector<uint32_t>{static_cast<uint32_t>(c.tk)}, {1}, Device::cpu());
    Tensor got = ops::scaled_dot_product_attention_kv_len(q, k, v, len, scale, c.causal, c.window, c.softcap);
    Tensor want = ops::scaled_dot_product_attention(q, k.narrow(2, 0, c.tk), v.narrow(2, 0, c.tk), scale,
                                                    c.causal, c.window, c.softcap);
    EXPECT_EQ(got.flatten_all().to_vec1<float>(), want.flatten_all().to_vec1<float>())
        << "tq " << c.tq << " tk " << c.tk;
  }
  Tensor q = randn({1, 2, 3, 8}, 7), k = randn({1, 2, 10, 8}, 8);
  for (uint32_t bad : {2u, 11u}) {
    Tensor len = Tensor::from_vec(std::vector<uint32_t>{bad}, {1}, Device::cpu());
    try {
      ops::scaled_dot_product_attention_kv_len(q, k, k, len, 1.0, true);
      FAIL() << "key count " << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("key count " + std::to_string(bad)), std::string::npos)
          << e.what();
    }
  }
  EXPECT_THROW(ops::scaled_dot_product_attention_kv_len(
                   q, k, k, Tensor::zeros({1}, DType::F32, Device::cpu()), 1.0, true),
               Error);
}

TEST(KvCache, AppendsInPlaceAndGrowsByChunks) {
  nn::KvCache cache(2, 2000);
  Tensor all_k = randn({1, 2, 600, 4}, 20), all_v = randn({1, 2, 600, 4}, 21);
  auto [k0, v0] = cache.append(all_k.narrow(2, 0, 5), all_v.narrow(2, 0, 5));
  EXPECT_EQ(k0.shape(), (Shape{1, 2, 5, 4}));
  EXPECT_EQ(cache.k_cache().capacity(), nn::kv_cache::Cache::kChunk);
  const void* buf = nullptr;
  for (size_t t = 5; t < 600; ++t) {
    auto [k, v] = cache.append(all_k.narrow(2, t, 1), all_v.narrow(2, t, 1));
    EXPECT_EQ(k.dim(2), t + 1);
    if (t + 1 <= nn::kv_cache::Cache::kChunk) {
      // the same buffer while it has room: no copy of the prefix
      if (!buf) buf = k.storage().get();
      EXPECT_EQ(k.storage().get(), buf);
    }
  }
  EXPECT_EQ(cache.current_seq_len(), 600u);
  EXPECT_EQ(cache.k_cache().capacity(), 2 * nn::kv_cache::Cache::kChunk);
  auto [k, v] = cache.append(all_k.narrow(2, 0, 0), all_v.narrow(2, 0, 0));
  EXPECT_EQ(max_abs_diff(k, all_k), 0.0f);
  EXPECT_EQ(max_abs_diff(v, all_v), 0.0f);
  cache.reset();
  EXPECT_EQ(cache.current_seq_len(), 0u);
  auto [k2, v2] = cache.append(all_k.narrow(2, 7, 3), all_v.narrow(2, 7, 3));
  EXPECT_EQ(max_abs_diff(k2, all_k.narrow(2, 7, 3)), 0.0f);
}

TEST(KvCache, RefusesOverflowAndMismatches) {
  nn::KvCache cache(2, 10);
  cache.append(randn({1, 2, 8, 4}, 1), randn({1, 2, 8, 4}, 2));
  EXPECT_EQ(cache.k_cache().capacity(), 10u);  // capped at max_seq_len
  EXPECT_THROW(cache.append(randn({1, 2, 3, 4}, 1), randn({1, 2, 3, 4}, 2)), Error);
  EXPECT_THROW(cache.append(randn({1, 3, 1, 4}, 1), randn({1, 3, 1, 4}, 2)), Error);
  EXPECT_THROW(cache.append(randn({1, 2, 1, 4}, 1), randn({1, 2, 2, 4}, 2)), Error);
}
