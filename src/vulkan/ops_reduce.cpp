// Reductions (sum, min, max, argmin, argmax over any dims) with reduce.comp.
//
// The layout is permuted to [kept dims..., reduced dims...]; when that is not a set of evenly
// spaced contiguous rows it is first copied to a dense temporary. Rows are then reduced by
// work-groups of `chunk` elements; rows much longer than the number of rows are split over
// several work-groups whose partials a second pass reduces. The split depends only on the
// shape and the device's binding range, so results are deterministic. Integer dtypes (u8,
// u32, i64) have their own variants (wrapping sums, partials in u32 / i64): bit-identical to
// the CPU.
#include <algorithm>
#include <string>

#include "storage.h"

namespace candle::vk_backend {
namespace {

struct ReducePush {
  uint32_t row_len, row_stride, chunk, chunks, op, in_off, out_off, w0, row0, c0, n_groups, idx_off;
};

// The reduce.comp variant for dt ("f32", "f16", "u8", "u32", "i64") and the dtype of its
// partial values; nullptr when there is none.
const char* reduce_suffix(const Context& ctx, DType dt, DType& partial) {
  partial = dt == DType::I64 ? DType::I64 : dt == DType::U8 || dt == DType::U32 ? DType::U32 : DType::F32;
  return num_suffix(ctx, dt);
}

struct Rows {
  const VulkanStorage* s;    // values
  const VulkanStorage* idx;  // partial indices (second pass) or nullptr
  size_t base, n_rows, row_len, row_stride;
};

// One pass of reduce.comp: rows -> out values / out indices (one output per work-group).
void run_pass(const std::string& kernel, const Rows& in, size_t chunk, size_t chunks, uint32_t op,
              const VulkanStorage& out_v, const VulkanStorage& out_i) {
  Context& ctx = in.s->ctx();
  const size_t W = in.n_rows * chunks;
  const size_t es = dtype_size(in.s->dtype());
  const size_t budget = std::min(bind_budget(ctx, es), bind_budget(ctx, 4));
  const size_t out_budget = bind_budget(ctx, 4);
  const uint64_t max_groups = uint64_t(ctx.features().max_groups[0]) * ctx.features().max_groups[1];
  auto start = [&](size_t w) { return (w / chunks) * in.row_stride + (w % chunks) * chunk; };
  auto end = [&](size_t w) {
    return (w / chunks) * in.row_stride + std::min(in.row_len, (w % chunks + 1) * chunk);
  };
  auto fits = [&](size_t w0, size_t w1) {
    return end(w1 - 1) - start(w0) <= budget && w1 - w0 <= out_budget && w1 - w0 <= max_groups;
  };
  for (size_t w0 = 0; w0 < W;) {
    size_t lo = 1, hi = W - w0 + 1;  // fits(w0, w0 + lo), !fits(w0, w0 + hi) or hi past the end
    if (!fits(w0, w0 + 1)) throw Error(ErrorKind::Internal, "reduce: a chunk does not fit a binding");
    while (hi - lo > 1) {
      size_t mid = lo + (hi - lo) / 2;
      (fits(w0, w0 + mid) ? lo : hi) = mid;
    }
    const size_t w1 = w0 + lo;
    const size_t row0 = w0 / chunks;
    const size_t first = in.base + start(w0), last = in.base + end(w1 - 1);
    auto bv = bind_range(*in.s, first, last);
    auto bi = in.idx ? bind_range(*in.idx, first, last) : bv;
    auto ov = bind_range(out_v, w0, w1);
    auto oi = bind_range(out_i, w0, w1);
    ReducePush pc{static_cast<uint32_t>(in.row_len),
                  static_cast<uint32_t>(in.row_stride),
                  static_cast<uint32_t>(chunk),
                  static_cast<uint32_t>(chunks),
                  op,
                  bv.first,
                  ov.first,
                  static_cast<uint32_t>(w0),
                  static_cast<uint32_t>(row0),
                  static_cast<uint32_t>(w0 % chunks),
                  static_cast<uint32_t>(w1 - w0),
                  bi.first};
    if (oi.first != ov.first) throw Error(ErrorKind::Internal, "reduce: output bindings differ");
    uint32_t gx, gy;
    grid_for(ctx, w1 - w0, 1, gx, gy);
    ctx.dispatch(kernel.c_str(), {bv.b, bi.b, ov.b, oi.b}, &pc, sizeof(pc), gx, gy);
    w0 = w1;
  }
}

}  // namespace

StoragePtr VulkanStorage::reduce(ReduceOp op, const Layout& l, const std::vector<size_t>& dims) const {
  const char* name = reduce_op_name(op);
  DType partial;
  const char* sfx = reduce_suffix(ctx(), dtype_, partial);
  const bool is_arg = op == ReduceOp::ArgMin || op == ReduceOp::ArgMax;
  const size_t rank = l.dims().size();
  bool valid = !(is_arg && dims.size() != 1);
  for (size_t i = 0; i < dims.size(); ++i)
    valid = valid && dims[i] < rank && (i == 0 || dims[i] > dims[i - 1]);
  size_t R = 1, n_out = 1;
  std::vector<size_t> perm;
  for (size_t d = 0; d < rank; ++d)
    if (!std::binary_search(dims.begin(), dims.end(), d)) {
      perm.push_back(d);
      n_out *= l.dims()[d];
    }
  const size_t n_kept = perm.size();
  for (size_t d : dims) {
    perm.push_back(d);
    if (d < rank) R *= l.dims()[d];
  }
  // invalid input, empty min/max, huge rows: the CPU path reports or handles it
  if (!sfx || !valid || (R == 0 && op != ReduceOp::Sum) || R > 0xffffffffull) {
    note_round_trip(name);
    return BackendStorage::reduce(op, l, dims);
  }
  const DType out_dt = is_arg ? DType::U32 : dtype_;
  auto out = vdev().make(out_dt, n_out);
  if (n_out == 0) return out;
  if (R == 0) {  // sum over an empty dim
    out->const_set(Scalar(0.0), Layout::contiguous(Shape{n_out}));
    return out;
  }
  // rows: [kept (merged into one strided dim), reduced (contiguous)]
  Layout pl = l.permute(perm);
  Layout kept(Shape(std::vector<size_t>(pl.dims().begin(), pl.dims().begin() + n_kept)),
              std::vector<size_t>(pl.stride().begin(), pl.stride().begin() + n_kept), 0);
  Layout red(Shape(std::vector<size_t>(pl.dims().begin() + n_kept, pl.dims().end())),
             std::vector<size_t>(pl.stride().begin() + n_kept, pl.stride().end()), 0);
  size_t row_stride = 0;
  bool rows_ok = red.is_contiguous();
  if (rows_ok && n_out > 1) {
    // the kept dims must fold into one stride of at least a row
    size_t expect = 0;
    bool have = false;
    for (size_t i = n_kept; i-- > 0;) {
      size_t d = kept.dims()[i], st = kept.stride()[i];
      if (d == 1) continue;
      if (!have) {
        row_stride = st;
        have = true;
      } else if (st != expect) {
        rows_ok = false;
      }
      expect = st * d;
    }
    rows_ok = rows_ok && row_stride >= R;
  }
  std::shared_ptr<VulkanStorage> tmp;
  const VulkanStorage* src = this;
  size_t base = l.start_offset();
  if (!rows_ok) {
    tmp = vdev().make(dtype_, n_out * R);
    copy_strided_src(*tmp, 0, pl);
    src = tmp.get();
    base = 0;
    row_stride = R;
  }
  if (n_out == 1) row_stride = R;

  // chunking: one work-group per row unless there are few long rows, or rows that exceed a binding
  const size_t max_chunk = std::min(bind_budget(ctx(), dtype_size(dtype_)), size_t(1) << 30);
  size_t chunks = 1;
  if (R > 8192 && n_out < 1024) chunks = std::min((R + 4095) / 4096, (1024 + n_out - 1) / n_out);
  chunks = std::max(chunks, (R + max_chunk - 1) / max_chunk);
  const size_t chunk = (R + chunks - 1) / chunks;
  chunks = (R + chunk - 1) / chunk;
  const uint32_t opc = static_cast<uint32_t>(op);
  Rows rows{src, nullptr, base, n_out, R, row_stride};
  const std::string k(sfx);
  if (chunks == 1) {
    run_pass("reduce_" + k, rows, chunk, 1, opc, *out, *out);
    return out;
  }
  auto pv = vdev().make(partial, n_out * chunks);
  auto pi = vdev().make(DType::U32, n_out * chunks);
  run_pass("reduce_" + k + "_p", rows, chunk, chunks, opc, *pv, *pi);
  Rows second{pv.get(), pi.get(), 0, n_out, chunks, chunks};
  run_pass("reduce_p_" + k, second, chunks, 1, opc, *out, *out);
  return out;
}

}  // namespace candle::vk_backend
