// The CPU's fused AdamW step (BackendStorage::adamw_step_set): one multi-core pass writing m,
// v and theta in place. Each element is independent, so the bytes do not depend on the thread
// count; the order of operations is that of candle's composed update, in the element type.
#include <cmath>
#include <memory>

#include "candle/backend/cpu_storage.h"
#include "cpu/clones.h"
#include "cpu/dense.h"
#include "cpu/parallel.h"

namespace candle {
namespace {

template <typename T>
CANDLE_TARGET_CLONES void adamw_range(T* __restrict theta, T* __restrict m, T* __restrict v,
                                      const T* __restrict g, size_t n, T b1, T one_b1, T b2, T one_b2,
                                      T scale_m, T scale_v, T decay, T lr, T eps) {
  for (size_t i = 0; i < n; ++i) {
    T gi = g[i];
    T mi = m[i] * b1 + gi * one_b1;
    T vi = v[i] * b2 + (gi * gi) * one_b2;
    m[i] = mi;
    v[i] = vi;
    T denom = std::sqrt(vi * scale_v) + eps;
    theta[i] = theta[i] * decay - ((mi * scale_m) / denom) * lr;
  }
}

// Whether `l` is contiguous, in bounds of `s`, with `n` elements.
bool dense_in(const BackendStorage& s, const Layout& l, size_t n) {
  return l.is_contiguous() && l.elem_count() == n && l.start_offset() + n <= s.elem_count();
}

}  // namespace

bool CpuStorage::adamw_step_set(const Layout& l, BackendStorage& m_base, const Layout& m_l,
                                BackendStorage& v_base, const Layout& v_l, const BackendStorage& g_base,
                                const Layout& g_l, const AdamWStep& c) {
  auto* m = dynamic_cast<CpuStorage*>(&m_base);
  auto* v = dynamic_cast<CpuStorage*>(&v_base);
  auto* g = dynamic_cast<const CpuStorage*>(&g_base);
  const DType dt = dtype();
  if (!m || !v || !g || (dt != DType::F32 && dt != DType::F64)) return false;
  if (m->dtype() != dt || v->dtype() != dt || g->dtype() != dt) return false;
  const size_t n = l.elem_count();
  if (!dense_in(*this, l, n) || !dense_in(*m, m_l, n) || !dense_in(*v, v_l, n) || g_l.elem_count() != n ||
      g_l.max_offset_exclusive() > g->elem_count())
    return false;
  auto run = [&]<typename T>() {
    std::unique_ptr<T[]> keep;
    const T* gp = cpu::dense_as<T, T>(*g, g_l, keep);
    T* tp = data<T>() + l.start_offset();
    T* mp = m->data<T>() + m_l.start_offset();
    T* vp = v->data<T>() + v_l.start_offset();
    const T b1 = static_cast<T>(c.beta1), one_b1 = static_cast<T>(1.0 - c.beta1);
    const T b2 = static_cast<T>(c.beta2), one_b2 = static_cast<T>(1.0 - c.beta2);
    const T sm = static_cast<T>(c.scale_m), sv = static_cast<T>(c.scale_v);
    const T decay = static_cast<T>(c.decay), lr = static_cast<T>(c.lr), eps = static_cast<T>(c.eps);
    cpu::parallel_for(n, cpu::kParallelGrain, [&](size_t b, size_t e) {
      adamw_range<T>(tp + b, mp + b, vp + b, gp + b, e - b, b1, one_b1, b2, one_b2, sm, sv, decay, lr, eps);
    });
  };
  if (dt == DType::F32)
    run.template operator()<float>();
  else
    run.template operator()<double>();
  return true;
}

}  // namespace candle
