// CPU gradients of conv1d / conv2d / conv_transpose1d / conv_transpose2d.
//
// Everything is a 2-D convolution with per-axis geometry (cpu::ConvGeom; 1-D is h = 1):
//  - kernel gradient: dW_g[c_out_g, kdim] = sum over images and blocks of output positions of
//    G[c_out_g, block] x panel[kdim, block]^T, where `panel` is the im2col panel of the input
//    (bounded by kPanelBytes and the conv scratch cap). The (image, block) units are cut into
//    chunks whose number depends only on the shape; each chunk accumulates into its own
//    partial dW (serial GEMMs in unit order) and the partials are added in chunk order, so the
//    bytes do not depend on the thread count. 1x1 stride-1 unpadded convs multiply the input
//    directly (no panel).
//  - input gradient: stride 1 with a non-negative "full" padding d (k - 1) - p is the forward
//    conv of grad_out with the flipped, transposed kernel (CpuStorage::conv1d/conv2d: im2col +
//    GEMM or Winograd); otherwise, per (image, group): cols[kdim, block] = W_g^T x G[:, block],
//    then col2im (scatter-add) into the image's input gradient. Tasks own whole images, so the
//    adds of every element run in one order (block, kernel tap, position) fixed by the shape;
//    with few images the tasks run one after another, parallel inside (GEMM tiles fixed by
//    the shape, col2im over input channels).
//  - conv_transpose: its input gradient is the forward conv of grad_out with the same kernel;
//    its kernel gradient is the conv kernel gradient with grad_out as the im2col'd "input"
//    and x as the "output gradient" (kernel [c_in, c_out / groups, k...]).
// f16/bf16/f8e4m3 are computed in f32 and rounded once.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "candle/backend/cpu_storage.h"
#include "candle/utils.h"
#include "cpu/conv_kernels.h"
#include "cpu/dense.h"
#include "cpu/gemm.h"
#include "cpu/im2col.h"
#include "cpu/parallel.h"
#include "cpu/strided.h"

namespace candle {
namespace cpu {
namespace {

// Target bytes of one im2col panel of the kernel gradient.
constexpr size_t kPanelBytes = size_t{1} << 20;
// Columns per unit of a 1x1 conv (no panel).
constexpr size_t kPointwiseCols = 4096;
// Panels are not made narrower than this, nor narrower than kMinSplitCols to make chunks.
constexpr size_t kMinCols = 64;
constexpr size_t kMinSplitCols = 256;
// Multiply-adds per chunk of the kernel gradient's reduction, and the most chunks.
constexpr double kChunkMacs = double(1 << 21);
constexpr size_t kMaxChunks = 16;
// Below this many multiply-adds everything runs on the calling thread.
constexpr double kParallelMacs = double(1 << 18);
// (image, group) tasks below which the input gradient runs them serially, parallel inside.
constexpr size_t kMinOuterTasks = 4;

size_t scratch_limit() {
  try {
    return conv_scratch_limit();
  } catch (const Error&) {
    return size_t{256} << 20;
  }
}

// out (dtype T, n elements) from an f32/f64 buffer.
template <typename T, typename C>
void store_as(const C* src, size_t n, T* dst) {
  parallel_for(n, kParallelGrain, [&](size_t i0, size_t i1) {
    for (size_t i = i0; i < i1; ++i) dst[i] = T(src[i]);
  });
}

// Columns per block of output positions for panels of `rows` rows: from the shape and the
// scratch cap only, balanced.
size_t block_cols(size_t rows, size_t ohw, size_t elem, size_t want_bytes, size_t min_cols) {
  size_t cols = std::max(min_cols, want_bytes / (std::max<size_t>(rows, 1) * elem));
  cols = std::min(cols, std::max<size_t>(1, scratch_limit() / 4 / (std::max<size_t>(rows, 1) * elem)));
  cols = std::max<size_t>(std::min(cols, ohw), 1);
  const size_t nblocks = (ohw + cols - 1) / cols;
  return (ohw + nblocks - 1) / nblocks;
}

// dw [c_out, kdim] = the kernel gradient of conv `g` with input x [b, c_in, ih, iw] and output
// gradient gy [b, c_out, oh, ow] (dense, compute type C).
//
// The output positions of all images, q = image * oh * ow + position, are cut into blocks
// (units) of `cols` columns that may span images; a unit packs its im2col panel (and its
// rows of gy when it spans images) and runs one GEMM with K = its columns.
template <typename C>
void grad_kernel_run(const ConvGeom& g, const C* x, const C* gy, C* dw) {
  const size_t cin_g = g.cin_g(), cout_g = g.cout_g(), kdim = g.kdim();
  const size_t ihw = g.ih * g.iw, ohw = g.oh * g.ow;
  const size_t dw_len = g.c_out * kdim;
  const size_t total = g.b * ohw;
  if (total == 0 || dw_len == 0) {
    std::fill(dw, dw + dw_len, C(0));
    return;
  }
  const bool pointwise = g.kh == 1 && g.kw == 1 && g.s_h == 1 && g.s_w == 1 && g.pad_h == 0 && g.pad_w == 0 &&
                         g.ih == g.oh && g.iw == g.ow;
  // columns per unit: a panel of about kPanelBytes, and enough units for kMaxChunks chunks
  size_t cols = pointwise ? kPointwiseCols : std::max(kMinCols, kPanelBytes / (kdim * sizeof(C)));
  cols = std::min(cols, std::max<size_t>(kMinSplitCols, (total + kMaxChunks - 1) / kMaxChunks));
  cols = std::min(cols, std::max<size_t>(1, scratch_limit() / 4 / ((kdim + cout_g) * sizeof(C))));
  cols = std::max<size_t>(std::min(cols, total), 1);
  const size_t units = (total + cols - 1) / cols;
  cols = (total + units - 1) / units;
  const double macs = double(total) * double(g.c_out) * double(kdim);
  size_t nchunks = static_cast<size_t>(std::clamp(macs / kChunkMacs, 1.0, double(kMaxChunks)));
  nchunks = std::min(nchunks, units);
  // the partials stay under a quarter of the scratch cap
  nchunks = std::max<size_t>(1, std::min(nchunks, scratch_limit() / 4 / (dw_len * sizeof(C))));
  std::unique_ptr<C[]> partial;
  if (nchunks > 1) partial.reset(new C[nchunks * dw_len]);
  const size_t tasks = g.groups * nchunks;
  auto run_task = [&](size_t t, C* panel, C* apack) {
    const size_t grp = t / nchunks, ch = t % nchunks;
    const size_t u0 = units * ch / nchunks, u1 = units * (ch + 1) / nchunks;
    C* out = (nchunks > 1 ? partial.get() + ch * dw_len : dw) + grp * cout_g * kdim;
    for (size_t u = u0; u < u1; ++u) {
      const size_t q0 = u * cols, q1 = std::min(total, q0 + cols), n = q1 - q0;
      const size_t b0 = q0 / ohw, b_last = (q1 - 1) / ohw;
      MatRef<C> a, b;
      if (b0 == b_last) {  // one image: gy rows in place
        const size_t p0 = q0 - b0 * ohw;
        a = {gy + (b0 * g.c_out + grp * cout_g) * ohw + p0, ohw, 1};
        const C* in_g = x + (b0 * g.c_in + grp * cin_g) * ihw;
        if (pointwise) {
          b = {in_g + p0, 1, ihw};
        } else {
          im2col(g, in_g, p0, p0 + n, panel, n);
          b = {panel, 1, n};
        }
      } else {
        for (size_t bi = b0, q = q0; bi <= b_last; ++bi) {
          const size_t p0 = q - bi * ohw, p1 = std::min(ohw, q1 - bi * ohw), off = q - q0;
          const C* g_rows = gy + (bi * g.c_out + grp * cout_g) * ohw;
          for (size_t co = 0; co < cout_g; ++co)
            std::memcpy(apack + co * n + off, g_rows + co * ohw + p0, (p1 - p0) * sizeof(C));
          im2col(g, x + (bi * g.c_in + grp * cin_g) * ihw, p0, p1, panel + off, n);
          q += p1 - p0;
        }
        a = {apack, n, 1};
        b = {panel, 1, n};
      }
      gemm_tile_exact(cout_g, kdim, n, a, b, out, kdim, u != u0);
    }
  };
  if (macs < kParallelMacs || tasks == 1) {
    std::unique_ptr<C[]> panel(new C[kdim * cols]), apack(new C[cout_g * cols]);
    for (size_t t = 0; t < tasks; ++t) run_task(t, panel.get(), apack.get());
  } else {
    parallel_for(tasks, 1, [&](size_t t0, size_t t1) {
      std::unique_ptr<C[]> panel(new C[kdim * cols]), apack(new C[cout_g * cols]);
      for (size_t t = t0; t < t1; ++t) run_task(t, panel.get(), apack.get());
    });
  }
  if (nchunks > 1) {
    const C* pp = partial.get();
    parallel_for(dw_len, kParallelGrain / nchunks + 1, [&](size_t i0, size_t i1) {
      for (size_t i = i0; i < i1; ++i) dw[i] = pp[i];
      for (size_t c = 1; c < nchunks; ++c) {
        const C* src = pp + c * dw_len;
        for (size_t i = i0; i < i1; ++i) dw[i] += src[i];
      }
    });
  }
}

// dx [b, c_in, ih, iw] = the input gradient of conv `g` (kernel w [c_out, cin_g, kh, kw],
// output gradient gy [b, c_out, oh, ow]) by GEMM + col2im.
template <typename C>
void grad_input_run(const ConvGeom& g, const C* gy, const C* w, C* dx) {
  const size_t cin_g = g.cin_g(), cout_g = g.cout_g(), kdim = g.kdim();
  const size_t ihw = g.ih * g.iw, ohw = g.oh * g.ow;
  const size_t cols = block_cols(kdim, ohw, sizeof(C), kPanelBytes, kMinCols);
  const size_t nblocks = (ohw + cols - 1) / cols;
  const size_t tasks = g.b * g.groups;
  const double macs = double(g.b) * double(ohw) * double(g.c_out) * double(kdim);
  // Small maps (an MNIST 8x8): one GEMM per image would repack W for 64 columns; a block of
  // whole images packs its rows of gy side by side and runs one wider GEMM. Images per block
  // follow from the shape only.
  const size_t img_cols = std::max(kMinCols, kPanelBytes / (std::max<size_t>(kdim, 1) * sizeof(C)));
  const size_t ipb = g.groups == 1 && ohw > 0 ? std::min(g.b, img_cols / ohw) : 0;
  if (ipb >= 2 && macs >= kParallelMacs) {
    const size_t nblk = (g.b + ipb - 1) / ipb, per = (g.b + nblk - 1) / nblk;
    parallel_for(nblk, 1, [&](size_t k0, size_t k1) {
      std::unique_ptr<C[]> panel(new C[kdim * per * ohw]), apack(new C[g.c_out * per * ohw]);
      for (size_t k = k0; k < k1; ++k) {
        const size_t b0 = k * per, nb = std::min(per, g.b - b0), n = nb * ohw;
        for (size_t i = 0; i < nb; ++i)
          for (size_t co = 0; co < g.c_out; ++co)
            std::memcpy(apack.get() + co * n + i * ohw, gy + ((b0 + i) * g.c_out + co) * ohw,
                        ohw * sizeof(C));
        gemm_tile_exact(kdim, n, g.c_out, MatRef<C>{w, 1, kdim}, MatRef<C>{apack.get(), n, 1}, panel.get(), n,
                        false);
        for (size_t i = 0; i < nb; ++i) {
          C* dx_i = dx + (b0 + i) * g.c_in * ihw;
          std::fill(dx_i, dx_i + g.c_in * ihw, C(0));
          col2im(g, panel.get() + i * ohw, 0, ohw, n, 0, g.c_in, dx_i);
        }
      }
    });
    return;
  }
  auto image = [&](size_t t, C* panel, bool inner_parallel) {
    const size_t bi = t / g.groups, grp = t % g.groups;
    C* dx_g = dx + (bi * g.c_in + grp * cin_g) * ihw;
    const size_t grain = inner_parallel ? kParallelGrain / std::max<size_t>(ihw, 1) + 1 : cin_g;
    parallel_for(cin_g, grain,
                 [&](size_t c0, size_t c1) { std::fill(dx_g + c0 * ihw, dx_g + c1 * ihw, C(0)); });
    if (ohw == 0) return;
    MatRef<C> a{w + grp * cout_g * kdim, 1, kdim};  // W_g^T: [kdim, cout_g]
    for (size_t blk = 0; blk < nblocks; ++blk) {
      const size_t p0 = blk * cols, p1 = std::min(ohw, p0 + cols), n = p1 - p0;
      MatRef<C> b{gy + (bi * g.c_out + grp * cout_g) * ohw + p0, ohw, 1};
      gemm_tile_exact(kdim, n, cout_g, a, b, panel, n, false);
      const size_t cgrain =
          inner_parallel ? kParallelGrain / std::max<size_t>(g.kh * g.kw * n, 1) + 1 : cin_g;
      parallel_for(cin_g, cgrain, [&](size_t c0, size_t c1) { col2im(g, panel, p0, p1, n, c0, c1, dx_g); });
    }
  };
  if (tasks >= kMinOuterTasks && macs >= kParallelMacs) {
    parallel_for(tasks, 1, [&](size_t t0, size_t t1) {
      std::unique_ptr<C[]> panel(new C[kdim * cols]);
      for (size_t t = t0; t < t1; ++t) image(t, panel.get(), false);
    });
  } else {
    std::unique_ptr<C[]> panel(new C[kdim * cols]);
    for (size_t t = 0; t < tasks; ++t) image(t, panel.get(), macs >= kParallelMacs);
  }
}

const CpuStorage& as_cpu_of(const BackendStorage& s, DType dt, const char* op, const char* what) {
  const auto* c = dynamic_cast<const CpuStorage*>(&s);
  if (!c || c->dtype() != dt) {
    throw Error(ErrorKind::Internal,
                std::string(op) + ": " + what + " is not a cpu storage of the same dtype");
  }
  return *c;
}

void check_layout(const char* op, const char* what, const Layout& l, const Shape& want, const CpuStorage& s) {
  if (l.shape() != want) {
    throw Error(ErrorKind::Internal, std::string(op) + ": " + what + " layout " + l.shape().to_string() +
                                         " does not match the parameters (" + want.to_string() + ")");
  }
  if (l.max_offset_exclusive() > s.elem_count()) {
    throw Error(ErrorKind::Internal, std::string(op) + ": " + what + " layout out of the storage's bounds");
  }
}

void check_geom(const ConvGeom& g, const char* op) {
  if (g.groups == 0 || g.c_in % g.groups != 0 || g.c_out % g.groups != 0 || g.s_h == 0 || g.s_w == 0 ||
      g.d_h == 0 || g.d_w == 0 || g.kh == 0 || g.kw == 0) {
    throw Error(ErrorKind::Internal, std::string(op) + ": invalid parameters");
  }
}

// Kernel gradient [c_out, cin_g, kh, kw] of conv g: `xs`/`xl` its input, `gs`/`gl` its output gradient.
StoragePtr grad_kernel_cpu(const ConvGeom& g, const CpuStorage& xs, const Layout& xl, const CpuStorage& gs,
                           const Layout& gl, const char* op) {
  check_geom(g, op);
  const size_t n = g.c_out * g.kdim();
  return dispatch_float(xs.dtype(), op, [&]<typename T>() -> StoragePtr {
    using C = compute_t<T>;
    std::unique_ptr<C[]> xk, gk;
    const C* x = dense_as<T, C>(xs, xl, xk);
    const C* gy = dense_as<T, C>(gs, gl, gk);
    auto out = CpuStorage::alloc(xs.dtype(), n);
    if constexpr (std::is_same_v<T, C>) {
      grad_kernel_run<C>(g, x, gy, out->data<T>());
    } else {
      std::unique_ptr<C[]> acc(new C[std::max<size_t>(n, 1)]);
      grad_kernel_run<C>(g, x, gy, acc.get());
      store_as<T, C>(acc.get(), n, out->data<T>());
    }
    return out;
  });
}

StoragePtr grad_input_gemm_cpu(const ConvGeom& g, const CpuStorage& gs, const Layout& gl,
                               const CpuStorage& ws, const Layout& wl, const char* op) {
  check_geom(g, op);
  const size_t n = g.b * g.c_in * g.ih * g.iw;
  return dispatch_float(gs.dtype(), op, [&]<typename T>() -> StoragePtr {
    using C = compute_t<T>;
    std::unique_ptr<C[]> gk, wk;
    const C* gy = dense_as<T, C>(gs, gl, gk);
    const C* w = dense_as<T, C>(ws, wl, wk);
    auto out = CpuStorage::alloc(gs.dtype(), n);
    if (n == 0) return out;
    if constexpr (std::is_same_v<T, C>) {
      grad_input_run<C>(g, gy, w, out->data<T>());
    } else {
      std::unique_ptr<C[]> acc(new C[n]);
      grad_input_run<C>(g, gy, w, acc.get());
      store_as<T, C>(acc.get(), n, out->data<T>());
    }
    return out;
  });
}

// The kernel [c_out, cin_g, kh, kw] flipped in both spatial dims and with its channel roles
// swapped, per group: [c_in, cout_g, kh, kw] (the forward kernel of the input gradient).
StoragePtr flipped_kernel(const ConvGeom& g, const CpuStorage& ws, const Layout& wl) {
  const size_t cin_g = g.cin_g(), cout_g = g.cout_g(), kk = g.kh * g.kw;
  auto out = CpuStorage::alloc(ws.dtype(), g.c_out * cin_g * kk);
  dispatch(ws.dtype(), [&]<typename T>() {
    std::unique_ptr<T[]> keep;
    const T* w = dense_as<T, T>(ws, wl, keep);
    T* o = out->data<T>();
    for (size_t grp = 0; grp < g.groups; ++grp)
      for (size_t co = 0; co < cout_g; ++co)
        for (size_t ci = 0; ci < cin_g; ++ci) {
          const T* src = w + ((grp * cout_g + co) * cin_g + ci) * kk;
          T* dst = o + ((grp * cin_g + ci) * cout_g + co) * kk;
          for (size_t i = 0; i < kk; ++i) dst[i] = src[kk - 1 - i];
        }
  });
  return out;
}

// A [b, c, h, w] result narrowed to [b, c, h2, w2] (h2 <= h, w2 <= w), copied.
StoragePtr crop(const StoragePtr& s, size_t b, size_t c, size_t h, size_t w, size_t h2, size_t w2) {
  if (h == h2 && w == w2) return s;
  const auto& src = static_cast<const CpuStorage&>(*s);
  Layout l = Layout::contiguous(Shape{b, c, h, w}).narrow(2, 0, h2).narrow(3, 0, w2);
  auto out = CpuStorage::alloc(src.dtype(), b * c * h2 * w2);
  if (out->elem_count()) src.copy_strided_src(*out, 0, l);
  return out;
}

ConvGeom geom2d(const ParamsConv2D& p) {
  return ConvGeom{p.b_size,  p.c_in,   p.i_h,    p.i_w,      p.c_out,    p.k_h,    p.k_w,     p.padding,
                  p.padding, p.stride, p.stride, p.dilation, p.dilation, p.groups, p.out_h(), p.out_w()};
}
ConvGeom geom1d(const ParamsConv1D& p) {
  return ConvGeom{p.b_size,  p.c_in, 1,        p.l_in, p.c_out,    1,        p.k_size, 0,
                  p.padding, 1,      p.stride, 1,      p.dilation, p.groups, 1,        p.l_out()};
}

// The conv geometry whose kernel gradient is conv_transpose's: "input" = grad_out (c_out
// channels, the transposed output size), "output" = x (c_in channels, the input size).
ConvGeom transposed_as_conv(size_t b, size_t c_in, size_t c_out, size_t ih, size_t iw, size_t oh_t,
                            size_t ow_t, size_t kh, size_t kw, size_t pad_h, size_t pad_w, size_t s_h,
                            size_t s_w, size_t d_h, size_t d_w, size_t groups) {
  return ConvGeom{b, c_out, oh_t, ow_t, c_in, kh, kw, pad_h, pad_w, s_h, s_w, d_h, d_w, groups, ih, iw};
}

// Whether the input gradient is better taken as the forward conv of grad_out with the flipped
// kernel (stride 1, "full" padding d (k - 1) - p >= 0 on both axes): its im2col panel has
// c_out_g k_h k_w rows against c_in_g k_h k_w for GEMM + col2im, so it is chosen when
// c_out_g <= c_in_g, or when the forward can take its Winograd path (f32 3x3, dilation 1,
// groups 1; its 5x5 form lost to GEMM + col2im on the mnist conv 32 -> 64 at 12x12).
bool input_grad_by_forward(DType dt, size_t stride, size_t full_h, size_t full_w, size_t padding,
                           size_t cin_g, size_t cout_g, size_t kh, size_t kw, size_t dilation,
                           size_t groups) {
  if (stride != 1 || full_h != full_w || full_h < padding) return false;
  if (cout_g <= cin_g) return true;
  return dt == DType::F32 && kh == 3 && kw == 3 && dilation == 1 && groups == 1;
}

}  // namespace
}  // namespace cpu

// ---- conv ------------------------------------------------------------------------------------

StoragePtr CpuStorage::conv2d_grad_kernel(const Layout& x_l, const BackendStorage& grad_out,
                                          const Layout& g_l, const ParamsConv2D& p) const {
  const char* op = "conv2d_grad_kernel";
  const auto& gs = cpu::as_cpu_of(grad_out, dtype_, op, "grad_out");
  const cpu::ConvGeom g = cpu::geom2d(p);
  cpu::check_geom(g, op);
  cpu::check_layout(op, "input", x_l, Shape{p.b_size, p.c_in, p.i_h, p.i_w}, *this);
  cpu::check_layout(op, "grad_out", g_l, Shape{p.b_size, p.c_out, g.oh, g.ow}, gs);
  return cpu::grad_kernel_cpu(g, *this, x_l, gs, g_l, op);
}

StoragePtr CpuStorage::conv1d_grad_kernel(const Layout& x_l, const BackendStorage& grad_out,
                                          const Layout& g_l, const ParamsConv1D& p) const {
  const char* op = "conv1d_grad_kernel";
  const auto& gs = cpu::as_cpu_of(grad_out, dtype_, op, "grad_out");
  const cpu::ConvGeom g = cpu::geom1d(p);
  cpu::check_geom(g, op);
  cpu::check_layout(op, "input", x_l, Shape{p.b_size, p.c_in, p.l_in}, *this);
  cpu::check_layout(op, "grad_out", g_l, Shape{p.b_size, p.c_out, g.ow}, gs);
  return cpu::grad_kernel_cpu(g, *this, x_l, gs, g_l, op);
}

StoragePtr CpuStorage::conv2d_grad_input(const Layout& g_l, const BackendStorage& kernel, const Layout& k_l,
                                         const ParamsConv2D& p) const {
  const char* op = "conv2d_grad_input";
  const auto& ws = cpu::as_cpu_of(kernel, dtype_, op, "kernel");
  const cpu::ConvGeom g = cpu::geom2d(p);
  cpu::check_geom(g, op);
  cpu::check_layout(op, "grad_out", g_l, Shape{p.b_size, p.c_out, g.oh, g.ow}, *this);
  cpu::check_layout(op, "kernel", k_l, Shape{p.c_out, p.c_in / p.groups, p.k_h, p.k_w}, ws);
  const size_t full_h = p.dilation * (p.k_h - 1), full_w = p.dilation * (p.k_w - 1);
  if (g.oh > 0 && g.ow > 0 &&
      cpu::input_grad_by_forward(dtype_, p.stride, full_h, full_w, p.padding, g.cin_g(), g.cout_g(), p.k_h,
                                 p.k_w, p.dilation, p.groups)) {
    // the forward conv of grad_out with the flipped kernel, "full" padding
    StoragePtr wf = cpu::flipped_kernel(g, ws, k_l);
    ParamsConv2D q{p.b_size,           g.oh, g.ow, p.k_h,      p.k_w,   p.c_in, p.c_out,
                   full_h - p.padding, 0,    1,    p.dilation, p.groups};
    return conv2d(g_l, *wf, Layout::contiguous(Shape{p.c_in, p.c_out / p.groups, p.k_h, p.k_w}), q,
                  ConvEpilogue{});
  }
  return cpu::grad_input_gemm_cpu(g, *this, g_l, ws, k_l, op);
}

StoragePtr CpuStorage::conv1d_grad_input(const Layout& g_l, const BackendStorage& kernel, const Layout& k_l,
                                         const ParamsConv1D& p) const {
  const char* op = "conv1d_grad_input";
  const auto& ws = cpu::as_cpu_of(kernel, dtype_, op, "kernel");
  const cpu::ConvGeom g = cpu::geom1d(p);
  cpu::check_geom(g, op);
  cpu::check_layout(op, "grad_out", g_l, Shape{p.b_size, p.c_out, g.ow}, *this);
  cpu::check_layout(op, "kernel", k_l, Shape{p.c_out, p.c_in / p.groups, p.k_size}, ws);
  const size_t full = p.dilation * (p.k_size - 1);
  if (g.ow > 0 && cpu::input_grad_by_forward(dtype_, p.stride, full, full, p.padding, g.cin_g(), g.cout_g(),
                                             1, p.k_size, p.dilation, p.groups)) {
    StoragePtr wf = cpu::flipped_kernel(g, ws, k_l);
    ParamsConv1D q{p.b_size, g.ow, p.c_in, p.c_out, p.k_size, full - p.padding, 0, 1, p.dilation, p.groups};
    return conv1d(g_l, *wf, Layout::contiguous(Shape{p.c_in, p.c_out / p.groups, p.k_size}), q);
  }
  return cpu::grad_input_gemm_cpu(g, *this, g_l, ws, k_l, op);
}

// ---- conv_transpose --------------------------------------------------------------------------

StoragePtr CpuStorage::conv_transpose2d_grad_kernel(const Layout& x_l, const BackendStorage& grad_out,
                                                    const Layout& g_l, const ParamsConv2D& p) const {
  const char* op = "conv_transpose2d_grad_kernel";
  const auto& gs = cpu::as_cpu_of(grad_out, dtype_, op, "grad_out");
  const size_t oh = p.out_h_transpose(), ow = p.out_w_transpose();
  const cpu::ConvGeom g =
      cpu::transposed_as_conv(p.b_size, p.c_in, p.c_out, p.i_h, p.i_w, oh, ow, p.k_h, p.k_w, p.padding,
                              p.padding, p.stride, p.stride, p.dilation, p.dilation, p.groups);
  cpu::check_geom(g, op);
  cpu::check_layout(op, "input", x_l, Shape{p.b_size, p.c_in, p.i_h, p.i_w}, *this);
  cpu::check_layout(op, "grad_out", g_l, Shape{p.b_size, p.c_out, oh, ow}, gs);
  return cpu::grad_kernel_cpu(g, gs, g_l, *this, x_l, op);
}

StoragePtr CpuStorage::conv_transpose1d_grad_kernel(const Layout& x_l, const BackendStorage& grad_out,
                                                    const Layout& g_l, const ParamsConv1D& p) const {
  const char* op = "conv_transpose1d_grad_kernel";
  const auto& gs = cpu::as_cpu_of(grad_out, dtype_, op, "grad_out");
  const size_t ol = p.l_out_transpose();
  const cpu::ConvGeom g = cpu::transposed_as_conv(p.b_size, p.c_in, p.c_out, 1, p.l_in, 1, ol, 1, p.k_size, 0,
                                                  p.padding, 1, p.stride, 1, p.dilation, p.groups);
  cpu::check_geom(g, op);
  cpu::check_layout(op, "input", x_l, Shape{p.b_size, p.c_in, p.l_in}, *this);
  cpu::check_layout(op, "grad_out", g_l, Shape{p.b_size, p.c_out, ol}, gs);
  return cpu::grad_kernel_cpu(g, gs, g_l, *this, x_l, op);
}

// The input gradient of conv_transpose is the forward conv of grad_out with the same kernel
// (cropped when output_padding >= stride made the transposed output longer).
StoragePtr CpuStorage::conv_transpose2d_grad_input(const Layout& g_l, const BackendStorage& kernel,
                                                   const Layout& k_l, const ParamsConv2D& p) const {
  const char* op = "conv_transpose2d_grad_input";
  const auto& ws = cpu::as_cpu_of(kernel, dtype_, op, "kernel");
  if (p.groups == 0 || p.c_out % p.groups != 0 || p.stride == 0 || p.dilation == 0 || p.k_h == 0 ||
      p.k_w == 0) {
    throw Error(ErrorKind::Internal, std::string(op) + ": invalid parameters");
  }
  const size_t oh = p.out_h_transpose(), ow = p.out_w_transpose();
  cpu::check_layout(op, "grad_out", g_l, Shape{p.b_size, p.c_out, oh, ow}, *this);
  cpu::check_layout(op, "kernel", k_l, Shape{p.c_in, p.c_out / p.groups, p.k_h, p.k_w}, ws);
  ParamsConv2D q{p.b_size, oh,        ow, p.k_h,    p.k_w,      p.c_in,
                 p.c_out,  p.padding, 0,  p.stride, p.dilation, p.groups};
  StoragePtr r = conv2d(g_l, ws, k_l, q, ConvEpilogue{});
  return cpu::crop(r, p.b_size, p.c_in, q.out_h(), q.out_w(), p.i_h, p.i_w);
}

StoragePtr CpuStorage::conv_transpose1d_grad_input(const Layout& g_l, const BackendStorage& kernel,
                                                   const Layout& k_l, const ParamsConv1D& p) const {
  const char* op = "conv_transpose1d_grad_input";
  const auto& ws = cpu::as_cpu_of(kernel, dtype_, op, "kernel");
  if (p.groups == 0 || p.c_out % p.groups != 0 || p.stride == 0 || p.dilation == 0 || p.k_size == 0) {
    throw Error(ErrorKind::Internal, std::string(op) + ": invalid parameters");
  }
  const size_t ol = p.l_out_transpose();
  cpu::check_layout(op, "grad_out", g_l, Shape{p.b_size, p.c_out, ol}, *this);
  cpu::check_layout(op, "kernel", k_l, Shape{p.c_in, p.c_out / p.groups, p.k_size}, ws);
  ParamsConv1D q{p.b_size, ol, p.c_in, p.c_out, p.k_size, p.padding, 0, p.stride, p.dilation, p.groups};
  StoragePtr r = conv1d(g_l, ws, k_l, q);
  return cpu::crop(r, p.b_size, p.c_in, 1, q.l_out(), 1, p.l_in);
}

}  // namespace candle
