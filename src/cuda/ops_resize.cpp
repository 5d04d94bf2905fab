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
  x.ctx().launched(fn(dt_of(x.dtype()), x.at(l.start_offset()), out->at(0), p, i64(k[0]), i64(k[1]), i64(st[0]),
                      i64(st[1]), x.stream()),
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
  throw Error(ErrorKind::InvalidArgument, std::string(op) + ": cannot resize an empty input to a non-empty output");
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
  x.ctx().launched(cuda_k::upsample_nearest(dtype_size(x.dtype()), x.at(l.start_offset()), table->ptr<int64_t>(),
                                            out->at(0), p, x.stream()),
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
                                            std::optional<double> scale_h, std::optional<double> scale_w) const {
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
  ctx().launched(cuda_k::upsample_bilinear(dt_of(dtype_), at(l.start_offset()), otab->ptr<int64_t>(), wtab->at(0),
                                           out->at(0), p, stream()),
                 op);
  return out;
}

}  // namespace candle::cuda_backend
