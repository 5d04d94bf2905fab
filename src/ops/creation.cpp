// Creation helpers: arange (computed on the host as candle does, then uploaded), eye,
// tril2/triu2 (comparisons on the device) and meshgrid.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "candle/tensor.h"
#include "core/backprop_op.h"
#include "ops/op_util.h"

namespace candle {
namespace {

// More elements than any arange can sensibly hold: a guard against runaway float loops.
constexpr double kMaxArangeLen = 1e12;

[[noreturn]] void arange_error(const std::string& what) {
  throw Error(ErrorKind::InvalidArgument, "arange: " + what);
}

template <typename T>
std::vector<T> arange_int(const Scalar& start, const Scalar& end, const Scalar& step, DType dtype) {
  int64_t s = start.as<int64_t>(), e = end.as<int64_t>(), st = step.as<int64_t>();
  if (st == 0) arange_error("step cannot be zero");
  // The length candle's `while current < end { current += step }` loop gives, computed
  // exactly (that loop overflows the element type near its limits).
  __int128 diff = static_cast<__int128>(e) - s;
  __int128 n = 0;
  if (st > 0 && diff > 0) n = (diff + st - 1) / st;
  if (st < 0 && diff < 0) n = (-diff + (-static_cast<__int128>(st)) - 1) / -static_cast<__int128>(st);
  if (static_cast<double>(n) > kMaxArangeLen) arange_error("too many elements");
  std::vector<T> out(static_cast<size_t>(n));
  if (out.empty()) return out;
  __int128 last = s + (n - 1) * st;
  constexpr auto lo = static_cast<__int128>(std::numeric_limits<T>::lowest());
  constexpr auto hi = static_cast<__int128>(std::numeric_limits<T>::max());
  if (s < lo || s > hi || last < lo || last > hi) {
    arange_error("values from " + std::to_string(s) + " to " + std::to_string(static_cast<int64_t>(last)) +
                 " do not fit dtype " + std::string(dtype_name(dtype)));
  }
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<T>(s + static_cast<int64_t>(i) * st);
  return out;
}

template <typename T>
std::vector<T> arange_float(const Scalar& start, const Scalar& end, const Scalar& step) {
  using C = compute_t<T>;
  T cur = start.as<T>(), e = end.as<T>(), st = step.as<T>();
  C cc = static_cast<C>(cur), ce = static_cast<C>(e), cs = static_cast<C>(step.as<T>());
  if (cs == C(0)) arange_error("step cannot be zero");
  if (std::isfinite(static_cast<double>(cc)) && std::isfinite(static_cast<double>(ce)) &&
      std::abs((static_cast<double>(ce) - static_cast<double>(cc)) / static_cast<double>(cs)) >
          kMaxArangeLen) {
    arange_error("too many elements");
  }
  // candle accumulates in the element type (current += step), so do we: same values, same length.
  std::vector<T> out;
  bool up = cs > C(0);
  while (up ? static_cast<C>(cur) < ce : static_cast<C>(cur) > ce) {
    out.push_back(cur);
    T next = T(static_cast<C>(cur) + static_cast<C>(st));
    C cn = static_cast<C>(next);
    if (!(up ? cn > static_cast<C>(cur) : cn < static_cast<C>(cur))) {
      // candle would loop forever here
      arange_error("step " + std::to_string(static_cast<double>(cs)) + " is too small to advance from " +
                   std::to_string(static_cast<double>(static_cast<C>(cur))));
    }
    cur = next;
  }
  return out;
}

// n x n matrix holding 1 where keep(row ids, column ids) and 0 elsewhere, computed on the
// device: a u32 arange compared against its transpose, then cast.
template <typename Keep>
Tensor band_matrix(size_t n, DType dtype, const Device& device, Keep keep) {
  if (n > std::numeric_limits<uint32_t>::max())
    throw Error(ErrorKind::InvalidArgument, "eye/tril2/triu2: n = " + std::to_string(n) + " is too large");
  Tensor ids = Tensor::arange<uint32_t>(0, static_cast<uint32_t>(n), device);
  return keep(ids.reshape({n, 1}), ids.reshape({1, n})).to_dtype(dtype);
}

}  // namespace

Tensor Tensor::arange_impl(const Scalar& start, const Scalar& end, const Scalar& step, DType dtype,
                           const Device& device) {
  return dispatch(dtype, [&]<typename T>() {
    std::vector<T> data;
    if constexpr (std::is_integral_v<T>)
      data = arange_int<T>(start, end, step, dtype);
    else
      data = arange_float<T>(start, end, step);
    return from_raw(data.data(), data.size(), dtype, Shape{data.size()}, device);
  });
}

Tensor Tensor::eye(size_t n, DType dtype, const Device& device) {
  return band_matrix(n, dtype, device,
                     [](const Tensor& row, const Tensor& col) { return row.broadcast_eq(col); });
}

Tensor Tensor::tril2(size_t n, DType dtype, const Device& device) {
  return band_matrix(n, dtype, device,
                     [](const Tensor& row, const Tensor& col) { return col.broadcast_le(row); });
}

Tensor Tensor::triu2(size_t n, DType dtype, const Device& device) {
  return band_matrix(n, dtype, device,
                     [](const Tensor& row, const Tensor& col) { return col.broadcast_ge(row); });
}

std::vector<Tensor> Tensor::meshgrid(const std::vector<Tensor>& args, bool xy_indexing) {
  if (args.size() < 2) throw Error(ErrorKind::InvalidArgument, "meshgrid requires at least two tensors");
  // As candle: xy indexing reverses the inputs, builds ij grids, and reverses the grids back.
  std::vector<const Tensor*> in;
  in.reserve(args.size());
  for (const Tensor& t : args) in.push_back(&t);
  if (xy_indexing) std::reverse(in.begin(), in.end());
  std::vector<size_t> dims;
  dims.reserve(in.size());
  for (const Tensor* t : in) dims.push_back(t->shape().dims1("meshgrid")[0]);
  std::vector<Tensor> grids;
  for (size_t idx = 0; idx < in.size(); ++idx) {
    const Tensor& t = *in[idx];
    std::vector<size_t> st(dims.size(), 0);
    st[idx] = t.stride()[0];
    Layout l(Shape(dims), std::move(st), t.layout().start_offset());
    Tensor grid = Tensor::from_storage(t.storage(), std::move(l), t.dtype(), t.device()).copy();
    // the grid repeats t along every other dim: its gradient sums over them
    grids.push_back(autograd::record(
        std::move(grid), "meshgrid",
        CANDLE_BACKWARD(idx) {
          std::vector<int64_t> other;
          for (size_t k = 0; k < g.rank(); ++k)
            if (k != idx) other.push_back(static_cast<int64_t>(k));
          gi[0] = g.sum(other);
        },
        t));
  }
  if (xy_indexing) std::reverse(grids.begin(), grids.end());
  return grids;
}

}  // namespace candle
