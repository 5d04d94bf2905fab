// matmul, broadcast_matmul, dot, mv: shape rules, then one batched backend GEMM.
//
// The backend takes each operand as [batch, rows, cols] with one batch stride, so the batch
// dims of an operand are folded into one. A view whose batch dims do not fold (a permuted
// view) is copied to contiguous; broadcast batch dims (stride 0) are never materialised:
// when they do not fold the product is split over the outer batch dims.
#include <optional>
#include <string>
#include <vector>

#include "candle/tensor.h"
#include "core/backprop_op.h"
#include "ops/op_util.h"

namespace candle {
namespace {

[[noreturn]] void shape_error(const char* op, const Shape& l, const Shape& r) {
  throw Error(ErrorKind::ShapeMismatch,
              std::string("shape mismatch in ") + op + ", lhs: " + l.to_string() + ", rhs: " + r.to_string());
}

// The single stride of dims [b, e) of a layout seen as one dim, if they fold into one
// (dims of size 1 do not count; all of size 1 gives stride 0).
std::optional<size_t> fold_dims(const Layout& l, size_t b, size_t e) {
  bool have = false;
  size_t inner = 0, expect = 0;
  for (size_t i = e; i-- > b;) {
    size_t dim = l.dims()[i], st = l.stride()[i];
    if (dim == 1) continue;
    if (!have) {
      inner = st;
      have = true;
    } else if (st != expect) {
      return std::nullopt;
    }
    expect = st * dim;
  }
  return inner;
}

bool has_zero_stride(const Layout& l, size_t nb) {
  for (size_t i = 0; i < nb; ++i)
    if (l.dims()[i] > 1 && l.stride()[i] == 0) return true;
  return false;
}

size_t product(const std::vector<size_t>& dims, size_t b, size_t e) {
  size_t p = 1;
  for (size_t i = b; i < e; ++i) p *= dims[i];
  return p;
}

// One backend call: lhs [batch.., m, k] x rhs [batch.., k, n] whose dims [first, nb) of
// batch fold, at the given extra offsets.
StoragePtr backend_matmul(const Tensor& lhs, const Layout& ll, size_t l_off, const Tensor& rhs,
                          const Layout& rl, size_t r_off, size_t first, size_t nb) {
  const size_t r = ll.dims().size();
  const size_t m = ll.dims()[r - 2], k = ll.dims()[r - 1], n = rl.dims()[r - 1];
  const size_t batch = product(ll.dims(), first, nb);
  const size_t lbs = *fold_dims(ll, first, nb), rbs = *fold_dims(rl, first, nb);
  Layout l3(Shape{batch, m, k}, {lbs, ll.stride()[r - 2], ll.stride()[r - 1]}, ll.start_offset() + l_off);
  Layout r3(Shape{batch, k, n}, {rbs, rl.stride()[r - 2], rl.stride()[r - 1]}, rl.start_offset() + r_off);
  return lhs.storage()->matmul(l3, *rhs.storage(), r3, MatmulDims{batch, m, n, k});
}

// lhs [batch.., m, k] x rhs [batch.., k, n], with equal batch dims, over any layouts of the
// tensors' storages; the result has shape `out`.
Tensor matmul_layouts(Tensor lhs, Layout ll, Tensor rhs, Layout rl, const Shape& out) {
  const DType dtype = lhs.dtype();
  const Device dev = lhs.device();  // by value: lhs may be replaced below
  const size_t r = ll.dims().size(), nb = r - 2;
  const size_t m = ll.dims()[r - 2], k = ll.dims()[r - 1], n = rl.dims()[r - 1];
  if (out.elem_count() == 0 || k == 0) return Tensor::zeros(out, dtype, dev);

  // rhs shared by the whole batch and lhs rows evenly spaced: one [batch*m, k] x [k, n] GEMM
  const size_t batch = product(ll.dims(), 0, nb);
  if (batch > 1 && fold_dims(rl, 0, nb) == size_t{0}) {
    if (auto row_stride = fold_dims(ll, 0, nb + 1)) {
      Layout l3(Shape{1, batch * m, k}, {0, *row_stride, ll.stride()[r - 1]}, ll.start_offset());
      Layout r3(Shape{1, k, n}, {0, rl.stride()[r - 2], rl.stride()[r - 1]}, rl.start_offset());
      return ops::make_result(lhs.storage()->matmul(l3, *rhs.storage(), r3, MatmulDims{1, batch * m, n, k}),
                              out, dtype, dev);
    }
  }

  // a view whose batch dims do not fold and that broadcasts nothing: copy it (its own size)
  if (!fold_dims(ll, 0, nb) && !has_zero_stride(ll, nb)) {
    lhs = Tensor::from_storage(lhs.storage(), ll, dtype, dev).copy();
    ll = lhs.layout();
  }
  if (!fold_dims(rl, 0, nb) && !has_zero_stride(rl, nb)) {
    rhs = Tensor::from_storage(rhs.storage(), rl, dtype, dev).copy();
    rl = rhs.layout();
  }
  // the outer dims [0, first) are looped over; [first, nb) fold for both operands
  size_t first = 0;
  while (first < nb && !(fold_dims(ll, first, nb) && fold_dims(rl, first, nb))) ++first;
  if (first == 0) {
    return ops::make_result(backend_matmul(lhs, ll, 0, rhs, rl, 0, 0, nb), out, dtype, dev);
  }
  const size_t outer = product(ll.dims(), 0, first);
  const size_t piece = product(ll.dims(), first, nb) * m * n;
  StoragePtr result = dev.backend().alloc(dtype, out.elem_count());
  std::vector<size_t> idx(first, 0);
  for (size_t o = 0; o < outer; ++o) {
    size_t l_off = 0, r_off = 0;
    for (size_t i = 0; i < first; ++i) {
      l_off += idx[i] * ll.stride()[i];
      r_off += idx[i] * rl.stride()[i];
    }
    StoragePtr part = backend_matmul(lhs, ll, l_off, rhs, rl, r_off, first, nb);
    part->copy_strided_src(*result, o * piece, Layout::contiguous(Shape{piece}));
    for (size_t i = first; i-- > 0;) {
      if (++idx[i] < ll.dims()[i]) break;
      idx[i] = 0;
    }
  }
  return ops::make_result(std::move(result), out, dtype, dev);
}

void check_operands(const Tensor& lhs, const Tensor& rhs, const char* op) {
  ops::check_same_device(lhs, rhs, op);
  ops::check_same_dtype(lhs, rhs, op);
  ops::check_float(lhs, op);
}

}  // namespace

// candle compares only the products of the batch dims and returns zeros for empty outputs
// before checking k; here the batch dims must be equal and every shape is checked first.
Tensor Tensor::matmul(const Tensor& rhs) const {
  const Shape& ls = shape();
  const Shape& rs = rhs.shape();
  const size_t r = ls.rank();
  if (r < 2 || rs.rank() != r) shape_error("matmul", ls, rs);
  for (size_t i = 0; i + 2 < r; ++i)
    if (ls[i] != rs[i]) shape_error("matmul", ls, rs);
  if (ls[r - 1] != rs[r - 2]) shape_error("matmul", ls, rs);
  check_operands(*this, rhs, "matmul");
  std::vector<size_t> out = ls.dims();
  out[r - 1] = rs[r - 1];
  return autograd::record(
      matmul_layouts(*this, layout(), rhs, rhs.layout(), Shape(std::move(out))), "matmul",
      CANDLE_BACKWARD() {
        // An operand that is a transposed view (Linear's w.t()) gets its gradient computed
        // transposed, so that the gradient reaching the contiguous tensor is contiguous too.
        auto transposed_view = [](const Tensor& t) { return !t.is_contiguous() && t.t().is_contiguous(); };
        if (in[0].track_op()) gi[0] = transposed_view(in[0]) ? in[1].matmul(g.t()).t() : g.matmul(in[1].t());
        if (in[1].track_op()) gi[1] = transposed_view(in[1]) ? g.t().matmul(in[0]).t() : in[0].t().matmul(g);
      },
      *this, rhs);
}

Tensor Tensor::broadcast_matmul(const Tensor& rhs) const {
  const Shape out = shape().broadcast_shape_matmul(rhs.shape(), "broadcast_matmul");
  check_operands(*this, rhs, "broadcast_matmul");
  const size_t r = out.rank();
  std::vector<size_t> l_dims = out.dims(), r_dims = out.dims();
  l_dims[r - 1] = dim(-1);
  r_dims[r - 2] = rhs.dim(-2);
  Layout ll = layout().broadcast_as(Shape(std::move(l_dims)));
  Layout rl = rhs.layout().broadcast_as(Shape(std::move(r_dims)));
  // the batch-broadcast gradients are summed back to each operand's shape
  return autograd::record(
      matmul_layouts(*this, std::move(ll), rhs, std::move(rl), out), "broadcast_matmul",
      CANDLE_BACKWARD() {
        const Tensor& a = in[0];
        const Tensor& b = in[1];
        if (a.track_op()) gi[0] = autograd::sum_to_shape(g.broadcast_matmul(b.t()), a.shape());
        if (b.track_op()) gi[1] = autograd::sum_to_shape(a.t().broadcast_matmul(g), b.shape());
      },
      *this, rhs);
}

Tensor Tensor::dot(const Tensor& rhs) const {
  if (rank() != 1 || rhs.rank() != 1 || dims()[0] != rhs.dims()[0]) shape_error("dot", shape(), rhs.shape());
  check_operands(*this, rhs, "dot");
  const size_t k = dims()[0];
  Layout ll(Shape{1, k}, {k * stride()[0], stride()[0]}, layout().start_offset());
  Layout rl(Shape{k, 1}, {rhs.stride()[0], 1}, rhs.layout().start_offset());
  return autograd::record(
      matmul_layouts(*this, std::move(ll), rhs, std::move(rl), Shape{}), "dot",
      CANDLE_BACKWARD() {
        if (in[0].track_op()) gi[0] = in[1].broadcast_mul(g);
        if (in[1].track_op()) gi[1] = in[0].broadcast_mul(g);
      },
      *this, rhs);
}

Tensor Tensor::mv(const Tensor& rhs) const {
  if (rank() != 2 || rhs.rank() != 1 || dims()[1] != rhs.dims()[0]) shape_error("mv", shape(), rhs.shape());
  check_operands(*this, rhs, "mv");
  const size_t k = rhs.dims()[0];
  Layout rl(Shape{k, 1}, {rhs.stride()[0], 1}, rhs.layout().start_offset());
  return autograd::record(
      matmul_layouts(*this, layout(), rhs, std::move(rl), Shape{dims()[0]}), "mv",
      CANDLE_BACKWARD() {
        if (in[0].track_op()) gi[0] = g.unsqueeze(1).matmul(in[1].unsqueeze(0));
        if (in[1].track_op()) gi[1] = in[0].t().mv(g);
      },
      *this, rhs);
}

}  // namespace candle
