// Helpers shared by the kernels' host code: dtype checks, range bindings and the strided
// element-wise launcher (dim merging and splitting into dispatches that fit the binding range).
#include <algorithm>
#include <bit>
#include <cstring>

#include "storage.h"

namespace candle::vk_backend {

const VulkanStorage& as_vk(const BackendStorage& s, const char* op) {
  auto* v = dynamic_cast<const VulkanStorage*>(&s);
  if (!v) throw Error(ErrorKind::DeviceMismatch, std::string(op) + ": operand is not on a Vulkan device");
  return *v;
}
VulkanStorage& as_vk(BackendStorage& s, const char* op) {
  auto* v = dynamic_cast<VulkanStorage*>(&s);
  if (!v) throw Error(ErrorKind::DeviceMismatch, std::string(op) + ": operand is not on a Vulkan device");
  return *v;
}

bool storage_ok(const Context& ctx, DType dt) {
  switch (dtype_size(dt)) {
    case 1: return ctx.features().int8;
    case 2: return ctx.features().int16;
    default: return true;
  }
}

const char* float_suffix(const Context& ctx, DType dt) {
  if (dt == DType::F32) return "f32";
  if (dt == DType::F16 && ctx.features().f16) return "f16";
  return nullptr;
}

const char* int_suffix(const Context& ctx, DType dt) {
  switch (dt) {
    case DType::U8: return ctx.features().int8 ? "u8" : nullptr;
    case DType::U32: return "u32";
    case DType::I64: return ctx.features().int64 ? "i64" : nullptr;
    default: return nullptr;
  }
}

const char* num_suffix(const Context& ctx, DType dt) {
  const char* f = float_suffix(ctx, dt);
  return f ? f : int_suffix(ctx, dt);
}

const char* bytes_suffix(const Context& ctx, DType dt) {
  if (!storage_ok(ctx, dt)) return nullptr;
  switch (dtype_size(dt)) {
    case 1: return "b1";
    case 2: return "b2";
    case 4: return "b4";
    case 8: return "b8";
  }
  return nullptr;
}

uint32_t f32_bits(float v) { return std::bit_cast<uint32_t>(v); }

VkStoragePtr upload_u32(VulkanDevice& dev, const std::vector<uint32_t>& v) {
  auto out = dev.make(DType::U32, v.size());
  if (!v.empty()) dev.ctx().write(out->block(), 0, v.data(), v.size() * sizeof(uint32_t));
  return out;
}

uint32_t check_ids(Context& ctx, DType ids_dtype, const RangeBinding& ids, size_t n, size_t limit,
                   const char* op, size_t dim, const Shape& shape) {
  struct {
    uint32_t n, ids_off, limit, tag;
  } pc{static_cast<uint32_t>(n), ids.first, static_cast<uint32_t>(std::min<size_t>(limit, 0xffffffffu)),
       ctx.register_id_check(op, dim, limit, shape.to_string())};
  uint32_t gx, gy;
  grid_for(ctx, n, kWorkGroup, gx, gy);
  ctx.dispatch(ids_dtype == DType::I64 ? "ids_check_i64" : "ids_check_u32", {ids.b, ctx.fault_binding()}, &pc,
               sizeof(pc), gx, gy);
  return pc.tag;
}

std::pair<size_t, size_t> layout_span(const Layout& l) {
  const size_t lo = l.start_offset();
  return {lo, std::max(l.max_offset_exclusive(), lo + 1)};
}

Dense dense(const VulkanStorage& s, const Layout& l) {
  if (l.is_contiguous()) return {&s, l.start_offset(), nullptr};
  auto tmp = s.vdev().make(s.dtype(), l.elem_count());
  if (l.elem_count()) s.copy_strided_src(*tmp, 0, l);
  return {tmp.get(), 0, tmp};
}

size_t bind_budget(const Context& ctx, size_t esize) {
  const auto& f = ctx.features();
  return static_cast<size_t>((f.max_range - f.offset_align - 4) / esize);
}

RangeBinding bind_range(const VulkanStorage& s, size_t lo, size_t hi) {
  const auto& f = s.ctx().features();
  const size_t es = dtype_size(s.dtype());
  const uint64_t lo_b = uint64_t(lo) * es;
  const uint64_t start = lo_b / f.offset_align * f.offset_align;
  uint64_t size = (std::max<uint64_t>(uint64_t(hi) * es, lo_b + 1) - start + 3) / 4 * 4;
  size = std::min<uint64_t>(size, block_bytes(s.block()) - start);
  return {{&s.block(), start, size}, static_cast<uint32_t>((lo_b - start) / es)};
}

void grid_for(const Context& ctx, size_t n, size_t per_group, uint32_t& gx, uint32_t& gy) {
  size_t groups = std::max<size_t>((n + per_group - 1) / per_group, 1);
  size_t mx = ctx.features().max_groups[0];
  gx = static_cast<uint32_t>(std::min(groups, mx));
  gy = static_cast<uint32_t>((groups + gx - 1) / gx);
}

namespace {

struct Merged {
  std::vector<size_t> dims;
  std::vector<std::vector<size_t>> st;  // per operand
  std::vector<size_t> start;
};

// Drops size-1 dims and merges neighbours that are contiguous for every operand.
Merged merge(const std::vector<Operand>& ops) {
  Merged m;
  const auto& dims = ops[0].l.dims();
  m.st.resize(ops.size());
  for (const auto& o : ops) m.start.push_back(o.l.start_offset());
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 1) continue;
    bool can = !m.dims.empty();
    for (size_t i = 0; can && i < ops.size(); ++i) can = m.st[i].back() == ops[i].l.stride()[d] * dims[d];
    if (can) {
      m.dims.back() *= dims[d];
      for (size_t i = 0; i < ops.size(); ++i) m.st[i].back() = ops[i].l.stride()[d];
    } else {
      m.dims.push_back(dims[d]);
      for (size_t i = 0; i < ops.size(); ++i) m.st[i].push_back(ops[i].l.stride()[d]);
    }
  }
  if (m.dims.empty()) {
    m.dims.push_back(1);
    for (auto& s : m.st) s.push_back(1);
  }
  return m;
}

// Elements spanned by operand i over dims [from, r) (the first of which has extent c).
size_t span(const Merged& m, size_t i, size_t from, size_t c) {
  size_t s = 1;
  for (size_t d = from; d < m.dims.size(); ++d) s += ((d == from ? c : m.dims[d]) - 1) * m.st[i][d];
  return s;
}

}  // namespace

bool run_elementwise(const char* kernel, const std::vector<Operand>& ops, size_t n_strided, uint32_t op,
                     uint32_t p0, uint32_t p1) {
  const size_t n = ops[0].l.elem_count();
  for (const auto& o : ops) {
    if (o.l.dims() != ops[0].l.dims())
      throw Error(ErrorKind::Internal, std::string(kernel) + ": shapes differ");
    if (n && o.l.max_offset_exclusive() > o.s->elem_count()) {
      throw Error(ErrorKind::Internal, std::string(kernel) + ": layout out of the storage's bounds");
    }
  }
  if (n == 0) return true;
  Merged m = merge(ops);
  const size_t r = m.dims.size();
  if (r > kMaxRank) return false;
  Context& ctx = ops[0].s->ctx();
  std::vector<size_t> budget;
  budget.reserve(ops.size());
  for (const auto& o : ops) budget.push_back(bind_budget(ctx, dtype_size(o.s->dtype())));
  const size_t max_elems = size_t(1) << 31;
  auto fits = [&](size_t from, size_t c) {
    size_t elems = c;
    for (size_t d = from + 1; d < r; ++d) elems *= m.dims[d];
    if (elems > max_elems) return false;
    for (size_t i = 0; i < ops.size(); ++i)
      if (span(m, i, from, c) > budget[i]) return false;
    return true;
  };
  // split dim: the outermost whose single slices fit; chunk: as many slices as fit
  size_t sd = 0;
  while (sd + 1 < r && !fits(sd, 1)) ++sd;
  if (!fits(sd, 1)) throw Error(ErrorKind::Internal, std::string(kernel) + ": cannot split the operands");
  size_t c = m.dims[sd];
  if (!fits(sd, c)) {
    size_t lo = 1, hi = c;  // fits(lo), !fits(hi)
    while (hi - lo > 1) {
      size_t mid = lo + (hi - lo) / 2;
      (fits(sd, mid) ? lo : hi) = mid;
    }
    c = lo;
  }
  size_t inner = 1;
  for (size_t d = sd + 1; d < r; ++d) inner *= m.dims[d];

  std::vector<size_t> idx(sd, 0);
  std::vector<Binding> binds(ops.size());
  for (;;) {
    for (size_t j = 0; j < m.dims[sd]; j += c) {
      const size_t cc = std::min(c, m.dims[sd] - j);
      EwPush pc{};
      const size_t cr = r - sd;
      pc.n = static_cast<uint32_t>(cc * inner);
      pc.rank_op = static_cast<uint32_t>(cr) | (op << 8);
      pc.p0 = p0;
      pc.p1 = p1;
      for (size_t d = 0; d < cr; ++d) pc.dims[d] = static_cast<uint32_t>(d == 0 ? cc : m.dims[sd + d]);
      for (size_t i = 0; i < ops.size(); ++i) {
        size_t first = m.start[i] + j * m.st[i][sd];
        for (size_t d = 0; d < sd; ++d) first += idx[d] * m.st[i][d];
        auto rb = bind_range(*ops[i].s, first, first + span(m, i, sd, cc));
        binds[i] = rb.b;
        pc.off[i] = rb.first;
        if (i < n_strided) {
          for (size_t d = 0; d < cr; ++d) pc.st[i][d] = static_cast<uint32_t>(m.st[i][sd + d]);
        }
      }
      uint32_t gx, gy;
      grid_for(ctx, pc.n, kWorkGroup, gx, gy);
      ctx.dispatch(kernel, binds.data(), binds.size(), &pc, sizeof(pc), gx, gy);
    }
    // next outer index
    size_t d = sd;
    while (d > 0) {
      --d;
      if (++idx[d] < m.dims[d]) break;
      idx[d] = 0;
      if (d == 0) return true;
    }
    if (sd == 0) return true;
  }
}

}  // namespace candle::vk_backend
