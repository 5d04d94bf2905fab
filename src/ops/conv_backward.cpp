// Backward passes of the conv / pool / resize family (see conv_backward.h), composed from
// existing ops: transposed convolutions for input gradients, convolutions of the transposed
// (batch <-> channel) tensors for kernel gradients, index_add / scatter_add for pooling and
// resizing. Every op used is deterministic, so the gradients do not depend on the thread count.
#include "ops/conv_backward.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace candle::autograd {
namespace {

Tensor ids_tensor(const std::vector<int64_t>& v, const Device& dev) {
  return Tensor::from_vec(v, Shape{v.size()}, dev);
}

// The output padding that makes a padding-0 transposed convolution of an output of length
// `out` reach index `pad + in` (the forward's input end), and the length it then gives.
size_t full_output_padding(size_t in, size_t out, size_t k, size_t padding, size_t stride, size_t dilation) {
  const size_t full = (out - 1) * stride + dilation * (k - 1) + 1;
  return padding + in > full ? padding + in - full : 0;
}

// The kernel gradient of one group of a convolution: x [b, ci, ..] and g [b, co, ..] with the
// batch taken as the channels: conv(x^T, g^T) with stride and dilation swapped -> [ci, co, ..].
Tensor kernel_grad_1d(const Tensor& x, const Tensor& g, size_t padding, size_t stride, size_t dilation,
                      size_t k) {
  Tensor r = x.transpose(0, 1).conv1d(g.transpose(0, 1), padding, dilation, stride, 1);
  return r.narrow(2, 0, k);
}

Tensor kernel_grad_2d(const Tensor& x, const Tensor& g, size_t padding, size_t stride, size_t dilation,
                      size_t kh, size_t kw) {
  Tensor r = x.transpose(0, 1).conv2d(g.transpose(0, 1), padding, dilation, stride, 1);
  return r.narrow(2, 0, kh).narrow(3, 0, kw);
}

// Runs fn(group) for each group and concatenates the results along `dim`.
template <typename F>
Tensor per_group(size_t groups, int64_t dim, F&& fn) {
  if (groups == 1) return fn(size_t{0});
  std::vector<Tensor> parts;
  parts.reserve(groups);
  for (size_t i = 0; i < groups; ++i) parts.push_back(fn(i));
  return Tensor::cat(parts, dim);
}

}  // namespace

// ---- convolutions ------------------------------------------------------------------------------

Tensor conv1d_grad_input(const Tensor& g, const Tensor& x, const Tensor& w, size_t padding, size_t stride,
                         size_t dilation, size_t groups) {
  const size_t l = x.dim(2), k = w.dim(2), lo = g.dim(2);
  const size_t op = full_output_padding(l, lo, k, padding, stride, dilation);
  return g.conv_transpose1d(w, 0, op, stride, dilation, groups).narrow(2, padding, l);
}

Tensor conv1d_grad_kernel(const Tensor& g, const Tensor& x, const Tensor& w, size_t padding, size_t stride,
                          size_t dilation, size_t groups) {
  const size_t cig = x.dim(1) / groups, cog = w.dim(0) / groups, k = w.dim(2);
  return per_group(groups, 0, [&](size_t i) {
    Tensor xg = x.narrow(1, i * cig, cig), gg = g.narrow(1, i * cog, cog);
    return kernel_grad_1d(xg, gg, padding, stride, dilation, k).transpose(0, 1);
  });
}

Tensor conv2d_grad_input(const Tensor& g, const Tensor& x, const Tensor& w, size_t padding, size_t stride,
                         size_t dilation, size_t groups) {
  const size_t h = x.dim(2), wd = x.dim(3), kh = w.dim(2), kw = w.dim(3);
  const size_t op = std::max(full_output_padding(h, g.dim(2), kh, padding, stride, dilation),
                             full_output_padding(wd, g.dim(3), kw, padding, stride, dilation));
  const size_t cog = w.dim(0) / groups;
  // conv_transpose2d has no groups: one call per group
  return per_group(groups, 1, [&](size_t i) {
    Tensor gg = groups == 1 ? g : g.narrow(1, i * cog, cog);
    Tensor wg = groups == 1 ? w : w.narrow(0, i * cog, cog);
    return gg.conv_transpose2d(wg, 0, op, stride, dilation).narrow(2, padding, h).narrow(3, padding, wd);
  });
}

Tensor conv2d_grad_kernel(const Tensor& g, const Tensor& x, const Tensor& w, size_t padding, size_t stride,
                          size_t dilation, size_t groups) {
  const size_t cig = x.dim(1) / groups, cog = w.dim(0) / groups;
  return per_group(groups, 0, [&](size_t i) {
    Tensor xg = x.narrow(1, i * cig, cig), gg = g.narrow(1, i * cog, cog);
    return kernel_grad_2d(xg, gg, padding, stride, dilation, w.dim(2), w.dim(3)).transpose(0, 1);
  });
}

// A transposed convolution's input gradient is the forward convolution of g (its output
// may run past the input when output_padding >= stride: cut it).
Tensor conv_transpose1d_grad_input(const Tensor& g, const Tensor& x, const Tensor& w, size_t padding,
                                   size_t stride, size_t dilation, size_t groups) {
  return g.conv1d(w, padding, stride, dilation, groups).narrow(2, 0, x.dim(2));
}

Tensor conv_transpose1d_grad_kernel(const Tensor& g, const Tensor& x, const Tensor& w, size_t padding,
                                    size_t stride, size_t dilation, size_t groups) {
  const size_t cig = x.dim(1) / groups, cog = w.dim(1), k = w.dim(2);
  return per_group(groups, 0, [&](size_t i) {
    Tensor xg = x.narrow(1, i * cig, cig), gg = g.narrow(1, i * cog, cog);
    // conv(g^T, x^T) -> [co, ci, k'], the kernel is [ci, co, k]
    return kernel_grad_1d(gg, xg, padding, stride, dilation, k).transpose(0, 1);
  });
}

Tensor conv_transpose2d_grad_input(const Tensor& g, const Tensor& x, const Tensor& w, size_t padding,
                                   size_t stride, size_t dilation) {
  return g.conv2d(w, padding, stride, dilation, 1).narrow(2, 0, x.dim(2)).narrow(3, 0, x.dim(3));
}

Tensor conv_transpose2d_grad_kernel(const Tensor& g, const Tensor& x, const Tensor& w, size_t padding,
                                    size_t stride, size_t dilation) {
  return kernel_grad_2d(g, x, padding, stride, dilation, w.dim(2), w.dim(3)).transpose(0, 1);
}

// ---- pooling -------------------------------------------------------------------------------------

// avg_pool is separable: spread g over the window rows (index_add along h), then over the
// window columns (along w), then divide by the window size.
Tensor avg_pool2d_grad(const Tensor& g, const Tensor& x, std::array<size_t, 2> kernel,
                       std::array<size_t, 2> stride) {
  const auto [b, c, h, w] = x.shape().dims4("avg_pool2d backward");
  Tensor acc = g;
  for (size_t axis = 0; axis < 2; ++axis) {
    const size_t n_out = g.dim(static_cast<int64_t>(2 + axis));
    std::vector<int64_t> src, dst;
    for (size_t o = 0; o < n_out; ++o) {
      for (size_t i = 0; i < kernel[axis]; ++i) {
        src.push_back(static_cast<int64_t>(o));
        dst.push_back(static_cast<int64_t>(o * stride[axis] + i));
      }
    }
    const auto dim = static_cast<int64_t>(2 + axis);
    std::vector<size_t> shape = acc.dims();
    shape[2 + axis] = axis == 0 ? h : w;
    Tensor spread = acc.index_select(ids_tensor(src, g.device()), dim);
    acc = Tensor::zeros(Shape(shape), g.dtype(), g.device())
              .index_add(ids_tensor(dst, g.device()), spread, dim);
  }
  (void)b;
  (void)c;
  return acc.affine(1.0 / static_cast<double>(kernel[0] * kernel[1]), 0.0);
}

Tensor max_pool2d_grad(const Tensor& g, const Tensor& x, std::array<size_t, 2> kernel,
                       std::array<size_t, 2> stride) {
  const auto [b, c, h, w] = x.shape().dims4("max_pool2d backward");
  const size_t ho = g.dim(2), wo = g.dim(3), kk = kernel[0] * kernel[1];
  auto windows = [&](const Tensor& t) {
    return t.unfold(2, kernel[0], stride[0])
        .unfold(3, kernel[1], stride[1])
        .reshape(Shape{t.dim(0), t.dim(1), ho, wo, kk});
  };
  // the first maximum of each window, as an index into the window, then into the h * w plane
  Tensor arg = windows(x).argmax_keepdim(-1);
  Tensor plane =
      Tensor::arange<int64_t>(0, static_cast<int64_t>(h * w), x.device()).reshape(Shape{1, 1, h, w});
  Tensor pos =
      windows(plane).broadcast_as(Shape{b, c, ho, wo, kk}).gather(arg, -1).reshape(Shape{b, c, ho * wo});
  Tensor gx = Tensor::zeros(Shape{b, c, h * w}, g.dtype(), g.device())
                  .scatter_add(pos, g.reshape(Shape{b, c, ho * wo}), 2);
  return gx.reshape(x.shape());
}

// ---- resizing ------------------------------------------------------------------------------------

namespace {

// The forward's source index of each output position (src/cpu/pool.cpp: floor(dst * in / out)).
Tensor nearest_ids(size_t in, size_t out, const Device& dev) {
  std::vector<int64_t> v(out);
  for (size_t i = 0; i < out; ++i) {
    const auto q = static_cast<unsigned __int128>(i) * in / out;
    v[i] = static_cast<int64_t>(std::min<size_t>(in - 1, static_cast<size_t>(q)));
  }
  return ids_tensor(v, dev);
}

// The forward's two taps and weights per output position (src/cpu/pool.cpp, linear_taps).
struct Taps {
  std::vector<int64_t> i0, i1;
  std::vector<double> l0, l1;
};

Taps linear_taps(size_t in, size_t out, bool align_corners, std::optional<double> scale_factor) {
  double scale;
  if (in == out) {
    scale = 1.0;
  } else if (align_corners) {
    scale = out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0;
  } else if (scale_factor) {
    scale = 1.0 / *scale_factor;
  } else {
    scale = static_cast<double>(in) / static_cast<double>(out);
  }
  Taps t;
  for (size_t o = 0; o < out; ++o) {
    const double d = static_cast<double>(o);
    double src = align_corners ? scale * d : scale * (d + 0.5) - 0.5;
    src = std::max(src, 0.0);
    const size_t i0 = std::min(static_cast<size_t>(std::floor(src)), in - 1);
    const double l1 = std::clamp(src - static_cast<double>(i0), 0.0, 1.0);
    t.i0.push_back(static_cast<int64_t>(i0));
    t.i1.push_back(static_cast<int64_t>(std::min(i0 + 1, in - 1)));
    t.l0.push_back(1.0 - l1);
    t.l1.push_back(l1);
  }
  return t;
}

// Sends g back along one resized dim: sum over taps of index_add(i, g * weight).
Tensor linear_back(const Tensor& g, size_t dim, size_t in, const Taps& t) {
  std::vector<size_t> shape = g.dims();
  shape[dim] = in;
  std::vector<size_t> wshape(g.rank(), 1);
  wshape[dim] = t.l0.size();
  const auto sd = static_cast<int64_t>(dim);
  Tensor w0 = Tensor::from_vec(t.l0, Shape(wshape), g.device()).to_dtype(g.dtype());
  Tensor w1 = Tensor::from_vec(t.l1, Shape(wshape), g.device()).to_dtype(g.dtype());
  return Tensor::zeros(Shape(shape), g.dtype(), g.device())
      .index_add(ids_tensor(t.i0, g.device()), g.broadcast_mul(w0), sd)
      .index_add(ids_tensor(t.i1, g.device()), g.broadcast_mul(w1), sd);
}

Tensor nearest_back(const Tensor& g, size_t dim, size_t in) {
  std::vector<size_t> shape = g.dims();
  shape[dim] = in;
  return Tensor::zeros(Shape(shape), g.dtype(), g.device())
      .index_add(nearest_ids(in, g.dims()[dim], g.device()), g, static_cast<int64_t>(dim));
}

}  // namespace

Tensor upsample_nearest1d_grad(const Tensor& g, const Tensor& x) { return nearest_back(g, 2, x.dim(2)); }

Tensor upsample_nearest2d_grad(const Tensor& g, const Tensor& x) {
  return nearest_back(nearest_back(g, 3, x.dim(3)), 2, x.dim(2));
}

Tensor upsample_bilinear2d_grad(const Tensor& g, const Tensor& x, bool align_corners,
                                std::optional<double> scale_h, std::optional<double> scale_w) {
  const size_t h = x.dim(2), w = x.dim(3);
  Tensor gw = linear_back(g, 3, w, linear_taps(w, g.dim(3), align_corners, scale_w));
  return linear_back(gw, 2, h, linear_taps(h, g.dim(2), align_corners, scale_h));
}

}  // namespace candle::autograd
