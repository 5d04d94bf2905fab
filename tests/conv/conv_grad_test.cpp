// Gradients of the convolution family (src/ops/conv_grad.h) against PyTorch 1.13 autograd
// (tests/data/convgrad_grid.safetensors, made by tools/gen_convgrad_fixtures.py): conv1d/2d,
// conv_transpose1d/2d, the conv bias, max/avg pooling and nearest/bilinear resizing, in f32
// and f64 (tight) and f16/bf16 (loose), through contiguous and strided views; a direct f64
// reference for shapes that take the chunked/blocked paths; thread-count determinism; errors.
#include "ops/conv_grad.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "candle/backend/cpu_storage.h"
#include "candle/candle.h"
#include "candle/io/safetensors.h"
#include "test_util.h"

namespace candle {
namespace {

namespace g = ops::grad;

const std::unordered_map<std::string, Tensor>& grid() {
  static const auto t =
      safetensors::load(std::string(CANDLE_TEST_DATA_DIR) + "/convgrad_grid.safetensors", Device::cpu());
  return t;
}

const Tensor& fx(const std::string& name) {
  auto it = grid().find(name);
  if (it == grid().end()) throw std::runtime_error("missing fixture " + name);
  return it->second;
}

// The output gradient of the fixtures: sin(0.37 i + 0.1) over the row-major elements.
Tensor gout(const Shape& s, DType dt) {
  std::vector<double> v(s.elem_count());
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37 * double(i) + 0.1);
  return Tensor::from_vec(v, s, Device::cpu()).to_dtype(dt);
}

std::vector<double> f64s(const Tensor& t) { return t.to_dtype(DType::F64).flatten_to_vec<double>(); }

// Same values, other strides: 1 = stored with dims 0 and 1 swapped, 2 = narrowed along the
// last dim of a wider tensor, 3 = at an offset (a narrow of the first dim).
Tensor strided(const Tensor& x, int variant) {
  const auto last = static_cast<int64_t>(x.rank() - 1);
  switch (variant) {
    case 1: return x.transpose(0, 1).contiguous().transpose(0, 1);
    case 2: {
      Tensor pad = Tensor::ones(x.shape(), x.dtype(), x.device()).narrow(last, 0, 1);
      return Tensor::cat({pad, x, pad}, last).narrow(last, 1, x.dim(-1));
    }
    case 3: {
      Tensor extra = Tensor::ones(x.shape(), x.dtype(), x.device());
      return Tensor::cat({extra, x}, 0).narrow(0, x.dim(0), x.dim(0));
    }
    default: return x;
  }
}

bool is_plain(const Tensor& t) { return t.is_contiguous() && t.layout().start_offset() == 0; }

// |got - want| <= tol * (1 + max |want|) elementwise.
void expect_close(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const auto a = f64s(got), b = f64s(want);
  double mx = 0;
  for (double v : b) mx = std::max(mx, std::fabs(v));
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(a[i], b[i], tol * (1.0 + mx)) << what << " at " << i;
  }
}

struct Case {
  std::string name;
  size_t k, s, p, d, g, b, o = 0;
};

// Cases of a fixture family ("c2d", "c1d", "t2d", "t1d") that have a reference of `suffix`.
std::vector<Case> cases(const std::string& fam, const std::string& suffix) {
  std::vector<Case> out;
  for (const auto& kv : grid()) {
    const std::string& key = kv.first;
    if (key.rfind(fam + ".", 0) != 0 || key.size() < suffix.size() ||
        key.compare(key.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    Case c;
    c.name = key.substr(0, key.size() - suffix.size());
    const char* rest = c.name.c_str() + fam.size() + 1;
    if (fam[0] == 'c')
      std::sscanf(rest, "k%zu.s%zu.p%zu.d%zu.g%zu.b%zu", &c.k, &c.s, &c.p, &c.d, &c.g, &c.b);
    else
      std::sscanf(rest, "k%zu.s%zu.p%zu.o%zu.d%zu.g%zu.b%zu", &c.k, &c.s, &c.p, &c.o, &c.d, &c.g, &c.b);
    out.push_back(c);
  }
  std::sort(out.begin(), out.end(), [](const Case& a, const Case& b) { return a.name < b.name; });
  return out;
}

// conv1d/conv2d: kernel, input and bias gradients against the references.
void run_conv_grid(bool is2d, DType dt, double tol, const std::string& ref) {
  const std::string fam = is2d ? "c2d" : "c1d";
  const auto all = cases(fam, ".gw" + ref);
  ASSERT_GT(all.size(), ref == ".f32" ? 60u : 20u);
  for (size_t i = 0; i < all.size(); ++i) {
    const Case& c = all[i];
    const std::string dim = is2d ? "2d" : "1d";
    Tensor x = fx("x" + dim + ".b" + std::to_string(c.b)).to_dtype(dt);
    Tensor w = fx("w" + dim + ".k" + std::to_string(c.k) + ".g" + std::to_string(c.g)).to_dtype(dt);
    Tensor gw, gx, gb;
    const int variant = 1 + int(i % 3);
    Tensor xv = strided(x, variant), wv = strided(w, 1 + int((i + 1) % 3));
    if (c.b > 1) {
      ASSERT_FALSE(is_plain(xv));
    }
    if (is2d) {
      const ParamsConv2D p = g::make_conv2d_params(x, w, c.p, c.s, c.d, c.g);
      Tensor gy = gout(Shape{c.b, p.c_out, p.out_h(), p.out_w()}, dt);
      Tensor gyv = strided(gy, 1 + int((i + 2) % 3));
      gw = g::conv2d_grad_kernel(i % 2 ? xv : x, i % 2 ? gy : gyv, p);
      gx = g::conv2d_grad_input(i % 2 ? gyv : gy, i % 2 ? w : wv, p);
      gb = g::conv_bias_grad(gyv);
    } else {
      const ParamsConv1D p = g::make_conv1d_params(x, w, c.p, c.s, c.d, c.g);
      Tensor gy = gout(Shape{c.b, p.c_out, p.l_out()}, dt);
      Tensor gyv = strided(gy, 1 + int((i + 2) % 3));
      gw = g::conv1d_grad_kernel(i % 2 ? xv : x, i % 2 ? gy : gyv, p);
      gx = g::conv1d_grad_input(i % 2 ? gyv : gy, i % 2 ? w : wv, p);
      gb = g::conv_bias_grad(gyv);
    }
    EXPECT_EQ(gw.dtype(), dt);
    expect_close(gw, fx(c.name + ".gw" + ref), tol, c.name + " grad_kernel");
    expect_close(gx, fx(c.name + ".gx" + ref), tol, c.name + " grad_input");
    expect_close(gb, fx(c.name + ".gb" + ref), tol, c.name + " grad_bias");
  }
}

TEST(ConvGrad, conv2d_grid_f32) { run_conv_grid(true, DType::F32, 2e-6, ".f32"); }
TEST(ConvGrad, conv2d_grid_f64) { run_conv_grid(true, DType::F64, 1e-13, ".f64"); }
TEST(ConvGrad, conv2d_grid_f16) { run_conv_grid(true, DType::F16, 2e-3, ".f32"); }
TEST(ConvGrad, conv2d_grid_bf16) { run_conv_grid(true, DType::BF16, 1.5e-2, ".f32"); }
TEST(ConvGrad, conv1d_grid_f32) { run_conv_grid(false, DType::F32, 2e-6, ".f32"); }
TEST(ConvGrad, conv1d_grid_f64) { run_conv_grid(false, DType::F64, 1e-13, ".f64"); }
TEST(ConvGrad, conv1d_grid_bf16) { run_conv_grid(false, DType::BF16, 1.5e-2, ".f32"); }

void run_transpose_grid(bool is2d, DType dt, double tol, const std::string& ref) {
  const std::string fam = is2d ? "t2d" : "t1d";
  const auto all = cases(fam, ".gw" + ref);
  ASSERT_GT(all.size(), ref == ".f32" ? 30u : 10u);
  for (size_t i = 0; i < all.size(); ++i) {
    const Case& c = all[i];
    Tensor x, w, gw, gx;
    if (is2d) {
      x = fx("xt2d.b" + std::to_string(c.b)).to_dtype(dt);
      w = fx("wt2d.k" + std::to_string(c.k)).to_dtype(dt);
      const ParamsConv2D p = g::make_conv_transpose2d_params(x, w, c.p, c.o, c.s, c.d);
      Tensor gy = gout(Shape{c.b, p.c_out, p.out_h_transpose(), p.out_w_transpose()}, dt);
      gw = g::conv_transpose2d_grad_kernel(strided(x, 1 + int(i % 3)), gy, p);
      gx = g::conv_transpose2d_grad_input(strided(gy, 1 + int((i + 1) % 3)), strided(w, 1 + int(i % 3)), p);
    } else {
      x = fx("xt1d.b" + std::to_string(c.b)).to_dtype(dt);
      w = fx("wt1d.k" + std::to_string(c.k) + ".g" + std::to_string(c.g)).to_dtype(dt);
      const ParamsConv1D p = g::make_conv_transpose1d_params(x, w, c.p, c.o, c.s, c.d, c.g);
      Tensor gy = gout(Shape{c.b, p.c_out, p.l_out_transpose()}, dt);
      gw = g::conv_transpose1d_grad_kernel(x, strided(gy, 1 + int(i % 3)), p);
      gx = g::conv_transpose1d_grad_input(gy, strided(w, 1 + int((i + 1) % 3)), p);
    }
    expect_close(gw, fx(c.name + ".gw" + ref), tol, c.name + " grad_kernel");
    expect_close(gx, fx(c.name + ".gx" + ref), tol, c.name + " grad_input");
  }
}

TEST(ConvGrad, conv_transpose2d_grid_f32) { run_transpose_grid(true, DType::F32, 2e-6, ".f32"); }
TEST(ConvGrad, conv_transpose2d_grid_f64) { run_transpose_grid(true, DType::F64, 1e-13, ".f64"); }
TEST(ConvGrad, conv_transpose2d_grid_f16) { run_transpose_grid(true, DType::F16, 2e-3, ".f32"); }
TEST(ConvGrad, conv_transpose1d_grid_f32) { run_transpose_grid(false, DType::F32, 2e-6, ".f32"); }
TEST(ConvGrad, conv_transpose1d_grid_f64) { run_transpose_grid(false, DType::F64, 1e-13, ".f64"); }

// The fixture grid includes output_padding >= stride (allowed when below the dilation).
TEST(ConvGrad, transpose_grid_covers_output_padding_past_stride) {
  bool found = false;
  for (const auto& c : cases("t2d", ".gw.f32")) found = found || (c.o >= c.s);
  EXPECT_TRUE(found);
}

// ---- exactness and direct references ---------------------------------------------------------

// Rows/cols that no output read (h + 2p - d(k-1) - 1 not a multiple of the stride) get 0.
TEST(ConvGrad, unused_trailing_input_gets_zero) {
  Tensor x = Tensor::ones(Shape{1, 2, 8, 9}, DType::F32, Device::cpu());
  Tensor w = Tensor::ones(Shape{3, 2, 3, 3}, DType::F32, Device::cpu());
  const ParamsConv2D p = g::make_conv2d_params(x, w, 0, 2, 1, 1);  // out 3x4: rows 0..6, cols 0..8
  Tensor gx = g::conv2d_grad_input(Tensor::ones(Shape{1, 3, 3, 4}, DType::F32, Device::cpu()), w, p);
  const auto v = gx.flatten_to_vec<float>();
  for (size_t c = 0; c < 2; ++c) {
    for (size_t col = 0; col < 9; ++col) EXPECT_EQ(v[(c * 8 + 7) * 9 + col], 0.0f) << c << " " << col;
    EXPECT_EQ(v[(c * 8 + 0) * 9 + 0], 3.0f);   // one window, three output channels
    EXPECT_EQ(v[(c * 8 + 2) * 9 + 2], 12.0f);  // four windows
  }
}

// A direct f64 conv gradient (loops) for shapes that take the chunked kernel-gradient path
// (several blocks per image, several chunks) and the GEMM + col2im input-gradient path.
struct Naive {
  size_t b, ci, h, w, co, kh, kw, s, p, d, g, oh, ow;
  std::vector<double> gw(const std::vector<double>& x, const std::vector<double>& gy) const {
    const size_t cig = ci / g, cog = co / g;
    std::vector<double> r(co * cig * kh * kw, 0.0);
    for (size_t bi = 0; bi < b; ++bi)
      for (size_t o = 0; o < co; ++o)
        for (size_t c = 0; c < cig; ++c)
          for (size_t ky = 0; ky < kh; ++ky)
            for (size_t kx = 0; kx < kw; ++kx) {
              double acc = 0;
              for (size_t oy = 0; oy < oh; ++oy)
                for (size_t ox = 0; ox < ow; ++ox) {
                  const long iy = long(oy * s + ky * d) - long(p), ix = long(ox * s + kx * d) - long(p);
                  if (iy < 0 || ix < 0 || iy >= long(h) || ix >= long(w)) continue;
                  const size_t cin = (o / cog) * cig + c;
                  acc += gy[((bi * co + o) * oh + oy) * ow + ox] * x[((bi * ci + cin) * h + iy) * w + ix];
                }
              r[((o * cig + c) * kh + ky) * kw + kx] += acc;
            }
    return r;
  }
  std::vector<double> gx(const std::vector<double>& gy, const std::vector<double>& wt) const {
    const size_t cig = ci / g, cog = co / g;
    std::vector<double> r(b * ci * h * w, 0.0);
    for (size_t bi = 0; bi < b; ++bi)
      for (size_t o = 0; o < co; ++o)
        for (size_t oy = 0; oy < oh; ++oy)
          for (size_t ox = 0; ox < ow; ++ox) {
            const double gv = gy[((bi * co + o) * oh + oy) * ow + ox];
            for (size_t c = 0; c < cig; ++c)
              for (size_t ky = 0; ky < kh; ++ky)
                for (size_t kx = 0; kx < kw; ++kx) {
                  const long iy = long(oy * s + ky * d) - long(p), ix = long(ox * s + kx * d) - long(p);
                  if (iy < 0 || ix < 0 || iy >= long(h) || ix >= long(w)) continue;
                  const size_t cin = (o / cog) * cig + c;
                  r[((bi * ci + cin) * h + iy) * w + ix] += gv * wt[((o * cig + c) * kh + ky) * kw + kx];
                }
          }
    return r;
  }
};

void check_against_naive(const Naive& n, DType dt, double tol) {
  Tensor x = Tensor::randn(0.0, 1.0, Shape{n.b, n.ci, n.h, n.w}, DType::F64, Device::cpu());
  Tensor w = Tensor::randn(0.0, 1.0, Shape{n.co, n.ci / n.g, n.kh, n.kw}, DType::F64, Device::cpu());
  const ParamsConv2D p = g::make_conv2d_params(x, w, n.p, n.s, n.d, n.g);
  ASSERT_EQ(p.out_h(), n.oh);
  ASSERT_EQ(p.out_w(), n.ow);
  Tensor gy = Tensor::randn(0.0, 1.0, Shape{n.b, n.co, n.oh, n.ow}, DType::F64, Device::cpu());
  const auto want_w = n.gw(f64s(x), f64s(gy));
  const auto want_x = n.gx(f64s(gy), f64s(w));
  Tensor gw = g::conv2d_grad_kernel(x.to_dtype(dt), gy.to_dtype(dt), p);
  Tensor gx = g::conv2d_grad_input(gy.to_dtype(dt), w.to_dtype(dt), p);
  expect_close(gw, Tensor::from_vec(want_w, gw.shape(), Device::cpu()), tol, "naive grad_kernel");
  expect_close(gx, Tensor::from_vec(want_x, gx.shape(), Device::cpu()), tol, "naive grad_input");
}

TEST(ConvGrad, chunked_paths_f64_match_direct_sums) {
  // 3x3 stride 2 groups 2: several panel blocks per image, several chunks, GEMM + col2im
  check_against_naive(Naive{3, 32, 95, 91, 24, 3, 3, 2, 1, 1, 2, 48, 46}, DType::F64, 1e-12);
  // 1x1 (pointwise kernel gradient, forward-conv input gradient)
  check_against_naive(Naive{2, 24, 70, 66, 16, 1, 1, 1, 0, 1, 1, 70, 66}, DType::F64, 1e-12);
  // stride 1 "full" padding: the forward conv of grad_out, dilated, 5x3 kernel (uneven axes -> GEMM path)
  check_against_naive(Naive{2, 8, 30, 31, 12, 5, 3, 1, 2, 2, 1, 26, 31}, DType::F64, 1e-12);
}

TEST(ConvGrad, chunked_paths_f32_match_direct_sums) {
  // 3x3 stride 1 f32 at 64 channels: the input gradient may take the forward's Winograd path
  check_against_naive(Naive{2, 64, 20, 20, 64, 3, 3, 1, 1, 1, 1, 20, 20}, DType::F32, 2e-5);
}

// A small scratch cap only changes the blocking, not the values (beyond rounding).
TEST(ConvGrad, small_scratch_cap_gives_the_same_values) {
  Tensor x = Tensor::randn(0.0, 1.0, Shape{2, 16, 40, 40}, DType::F64, Device::cpu());
  Tensor w = Tensor::randn(0.0, 1.0, Shape{16, 16, 3, 3}, DType::F64, Device::cpu());
  const ParamsConv2D p = g::make_conv2d_params(x, w, 1, 2, 1, 1);
  Tensor gy = Tensor::randn(0.0, 1.0, Shape{2, 16, p.out_h(), p.out_w()}, DType::F64, Device::cpu());
  Tensor a = g::conv2d_grad_kernel(x, gy, p), ai = g::conv2d_grad_input(gy, w, p);
  const size_t old = conv_scratch_limit();
  set_conv_scratch_limit(64 << 10);
  Tensor b = g::conv2d_grad_kernel(x, gy, p), bi = g::conv2d_grad_input(gy, w, p);
  set_conv_scratch_limit(old);
  expect_close(b, a, 1e-13, "grad_kernel");
  expect_close(bi, ai, 1e-13, "grad_input");
}

// A batch of small maps takes one GEMM per block of images for the input gradient; each image's
// gradient must equal the one computed for that image alone (the per-image path).
TEST(ConvGrad, input_grad_of_an_image_block_equals_per_image) {
  Tensor gy = Tensor::randn(0.0, 1.0, Shape{8, 32, 8, 8}, DType::F64, Device::cpu());
  Tensor w = Tensor::randn(0.0, 1.0, Shape{32, 16, 5, 5}, DType::F64, Device::cpu());
  Tensor x = Tensor::zeros(Shape{8, 16, 12, 12}, DType::F64, Device::cpu());
  const ParamsConv2D p = g::make_conv2d_params(x, w, 0, 1, 1, 1);
  Tensor all = g::conv2d_grad_input(gy, w, p);
  const ParamsConv2D p1 = g::make_conv2d_params(x.narrow(0, 0, 1), w, 0, 1, 1, 1);
  for (size_t i = 0; i < 8; ++i)
    expect_close(all.narrow(0, i, 1), g::conv2d_grad_input(gy.narrow(0, i, 1), w, p1), 1e-12,
                 "image " + std::to_string(i));
}

// ---- bias ------------------------------------------------------------------------------------

TEST(ConvGrad, bias_grad_sums_every_dim_but_channels) {
  std::vector<float> v(2 * 3 * 2 * 2);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i);
  Tensor gy = Tensor::from_vec(v, Shape{2, 3, 2, 2}, Device::cpu());
  // channel c: sum over b of sum of 4 consecutive values starting at (b * 3 + c) * 4
  EXPECT_EQ(g::conv_bias_grad(gy).to_vec1<float>(), (std::vector<float>{60, 92, 124}));
  EXPECT_EQ(g::conv_bias_grad(gy.reshape(Shape{2, 3, 4})).to_vec1<float>(),
            (std::vector<float>{60, 92, 124}));
  EXPECT_EQ(g::conv_bias_grad(gy.to_dtype(DType::BF16)).to_dtype(DType::F32).to_vec1<float>(),
            (std::vector<float>{60, 92, 124}));
}

// ---- pooling ---------------------------------------------------------------------------------

struct PoolCase {
  size_t kh, kw, sh, sw;
  std::string name() const {
    return "k" + std::to_string(kh) + "x" + std::to_string(kw) + ".s" + std::to_string(sh) + "x" +
           std::to_string(sw);
  }
};
const PoolCase kPools[] = {{2, 2, 2, 2}, {3, 3, 2, 2}, {2, 2, 1, 1},
                           {3, 2, 2, 3}, {2, 2, 3, 3}, {1, 1, 2, 2}};

void run_pools(DType dt, double tol, const std::string& ref) {
  size_t checked = 0;
  for (const auto& pc : kPools) {
    auto it = grid().find("maxpool." + pc.name() + ref);
    if (it == grid().end()) continue;
    Tensor x = fx("pool.x").to_dtype(dt);
    const Shape os{2, 3, (7 - pc.kh) / pc.sh + 1, (9 - pc.kw) / pc.sw + 1};
    Tensor gy = gout(os, dt);
    Tensor gm = g::max_pool2d_grad(strided(x, 1 + int(checked % 3)), gy, {pc.kh, pc.kw}, {pc.sh, pc.sw});
    expect_close(gm, it->second, tol, "max_pool2d_grad " + pc.name());
    Tensor ga =
        g::avg_pool2d_grad(x.shape(), strided(gy, 1 + int(checked % 3)), {pc.kh, pc.kw}, {pc.sh, pc.sw});
    expect_close(ga, fx("avgpool." + pc.name() + ref), tol, "avg_pool2d_grad " + pc.name());
    ++checked;
  }
  EXPECT_GE(checked, 2u);
}

TEST(ConvGrad, pools_f32_ties_nan_overlap_gaps) { run_pools(DType::F32, 1e-7, ".f32"); }
TEST(ConvGrad, pools_f64) { run_pools(DType::F64, 1e-15, ".f64"); }
TEST(ConvGrad, pools_bf16) { run_pools(DType::BF16, 1e-2, ".f32"); }

TEST(ConvGrad, max_pool_ties_go_to_the_first_and_nan_wins) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  Tensor x = Tensor::from_vec(std::vector<float>{2, 5, 5, 1, 1, nan, 3, nan, -inf, -inf, 0, 0},
                              Shape{1, 1, 3, 4}, Device::cpu());
  Tensor gy = Tensor::from_vec(std::vector<float>{1, 10, 100}, Shape{1, 1, 3, 1}, Device::cpu());
  Tensor gx = g::max_pool2d_grad(x, gy, {1, 4}, {1, 4});
  // row 0: first of the tied 5s; row 1: the later NaN (PyTorch 1.13); row 2: -inf -> first, 0s -> first 0
  EXPECT_EQ(gx.flatten_to_vec<float>(), (std::vector<float>{0, 1, 0, 0, 0, 0, 0, 10, 0, 0, 100, 0}));
}

// The 2x2 stride-2 f32 path takes eight windows at a time: wide rows with many ties and NaNs
// (and a tail of 5 windows) against a scalar scan written here. Forward and gradient must pick
// the same element: the first maximum, or the last NaN.
TEST(ConvGrad, max_pool_2x2_vector_path_matches_the_scalar_rule) {
  const size_t h = 6, w = 42, oh = h / 2, ow = w / 2, planes = 3;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> xv(planes * h * w), gv(planes * oh * ow);
  uint32_t s = 12345;
  for (auto& v : xv) {
    s = s * 1664525u + 1013904223u;
    const uint32_t r = s >> 24;
    v = r < 20 ? nan : float(r % 3) - 1.0f;  // values -1, 0, 1 (ties everywhere), ~8% NaN
  }
  for (size_t i = 0; i < gv.size(); ++i) gv[i] = float(i + 1);
  std::vector<float> want_dx(xv.size(), 0.0f), want_y(gv.size());
  for (size_t p = 0; p < planes; ++p)
    for (size_t oy = 0; oy < oh; ++oy)
      for (size_t ox = 0; ox < ow; ++ox) {
        const size_t base = p * h * w + 2 * oy * w + 2 * ox;
        const size_t cand[4] = {base, base + 1, base + w, base + w + 1};
        size_t at = cand[0];
        for (size_t k = 1; k < 4; ++k)
          if (xv[cand[k]] > xv[at] || std::isnan(xv[cand[k]])) at = cand[k];
        const size_t o = (p * oh + oy) * ow + ox;
        want_y[o] = xv[at];
        want_dx[at] = gv[o];
      }
  Tensor x = Tensor::from_vec(xv, Shape{1, planes, h, w}, Device::cpu());
  Tensor gy = Tensor::from_vec(gv, Shape{1, planes, oh, ow}, Device::cpu());
  EXPECT_EQ(test_util::bytes_of(x.max_pool2d(2)),
            test_util::bytes_of(Tensor::from_vec(want_y, Shape{1, planes, oh, ow}, Device::cpu())));
  EXPECT_EQ(g::max_pool2d_grad(x, gy, {2, 2}, {2, 2}).flatten_to_vec<float>(), want_dx);
}

// ---- resizing --------------------------------------------------------------------------------

void run_resizing(DType dt, double tol, const std::string& ref) {
  size_t checked = 0;
  for (const auto& kv : grid()) {
    const std::string& key = kv.first;
    if (key.size() < ref.size() || key.compare(key.size() - ref.size(), ref.size(), ref) != 0) continue;
    const std::string base = key.substr(0, key.size() - ref.size());
    const Tensor& want = kv.second;
    size_t oh = 0, ow = 0, ol = 0, ac = 0;
    double sh = 0, sw = 0;
    Tensor got;
    const int v = 1 + int(checked % 3);
    if (std::sscanf(base.c_str(), "nearest2d.%zux%zu", &oh, &ow) == 2) {
      got = g::upsample_nearest2d_grad(strided(gout(Shape{2, 3, oh, ow}, dt), v), 5, 7);
    } else if (std::sscanf(base.c_str(), "nearest1d.%zu", &ol) == 1) {
      got = g::upsample_nearest1d_grad(strided(gout(Shape{2, 3, ol}, dt), v), 7);
    } else if (std::sscanf(base.c_str(), "bilinear.%zux%zu.ac%zu", &oh, &ow, &ac) == 3) {
      got = g::upsample_bilinear2d_grad(strided(gout(Shape{2, 3, oh, ow}, dt), v), 5, 7, ac != 0);
    } else if (std::sscanf(base.c_str(), "bilinear_scale.%lfx%lf.ac%zu", &sh, &sw, &ac) == 3) {
      oh = size_t(std::floor(5 * sh));
      ow = size_t(std::floor(7 * sw));
      got = g::upsample_bilinear2d_grad(strided(gout(Shape{2, 3, oh, ow}, dt), v), 5, 7, ac != 0, sh, sw);
    } else {
      continue;
    }
    expect_close(got, want, tol, base);
    ++checked;
  }
  EXPECT_GE(checked, ref == ".f32" ? 18u : 5u);
}

TEST(ConvGrad, resizing_f32) { run_resizing(DType::F32, 1e-6, ".f32"); }
TEST(ConvGrad, resizing_f64) { run_resizing(DType::F64, 1e-13, ".f64"); }
TEST(ConvGrad, resizing_f16) { run_resizing(DType::F16, 3e-3, ".f32"); }

TEST(ConvGrad, nearest_grad_sums_the_copies) {
  Tensor gy = Tensor::from_vec(std::vector<float>{1, 2, 3, 4, 5}, Shape{1, 1, 5}, Device::cpu());
  // in 2 -> out 5: sources floor(i * 2 / 5) = 0, 0, 0, 1, 1
  EXPECT_EQ(g::upsample_nearest1d_grad(gy, 2).flatten_to_vec<float>(), (std::vector<float>{6, 9}));
}

TEST(ConvGrad, bilinear_same_size_is_identity) {
  Tensor gy = Tensor::randn(0.0, 1.0, Shape{1, 2, 3, 4}, DType::F32, Device::cpu());
  EXPECT_EQ(g::upsample_bilinear2d_grad(gy, 3, 4, false).flatten_to_vec<float>(), gy.flatten_to_vec<float>());
}

// ---- determinism -----------------------------------------------------------------------------

using test_util::bytes_of;

using test_util::expect_same_bytes_at_1_2_3_threads;

TEST(ConvGrad, identical_bytes_at_1_2_3_threads) {
  for (DType dt : {DType::F32, DType::F64, DType::BF16}) {
    Tensor x = Tensor::randn(0.0, 1.0, Shape{4, 32, 48, 48}, DType::F32, Device::cpu()).to_dtype(dt);
    Tensor w = Tensor::randn(0.0, 1.0, Shape{64, 16, 3, 3}, DType::F32, Device::cpu()).to_dtype(dt);
    for (size_t stride : {1, 2}) {
      const ParamsConv2D p = g::make_conv2d_params(x, w, 1, stride, 1, 2);
      Tensor gy =
          Tensor::randn(0.0, 1.0, Shape{4, 64, p.out_h(), p.out_w()}, DType::F32, Device::cpu()).to_dtype(dt);
      expect_same_bytes_at_1_2_3_threads([&] { return g::conv2d_grad_kernel(x, gy, p); },
                                         "conv2d_grad_kernel");
      expect_same_bytes_at_1_2_3_threads([&] { return g::conv2d_grad_input(gy, w, p); }, "conv2d_grad_input");
      expect_same_bytes_at_1_2_3_threads([&] { return g::conv_bias_grad(gy); }, "conv_bias_grad");
    }
    // batch 1 (the input gradient runs its image serially, parallel inside)
    Tensor x1 = x.narrow(0, 0, 1);
    const ParamsConv2D p1 = g::make_conv2d_params(x1, w, 0, 2, 2, 2);
    Tensor gy1 =
        Tensor::randn(0.0, 1.0, Shape{1, 64, p1.out_h(), p1.out_w()}, DType::F32, Device::cpu()).to_dtype(dt);
    expect_same_bytes_at_1_2_3_threads([&] { return g::conv2d_grad_kernel(x1, gy1, p1); }, "grad_kernel b1");
    expect_same_bytes_at_1_2_3_threads([&] { return g::conv2d_grad_input(gy1, w, p1); }, "grad_input b1");
    // conv_transpose2d k4 s2
    Tensor wt = Tensor::randn(0.0, 1.0, Shape{32, 16, 4, 4}, DType::F32, Device::cpu()).to_dtype(dt);
    const ParamsConv2D pt = g::make_conv_transpose2d_params(x, wt, 1, 0, 2, 1);
    Tensor gyt = Tensor::randn(0.0, 1.0, Shape{4, 16, pt.out_h_transpose(), pt.out_w_transpose()}, DType::F32,
                               Device::cpu())
                     .to_dtype(dt);
    expect_same_bytes_at_1_2_3_threads([&] { return g::conv_transpose2d_grad_kernel(x, gyt, pt); },
                                       "convt kernel");
    expect_same_bytes_at_1_2_3_threads([&] { return g::conv_transpose2d_grad_input(gyt, wt, pt); },
                                       "convt input");
    // pools and resizing
    Tensor gp = Tensor::randn(0.0, 1.0, Shape{4, 32, 23, 23}, DType::F32, Device::cpu()).to_dtype(dt);
    expect_same_bytes_at_1_2_3_threads(
        [&] {
          return g::max_pool2d_grad(x, gp, {3, 3}, {2, 2});
        },
        "max_pool2d_grad");
    expect_same_bytes_at_1_2_3_threads(
        [&] {
          return g::avg_pool2d_grad(x.shape(), gp, {3, 3}, {2, 2});
        },
        "avg_pool2d_grad");
    Tensor gu = Tensor::randn(0.0, 1.0, Shape{4, 32, 101, 97}, DType::F32, Device::cpu()).to_dtype(dt);
    expect_same_bytes_at_1_2_3_threads([&] { return g::upsample_nearest2d_grad(gu, 48, 48); }, "nearest2d");
    expect_same_bytes_at_1_2_3_threads([&] { return g::upsample_bilinear2d_grad(gu, 48, 48, false); },
                                       "bilinear");
  }
}

// ---- errors ----------------------------------------------------------------------------------

template <typename Fn>
void expect_error(Fn&& fn, const std::string& op) {
  try {
    fn();
    ADD_FAILURE() << op << ": no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(op), std::string::npos) << e.what();
  }
}

TEST(ConvGrad, bad_inputs_give_errors) {
  const Device cpu = Device::cpu();
  Tensor x = Tensor::zeros(Shape{2, 4, 9, 9}, DType::F32, cpu);
  Tensor w = Tensor::zeros(Shape{6, 2, 3, 3}, DType::F32, cpu);
  const ParamsConv2D p = g::make_conv2d_params(x, w, 1, 2, 1, 2);
  Tensor gy = Tensor::zeros(Shape{2, 6, p.out_h(), p.out_w()}, DType::F32, cpu);
  EXPECT_NO_THROW(g::conv2d_grad_kernel(x, gy, p));
  // grad_out of the wrong shape
  expect_error(
      [&] {
        g::conv2d_grad_kernel(x, Tensor::zeros(Shape{2, 6, 4, 4}, DType::F32, cpu), p);
      },
      "conv2d_grad_kernel");
  expect_error([&] { g::conv2d_grad_input(gy.narrow(1, 0, 5), w, p); }, "conv2d_grad_input");
  // dtype mismatch, integer dtype, wrong rank
  expect_error([&] { g::conv2d_grad_kernel(x, gy.to_dtype(DType::F64), p); }, "conv2d_grad_kernel");
  expect_error([&] { g::conv2d_grad_input(gy.to_dtype(DType::I64), w.to_dtype(DType::I64), p); },
               "conv2d_grad_input");
  expect_error([&] { g::conv2d_grad_kernel(x.flatten_all(), gy, p); }, "conv2d_grad_kernel");
  // bad parameters: groups not dividing, zero stride, kernel larger than the padded input
  ParamsConv2D bad = p;
  bad.groups = 3;
  expect_error([&] { g::conv2d_grad_kernel(x, gy, bad); }, "conv2d_grad_kernel");
  bad = p;
  bad.stride = 0;
  expect_error([&] { g::conv2d_grad_input(gy, w, bad); }, "conv2d_grad_input");
  bad = p;
  bad.k_h = 13;
  expect_error([&] { g::conv2d_grad_input(gy, w, bad); }, "conv2d_grad_input");
  // conv1d kernel of the wrong shape
  Tensor x1 = Tensor::zeros(Shape{1, 4, 10}, DType::F32, cpu),
         w1 = Tensor::zeros(Shape{2, 4, 3}, DType::F32, cpu);
  const ParamsConv1D p1 = g::make_conv1d_params(x1, w1, 0, 1, 1, 1);
  expect_error(
      [&] {
        g::conv1d_grad_input(Tensor::zeros(Shape{1, 2, 8}, DType::F32, cpu), w1.narrow(2, 0, 2), p1);
      },
      "conv1d_grad_input");
  // conv_transpose: output_padding not below stride or dilation
  Tensor wt = Tensor::zeros(Shape{4, 3, 3, 3}, DType::F32, cpu);
  ParamsConv2D pt = g::make_conv_transpose2d_params(x, wt, 0, 2, 2, 1);
  expect_error(
      [&] {
        g::conv_transpose2d_grad_input(Tensor::zeros(Shape{2, 3, 21, 21}, DType::F32, cpu), wt, pt);
      },
      "conv_transpose2d_grad_input");
  // bias: rank 1
  expect_error([&] { g::conv_bias_grad(Tensor::zeros(Shape{5}, DType::F32, cpu)); }, "conv_bias_grad");
  // pools: wrong grad_out shape, zero kernel, kernel larger than the input
  expect_error(
      [&] {
        g::max_pool2d_grad(x, Tensor::zeros(Shape{2, 4, 5, 5}, DType::F32, cpu), {2, 2}, {2, 2});
      },
      "max_pool2d_grad");
  expect_error([&] { g::avg_pool2d_grad(x.shape(), gy, {0, 2}, {2, 2}); }, "avg_pool2d_grad");
  expect_error([&] { g::avg_pool2d_grad(Shape{2, 4, 3, 3}, gy, {4, 4}, {1, 1}); }, "avg_pool2d_grad");
  // resizing: wrong rank, empty input for a non-empty output, bad scale
  expect_error([&] { g::upsample_nearest2d_grad(x1, 3, 3); }, "upsample_nearest2d_grad");
  expect_error([&] { g::upsample_nearest1d_grad(x1, 0); }, "upsample_nearest1d_grad");
  expect_error([&] { g::upsample_bilinear2d_grad(x, 4, 4, false, -1.0, 2.0); }, "upsample_bilinear2d_grad");
}

}  // namespace
}  // namespace candle
