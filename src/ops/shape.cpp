// Shape and view ops: reshape, squeeze/unsqueeze, flatten, transpose/permute, narrow, chunk,
// broadcast, cat/stack, pad, repeat, roll, flip, unfold and Tensor::i indexing.
//
// Views share the storage and only change the layout. Ops that build a new tensor write it
// with a few large row copies (BackendStorage::copy2d / copy_strided_src / copy_strided_rows,
// multi-core on the CPU).
#include <algorithm>
#include <optional>
#include <string>
#include <variant>

#include "candle/tensor.h"
#include "candle/utils.h"
#include "core/backprop_op.h"
#include "ops/op_util.h"

namespace candle {
namespace {

Tensor view_of(const Tensor& t, Layout l) {
  return Tensor::from_storage(t.storage(), std::move(l), t.dtype(), t.device());
}

// Records a result whose gradient is g reshaped to the input's shape (reshape, squeeze,
// unsqueeze, and the repeat / unfold cases that only add dims).
Tensor record_reshape(Tensor out, const Tensor& t, const char* name) {
  return autograd::record(
      std::move(out), name, CANDLE_BACKWARD() { gi[0] = g.reshape(in[0].shape()); }, t);
}

size_t product(const std::vector<size_t>& v, size_t begin, size_t end) {
  size_t p = 1;
  for (size_t k = begin; k < end; ++k) p *= v[k];
  return p;
}

std::string str(int64_t v) { return std::to_string(v); }

// Seen as a [d1, d2] matrix split before dim `split`, the layout has contiguous rows that
// start at a constant stride: returns that stride (any value when there is one row).
std::optional<size_t> row_stride_2d(const Layout& l, size_t split) {
  const auto& dims = l.dims();
  const auto& st = l.stride();
  size_t acc = 1;
  for (size_t k = dims.size(); k-- > split;) {
    if (dims[k] != 1 && st[k] != acc) return std::nullopt;
    acc *= dims[k];
  }
  std::optional<size_t> row_stride;
  size_t expect = 0;
  for (size_t k = split; k-- > 0;) {
    if (dims[k] == 1) continue;
    if (row_stride && st[k] != expect) return std::nullopt;
    if (!row_stride) row_stride = st[k];
    expect = st[k] * dims[k];
  }
  return row_stride ? *row_stride : acc;
}

// Writes the elements of (src, l), seen as rows split before dim `split`, into dst: row r
// of d2 = prod(dims[split..]) elements lands at dst_o + r * dst_s.
void write_rows(const BackendStorage& src, const Layout& l, size_t split, BackendStorage& dst, size_t dst_s,
                size_t dst_o) {
  size_t n = l.elem_count();
  if (n == 0) return;
  size_t d1 = product(l.dims(), 0, split);
  size_t d2 = n / d1;
  if (auto s = row_stride_2d(l, split)) {
    src.copy2d(dst, d1, d2, *s, dst_s, l.start_offset(), dst_o);
    return;
  }
  if (d1 == 1 || dst_s == d2) {
    src.copy_strided_src(dst, dst_o, l);
    return;
  }
  src.copy_strided_rows(dst, l, d2, dst_s, dst_o);
}

// An untracked new tensor: the op that fills it records its node.
Tensor new_contiguous(const Shape& shape, const Tensor& like) {
  StoragePtr s = like.device().backend().alloc(like.dtype(), shape.elem_count());
  return Tensor::from_storage(std::move(s), Layout::contiguous(shape), like.dtype(), like.device());
}

// A contiguous copy of t's elements with another shape of the same element count.
Tensor copy_as(const Tensor& t, const Shape& shape) {
  Tensor out = new_contiguous(shape, t);
  write_rows(*t.storage(), t.layout(), 0, *out.storage(), t.elem_count(), 0);
  return out;
}

[[noreturn]] void rank_error(const char* op, const std::string& want, const Shape& s) {
  throw Error(ErrorKind::ShapeMismatch, std::string("unexpected rank in ") + op + ", expected: " + want +
                                            ", got: " + std::to_string(s.rank()) + " (shape " +
                                            s.to_string() + ")");
}

}  // namespace

Tensor Tensor::reshape(const Shape& shape) const {
  if (shape.elem_count() != elem_count()) {
    throw Error(ErrorKind::ShapeMismatch, "shape mismatch in reshape, src: " + this->shape().to_string() +
                                              ", dst: " + shape.to_string());
  }
  if (is_contiguous()) {
    return record_reshape(view_of(*this, Layout::contiguous(shape, layout().start_offset())), *this,
                          "reshape");
  }
  return record_reshape(copy_as(*this, shape), *this, "reshape");
}

Tensor Tensor::squeeze(int64_t dim) const {
  size_t d = shape().resolve_dim(dim, "squeeze");
  if (dims()[d] != 1) return *this;
  std::vector<size_t> dv = dims(), st = stride();
  dv.erase(dv.begin() + static_cast<std::ptrdiff_t>(d));
  st.erase(st.begin() + static_cast<std::ptrdiff_t>(d));
  return record_reshape(view_of(*this, Layout(Shape(std::move(dv)), std::move(st), layout().start_offset())),
                        *this, "squeeze");
}

Tensor Tensor::unsqueeze(int64_t dim) const {
  size_t d = shape().resolve_dim_inclusive(dim, "unsqueeze");
  std::vector<size_t> dv = dims(), st = stride();
  // the stride a contiguous tensor would have there, so contiguity is kept
  size_t s = d < dv.size() ? st[d] * dv[d] : 1;
  dv.insert(dv.begin() + static_cast<std::ptrdiff_t>(d), 1);
  st.insert(st.begin() + static_cast<std::ptrdiff_t>(d), s);
  return record_reshape(view_of(*this, Layout(Shape(std::move(dv)), std::move(st), layout().start_offset())),
                        *this, "unsqueeze");
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (rank() == 0) return reshape(Shape{1});
  size_t s = shape().resolve_dim(start_dim, "flatten");
  size_t e = shape().resolve_dim(end_dim, "flatten");
  if (s > e) {
    // candle silently returns the input here; a reversed range is a caller bug
    throw Error(ErrorKind::InvalidArgument, "flatten: start dim " + str(start_dim) + " comes after end dim " +
                                                str(end_dim) + " for shape " + shape().to_string());
  }
  if (s == e) return *this;
  const auto& dv = dims();
  std::vector<size_t> out(dv.begin(), dv.begin() + static_cast<std::ptrdiff_t>(s));
  out.push_back(product(dv, s, e + 1));
  out.insert(out.end(), dv.begin() + static_cast<std::ptrdiff_t>(e + 1), dv.end());
  return reshape(Shape(std::move(out)));
}

Tensor Tensor::flatten_all() const { return rank() == 0 ? reshape(Shape{1}) : flatten(0, -1); }
Tensor Tensor::flatten_to(int64_t end_dim) const {
  return rank() == 0 ? reshape(Shape{1}) : flatten(0, end_dim);
}
Tensor Tensor::flatten_from(int64_t start_dim) const {
  return rank() == 0 ? reshape(Shape{1}) : flatten(start_dim, -1);
}

Tensor Tensor::t() const {
  if (rank() < 2) rank_error("t", "at least 2", shape());
  return transpose(-2, -1);
}

Tensor Tensor::transpose(int64_t dim1, int64_t dim2) const {
  size_t a = shape().resolve_dim(dim1, "transpose");
  size_t b = shape().resolve_dim(dim2, "transpose");
  if (a == b) return *this;
  return autograd::record(
      view_of(*this, layout().transpose(a, b)), "transpose",
      CANDLE_BACKWARD(a, b) { gi[0] = g.transpose(a, b); }, *this);
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  if (dims.size() != rank()) {
    throw Error(ErrorKind::ShapeMismatch, "dimension mismatch in permute, got " +
                                              std::to_string(dims.size()) + " dims for shape " +
                                              shape().to_string());
  }
  std::vector<size_t> idx;
  idx.reserve(dims.size());
  for (int64_t d : dims) idx.push_back(shape().resolve_dim(d, "permute"));
  Tensor out = view_of(*this, layout().permute(idx));
  if (!track_op()) return out;
  return autograd::record(
      std::move(out), "permute",
      CANDLE_BACKWARD(idx) {
        std::vector<int64_t> inv(idx.size());
        for (size_t k = 0; k < idx.size(); ++k) inv[idx[k]] = static_cast<int64_t>(k);
        gi[0] = g.permute(inv);
      },
      *this);
}

Tensor Tensor::narrow(int64_t dim, size_t start, size_t len) const {
  size_t d = shape().resolve_dim(dim, "narrow");
  size_t n = dims()[d];
  if (start > n || len > n - start) {
    throw Error(ErrorKind::IndexOutOfRange, "narrow invalid args, start + len > dim_len: shape " +
                                                shape().to_string() + ", dim: " + std::to_string(d) +
                                                ", start: " + std::to_string(start) +
                                                ", len: " + std::to_string(len));
  }
  if (start == 0 && len == n) return *this;
  return autograd::record(
      view_of(*this, layout().narrow(d, start, len)), "narrow",
      CANDLE_BACKWARD(d, start, len, n) {
        gi[0] = g.pad_with_zeros(static_cast<int64_t>(d), start, n - start - len);
      },
      *this);
}

std::vector<Tensor> Tensor::chunk(size_t chunks, int64_t dim) const {
  size_t d = shape().resolve_dim(dim, "chunk");
  if (chunks == 0) throw Error(ErrorKind::InvalidArgument, "chunk: the number of chunks must be positive");
  size_t size = dims()[d];
  std::vector<Tensor> out;
  if (size < chunks) {
    for (size_t i = 0; i < size; ++i) out.push_back(narrow(static_cast<int64_t>(d), i, 1));
    return out;
  }
  // candle's split: size / chunks each, the first size % chunks chunks one longer
  size_t base = size / chunks, extra = size % chunks, start = 0;
  for (size_t i = 0; i < chunks; ++i) {
    size_t len = base + (i < extra ? 1 : 0);
    out.push_back(narrow(static_cast<int64_t>(d), start, len));
    start += len;
  }
  return out;
}

Tensor Tensor::get(size_t i) const {
  if (rank() == 0) return *this;
  return get_on_dim(0, i);
}

Tensor Tensor::get_on_dim(int64_t dim, size_t i) const {
  size_t d = shape().resolve_dim(dim, "get_on_dim");
  if (i >= dims()[d]) {
    throw Error(ErrorKind::IndexOutOfRange, "index out of range in get_on_dim, index: " + std::to_string(i) +
                                                ", dim: " + std::to_string(d) +
                                                ", shape: " + shape().to_string());
  }
  return narrow(static_cast<int64_t>(d), i, 1).squeeze(static_cast<int64_t>(d));
}

Tensor Tensor::broadcast_as(const Shape& shape) const {
  if (shape == this->shape()) return *this;
  return autograd::record(
      view_of(*this, layout().broadcast_as(shape)), "broadcast_as",
      CANDLE_BACKWARD() { gi[0] = autograd::sum_to_shape(g, in[0].shape()); }, *this);
}

Tensor Tensor::broadcast_left(const Shape& left) const {
  std::vector<size_t> dv = left.dims();
  dv.insert(dv.end(), dims().begin(), dims().end());
  return broadcast_as(Shape(std::move(dv)));
}

namespace {
// repeat's gradient: g seen as [reps0, in0, reps1, in1, ..] summed over the repeat dims.
Tensor record_repeat(Tensor out, const Tensor& t, const std::vector<size_t>& in_dims,
                     const std::vector<size_t>& reps) {
  if (!t.track_op()) return out;
  return autograd::record(
      std::move(out), "repeat",
      CANDLE_BACKWARD(in_dims, reps) {
        std::vector<size_t> split;
        std::vector<int64_t> sum_dims;
        for (size_t k = 0; k < in_dims.size(); ++k) {
          sum_dims.push_back(static_cast<int64_t>(split.size()));
          split.push_back(reps[k]);
          split.push_back(in_dims[k]);
        }
        gi[0] = g.reshape(Shape(split)).sum(sum_dims).reshape(in[0].shape());
      },
      t);
}
}  // namespace

Tensor Tensor::repeat(const Shape& repeats) const {
  // As candle: missing trailing repeats count as 1, extra leading ones add dims of size 1.
  const auto& r = repeats.dims();
  size_t rank = std::max(this->rank(), r.size());
  size_t added = rank - this->rank();
  std::vector<size_t> in(added, 1), st(added, 0);
  in.insert(in.end(), dims().begin(), dims().end());
  st.insert(st.end(), stride().begin(), stride().end());
  std::vector<size_t> reps(rank, 1), out(rank);
  for (size_t k = 0; k < r.size(); ++k) reps[k] = r[k];
  for (size_t k = 0; k < rank; ++k) out[k] = in[k] * reps[k];
  Layout src_l(Shape(in), st, layout().start_offset());
  size_t kstar = rank;
  for (size_t k = rank; k-- > 0;) {
    if (reps[k] != 1) {
      kstar = k;
      break;
    }
  }
  if (kstar == rank) return record_reshape(view_of(*this, src_l), *this, "repeat");
  Tensor res = record_repeat(new_contiguous(Shape(out), *this), *this, in, reps);
  if (res.elem_count() == 0) return res;
  // Stage 1: tile 0 of dim k*, i.e. the input broadcast over the repeats of the outer dims
  // (stride-0 dims interleaved with the input's dims) and kept as is from k* in.
  std::vector<size_t> l1_dims, l1_st;
  for (size_t k = 0; k < kstar; ++k) {
    l1_dims.insert(l1_dims.end(), {reps[k], in[k]});
    l1_st.insert(l1_st.end(), {0, st[k]});
  }
  l1_dims.insert(l1_dims.end(), in.begin() + static_cast<std::ptrdiff_t>(kstar), in.end());
  l1_st.insert(l1_st.end(), st.begin() + static_cast<std::ptrdiff_t>(kstar), st.end());
  Layout l1(Shape(l1_dims), l1_st, layout().start_offset());
  size_t rows = product(out, 0, kstar);
  size_t b = product(in, kstar, rank);
  size_t reps_k = reps[kstar];
  BackendStorage& dst = *res.storage();
  write_rows(*storage(), l1, 2 * kstar, dst, reps_k * b, 0);
  // Stage 2: fill the other tiles of dim k* by doubling the filled ones.
  for (size_t filled = 1; filled < reps_k;) {
    size_t m = std::min(filled, reps_k - filled);
    dst.copy2d(dst, rows, m * b, reps_k * b, reps_k * b, 0, filled * b);
    filled += m;
  }
  return res;
}

Tensor Tensor::cat(const std::vector<Tensor>& tensors, int64_t dim) {
  if (tensors.empty()) throw Error(ErrorKind::InvalidArgument, "cat requires at least one tensor");
  const Tensor& a0 = tensors[0];
  size_t d = a0.shape().resolve_dim(dim, "cat");
  size_t total = 0;
  bool track = false;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    ops::check_same_dtype(a0, t, "cat");
    ops::check_same_device(a0, t, "cat");
    bool same = t.rank() == a0.rank();
    for (size_t k = 0; same && k < a0.rank(); ++k) same = k == d || t.dims()[k] == a0.dims()[k];
    if (!same) {
      throw Error(ErrorKind::ShapeMismatch, "shape mismatch in cat along dim " + std::to_string(d) +
                                                ", tensor 0: " + a0.shape().to_string() + ", tensor " +
                                                std::to_string(i) + ": " + t.shape().to_string());
    }
    total += t.dims()[d];
    track = track || t.track_op();
  }
  if (tensors.size() == 1) return a0;
  std::vector<size_t> out = a0.dims();
  out[d] = total;
  Tensor res = new_contiguous(Shape(out), a0);
  if (track) {
    res = autograd::record_vec(
        std::move(res), "cat", tensors, CANDLE_BACKWARD(d) {
          size_t at = 0;
          for (size_t i = 0; i < in.size(); ++i) {
            const size_t len = in[i].dims()[d];
            if (in[i].track_op()) gi[i] = g.narrow(static_cast<int64_t>(d), at, len);
            at += len;
          }
        });
  }
  size_t inner = product(out, d + 1, out.size());
  size_t dst_s = total * inner;
  size_t at = 0;
  for (const Tensor& t : tensors) {
    write_rows(*t.storage(), t.layout(), d, *res.storage(), dst_s, at * inner);
    at += t.dims()[d];
  }
  return res;
}

Tensor Tensor::stack(const std::vector<Tensor>& tensors, int64_t dim) {
  if (tensors.empty()) throw Error(ErrorKind::InvalidArgument, "stack requires at least one tensor");
  const Tensor& a0 = tensors[0];
  for (size_t i = 1; i < tensors.size(); ++i) {
    if (tensors[i].shape() != a0.shape()) {
      throw Error(ErrorKind::ShapeMismatch, "shape mismatch in stack, tensor 0: " + a0.shape().to_string() +
                                                ", tensor " + std::to_string(i) + ": " +
                                                tensors[i].shape().to_string());
    }
    ops::check_same_dtype(a0, tensors[i], "stack");
    ops::check_same_device(a0, tensors[i], "stack");
  }
  int64_t d = static_cast<int64_t>(a0.shape().resolve_dim_inclusive(dim, "stack"));
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (const Tensor& t : tensors) parts.push_back(t.unsqueeze(d));
  if (parts.size() == 1) return parts[0];
  return cat(parts, d);
}

namespace {

// The padded result of t along d with `left` / `right` slots, t's values already written.
struct Padded {
  Tensor out;
  size_t rows, inner, n, dst_s;
};

Padded pad_body(const Tensor& t, size_t d, size_t left, size_t right) {
  std::vector<size_t> out = t.dims();
  size_t n = out[d];
  out[d] = n + left + right;
  Padded p{new_contiguous(Shape(out), t), product(out, 0, d), product(out, d + 1, out.size()), n, 0};
  p.dst_s = out[d] * p.inner;
  write_rows(*t.storage(), t.layout(), d, *p.out.storage(), p.dst_s, left * p.inner);
  return p;
}

// t's slice `index` along d, broadcast to `count` copies (a stride-0 layout).
Layout edge_layout(const Tensor& t, size_t d, size_t index, size_t count) {
  Layout l = t.layout().narrow(d, index, 1);
  std::vector<size_t> dv = l.dims(), st = l.stride();
  dv[d] = count;
  st[d] = 0;
  return Layout(Shape(std::move(dv)), std::move(st), l.start_offset());
}

}  // namespace

Tensor Tensor::pad_with_zeros(int64_t dim, size_t left, size_t right) const {
  size_t d = shape().resolve_dim(dim, "pad_with_zeros");
  if (left == 0 && right == 0) return *this;
  Padded p = pad_body(*this, d, left, right);
  p.out = autograd::record(
      std::move(p.out), "pad_with_zeros",
      CANDLE_BACKWARD(d, left) { gi[0] = g.narrow(static_cast<int64_t>(d), left, in[0].dims()[d]); }, *this);
  if (p.out.elem_count() == 0) return p.out;
  BackendStorage& dst = *p.out.storage();
  if (left) dst.const_set(Scalar(0), Layout(Shape{p.rows, left * p.inner}, {p.dst_s, 1}, 0));
  if (right)
    dst.const_set(Scalar(0), Layout(Shape{p.rows, right * p.inner}, {p.dst_s, 1}, (left + p.n) * p.inner));
  return p.out;
}

Tensor Tensor::pad_with_same(int64_t dim, size_t left, size_t right) const {
  size_t d = shape().resolve_dim(dim, "pad_with_same");
  if (left == 0 && right == 0) return *this;
  if (elem_count() == 0) {
    throw Error(ErrorKind::InvalidArgument,
                "cannot use pad_with_same on an empty tensor, shape " + shape().to_string());
  }
  Padded p = pad_body(*this, d, left, right);
  // each padded slot takes its gradient back to the edge it copies: one index_add
  p.out = autograd::record(
      std::move(p.out), "pad_with_same",
      CANDLE_BACKWARD(d, left, right) {
        const Tensor& x = in[0];
        const size_t n = x.dims()[d];
        std::vector<int64_t> src(left, 0);
        for (size_t i = 0; i < n; ++i) src.push_back(static_cast<int64_t>(i));
        src.insert(src.end(), right, static_cast<int64_t>(n - 1));
        Tensor ids = Tensor::from_vec(src, Shape{src.size()}, x.device());
        gi[0] = autograd::zeros_of(x).index_add(ids, g, static_cast<int64_t>(d));
      },
      *this);
  BackendStorage& dst = *p.out.storage();
  if (left) write_rows(*storage(), edge_layout(*this, d, 0, left), d, dst, p.dst_s, 0);
  if (right)
    write_rows(*storage(), edge_layout(*this, d, p.n - 1, right), d, dst, p.dst_s, (left + p.n) * p.inner);
  return p.out;
}

Tensor Tensor::roll(int64_t shift, int64_t dim) const {
  size_t d = shape().resolve_dim(dim, "roll");
  int64_t n = static_cast<int64_t>(dims()[d]);
  if (n == 0) return *this;
  int64_t s = shift % n;
  if (s < 0) s += n;
  if (s == 0) return *this;
  auto sd = static_cast<int64_t>(d);
  auto us = static_cast<size_t>(s), un = static_cast<size_t>(n);
  return cat({narrow(sd, un - us, us), narrow(sd, 0, un - us)}, sd);
}

Tensor Tensor::flip(const std::vector<int64_t>& dims) const {
  std::vector<bool> flipped(rank(), false);
  for (int64_t dim : dims) {
    size_t d = shape().resolve_dim(dim, "flip");
    if (flipped[d]) {
      throw Error(
          ErrorKind::InvalidArgument,
          "flip: dim " + std::to_string(d) + " appears more than once (shape " + shape().to_string() + ")");
    }
    flipped[d] = true;
  }
  std::vector<size_t> fd;
  for (size_t k = 0; k < rank(); ++k)
    if (flipped[k] && this->dims()[k] > 1) fd.push_back(k);
  if (fd.empty()) return *this;
  StoragePtr s = storage()->flip(layout(), fd);
  Tensor out = from_storage(std::move(s), Layout::contiguous(shape()), dtype(), device());
  if (!track_op()) return out;
  return autograd::record(
      std::move(out), "flip", CANDLE_BACKWARD(dims) { gi[0] = g.flip(dims); }, *this);
}

Tensor Tensor::unfold(int64_t dim, size_t size, size_t step) const {
  size_t d = shape().resolve_dim(dim, "unfold");
  size_t n = dims()[d];
  if (step == 0) throw Error(ErrorKind::InvalidArgument, "unfold: step must be positive");
  if (size > n) {
    throw Error(ErrorKind::ShapeMismatch, "unfold: size " + std::to_string(size) + " is larger than dim " +
                                              std::to_string(d) + " of shape " + shape().to_string());
  }
  std::vector<size_t> dv = dims(), st = stride();
  dv[d] = (n - size) / step + 1;
  st[d] = stride()[d] * step;
  dv.push_back(size);
  st.push_back(stride()[d]);
  // window w, offset j reads position w * step + j: the gradient index_adds back there
  return autograd::record(
      view_of(*this, Layout(Shape(std::move(dv)), std::move(st), layout().start_offset())), "unfold",
      CANDLE_BACKWARD(d, size, step) {
        const Tensor& x = in[0];
        const size_t nwin = g.dims()[d];
        std::vector<int64_t> pos;
        pos.reserve(nwin * size);
        for (size_t w = 0; w < nwin; ++w)
          for (size_t j = 0; j < size; ++j) pos.push_back(static_cast<int64_t>(w * step + j));
        // move the window-offset dim next to the window dim, then merge them
        Tensor gm =
            g.unsqueeze(static_cast<int64_t>(d + 1)).transpose(static_cast<int64_t>(d + 1), -1).squeeze(-1);
        std::vector<size_t> merged = x.dims();
        merged[d] = nwin * size;
        Tensor ids = Tensor::from_vec(pos, Shape{pos.size()}, x.device());
        gi[0] = autograd::zeros_of(x).index_add(ids, gm.reshape(Shape(merged)), static_cast<int64_t>(d));
      },
      *this);
}

Tensor Tensor::i(std::initializer_list<IndexItem> items) const {
  if (items.size() > rank()) {
    throw Error(ErrorKind::DimOutOfRange, "too many indices in i: " + std::to_string(items.size()) +
                                              " for shape " + shape().to_string());
  }
  Tensor x = *this;
  size_t cur = 0;
  for (const IndexItem& item : items) {
    auto n = static_cast<int64_t>(x.dims()[cur]);
    auto scur = static_cast<int64_t>(cur);
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, int64_t>) {
            int64_t idx = v < 0 ? v + n : v;
            if (idx < 0 || idx >= n) {
              throw Error(ErrorKind::IndexOutOfRange, "index out of range in i, index: " + str(v) +
                                                          ", dim: " + std::to_string(cur) +
                                                          ", shape: " + x.shape().to_string());
            }
            x = x.narrow(scur, static_cast<size_t>(idx), 1).squeeze(scur);
          } else if constexpr (std::is_same_v<V, Slice>) {
            int64_t s = v.start.value_or(0), e = v.end.value_or(n);
            if (s < 0) s += n;
            if (e < 0) e += n;
            if (s < 0 || s > n || e < 0 || e > n) {
              throw Error(ErrorKind::IndexOutOfRange,
                          "range out of bounds in i, range: " + (v.start ? str(*v.start) : std::string()) +
                              ".." + (v.end ? str(*v.end) : std::string()) + ", dim: " + std::to_string(cur) +
                              ", shape: " + x.shape().to_string());
            }
            x = x.narrow(scur, static_cast<size_t>(s), e > s ? static_cast<size_t>(e - s) : 0);
            ++cur;
          } else if constexpr (std::is_same_v<V, std::vector<int64_t>>) {
            std::vector<int64_t> ids(v.size());
            for (size_t j = 0; j < v.size(); ++j) {
              int64_t idx = v[j] < 0 ? v[j] + n : v[j];
              if (idx < 0 || idx >= n) {
                throw Error(ErrorKind::IndexOutOfRange, "index out of range in i, index: " + str(v[j]) +
                                                            ", dim: " + std::to_string(cur) +
                                                            ", shape: " + x.shape().to_string());
              }
              ids[j] = idx;
            }
            x = x.index_select(Tensor::from_vec(ids, Shape{ids.size()}, x.device()), scur);
            ++cur;
          } else {
            if (v->rank() != 1) rank_error("i (index tensor)", "1", v->shape());
            x = x.index_select(*v, scur);
            ++cur;
          }
        },
        item.value());
  }
  return x;
}

}  // namespace candle
