// Convolutions: conv2d / conv1d as an implicit GEMM with the bias + activation epilogue
// (kernels/cuda/conv2d_tc.cu on tensor cores, kernels/cuda/conv2d.cu on CUDA cores), conv_transpose2d /
// conv_transpose1d by gathering taps (kernels/cuda/conv_transpose.cu). The input is read through its layout's
// strides; the kernel is made dense first when it is not.
#include <algorithm>
#include <string>
#include <vector>

#include "candle/cuda.h"
#include "cudnn_conv.h"
#include "launch_conv.h"
#include "launch_epilogue.h"
#include "storage.h"

namespace candle::cuda_backend {
namespace {

// Offsets at or above this use the kernels' 64-bit index arithmetic (int32 below, with room for
// the grid-stride step).
constexpr size_t kNarrow = size_t{1} << 30;

size_t span_of(const Layout& l) { return l.elem_count() ? l.max_offset_exclusive() - l.start_offset() : 0; }

[[noreturn]] void internal(const char* op, const std::string& what) {
  throw Error(ErrorKind::Internal, std::string(op) + ": " + what);
}

void check_bounds(const CudaStorage& s, const Layout& l, const char* op) {
  if (l.elem_count() && l.max_offset_exclusive() > s.elem_count())
    internal(op, "layout out of the storage's bounds");
}

const CudaStorage& kernel_of(const CudaStorage& x, const BackendStorage& kb, const Layout& kl,
                             const char* op) {
  const CudaStorage& k = as_cuda(kb, op);
  if (k.dtype() != x.dtype()) internal(op, "kernel is not a storage of the input's dtype");
  check_bounds(k, kl, op);
  return k;
}

CuStoragePtr upload_i64(CudaDevice& dev, const std::vector<int64_t>& v) {
  auto t = dev.make(DType::I64, v.size());
  dev.ctx().upload(t->at(0), v.data(), v.size() * sizeof(int64_t));
  return t;
}

// The largest |offset| the kernels form from coordinates (padding included), as a size.
size_t coord_reach(const cuda_k::ConvArgs& a, bool transpose) {
  const auto reach = [&](int64_t pad, int64_t s, int64_t d, int64_t k, int64_t in, int64_t out) {
    return static_cast<size_t>(pad + s * (transpose ? in : out) + d * k + (transpose ? out : in) + 1);
  };
  const size_t ry = reach(a.pad_h, a.s_h, a.d_h, a.kh, a.ih, a.oh);
  const size_t rx = reach(a.pad_w, a.s_w, a.d_w, a.kw, a.iw, a.ow);
  return ry * static_cast<size_t>(a.sh) + rx * static_cast<size_t>(a.sw);
}

// The tensor-core kernel (conv2d_tc.cu) for f16 / bf16, and for f32 only when TF32 was asked for
// (cuda::gemm_reduced_precision_f32(); else f32 stays exact FMA arithmetic); the CUDA-core one
// (conv2d.cu) for f64, f8e4m3, before sm_80 (no bf16 / TF32 WMMA), and for problems thinner than
// one 16-wide MMA step (co_g or K below 16), where most of each tensor-core tile would be padding.
bool use_tensor_cores(DType dt, const cuda_k::ConvArgs& a, int compute_capability) {
  const bool dtype_ok =
      dt == DType::F16 || dt == DType::BF16 || (dt == DType::F32 && cuda::gemm_reduced_precision_f32());
  return dtype_ok && compute_capability >= 80 && a.co_g >= 16 && a.ci_g * a.kh * a.kw >= 16;
}

StoragePtr run_conv(const CudaStorage& x, const Layout& l, const BackendStorage& kb, const Layout& kl,
                    cuda_k::ConvArgs a, const ConvEpilogue* ep, const char* op) {
  if (!dtype_is_float(x.dtype())) unsupported(x.dtype(), op);
  const CudaStorage& k = kernel_of(x, kb, kl, op);
  check_bounds(x, l, op);
  const size_t c_out = static_cast<size_t>(a.groups * a.co_g);
  const size_t total = static_cast<size_t>(a.b) * c_out * static_cast<size_t>(a.oh * a.ow);
  auto out = x.cdev().make(x.dtype(), total);
  if (total == 0) return out;
  const CudaStorage* bias = nullptr;
  size_t bias_first = 0;
  if (ep) {
    if (ep->activation) a.act = static_cast<int32_t>(*ep->activation);
    if (ep->bias) {
      bias = &as_cuda(*ep->bias, op);
      const Layout& bl = ep->bias_layout;
      if (bias->dtype() != x.dtype() || bl.elem_count() != c_out || bl.stride().size() != 1)
        internal(op, "bad bias storage");
      check_bounds(*bias, bl, op);
      a.has_bias = true;
      a.bias_st = static_cast<int64_t>(bl.stride()[0]);
      bias_first = bl.start_offset();
    }
  }
  const size_t K = static_cast<size_t>(a.ci_g * a.kh * a.kw);
  std::vector<int64_t> taps(3 * K);
  for (int64_t ci = 0; ci < a.ci_g; ++ci)
    for (int64_t ky = 0; ky < a.kh; ++ky)
      for (int64_t kx = 0; kx < a.kw; ++kx) {
        const size_t kk = static_cast<size_t>((ci * a.kh + ky) * a.kw + kx);
        const int64_t dy = ky * a.d_h, dx = kx * a.d_w;
        taps[3 * kk] = ci * a.sc + dy * a.sh + dx * a.sw;
        taps[3 * kk + 1] = dy;
        taps[3 * kk + 2] = dx;
      }
  CuStoragePtr tt = K ? upload_i64(x.cdev(), taps) : nullptr;
  Dense w = dense(k, kl);
  const size_t bias_span = bias ? span_of(ep->bias_layout) : 0;
  a.wide = span_of(l) >= kNarrow || total >= kNarrow || c_out * K >= kNarrow || bias_span >= kNarrow ||
           coord_reach(a, false) >= kNarrow;
  const bool tc = use_tensor_cores(x.dtype(), a, x.ctx().compute_capability());
  x.ctx().launched(
      (tc ? cuda_k::conv2d_tc : cuda_k::conv2d)(
          dt_of(x.dtype()), x.at(l.start_offset()), w.s->at(w.first), tt ? tt->ptr<int64_t>() : nullptr,
          bias ? bias->at(bias_first) : nullptr, out->at(0), a, x.stream()),
      op);
  return out;
}

StoragePtr run_conv_transpose(const CudaStorage& x, const Layout& l, const BackendStorage& kb,
                              const Layout& kl, cuda_k::ConvArgs a, const char* op) {
  if (!dtype_is_float(x.dtype())) unsupported(x.dtype(), op);
  const CudaStorage& k = kernel_of(x, kb, kl, op);
  check_bounds(x, l, op);
  const size_t c_out = static_cast<size_t>(a.groups * a.co_g);
  const size_t total = static_cast<size_t>(a.b) * c_out * static_cast<size_t>(a.oh * a.ow);
  auto out = x.cdev().make(x.dtype(), total);
  if (total == 0) return out;
  Dense w = dense(k, kl);
  const size_t wn = static_cast<size_t>(a.groups * a.ci_g * a.co_g * a.kh * a.kw);
  a.wide = span_of(l) >= kNarrow || total >= kNarrow || wn >= kNarrow || coord_reach(a, true) >= kNarrow;
  x.ctx().launched(cuda_k::conv_transpose2d(dt_of(x.dtype()), x.at(l.start_offset()), w.s->at(w.first),
                                            out->at(0), a, x.stream()),
                   op);
  return out;
}

int64_t i64(size_t v) { return static_cast<int64_t>(v); }

// Input strides of a rank-4 (b, c, h, w) or rank-3 (b, c, l) layout.
void set_strides(cuda_k::ConvArgs& a, const Layout& l, const char* op) {
  const auto& s = l.stride();
  if (s.size() == 4) {
    a.sb = i64(s[0]), a.sc = i64(s[1]), a.sh = i64(s[2]), a.sw = i64(s[3]);
  } else if (s.size() == 3) {
    a.sb = i64(s[0]), a.sc = i64(s[1]), a.sh = 0, a.sw = i64(s[2]);
  } else {
    internal(op, "input of rank " + std::to_string(s.size()));
  }
}

void check_groups(size_t groups, size_t c_in, size_t c_out, const char* op) {
  if (groups == 0 || c_in % groups != 0 || c_out % groups != 0) internal(op, "invalid parameters");
}

// The padded input must hold one dilated kernel window.
void check_window(size_t in, size_t pad, size_t dil, size_t k, size_t stride, const char* op) {
  if (k == 0 || dil == 0 || stride == 0 || in + 2 * pad < dil * (k - 1) + 1)
    internal(op, "invalid parameters");
}

}  // namespace

StoragePtr CudaStorage::conv1d(const Layout& l, const BackendStorage& kernel, const Layout& kernel_l,
                               const ParamsConv1D& p) const {
  const char* op = "conv1d";
  check_groups(p.groups, p.c_in, p.c_out, op);
  check_window(p.l_in, p.padding, p.dilation, p.k_size, p.stride, op);
  l.shape().dims3(op);
  cuda_k::ConvArgs a;
  a.b = i64(p.b_size), a.groups = i64(p.groups), a.ci_g = i64(p.c_in / p.groups),
  a.co_g = i64(p.c_out / p.groups);
  a.ih = 1, a.iw = i64(p.l_in), a.kh = 1, a.kw = i64(p.k_size), a.oh = 1, a.ow = i64(p.l_out());
  a.pad_w = i64(p.padding), a.s_w = i64(p.stride), a.d_w = i64(p.dilation);
  set_strides(a, l, op);
  return run_conv(*this, l, kernel, kernel_l, a, nullptr, op);
}

// conv2d through cuDNN where it loaded and takes the case (then bias and activation in one
// pass over the output); nullptr otherwise.
// cuDNN takes these dtypes (when it loaded).
static bool cudnn_float(DType dt) { return dtype_is_float(dt) && dt != DType::F8E4M3 && cudnn_available(); }

static StoragePtr conv2d_cudnn(const CudaStorage& x, const Layout& l, const BackendStorage& kernel_b,
                               const Layout& kernel_l, const ParamsConv2D& p, const ConvEpilogue& e) {
  if (!cudnn_float(x.dtype())) return nullptr;
  const CudaStorage& w = as_cuda(kernel_b, "conv2d");
  if (w.dtype() != x.dtype()) return nullptr;
  const size_t oh = p.out_h(), ow = p.out_w();
  auto out = x.cdev().make(x.dtype(), p.b_size * p.c_out * oh * ow);
  if (out->elem_count() == 0) return out;
  if (!cudnn_conv2d(x, l, w, kernel_l, p, *out)) return nullptr;
  if (e.bias || e.activation) {
    Dense bias{nullptr, 0, nullptr};
    if (e.bias) bias = dense(as_cuda(*e.bias, "conv2d"), e.bias_layout);
    x.ctx().launched(cuda_k::bias_act_inplace(
                         dt_of(x.dtype()), out->at(0), bias.s ? bias.s->at(bias.first) : nullptr, p.b_size,
                         p.c_out, oh * ow, e.activation ? static_cast<int>(*e.activation) : -1, x.stream()),
                     "conv2d epilogue");
  }
  return out;
}

StoragePtr CudaStorage::conv2d(const Layout& l, const BackendStorage& kernel, const Layout& kernel_l,
                               const ParamsConv2D& p, const ConvEpilogue& epilogue) const {
  const char* op = "conv2d";
  check_groups(p.groups, p.c_in, p.c_out, op);
  check_window(p.i_h, p.padding, p.dilation, p.k_h, p.stride, op);
  check_window(p.i_w, p.padding, p.dilation, p.k_w, p.stride, op);
  l.shape().dims4(op);
  cuda_k::ConvArgs a;
  a.b = i64(p.b_size), a.groups = i64(p.groups), a.ci_g = i64(p.c_in / p.groups),
  a.co_g = i64(p.c_out / p.groups);
  a.ih = i64(p.i_h), a.iw = i64(p.i_w), a.kh = i64(p.k_h), a.kw = i64(p.k_w);
  a.oh = i64(p.out_h()), a.ow = i64(p.out_w());
  a.pad_h = a.pad_w = i64(p.padding), a.s_h = a.s_w = i64(p.stride), a.d_h = a.d_w = i64(p.dilation);
  set_strides(a, l, op);
  if (auto out = conv2d_cudnn(*this, l, kernel, kernel_l, p, epilogue)) return out;
  return run_conv(*this, l, kernel, kernel_l, a, &epilogue, op);
}

StoragePtr CudaStorage::conv_transpose1d(const Layout& l, const BackendStorage& kernel,
                                         const Layout& kernel_l, const ParamsConv1D& p) const {
  const char* op = "conv_transpose1d";
  if (p.groups == 0 || p.c_in % p.groups != 0 || p.c_out % p.groups != 0 || p.stride == 0 ||
      p.dilation == 0 || p.k_size == 0 || p.l_in == 0)
    internal(op, "invalid parameters");
  l.shape().dims3(op);
  cuda_k::ConvArgs a;
  a.b = i64(p.b_size), a.groups = i64(p.groups), a.ci_g = i64(p.c_in / p.groups),
  a.co_g = i64(p.c_out / p.groups);
  a.ih = 1, a.iw = i64(p.l_in), a.kh = 1, a.kw = i64(p.k_size), a.oh = 1, a.ow = i64(p.l_out_transpose());
  a.pad_w = i64(p.padding), a.s_w = i64(p.stride), a.d_w = i64(p.dilation);
  set_strides(a, l, op);
  return run_conv_transpose(*this, l, kernel, kernel_l, a, op);
}

StoragePtr CudaStorage::conv_transpose2d(const Layout& l, const BackendStorage& kernel,
                                         const Layout& kernel_l, const ParamsConv2D& p) const {
  const char* op = "conv_transpose2d";
  if (p.groups != 1 || p.stride == 0 || p.dilation == 0 || p.k_h == 0 || p.k_w == 0 || p.i_h == 0 ||
      p.i_w == 0)
    internal(op, "invalid parameters");
  l.shape().dims4(op);
  cuda_k::ConvArgs a;
  a.b = i64(p.b_size), a.groups = 1, a.ci_g = i64(p.c_in), a.co_g = i64(p.c_out);
  a.ih = i64(p.i_h), a.iw = i64(p.i_w), a.kh = i64(p.k_h), a.kw = i64(p.k_w);
  a.oh = i64(p.out_h_transpose()), a.ow = i64(p.out_w_transpose());
  a.pad_h = a.pad_w = i64(p.padding), a.s_h = a.s_w = i64(p.stride), a.d_h = a.d_w = i64(p.dilation);
  set_strides(a, l, op);
  return run_conv_transpose(*this, l, kernel, kernel_l, a, op);
}

}  // namespace candle::cuda_backend

// ---- gradients ---------------------------------------------------------------------------------

namespace candle::cuda_backend {
namespace {

const CudaStorage& operand_of(const BackendStorage& s, DType dt, const char* op, const char* what) {
  const CudaStorage& c = as_cuda(s, op);
  if (c.dtype() != dt) internal(op, std::string(what) + " is not a storage of the input's dtype");
  return c;
}

void check_shape(const char* op, const char* what, const Layout& l, const Shape& want) {
  if (l.shape() != want)
    internal(op, std::string(what) + " layout " + l.shape().to_string() + " does not match the parameters");
}

void check_geom(size_t groups, size_t c_in, size_t c_out, size_t stride, size_t dil, size_t kh, size_t kw,
                const char* op) {
  if (groups == 0 || c_in % groups != 0 || c_out % groups != 0 || stride == 0 || dil == 0 || kh == 0 ||
      kw == 0)
    internal(op, "invalid parameters");
}

// Strides of a [b, c, h, w] or [b, c, l] layout as (sb, sc, sh, sw).
std::array<int64_t, 4> strides4(const Layout& l) {
  const auto& s = l.stride();
  if (s.size() == 3) return {i64(s[0]), i64(s[1]), 0, i64(s[2])};
  return {i64(s[0]), i64(s[1]), i64(s[2]), i64(s[3])};
}

// A = the correlation's first operand (its channels index the kernel gradient's rows).
StoragePtr run_corr(const CudaStorage& a, const Layout& al, const CudaStorage& b, const Layout& bl,
                    cuda_k::CorrArgs c, const char* op) {
  if (!dtype_is_float(a.dtype())) unsupported(a.dtype(), op);
  check_bounds(a, al, op);
  check_bounds(b, bl, op);
  const auto as = strides4(al), bs = strides4(bl);
  c.asb = as[0], c.asc = as[1], c.ash = as[2], c.asw = as[3];
  c.bsb = bs[0], c.bsc = bs[1], c.bsh = bs[2], c.bsw = bs[3];
  c.wide = static_cast<size_t>(c.b * c.ph * c.pw) >= kNarrow;
  const size_t n = static_cast<size_t>(c.groups * c.a_g * c.b_g * c.kh * c.kw);
  auto out = a.cdev().make(a.dtype(), n);
  if (n == 0) return out;
  if (c.b * c.ph * c.pw == 0) {
    out->const_set(Scalar(0.0), Layout::contiguous(Shape{n}));
    return out;
  }
  a.ctx().launched(cuda_k::conv_grad_kernel(dt_of(a.dtype()), a.at(al.start_offset()),
                                            b.at(bl.start_offset()), out->at(0), c, a.stream()),
                   op);
  return out;
}

cuda_k::CorrArgs corr_2d(const ParamsConv2D& p) {
  cuda_k::CorrArgs c;
  c.b = i64(p.b_size), c.groups = i64(p.groups), c.kh = i64(p.k_h), c.kw = i64(p.k_w);
  c.pad_h = c.pad_w = i64(p.padding), c.s_h = c.s_w = i64(p.stride), c.d_h = c.d_w = i64(p.dilation);
  return c;
}

cuda_k::CorrArgs corr_1d(const ParamsConv1D& p) {
  cuda_k::CorrArgs c;
  c.b = i64(p.b_size), c.groups = i64(p.groups), c.kh = 1, c.kw = i64(p.k_size), c.ph = 1, c.bh = 1;
  c.pad_w = i64(p.padding), c.s_w = i64(p.stride), c.d_w = i64(p.dilation);
  return c;
}

}  // namespace

StoragePtr CudaStorage::conv2d_grad_kernel(const Layout& x_l, const BackendStorage& grad_out,
                                           const Layout& g_l, const ParamsConv2D& p) const {
  const char* op = "conv2d_grad_kernel";
  const CudaStorage& gs = operand_of(grad_out, dtype_, op, "grad_out");
  check_geom(p.groups, p.c_in, p.c_out, p.stride, p.dilation, p.k_h, p.k_w, op);
  check_window(p.i_h, p.padding, p.dilation, p.k_h, p.stride, op);
  check_window(p.i_w, p.padding, p.dilation, p.k_w, p.stride, op);
  check_shape(op, "input", x_l, Shape{p.b_size, p.c_in, p.i_h, p.i_w});
  check_shape(op, "grad_out", g_l, Shape{p.b_size, p.c_out, p.out_h(), p.out_w()});
  if (cudnn_float(dtype_) && p.b_size * p.c_out * p.out_h() * p.out_w() > 0) {
    auto dw = cdev().make(dtype_, p.c_out * (p.c_in / p.groups) * p.k_h * p.k_w);
    if (cudnn_conv2d_grad_kernel(*this, x_l, gs, g_l, p, *dw)) return dw;
  }
  cuda_k::CorrArgs c = corr_2d(p);
  c.a_g = i64(p.c_out / p.groups), c.b_g = i64(p.c_in / p.groups);
  c.ph = i64(p.out_h()), c.pw = i64(p.out_w()), c.bh = i64(p.i_h), c.bw = i64(p.i_w);
  return run_corr(gs, g_l, *this, x_l, c, op);
}

StoragePtr CudaStorage::conv1d_grad_kernel(const Layout& x_l, const BackendStorage& grad_out,
                                           const Layout& g_l, const ParamsConv1D& p) const {
  const char* op = "conv1d_grad_kernel";
  const CudaStorage& gs = operand_of(grad_out, dtype_, op, "grad_out");
  check_geom(p.groups, p.c_in, p.c_out, p.stride, p.dilation, 1, p.k_size, op);
  check_window(p.l_in, p.padding, p.dilation, p.k_size, p.stride, op);
  check_shape(op, "input", x_l, Shape{p.b_size, p.c_in, p.l_in});
  check_shape(op, "grad_out", g_l, Shape{p.b_size, p.c_out, p.l_out()});
  cuda_k::CorrArgs c = corr_1d(p);
  c.a_g = i64(p.c_out / p.groups), c.b_g = i64(p.c_in / p.groups);
  c.pw = i64(p.l_out()), c.bw = i64(p.l_in);
  return run_corr(gs, g_l, *this, x_l, c, op);
}

StoragePtr CudaStorage::conv2d_grad_input(const Layout& g_l, const BackendStorage& kernel, const Layout& k_l,
                                          const ParamsConv2D& p) const {
  const char* op = "conv2d_grad_input";
  check_geom(p.groups, p.c_in, p.c_out, p.stride, p.dilation, p.k_h, p.k_w, op);
  check_window(p.i_h, p.padding, p.dilation, p.k_h, p.stride, op);
  check_window(p.i_w, p.padding, p.dilation, p.k_w, p.stride, op);
  check_shape(op, "grad_out", g_l, Shape{p.b_size, p.c_out, p.out_h(), p.out_w()});
  check_shape(op, "kernel", k_l, Shape{p.c_out, p.c_in / p.groups, p.k_h, p.k_w});
  if (cudnn_float(dtype_)) {
    const CudaStorage& k = as_cuda(kernel, op);
    auto dx = cdev().make(dtype_, p.b_size * p.c_in * p.i_h * p.i_w);
    if (k.dtype() == dtype_ && (dx->elem_count() == 0 || cudnn_conv2d_grad_input(*this, g_l, k, k_l, p, *dx)))
      return dx;
  }
  // the transposed conv of grad_out with the same kernel, onto the input's size
  cuda_k::ConvArgs a;
  a.b = i64(p.b_size), a.groups = i64(p.groups), a.ci_g = i64(p.c_out / p.groups),
  a.co_g = i64(p.c_in / p.groups);
  a.ih = i64(p.out_h()), a.iw = i64(p.out_w()), a.kh = i64(p.k_h), a.kw = i64(p.k_w);
  a.oh = i64(p.i_h), a.ow = i64(p.i_w);
  a.pad_h = a.pad_w = i64(p.padding), a.s_h = a.s_w = i64(p.stride), a.d_h = a.d_w = i64(p.dilation);
  set_strides(a, g_l, op);
  return run_conv_transpose(*this, g_l, kernel, k_l, a, op);
}

StoragePtr CudaStorage::conv1d_grad_input(const Layout& g_l, const BackendStorage& kernel, const Layout& k_l,
                                          const ParamsConv1D& p) const {
  const char* op = "conv1d_grad_input";
  check_geom(p.groups, p.c_in, p.c_out, p.stride, p.dilation, 1, p.k_size, op);
  check_window(p.l_in, p.padding, p.dilation, p.k_size, p.stride, op);
  check_shape(op, "grad_out", g_l, Shape{p.b_size, p.c_out, p.l_out()});
  check_shape(op, "kernel", k_l, Shape{p.c_out, p.c_in / p.groups, p.k_size});
  cuda_k::ConvArgs a;
  a.b = i64(p.b_size), a.groups = i64(p.groups), a.ci_g = i64(p.c_out / p.groups),
  a.co_g = i64(p.c_in / p.groups);
  a.ih = 1, a.iw = i64(p.l_out()), a.kh = 1, a.kw = i64(p.k_size), a.oh = 1, a.ow = i64(p.l_in);
  a.pad_w = i64(p.padding), a.s_w = i64(p.stride), a.d_w = i64(p.dilation);
  set_strides(a, g_l, op);
  return run_conv_transpose(*this, g_l, kernel, k_l, a, op);
}

StoragePtr CudaStorage::conv_transpose2d_grad_kernel(const Layout& x_l, const BackendStorage& grad_out,
                                                     const Layout& g_l, const ParamsConv2D& p) const {
  const char* op = "conv_transpose2d_grad_kernel";
  const CudaStorage& gs = operand_of(grad_out, dtype_, op, "grad_out");
  check_geom(p.groups, p.c_in, p.c_out, p.stride, p.dilation, p.k_h, p.k_w, op);
  const size_t oh = p.out_h_transpose(), ow = p.out_w_transpose();
  check_shape(op, "input", x_l, Shape{p.b_size, p.c_in, p.i_h, p.i_w});
  check_shape(op, "grad_out", g_l, Shape{p.b_size, p.c_out, oh, ow});
  cuda_k::CorrArgs c = corr_2d(p);
  c.a_g = i64(p.c_in / p.groups), c.b_g = i64(p.c_out / p.groups);
  c.ph = i64(p.i_h), c.pw = i64(p.i_w), c.bh = i64(oh), c.bw = i64(ow);
  return run_corr(*this, x_l, gs, g_l, c, op);
}

StoragePtr CudaStorage::conv_transpose1d_grad_kernel(const Layout& x_l, const BackendStorage& grad_out,
                                                     const Layout& g_l, const ParamsConv1D& p) const {
  const char* op = "conv_transpose1d_grad_kernel";
  const CudaStorage& gs = operand_of(grad_out, dtype_, op, "grad_out");
  check_geom(p.groups, p.c_in, p.c_out, p.stride, p.dilation, 1, p.k_size, op);
  const size_t ol = p.l_out_transpose();
  check_shape(op, "input", x_l, Shape{p.b_size, p.c_in, p.l_in});
  check_shape(op, "grad_out", g_l, Shape{p.b_size, p.c_out, ol});
  cuda_k::CorrArgs c = corr_1d(p);
  c.a_g = i64(p.c_in / p.groups), c.b_g = i64(p.c_out / p.groups);
  c.pw = i64(p.l_in), c.bw = i64(ol);
  return run_corr(*this, x_l, gs, g_l, c, op);
}

// The input gradient of conv_transpose: the forward conv of grad_out with the same kernel,
// computed on the input's size only (the CPU's crop when output_padding >= stride).
StoragePtr CudaStorage::conv_transpose2d_grad_input(const Layout& g_l, const BackendStorage& kernel,
                                                    const Layout& k_l, const ParamsConv2D& p) const {
  const char* op = "conv_transpose2d_grad_input";
  if (p.groups == 0 || p.c_in % p.groups != 0 || p.c_out % p.groups != 0 || p.stride == 0 ||
      p.dilation == 0 || p.k_h == 0 || p.k_w == 0)
    internal(op, "invalid parameters");
  const size_t oh = p.out_h_transpose(), ow = p.out_w_transpose();
  check_shape(op, "grad_out", g_l, Shape{p.b_size, p.c_out, oh, ow});
  check_shape(op, "kernel", k_l, Shape{p.c_in, p.c_out / p.groups, p.k_h, p.k_w});
  cuda_k::ConvArgs a;
  a.b = i64(p.b_size), a.groups = i64(p.groups), a.ci_g = i64(p.c_out / p.groups),
  a.co_g = i64(p.c_in / p.groups);
  a.ih = i64(oh), a.iw = i64(ow), a.kh = i64(p.k_h), a.kw = i64(p.k_w), a.oh = i64(p.i_h), a.ow = i64(p.i_w);
  a.pad_h = a.pad_w = i64(p.padding), a.s_h = a.s_w = i64(p.stride), a.d_h = a.d_w = i64(p.dilation);
  set_strides(a, g_l, op);
  return run_conv(*this, g_l, kernel, k_l, a, nullptr, op);
}

StoragePtr CudaStorage::conv_transpose1d_grad_input(const Layout& g_l, const BackendStorage& kernel,
                                                    const Layout& k_l, const ParamsConv1D& p) const {
  const char* op = "conv_transpose1d_grad_input";
  if (p.groups == 0 || p.c_in % p.groups != 0 || p.c_out % p.groups != 0 || p.stride == 0 ||
      p.dilation == 0 || p.k_size == 0)
    internal(op, "invalid parameters");
  const size_t ol = p.l_out_transpose();
  check_shape(op, "grad_out", g_l, Shape{p.b_size, p.c_out, ol});
  check_shape(op, "kernel", k_l, Shape{p.c_in, p.c_out / p.groups, p.k_size});
  cuda_k::ConvArgs a;
  a.b = i64(p.b_size), a.groups = i64(p.groups), a.ci_g = i64(p.c_out / p.groups),
  a.co_g = i64(p.c_in / p.groups);
  a.ih = 1, a.iw = i64(ol), a.kh = 1, a.kw = i64(p.k_size), a.oh = 1, a.ow = i64(p.l_in);
  a.pad_w = i64(p.padding), a.s_w = i64(p.stride), a.d_w = i64(p.dilation);
  set_strides(a, g_l, op);
  return run_conv(*this, g_l, kernel, k_l, a, nullptr, op);
}

StoragePtr CudaStorage::conv_bias_grad(const Layout& g_l) const {
  const char* op = "conv_bias_grad";
  const auto& d = g_l.dims();
  if (d.size() < 2) internal(op, "grad_out must have rank >= 2");
  check_bounds(*this, g_l, op);
  if (!dtype_is_float(dtype_)) unsupported(dtype_, op);
  const size_t b = d[0], c = d[1], r = g_l.elem_count() / std::max<size_t>(b * c, 1);
  auto out = cdev().make(dtype_, c);
  if (c == 0) return out;
  if (b * r == 0) {
    out->const_set(Scalar(0.0), Layout::contiguous(Shape{c}));
    return out;
  }
  Dense g = dense(*this, g_l);
  ctx().launched(
      cuda_k::conv_bias_grad(dt_of(dtype_), g.s->at(g.first), out->at(0), i64(b), i64(c), i64(r), stream()),
      op);
  return out;
}

}  // namespace candle::cuda_backend
