// conv1d / conv2d against PyTorch references (tests/data/conv_grid.safetensors, made by
// tools/gen_conv_fixtures.py with Debian's PyTorch 1.13): kernel 1/3/5/7, stride 1/2, padding
// 0/1/2, dilation 1/2, groups 1/2/channels, batch 1/3, odd sizes; f32 and f64 with tight
// tolerances, f16 and bf16 loose; each case through contiguous and strided layouts.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "candle/candle.h"

namespace candle {
namespace {

const std::unordered_map<std::string, Tensor>& grid() {
  static const auto t =
      safetensors::load(std::string(CANDLE_TEST_DATA_DIR) + "/conv_grid.safetensors", Device::cpu());
  return t;
}

struct GridCase {
  std::string name;  // e.g. c2d.k3.s1.p0.d1.g2.b1
  bool is2d;
  size_t k, s, p, d, g, b;
};

std::vector<GridCase> cases() {
  std::vector<GridCase> out;
  for (const auto& [key, t] : grid()) {
    if ((key.rfind("c2d.", 0) != 0 && key.rfind("c1d.", 0) != 0) || key.size() < 4 ||
        key.substr(key.size() - 4) != ".f32")
      continue;
    GridCase c;
    c.name = key.substr(0, key.size() - 4);
    c.is2d = key[1] == '2';
    std::sscanf(c.name.c_str() + 4, "k%zu.s%zu.p%zu.d%zu.g%zu.b%zu", &c.k, &c.s, &c.p, &c.d, &c.g, &c.b);
    out.push_back(c);
  }
  std::sort(out.begin(), out.end(), [](const GridCase& a, const GridCase& b) { return a.name < b.name; });
  return out;
}

// Layout variants (0: contiguous). Each keeps the values, changes the strides/offset.
Tensor strided_input(const Tensor& x, int variant) {
  const size_t last = x.rank() - 1;
  switch (variant) {
    case 1: return x.transpose(0, 1).contiguous().transpose(0, 1);  // stored [c, b, ...]
    case 2: {                                                       // narrowed along the last dim
      Tensor pad = Tensor::ones(x.shape(), x.dtype(), x.device()).narrow(static_cast<int64_t>(last), 0, 2);
      return Tensor::cat({pad, x, pad}, static_cast<int64_t>(last))
          .narrow(static_cast<int64_t>(last), 2, x.dim(-1));
    }
    case 3: {  // at an offset: a narrow of the batch dim of a larger tensor
      Tensor extra = Tensor::ones(x.shape(), x.dtype(), x.device());
      return Tensor::cat({extra, x}, 0).narrow(0, x.dim(0), x.dim(0));
    }
    default: return x;
  }
}

Tensor strided_kernel(const Tensor& w, int variant) {
  const size_t last = w.rank() - 1;
  switch (variant) {
    case 1: {  // at an offset (candle once read such a view at its old offset)
      Tensor extra = Tensor::ones(w.shape(), w.dtype(), w.device()).narrow(0, 0, 3);
      return Tensor::cat({extra, w}, 0).narrow(0, 3, w.dim(0));
    }
    case 2: return w.transpose(0, 1).contiguous().transpose(0, 1);  // stored [c_in/g, c_out, ...]
    case 3: {
      Tensor pad = Tensor::ones(w.shape(), w.dtype(), w.device()).narrow(static_cast<int64_t>(last), 0, 1);
      return Tensor::cat({w, pad}, static_cast<int64_t>(last))
          .narrow(static_cast<int64_t>(last), 0, w.dim(-1));
    }
    default: return w;
  }
}

void run_grid(DType dt, double rel_tol, bool only_f64_refs) {
  const auto all = cases();
  ASSERT_GT(all.size(), 150u);
  size_t checked = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    const GridCase& c = all[i];
    const std::string ref_key = c.name + (only_f64_refs ? ".f64" : ".f32");
    auto it = grid().find(ref_key);
    if (it == grid().end()) continue;
    const std::string dim = c.is2d ? "2d" : "1d";
    Tensor x = grid().at("x" + dim + ".b" + std::to_string(c.b)).to_dtype(dt);
    Tensor w = grid().at("w" + dim + ".k" + std::to_string(c.k) + ".g" + std::to_string(c.g)).to_dtype(dt);
    const std::vector<double> want = it->second.to_dtype(DType::F64).flatten_to_vec<double>();
    const double scale = std::sqrt(double(w.dim(1)) * double(c.is2d ? c.k * c.k : c.k));
    for (int variant = 0; variant < 4; ++variant) {
      if (variant != 0 && variant != 1 + int(i % 3)) continue;  // contiguous + one strided form per case
      Tensor xv = strided_input(x, variant), wv = strided_kernel(w, variant);
      if (variant != 0) {
        ASSERT_FALSE(xv.is_contiguous() && xv.layout().start_offset() == 0 && wv.is_contiguous() &&
                     wv.layout().start_offset() == 0);
      }
      Tensor y = c.is2d ? xv.conv2d(wv, c.p, c.s, c.d, c.g) : xv.conv1d(wv, c.p, c.s, c.d, c.g);
      ASSERT_EQ(y.shape(), it->second.shape()) << c.name;
      const std::vector<double> got = y.to_dtype(DType::F64).flatten_to_vec<double>();
      for (size_t j = 0; j < got.size(); ++j) {
        ASSERT_NEAR(got[j], want[j], rel_tol * (scale + std::fabs(want[j])))
            << c.name << " " << dtype_name(dt) << " layout " << variant << " at " << j;
      }
    }
    ++checked;
  }
  EXPECT_GT(checked, 40u);
}

TEST(ConvGrid, f32_against_pytorch) { run_grid(DType::F32, 5e-6, false); }
TEST(ConvGrid, f64_against_pytorch_f64) { run_grid(DType::F64, 1e-12, true); }
TEST(ConvGrid, f16_against_pytorch) { run_grid(DType::F16, 1e-2, false); }
TEST(ConvGrid, bf16_against_pytorch) { run_grid(DType::BF16, 6e-2, false); }

}  // namespace
}  // namespace candle
