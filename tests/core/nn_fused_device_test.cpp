// candle::nn's fused backend hooks on every GPU device against the CPU backend's kernels, at the
// storage level: softmax_last_dim, rms_norm, layer_norm, rope (three kinds), scaled dot-product
// attention (with CUDA's split-key path for small grids) and the AdamW step, over dtypes and
// strided layouts. A device may answer "no kernel" (nullptr / false: candle::nn then composes
// tensor ops), except CUDA, whose kernels cover every case here; no case may take a CPU
// round-trip (the fixture checks).
//
// Tolerances: the row ops and attention sum in another order than the CPU (f32 1e-5 + 1e-5 |want|,
// attention 2e-5 + 1e-4); f16 / bf16 / f8 compute in f32 and round once at the store, so about
// one ulp of the storage type apart (2e-3, 8e-3, 0.13 relative); f64 1e-12. rope rounds each
// product and sum as the CPU does and AdamW follows the CPU's roundings: the same bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <tuple>

#include "candle/backend/cpu_storage.h"
#include "storage_util.h"
#include "test_device.h"

namespace candle {
namespace {

using namespace storage_test;

CANDLE_GPU_DEVICE_TEST_SUITE(NnFusedDevice);

struct Tol {
  float atol, rtol;
};

Tol row_tol(DType dt) {
  switch (dt) {
    case DType::F16: return {2e-3f, 2e-3f};
    case DType::BF16: return {8e-3f, 8e-3f};
    case DType::F8E4M3: return {4e-3f, 0.13f};
    case DType::F64: return {1e-12f, 1e-12f};
    default: return {1e-5f, 1e-5f};
  }
}

std::vector<DType> dtypes_of(const Device& dev) {
  if (dev.is_cuda()) return {DType::F32, DType::F16, DType::BF16, DType::F64, DType::F8E4M3};
  return float_dtypes(dev);
}

// A result of a hook: present, or absent where the device may lack the kernel.
bool have(const Device& dev, const StoragePtr& got, const std::string& what) {
  if (got) return true;
  if (dev.is_cuda()) ADD_FAILURE() << what << ": no CUDA kernel";
  return false;
}

// Row ops over the harness's layouts, for short rows (a warp per row on CUDA) and long ones (a
// block per row).
CANDLE_DEVICE_TEST(NnFusedDevice, RowOpsEveryDtypeAndLayout) {
  for (size_t c : {size_t(29), size_t(3001)}) {
    const size_t r = 37;
    for (DType dt : dtypes_of(dev)) {
      const Tol t = row_tol(dt);
      Pair x = make_pair(dev, dt, values(storage_elems(r, c), -3.0f, 3.0f, 11));
      Pair a = make_pair(dev, dt, values(2 * c, 0.5f, 1.5f, 12));
      Pair b = make_pair(dev, dt, values(2 * c, -0.5f, 0.5f, 13));
      const Layout al = Layout::contiguous(Shape{c});
      const Layout bl(Shape{c}, {2}, 1);  // a strided beta
      for (const auto& nl : layouts(r, c)) {
        const std::string what = std::string(dtype_name(dt)) + " " + nl.name + " d=" + std::to_string(c);
        if (auto got = x.vk->softmax_last_dim(nl.l); have(dev, got, "softmax " + what))
          expect_close(as_f32(*got), as_f32(*x.cpu->softmax_last_dim(nl.l)), t.atol, t.rtol,
                       "softmax " + what);
        if (auto got = x.vk->rms_norm(nl.l, *a.vk, al, 1e-5f); have(dev, got, "rms_norm " + what))
          expect_close(as_f32(*got), as_f32(*x.cpu->rms_norm(nl.l, *a.cpu, al, 1e-5f)), t.atol, t.rtol,
                       "rms_norm " + what);
        if (auto got = x.vk->layer_norm(nl.l, *a.vk, al, *b.vk, bl, 1e-5f);
            have(dev, got, "layer_norm " + what))
          expect_close(as_f32(*got), as_f32(*x.cpu->layer_norm(nl.l, *a.cpu, al, *b.cpu, bl, 1e-5f)), t.atol,
                       t.rtol, "layer_norm " + what);
      }
    }
  }
}

CANDLE_DEVICE_TEST(NnFusedDevice, SoftmaxOfLargeAndInfiniteInputs) {
  // large values (the max is subtracted) and a -inf entry (weight 0); on CUDA also a row of -inf
  // (NaN everywhere, as the CPU's (-inf) - (-inf))
  std::vector<float> v{1000.0f, 999.0f, -INFINITY, 998.0f, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
  Pair x = make_pair(dev, DType::F32, v);
  const Layout l = Layout::contiguous(Shape{dev.is_cuda() ? size_t(2) : size_t(1), 4});
  auto got = x.vk->softmax_last_dim(l);
  if (!have(dev, got, "softmax")) return;
  expect_close(as_f32(*got), as_f32(*x.cpu->softmax_last_dim(l)), 1e-6f, 1e-6f, "softmax", true);
}

// rope, rope_i and rope_thd with cos/sin [t_max, d/2] and [b, t_max, d/2], x dense and strided.
CANDLE_DEVICE_TEST(NnFusedDevice, RopeEveryKindDtypeAndLayout) {
  const size_t b = 2, h = 3, t = 5, d = 8, t_max = 7;
  for (DType dt : dtypes_of(dev)) {
    Pair x = make_pair(dev, dt, values(b * h * t * d + 3, -2.0f, 2.0f, 21));
    Pair cs = make_pair(dev, dt, values(b * t_max * d / 2, -1.0f, 1.0f, 22));
    Pair sn = make_pair(dev, dt, values(b * t_max * d / 2, -1.0f, 1.0f, 23));
    for (RopeKind kind : {RopeKind::Halves, RopeKind::Interleaved, RopeKind::HalvesThd}) {
      const bool thd = kind == RopeKind::HalvesThd;
      const size_t d1 = thd ? t : h, d2 = thd ? h : t;
      // dense with an offset, and dims 1 and 2 swapped in memory
      const std::vector<std::pair<const char*, Layout>> xls{
          {"dense", Layout(Shape{b, d1, d2, d}, {d1 * d2 * d, d2 * d, d, 1}, 3)},
          {"swapped", Layout(Shape{b, d1, d2, d}, {d1 * d2 * d, d, d1 * d, 1}, 0)}};
      const std::vector<std::pair<const char*, Layout>> cls{
          {"cs2", Layout::contiguous(Shape{t_max, d / 2})},
          {"cs3", Layout::contiguous(Shape{b, t_max, d / 2})}};
      for (const auto& [xn, xl] : xls)
        for (const auto& [cn, cl] : cls) {
          const std::string what = std::string("rope kind ") + std::to_string(int(kind)) + " " +
                                   std::string(dtype_name(dt)) + " " + xn + " " + cn;
          auto got = x.vk->rope(kind, xl, *cs.vk, cl, *sn.vk, cl);
          if (!have(dev, got, what)) continue;
          auto want = x.cpu->rope(kind, xl, *cs.cpu, cl, *sn.cpu, cl);
          if (dev.is_cuda())
            expect_same_bytes(*got, *want, what);
          else
            expect_close(as_f32(*got), as_f32(*want), row_tol(dt).atol, row_tol(dt).rtol, what);
        }
    }
  }
}

struct AttnCase {
  const char* name;
  size_t b, h, hkv, tq, tk, d, dv;
  AttentionParams p;
  bool strided_q;
};

CANDLE_DEVICE_TEST(NnFusedDevice, AttentionCausalWindowSoftcapGqaStrided) {
  const std::vector<AttnCase> cases{
      {"full", 2, 4, 4, 37, 37, 16, 24, {0.25f, false, 0, 0.0f}, false},
      {"causal-gqa", 2, 4, 2, 37, 37, 16, 16, {0.25f, true, 0, 0.0f}, false},
      {"causal-last-rows", 1, 4, 1, 5, 70, 32, 32, {0.17f, true, 0, 0.0f}, false},
      {"window", 1, 2, 2, 40, 40, 8, 8, {0.35f, true, 9, 0.0f}, false},
      {"window-noncausal", 1, 2, 1, 40, 40, 8, 8, {0.35f, false, 9, 0.0f}, false},
      {"softcap", 1, 2, 2, 19, 19, 16, 16, {1.0f, true, 0, 5.0f}, false},
      {"decode-long", 1, 8, 2, 1, 300, 128, 128, {0.088f, true, 0, 0.0f}, false},
      {"strided-q", 2, 4, 2, 9, 9, 64, 64, {0.125f, true, 0, 0.0f}, true},
      {"d256", 1, 2, 1, 6, 45, 256, 256, {0.0625f, true, 0, 0.0f}, false},
      // few blocks over many keys: CUDA splits the keys over blocks and merges the partial results
      {"decode-split", 1, 4, 1, 1, 1000, 64, 64, {0.125f, true, 0, 0.0f}, false},
      {"split-window", 1, 2, 1, 2, 1200, 32, 48, {0.18f, true, 40, 0.0f}, false},
      {"split-noncausal", 2, 1, 1, 3, 777, 16, 16, {0.25f, false, 0, 3.0f}, true},
      // CUDA's decode kernel (<= 8 query rows a kv head, value rows of 64 / 128 / 256): TinyLlama's
      // and LLaMA-7B's decode shapes, one split and many, two query rows, rows of a group of 3
      // padded to 4, a window with a softcap, a key width that is no value width
      {"dec-gqa8", 1, 32, 4, 1, 190, 64, 64, {0.125f, true, 0, 0.0f}, false},
      {"dec-gqa8-long", 1, 32, 4, 1, 2047, 64, 64, {0.125f, true, 0, 0.0f}, false},
      {"dec-mha", 1, 32, 32, 1, 300, 128, 128, {0.088f, true, 0, 0.0f}, false},
      {"dec-short", 1, 8, 1, 1, 3, 64, 64, {0.125f, true, 0, 0.0f}, false},
      {"dec-2rows", 2, 8, 2, 2, 333, 64, 64, {0.125f, true, 0, 0.0f}, true},
      {"dec-group3", 1, 6, 2, 1, 100, 64, 128, {0.2f, false, 0, 0.0f}, false},
      {"dec-window-cap", 1, 8, 2, 1, 500, 128, 128, {0.088f, true, 100, 30.0f}, false},
      {"dec-d72-dv256", 1, 2, 1, 1, 150, 72, 256, {0.1f, true, 0, 0.0f}, false},
  };
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    if (dt != DType::F32 && !dev.is_cuda()) continue;
    const Tol t =
        dt == DType::F32 ? Tol{2e-5f, 1e-4f} : (dt == DType::F16 ? Tol{2e-3f, 4e-3f} : Tol{8e-3f, 1.6e-2f});
    for (const auto& c : cases) {
      const std::string what = std::string(c.name) + " " + std::string(dtype_name(dt));
      Pair q = make_pair(dev, dt, values(c.b * c.h * c.tq * c.d, -1.0f, 1.0f, 31));
      Pair k = make_pair(dev, dt, values(c.b * c.hkv * c.tk * c.d, -1.0f, 1.0f, 32));
      Pair v = make_pair(dev, dt, values(c.b * c.hkv * c.tk * c.dv, -1.0f, 1.0f, 33));
      // strided: q [b, h, tq, d] viewed from memory laid out [b, tq, h, d]
      const Layout ql = c.strided_q
                            ? Layout(Shape{c.b, c.h, c.tq, c.d}, {c.tq * c.h * c.d, c.d, c.h * c.d, 1}, 0)
                            : Layout::contiguous(Shape{c.b, c.h, c.tq, c.d});
      const Layout kl = Layout::contiguous(Shape{c.b, c.hkv, c.tk, c.d});
      const Layout vl = Layout::contiguous(Shape{c.b, c.hkv, c.tk, c.dv});
      const auto want = as_f32(*q.cpu->scaled_dot_product_attention(ql, *k.cpu, kl, *v.cpu, vl, c.p));
      // CUDA: both forms of its decode kernel (CANDLE_CUDA_ATTN_DECODE, read at each call)
      for (const char* form : {"tile", "rows"}) {
        if (dev.is_cuda()) setenv("CANDLE_CUDA_ATTN_DECODE", form, 1);
        auto got = q.vk->scaled_dot_product_attention(ql, *k.vk, kl, *v.vk, vl, c.p);
        if (dev.is_cuda()) unsetenv("CANDLE_CUDA_ATTN_DECODE");
        if (!have(dev, got, what)) break;
        expect_close(as_f32(*got), want, t.atol, t.rtol, what + " " + form);
        if (!dev.is_cuda()) break;
      }
    }
  }
}

CANDLE_DEVICE_TEST(NnFusedDevice, AdamWStepMatchesTheCpuBytes) {
  const size_t n = 1037;
  const AdamWStep c{
      1e-3, 0.9, 0.999, 1e-8, 1.0 - 1e-3 * 0.01, 1.0 / (1.0 - 0.9 * 0.9), 1.0 / (1.0 - 0.999 * 0.999)};
  for (DType dt : {DType::F32, DType::F64}) {
    Pair th = make_pair(dev, dt, values(n, -1.0f, 1.0f, 41));
    Pair m = make_pair(dev, dt, values(n, -0.1f, 0.1f, 42));
    Pair v = make_pair(dev, dt, values(n, 0.0f, 0.01f, 43));
    Pair g = make_pair(dev, dt, values(n + 1, -0.5f, 0.5f, 44));
    for (const auto& gl : {Layout::contiguous(Shape{n}, 1), Layout(Shape{n / 2}, {2}, 0)}) {
      const std::string what = std::string("adamw ") + std::string(dtype_name(dt)) + " g " +
                               (gl.is_contiguous() ? "dense" : "strided");
      const Layout tl = Layout::contiguous(Shape{gl.elem_count()});
      const bool ok = th.vk->adamw_step_set(tl, *m.vk, tl, *v.vk, tl, *g.vk, gl, c);
      if (!ok) {
        if (dev.is_cuda()) ADD_FAILURE() << what << ": no CUDA kernel";
        continue;
      }
      ASSERT_TRUE(th.cpu->adamw_step_set(tl, *m.cpu, tl, *v.cpu, tl, *g.cpu, gl, c)) << what;
      for (const auto& [name, got, want] :
           {std::tuple{"theta", th.vk, th.cpu}, std::tuple{"m", m.vk, m.cpu}, std::tuple{"v", v.vk, v.cpu}}) {
        if (dev.is_cuda())
          expect_same_bytes(*got, *want, what + " " + name);
        else
          expect_close(as_f32(*got), as_f32(*want), 1e-6f, 1e-6f, what + " " + name);
      }
    }
  }
}

}  // namespace
}  // namespace candle
