// Pooling (max_pool2d, avg_pool2d) and resizing (upsample_nearest1d/2d, upsample_bilinear2d):
// kernels/cuda/pool.cu and resize.cu. The resizing kernels read host-computed source tables
// made by the CPU's own helpers (cpu/resize_index.h), so the positions match bit for bit.
#include <string>
#include <vector>

#include "cpu/resize_index.h"
#include "launch_conv.h"
#include "storage.h"

namespace candle::cuda_backend {
namespace {

constexpr size_t kNarrow = size_t{1} << 30;

size_t span_of(const Layout& l) { return l.elem_count() ? l.max_offset_exclusive() - l.start_offset() : 0; }

int64_t i64(size_t v) { return static_cast<int64_t>(v); }

cuda_k::PlaneArgs planes4(const Layout& l, const char* op) {
  auto [b, c, h, w] = l.shape().dims4(op);
  const auto& s = l.stride();
  cuda_k::PlaneArgs p;
  p.b = i64(b), p.c = i64(c), p.h = i64(h), p.w = i64(w);
  p.sb = i64(s[0]), p.sc = i64(s[1]), p.sh = i64(s[2]), p.sw = i64(s[3]);
  return p;
}

cuda_k::PlaneArgs planes3(const Layout& l, const char* op) {
  auto [b, c, n] = l.shape().dims3(op);
  const auto& s = l.stride();
  cuda_k::PlaneArgs p;
  p.b = i64(b), p.c = i64(c), p.h = 1, p.w = i64(n);
  p.sb = i64(s[0]), p.sc = i64(s[1]), p.sh = 0, p.sw = i64(s[2]);
  return p;
}

size_t out_count(const cuda_k::PlaneArgs& p) { return static_cast<size_t>(p.b * p.c * p.oh * p.ow); }

void set_wide(cuda_k::PlaneArgs& p, const Layout& l) {
  p.wide = span_of(l) >= kNarrow || out_count(p) >= kNarrow;
}

// The CPU's message, word for word.
void check_pool_args(const cuda_k::PlaneArgs& p, std::array<size_t, 2> k, std::array<size_t, 2> s,
                     const char* op) {
  if (k[0] == 0 || k[1] == 0 || s[0] == 0 || s[1] == 0 || i64(k[0]) > p.h || i64(k[1]) > p.w) {
    throw Error(ErrorKind::InvalidArgument,
                std::string(op) + ": invalid kernel (" + std::to_string(k[0]) + ", " + std::to_string(k[1]) +
                    ") / stride (" + std::to_string(s[0]) + ", " + std::to_string(s[1]) + ") for input " +
                    "height/width " + std::to_string(p.h) + ", " + std::to_string(p.w));
  }
}

StoragePtr pool(const CudaStorage& x, const Layout& l, std::array<size_t, 2> k, std::array<size_t, 2> st,
                bool is_max) {
  const char* op = is_max ? "max_pool2d" : "avg_pool2d";
  cuda_k::PlaneArgs p = planes4(l, op);
  check_pool_args(p, k, st, op);
  p.oh = (p.h - i64(k[0])) / i64(st[0]) + 1;
  p.ow = (p.w - i64(k[1])) / i64(st[1]) + 1;
  if (!is_max && !dtype_is_float(x.dtype())) unsupported(x.dtype(), op);
  auto out = x.cdev().make(x.dtype(), out_count(p));
  if (out_count(p) == 0) return out;
  set_wide(p, l);
  const auto fn = is_max ? cuda_k::max_pool2d : cuda_k::avg_pool2d;
  x.ctx().launched(fn(dt_of(x.dtype()), x.at(l.start_offset()), out->at(0), p, i64(k[0]), i64(k[1]),
                      i64(st[0]), i64(st[1]), x.stream()),
                   op);
  return out;
}

template <typename T>
CuStoragePtr upload_table(CudaDevice& dev, DType dt, const std::vector<T>& v) {
  auto t = dev.make(dt, v.size());
  dev.ctx().upload(t->at(0), v.data(), v.size() * sizeof(T));
  return t;
}

[[noreturn]] void empty_input(const char* op) {
  throw Error(ErrorKind::InvalidArgument,
              std::string(op) + ": cannot resize an empty input to a non-empty output");
}

StoragePtr nearest(const CudaStorage& x, const Layout& l, cuda_k::PlaneArgs p, size_t out_h, size_t out_w,
                   const char* op) {
  p.oh = i64(out_h), p.ow = i64(out_w);
  auto out = x.cdev().make(x.dtype(), out_count(p));
  if (out_count(p) == 0) return out;
  if (p.h == 0 || p.w == 0) empty_input(op);
  std::vector<int64_t> offs;
  offs.reserve(out_h + out_w);
  for (size_t i : cpu::nearest_indices(static_cast<size_t>(p.h), out_h)) offs.push_back(i64(i) * p.sh);
  for (size_t i : cpu::nearest_indices(static_cast<size_t>(p.w), out_w)) offs.push_back(i64(i) * p.sw);
  auto table = upload_table(x.cdev(), DType::I64, offs);
  set_wide(p, l);
  x.ctx().launched(cuda_k::upsample_nearest(dtype_size(x.dtype()), x.at(l.start_offset()),
                                            table->ptr<int64_t>(), out->at(0), p, x.stream()),
                   op);
  return out;
}

template <typename A>
std::vector<A> weights_of(const cpu::LinearTaps& th, const cpu::LinearTaps& tw) {
  std::vector<A> w;
  w.reserve(2 * (th.l0.size() + tw.l0.size()));
  for (double v : th.l0) w.push_back(static_cast<A>(v));
  for (double v : th.l1) w.push_back(static_cast<A>(v));
  for (double v : tw.l0) w.push_back(static_cast<A>(v));
  for (double v : tw.l1) w.push_back(static_cast<A>(v));
  return w;
}

}  // namespace

StoragePtr CudaStorage::avg_pool2d(const Layout& l, std::array<size_t, 2> kernel,
                                   std::array<size_t, 2> stride) const {
  return pool(*this, l, kernel, stride, false);
}

StoragePtr CudaStorage::max_pool2d(const Layout& l, std::array<size_t, 2> kernel,
                                   std::array<size_t, 2> stride) const {
  return pool(*this, l, kernel, stride, true);
}

StoragePtr CudaStorage::upsample_nearest1d(const Layout& l, size_t out_l) const {
  const char* op = "upsample_nearest1d";
  return nearest(*this, l, planes3(l, op), 1, out_l, op);
}

StoragePtr CudaStorage::upsample_nearest2d(const Layout& l, size_t out_h, size_t out_w) const {
  const char* op = "upsample_nearest2d";
  return nearest(*this, l, planes4(l, op), out_h, out_w, op);
}

StoragePtr CudaStorage::upsample_bilinear2d(const Layout& l, size_t out_h, size_t out_w, bool align_corners,
                                            std::optional<double> scale_h,
                                            std::optional<double> scale_w) const {
  const char* op = "upsample_bilinear2d";
  cuda_k::PlaneArgs p = planes4(l, op);
  if (!dtype_is_float(dtype_)) unsupported(dtype_, op);
  p.oh = i64(out_h), p.ow = i64(out_w);
  const size_t n = out_count(p);
  auto out = cdev().make(dtype_, n);
  // the same size is a copy (as the CPU), exact for inf / NaN too
  if (i64(out_h) == p.h && i64(out_w) == p.w) {
    if (n) copy_strided_src(*out, 0, l);
    return out;
  }
  if (n == 0) return out;
  if (p.h == 0 || p.w == 0) empty_input(op);
  const cpu::LinearTaps th = cpu::linear_taps(static_cast<size_t>(p.h), out_h, align_corners, scale_h);
  const cpu::LinearTaps tw = cpu::linear_taps(static_cast<size_t>(p.w), out_w, align_corners, scale_w);
  std::vector<int64_t> offs;
  offs.reserve(2 * (out_h + out_w));
  for (size_t i : th.i0) offs.push_back(i64(i) * p.sh);
  for (size_t i : th.i1) offs.push_back(i64(i) * p.sh);
  for (size_t i : tw.i0) offs.push_back(i64(i) * p.sw);
  for (size_t i : tw.i1) offs.push_back(i64(i) * p.sw);
  auto otab = upload_table(cdev(), DType::I64, offs);
  CuStoragePtr wtab = dtype_ == DType::F64 ? upload_table(cdev(), DType::F64, weights_of<double>(th, tw))
                                           : upload_table(cdev(), DType::F32, weights_of<float>(th, tw));
  set_wide(p, l);
  ctx().launched(cuda_k::upsample_bilinear(dt_of(dtype_), at(l.start_offset()), otab->ptr<int64_t>(),
                                           wtab->at(0), out->at(0), p, stream()),
                 op);
  return out;
}

}  // namespace candle::cuda_backend

// ---- gradients ---------------------------------------------------------------------------------

namespace candle::cuda_backend {
namespace {

[[noreturn]] void internal(const char* op, const std::string& what) {
  throw Error(ErrorKind::Internal, std::string(op) + ": " + what);
}

// The CPU's check of the pooling gradients.
void check_pool_grad(const char* op, size_t h, size_t w, std::array<size_t, 2> k, std::array<size_t, 2> s) {
  if (k[0] == 0 || k[1] == 0 || s[0] == 0 || s[1] == 0 || k[0] > h || k[1] > w) {
    internal(op, "invalid kernel (" + std::to_string(k[0]) + ", " + std::to_string(k[1]) + ") / stride (" +
                     std::to_string(s[0]) + ", " + std::to_string(s[1]) + ") for input " + std::to_string(h) +
                     "x" + std::to_string(w));
  }
}

void check_in_bounds(const CudaStorage& s, const Layout& l, const char* op) {
  if (l.elem_count() && l.max_offset_exclusive() > s.elem_count())
    internal(op, "layout out of the storage's bounds");
}

// For each input index, the range [first, last + 1) of the outputs that read it (nearest).
void append_ranges(size_t in, size_t out, std::vector<int64_t>& r) {
  std::vector<int64_t> lo(in, 0), hi(in, 0);
  std::vector<bool> seen(in, false);
  if (in) {
    const std::vector<size_t> idx = cpu::nearest_indices(in, out);
    for (size_t o = 0; o < out; ++o) {
      const size_t i = idx[o];
      if (!seen[i]) lo[i] = i64(o), seen[i] = true;
      hi[i] = i64(o) + 1;
    }
  }
  r.insert(r.end(), lo.begin(), lo.end());
  r.insert(r.end(), hi.begin(), hi.end());
}

StoragePtr nearest_grad(const CudaStorage& g, const Layout& g_l, size_t b, size_t c, size_t in_h, size_t in_w,
                        size_t out_h, size_t out_w, const char* op) {
  if ((in_h == 0 || in_w == 0) && out_h * out_w != 0) internal(op, "empty input with a non-empty output");
  check_in_bounds(g, g_l, op);
  if (!dtype_is_float(g.dtype())) unsupported(g.dtype(), op);
  const size_t n = b * c * in_h * in_w;
  auto out = g.cdev().make(g.dtype(), n);
  if (n == 0) return out;
  if (out_h * out_w == 0) {
    out->const_set(Scalar(0.0), Layout::contiguous(Shape{n}));
    return out;
  }
  std::vector<int64_t> ranges;
  ranges.reserve(2 * (in_h + in_w));
  append_ranges(in_h, out_h, ranges);
  append_ranges(in_w, out_w, ranges);
  auto table = upload_table(g.cdev(), DType::I64, ranges);
  Dense gd = dense(g, g_l);
  cuda_k::PlaneArgs p;
  p.b = i64(b), p.c = i64(c), p.h = i64(in_h), p.w = i64(in_w), p.oh = i64(out_h), p.ow = i64(out_w);
  g.ctx().launched(cuda_k::upsample_nearest_grad(dt_of(g.dtype()), gd.s->at(gd.first), table->ptr<int64_t>(),
                                                 out->at(0), p, g.stream()),
                   op);
  return out;
}

}  // namespace

StoragePtr CudaStorage::max_pool2d_grad(const Layout& x_l, const BackendStorage& grad_out, const Layout& g_l,
                                        std::array<size_t, 2> k, std::array<size_t, 2> st) const {
  const char* op = "max_pool2d_grad";
  const CudaStorage& gs = as_cuda(grad_out, op);
  if (gs.dtype() != dtype_) internal(op, "grad_out is not a storage of the input's dtype");
  cuda_k::PlaneArgs p = planes4(x_l, op);
  check_pool_grad(op, static_cast<size_t>(p.h), static_cast<size_t>(p.w), k, st);
  check_in_bounds(*this, x_l, op);
  check_in_bounds(gs, g_l, op);
  p.oh = (p.h - i64(k[0])) / i64(st[0]) + 1;
  p.ow = (p.w - i64(k[1])) / i64(st[1]) + 1;
  if (g_l.shape() != Shape{static_cast<size_t>(p.b), static_cast<size_t>(p.c), static_cast<size_t>(p.oh),
                           static_cast<size_t>(p.ow)})
    internal(op, "grad_out layout " + g_l.shape().to_string() + " does not match the pooled shape");
  if (!dtype_is_float(dtype_)) unsupported(dtype_, op);
  const size_t n = x_l.elem_count();
  auto out = cdev().make(dtype_, n);
  if (n == 0) return out;
  Dense gd = dense(gs, g_l);
  ctx().launched(
      cuda_k::max_pool2d_grad(dt_of(dtype_), at(x_l.start_offset()), gd.s->at(gd.first), out->at(0), p,
                              i64(k[0]), i64(k[1]), i64(st[0]), i64(st[1]), stream()),
      op);
  return out;
}

StoragePtr CudaStorage::avg_pool2d_grad(const Layout& g_l, size_t in_h, size_t in_w, std::array<size_t, 2> k,
                                        std::array<size_t, 2> st) const {
  const char* op = "avg_pool2d_grad";
  const auto d4 = g_l.shape().dims4(op);
  check_pool_grad(op, in_h, in_w, k, st);
  if (d4[2] != (in_h - k[0]) / st[0] + 1 || d4[3] != (in_w - k[1]) / st[1] + 1)
    internal(op, "grad_out layout " + g_l.shape().to_string() + " does not match the pooled shape");
  check_in_bounds(*this, g_l, op);
  if (!dtype_is_float(dtype_)) unsupported(dtype_, op);
  const size_t n = d4[0] * d4[1] * in_h * in_w;
  auto out = cdev().make(dtype_, n);
  if (n == 0) return out;
  cuda_k::PlaneArgs p;
  p.b = i64(d4[0]), p.c = i64(d4[1]), p.h = i64(in_h), p.w = i64(in_w), p.oh = i64(d4[2]), p.ow = i64(d4[3]);
  Dense gd = dense(*this, g_l);
  ctx().launched(cuda_k::avg_pool2d_grad(dt_of(dtype_), gd.s->at(gd.first), out->at(0), p, i64(k[0]),
                                         i64(k[1]), i64(st[0]), i64(st[1]), stream()),
                 op);
  return out;
}

StoragePtr CudaStorage::upsample_nearest1d_grad(const Layout& g_l, size_t in_l) const {
  const char* op = "upsample_nearest1d_grad";
  auto [b, c, out_l] = g_l.shape().dims3(op);
  return nearest_grad(*this, g_l, b, c, 1, in_l, 1, out_l, op);
}

StoragePtr CudaStorage::upsample_nearest2d_grad(const Layout& g_l, size_t in_h, size_t in_w) const {
  const char* op = "upsample_nearest2d_grad";
  const auto d4 = g_l.shape().dims4(op);
  return nearest_grad(*this, g_l, d4[0], d4[1], in_h, in_w, d4[2], d4[3], op);
}

StoragePtr CudaStorage::upsample_bilinear2d_grad(const Layout& g_l, size_t in_h, size_t in_w,
                                                 bool align_corners, std::optional<double> scale_h,
                                                 std::optional<double> scale_w) const {
  const char* op = "upsample_bilinear2d_grad";
  const auto d4 = g_l.shape().dims4(op);
  const size_t b = d4[0], c = d4[1], out_h = d4[2], out_w = d4[3];
  if ((in_h == 0 || in_w == 0) && out_h * out_w != 0) internal(op, "empty input with a non-empty output");
  check_in_bounds(*this, g_l, op);
  if (!dtype_is_float(dtype_)) unsupported(dtype_, op);
  if (in_h == out_h && in_w == out_w) {  // the forward is a copy
    auto out = cdev().make(dtype_, g_l.elem_count());
    if (out->elem_count()) copy_strided_src(*out, 0, g_l);
    return out;
  }
  const size_t n = b * c * in_h * in_w;
  auto out = cdev().make(dtype_, n);
  if (n == 0) return out;
  if (out_h * out_w == 0) {
    out->const_set(Scalar(0.0), Layout::contiguous(Shape{n}));
    return out;
  }
  const cpu::LinearTaps th = cpu::linear_taps(in_h, out_h, align_corners, scale_h);
  const cpu::LinearTaps tw = cpu::linear_taps(in_w, out_w, align_corners, scale_w);
  // per input index, the (output, tap) pairs that reach it, in the CPU's order: outputs
  // ascending, tap 0 before tap 1
  auto csr = [](const cpu::LinearTaps& t, size_t in, std::vector<int64_t>& tab) {
    std::vector<std::vector<int64_t>> lists(in);
    for (size_t o = 0; o < t.i0.size(); ++o) {
      lists[t.i0[o]].push_back(i64(o) << 1);
      lists[t.i1[o]].push_back(i64(o) << 1 | 1);
    }
    int64_t at = 0;
    for (const auto& l : lists) {
      tab.push_back(at);
      at += i64(l.size());
    }
    tab.push_back(at);
    for (const auto& l : lists) tab.insert(tab.end(), l.begin(), l.end());
  };
  std::vector<int64_t> tab;
  csr(th, in_h, tab);
  const auto cols_at = i64(tab.size());
  csr(tw, in_w, tab);
  auto ttab = upload_table(cdev(), DType::I64, tab);
  CuStoragePtr wtab = dtype_ == DType::F64 ? upload_table(cdev(), DType::F64, weights_of<double>(th, tw))
                                           : upload_table(cdev(), DType::F32, weights_of<float>(th, tw));
  Dense gd = dense(*this, g_l);
  cuda_k::PlaneArgs p;
  p.b = i64(b), p.c = i64(c), p.h = i64(in_h), p.w = i64(in_w), p.oh = i64(out_h), p.ow = i64(out_w);
  ctx().launched(cuda_k::upsample_bilinear_grad(dt_of(dtype_), gd.s->at(gd.first), ttab->ptr<int64_t>(),
                                                cols_at, wtab->at(0), out->at(0), p, stream()),
                 op);
  return out;
}

}  // namespace candle::cuda_backend
