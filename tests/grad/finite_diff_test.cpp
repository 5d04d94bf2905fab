// Finite-difference checks (f64, central differences, tolerance 1e-6 relative unless stated)
// of every op with a gradient, each over contiguous and strided inputs (grad_test_util.h).
#include <gtest/gtest.h>

#include "candle/nn/ops.h"
#include "grad/grad_test_util.h"

using namespace candle;
using candle::grad_test::away_from_zero;
using candle::grad_test::check_fd;
using candle::grad_test::uniform;
using V = std::vector<Tensor>;

namespace {
Tensor u(const Shape& s, uint32_t seed, double lo = -2.0, double hi = 2.0) {
  return uniform(s, lo, hi, seed);
}
Tensor nz(const Shape& s, uint32_t seed) { return away_from_zero(s, 0.2, 2.0, seed); }
Tensor pos(const Shape& s, uint32_t seed) { return uniform(s, 0.5, 2.0, seed); }
Tensor ids_i64(std::vector<int64_t> v) { return Tensor::from_vec(v, Shape{v.size()}, Device::cpu()); }
}  // namespace

#define UNARY_FD(NAME, INPUT, EXPR)                          \
  TEST(GradFd, NAME) {                                       \
    check_fd([](const V& a) { return a[0].EXPR; }, {INPUT}); \
  }

// ---- unary --------------------------------------------------------------------------------------
UNARY_FD(Neg, u({3, 4}, 1), neg())
UNARY_FD(Recip, nz({3, 4}, 2), recip())
UNARY_FD(Exp, u({3, 4}, 3), exp())
UNARY_FD(Log, pos({3, 4}, 4), log())
UNARY_FD(Sin, u({3, 4}, 5), sin())
UNARY_FD(Cos, u({3, 4}, 6), cos())
UNARY_FD(Tanh, u({3, 4}, 7), tanh())
UNARY_FD(Abs, nz({3, 4}, 8), abs())
UNARY_FD(Sqr, u({3, 4}, 9), sqr())
UNARY_FD(Sqrt, pos({3, 4}, 10), sqrt())
UNARY_FD(Gelu, u({3, 4}, 11), gelu())
UNARY_FD(GeluErf, u({3, 4}, 12), gelu_erf())
UNARY_FD(Erf, u({3, 4}, 13), erf())
UNARY_FD(Relu, nz({3, 4}, 14), relu())
UNARY_FD(Silu, u({3, 4}, 15), silu())
UNARY_FD(Sigmoid, u({3, 4}, 16), sigmoid())
UNARY_FD(Affine, u({3, 4}, 17), affine(-1.5, 0.25))
UNARY_FD(Powf, pos({3, 4}, 18), powf(2.5))
UNARY_FD(Elu, nz({3, 4}, 19), elu(0.7))
UNARY_FD(ClampScalar, u({3, 4}, 20), clamp(Scalar(-1.0), Scalar(1.0)))
UNARY_FD(MaximumScalar, u({3, 4}, 21), maximum(Scalar(0.3)))
UNARY_FD(MinimumScalar, u({3, 4}, 22), minimum(Scalar(0.3)))
// piecewise constant: zero gradient away from the jumps (inputs at +-(k + 0.3..0.7))
UNARY_FD(Ceil, u({3, 4}, 23, 0.3, 0.7), ceil())
UNARY_FD(Floor, u({3, 4}, 24, 0.3, 0.7), floor())
UNARY_FD(Round, u({3, 4}, 25, 0.1, 0.4), round())
UNARY_FD(Sign, nz({3, 4}, 26), sign())
UNARY_FD(OperatorScalarDiv, nz({3, 4}, 27), recip() * 2.0)

// ---- binary and broadcast -------------------------------------------------------------------------
#define BINARY_FD(NAME, A, B, EXPR)                               \
  TEST(GradFd, NAME) {                                            \
    check_fd([](const V& a) { return a[0].EXPR(a[1]); }, {A, B}); \
  }

BINARY_FD(Add, u({3, 4}, 30), u({3, 4}, 31), add)
BINARY_FD(Sub, u({3, 4}, 32), u({3, 4}, 33), sub)
BINARY_FD(Mul, u({3, 4}, 34), u({3, 4}, 35), mul)
BINARY_FD(Div, u({3, 4}, 36), nz({3, 4}, 37), div)
BINARY_FD(Maximum, u({3, 4}, 38), u({3, 4}, 39), maximum)
BINARY_FD(Minimum, u({3, 4}, 40), u({3, 4}, 41), minimum)
BINARY_FD(Pow, pos({3, 4}, 42), u({3, 4}, 43), pow)
BINARY_FD(BroadcastAdd, u({2, 3, 4}, 44), u({3, 1}, 45), broadcast_add)
BINARY_FD(BroadcastSub, u({3, 1}, 46), u({2, 3, 4}, 47), broadcast_sub)
BINARY_FD(BroadcastMul, u({2, 1, 4}, 48), u({3, 1}, 49), broadcast_mul)
BINARY_FD(BroadcastDiv, u({2, 3, 4}, 50), nz({4}, 51), broadcast_div)
BINARY_FD(BroadcastMaximum, u({2, 3, 4}, 52), u({1, 4}, 53), broadcast_maximum)
BINARY_FD(BroadcastMinimum, u({2, 3, 4}, 54), u({3, 1}, 55), broadcast_minimum)
BINARY_FD(BroadcastPow, pos({2, 3}, 56), u({3}, 57), broadcast_pow)

TEST(GradFd, ClampTensor) {
  check_fd([](const V& a) { return a[0].clamp(a[1], a[2]); },
           {u({3, 4}, 60), u({4}, 61, -2.0, -0.5), u({3, 1}, 62, 0.5, 2.0)});
}

TEST(GradFd, WhereCond) {
  Tensor cond =
      Tensor::from_vec(std::vector<uint8_t>{1, 0, 0, 1, 1, 0, 1, 0, 0, 1, 1, 1}, {3, 4}, Device::cpu());
  check_fd([cond](const V& a) { return cond.where_cond(a[0], a[1]); }, {u({3, 4}, 63), u({1, 4}, 64)});
}

// ---- reductions -----------------------------------------------------------------------------------
UNARY_FD(SumKeepdim, u({3, 4, 2}, 70), sum_keepdim(1))
UNARY_FD(SumDims, u({3, 4, 2}, 71), sum(std::vector<int64_t>{0, 2}))
UNARY_FD(SumAll, u({3, 4}, 72), sum_all())
UNARY_FD(Mean, u({3, 4, 2}, 73), mean(1))
UNARY_FD(MeanKeepdimDims, u({3, 4, 2}, 74), mean_keepdim(std::vector<int64_t>{0, 2}))
UNARY_FD(MeanAll, u({3, 4}, 75), mean_all())
UNARY_FD(MaxKeepdim, u({3, 4, 2}, 76), max_keepdim(1))
UNARY_FD(Max, u({3, 4}, 77), max(0))
UNARY_FD(MinKeepdim, u({3, 4}, 78), min_keepdim(-1))
UNARY_FD(Min, u({3, 4, 2}, 79), min(2))
UNARY_FD(MaxAll, u({3, 4}, 80), max_all())
UNARY_FD(MinAll, u({3, 4}, 81), min_all())
UNARY_FD(Var, u({3, 4}, 82), var(1))
UNARY_FD(VarKeepdim, u({3, 4}, 83), var_keepdim(0))
UNARY_FD(LogSumExp, u({3, 4, 2}, 84), log_sum_exp(std::vector<int64_t>{1, 2}))
UNARY_FD(Cumsum, u({3, 4}, 85), cumsum(1))
UNARY_FD(Norm, u({3, 4}, 86), norm())
TEST(GradFd, SortLastDim) {
  check_fd([](const V& a) { return a[0].sort_last_dim(true).first; }, {u({3, 5}, 87)});
}

// ---- matmul ---------------------------------------------------------------------------------------
BINARY_FD(Matmul, u({2, 3, 4}, 90), u({2, 4, 5}, 91), matmul)
BINARY_FD(Matmul2d, u({3, 4}, 92), u({4, 2}, 93), matmul)
BINARY_FD(BroadcastMatmul, u({2, 1, 3, 4}, 94), u({3, 4, 2}, 95), broadcast_matmul)
BINARY_FD(Dot, u({5}, 96), u({5}, 97), dot)
BINARY_FD(Mv, u({3, 5}, 98), u({5}, 99), mv)

// ---- shape ops and views --------------------------------------------------------------------------
TEST(GradFd, Cat) {
  check_fd(
      [](const V& a) {
        return Tensor::cat({a[0], a[1], a[0]}, 1);
      },
      {u({2, 3, 2}, 100), u({2, 1, 2}, 101)});
}
TEST(GradFd, Stack) {
  check_fd([](const V& a) { return Tensor::stack({a[0], a[1]}, 2); }, {u({2, 3}, 102), u({2, 3}, 103)});
}
UNARY_FD(Narrow, u({4, 5}, 104), narrow(1, 1, 3))
UNARY_FD(Reshape, u({4, 6}, 105), reshape({2, 3, 4}))
UNARY_FD(ReshapeOfTransposed, u({4, 6}, 106), t().reshape({3, 8}))
UNARY_FD(Transpose, u({2, 3, 4}, 107), transpose(0, 2))
UNARY_FD(T, u({3, 4}, 108), t())
UNARY_FD(Permute, u({2, 3, 4}, 109), permute({2, 0, 1}))
UNARY_FD(Squeeze, u({3, 1, 4}, 110), squeeze(1))
UNARY_FD(Unsqueeze, u({3, 4}, 111), unsqueeze(1))
UNARY_FD(Flatten, u({2, 3, 4}, 112), flatten(1, 2))
UNARY_FD(BroadcastAs, u({3, 1}, 113), broadcast_as({2, 3, 4}))
UNARY_FD(BroadcastLeft, u({3, 4}, 114), broadcast_left({2}))
UNARY_FD(Repeat, u({2, 3}, 115), repeat({2, 1, 3}))
UNARY_FD(PadWithZeros, u({3, 4}, 116), pad_with_zeros(1, 2, 1))
UNARY_FD(PadWithSame, u({3, 4}, 117), pad_with_same(0, 2, 3))
UNARY_FD(Roll, u({3, 4}, 118), roll(-3, 1))
UNARY_FD(Flip, u({3, 4}, 119), flip({0, 1}))
UNARY_FD(Unfold, u({3, 7}, 120), unfold(1, 3, 2))
UNARY_FD(UnfoldOverlap, u({8, 2}, 121), unfold(0, 3, 1))
UNARY_FD(Get, u({3, 4}, 122), get(1))
UNARY_FD(IndexItems, u({4, 5}, 123), i({Slice(1, 3), std::vector<int64_t>{4, 0, 4}}))
UNARY_FD(Copy, u({3, 4}, 124), copy())
UNARY_FD(Contiguous, u({3, 4}, 125), t().contiguous())
UNARY_FD(ToDeviceCpu, u({3, 4}, 126), to_device(Device::cpu()))
TEST(GradFd, Chunk) {
  check_fd([](const V& a) { return a[0].chunk(3, 1)[1]; }, {u({2, 7}, 127)});
}
TEST(GradFd, ToDtype) {
  // through f32: a step of 1e-2 (exact for a square) keeps the f32 rounding small; tolerance 1e-3
  check_fd([](const V& a) { return a[0].to_dtype(DType::F32).sqr().to_dtype(DType::F64); }, {u({3, 4}, 128)},
           1e-3, 1e-2);
}
TEST(GradFd, Meshgrid) {
  check_fd(
      [](const V& a) {
        auto g = Tensor::meshgrid({a[0], a[1]}, true);
        return g[0].mul(g[1].sqr());
      },
      {u({3}, 129), u({4}, 130)});
}

// ---- indexing -------------------------------------------------------------------------------------
TEST(GradFd, IndexSelect) {
  Tensor ids = ids_i64({2, 0, 2, 3});
  check_fd([ids](const V& a) { return a[0].index_select(ids, 1); }, {u({3, 4}, 140)});
}
TEST(GradFd, Gather) {
  Tensor ids = Tensor::from_vec(std::vector<int64_t>{0, 2, 2, 1, 1, 0}, {3, 2}, Device::cpu());
  check_fd([ids](const V& a) { return a[0].gather(ids, 1); }, {u({3, 3}, 141)});
}
TEST(GradFd, Scatter) {
  Tensor ids = Tensor::from_vec(std::vector<int64_t>{0, 2, 1, 3, 3, 0}, {3, 2}, Device::cpu());
  check_fd([ids](const V& a) { return a[0].scatter(ids, a[1], 1); }, {u({3, 4}, 142), u({3, 2}, 143)});
}
TEST(GradFd, ScatterAdd) {
  Tensor ids = Tensor::from_vec(std::vector<int64_t>{0, 0, 1, 3, 2, 2}, {3, 2}, Device::cpu());
  check_fd([ids](const V& a) { return a[0].scatter_add(ids, a[1], 1); }, {u({3, 4}, 144), u({3, 2}, 145)});
}
TEST(GradFd, IndexAdd) {
  Tensor ids = ids_i64({1, 1, 0});
  check_fd([ids](const V& a) { return a[0].index_add(ids, a[1], 0); }, {u({3, 4}, 146), u({3, 4}, 147)});
}
TEST(GradFd, SliceScatter) {
  check_fd([](const V& a) { return a[0].slice_scatter(a[1], 1, 1); }, {u({3, 5}, 148), u({3, 2}, 149)});
}
TEST(GradFd, Embedding) {
  Tensor ids = Tensor::from_vec(std::vector<uint32_t>{3, 0, 3, 1}, {2, 2}, Device::cpu());
  check_fd([ids](const V& a) { return a[0].embedding(ids); }, {u({4, 3}, 150)});
}

// ---- convolutions, pooling, resizing --------------------------------------------------------------
TEST(GradFd, Conv1d) {
  check_fd([](const V& a) { return a[0].conv1d(a[1], 1, 2, 1, 1); }, {u({2, 3, 9}, 160), u({4, 3, 3}, 161)});
}
TEST(GradFd, Conv1dDilatedGrouped) {
  check_fd([](const V& a) { return a[0].conv1d(a[1], 2, 1, 2, 2); }, {u({1, 4, 8}, 162), u({6, 2, 3}, 163)});
}
TEST(GradFd, Conv2d) {
  check_fd([](const V& a) { return a[0].conv2d(a[1], 1, 1, 1, 1); },
           {u({2, 2, 5, 4}, 164), u({3, 2, 3, 3}, 165)});
}
TEST(GradFd, Conv2dStridedDilated) {
  check_fd([](const V& a) { return a[0].conv2d(a[1], 1, 2, 2, 1); },
           {u({1, 2, 7, 6}, 166), u({2, 2, 2, 3}, 167)});
}
TEST(GradFd, Conv2dGrouped) {
  check_fd([](const V& a) { return a[0].conv2d(a[1], 0, 1, 1, 2); },
           {u({2, 4, 4, 4}, 168), u({4, 2, 2, 2}, 169)});
}
TEST(GradFd, Conv2dFusedBiasRelu) {
  check_fd([](const V& a) { return a[0].conv2d_fused(a[1], a[2], 1, 1, 1, 1, UnaryOp::Silu); },
           {u({1, 2, 4, 4}, 170), u({3, 2, 3, 3}, 171), u({3}, 172)});
}
// bias + relu and bias alone take the fused node (relu mask from the output, per-channel bias sum)
TEST(GradFd, Conv2dFusedBiasReluNode) {
  check_fd([](const V& a) { return a[0].conv2d_fused(a[1], a[2], 1, 1, 1, 1, UnaryOp::Relu); },
           {u({2, 2, 5, 4}, 177), u({3, 2, 3, 3}, 178), u({3}, 179)});
}
TEST(GradFd, Conv2dFusedBiasOnlyStrided) {
  check_fd([](const V& a) { return a[0].conv2d_fused(a[1], a[2], 0, 2, 1, 1, std::nullopt); },
           {u({1, 3, 7, 6}, 180), u({2, 3, 2, 2}, 181), u({2}, 182)});
}
TEST(GradFd, ConvTranspose1d) {
  check_fd([](const V& a) { return a[0].conv_transpose1d(a[1], 1, 1, 2, 1, 1); },
           {u({2, 3, 5}, 173), u({3, 2, 3}, 174)});
}
TEST(GradFd, ConvTranspose1dGroupedDilated) {
  check_fd([](const V& a) { return a[0].conv_transpose1d(a[1], 2, 0, 1, 2, 2); },
           {u({1, 4, 6}, 175), u({4, 3, 3}, 176)});
}
TEST(GradFd, ConvTranspose2d) {
  check_fd([](const V& a) { return a[0].conv_transpose2d(a[1], 1, 1, 2, 1); },
           {u({1, 2, 3, 4}, 177), u({2, 3, 3, 3}, 178)});
}
TEST(GradFd, ConvTranspose2dDilated) {
  check_fd([](const V& a) { return a[0].conv_transpose2d(a[1], 0, 0, 1, 2); },
           {u({2, 2, 3, 3}, 179), u({2, 2, 2, 2}, 180)});
}
TEST(GradFd, AvgPool2d) {
  check_fd([](const V& a) { return a[0].avg_pool2d(2); }, {u({2, 2, 5, 4}, 181)});
}
TEST(GradFd, AvgPool2dOverlapping) {
  check_fd([](const V& a) { return a[0].avg_pool2d_with_stride({3, 2}, {1, 2}); }, {u({1, 2, 5, 5}, 182)});
}
TEST(GradFd, MaxPool2d) {
  check_fd([](const V& a) { return a[0].max_pool2d(2); }, {u({2, 2, 4, 5}, 183)});
}
TEST(GradFd, MaxPool2dOverlapping) {
  check_fd([](const V& a) { return a[0].max_pool2d_with_stride({3, 3}, {1, 2}); }, {u({1, 2, 6, 7}, 184)});
}
UNARY_FD(UpsampleNearest1d, u({2, 2, 3}, 185), upsample_nearest1d(7))
UNARY_FD(UpsampleNearest2d, u({1, 2, 3, 2}, 186), upsample_nearest2d(5, 4))
UNARY_FD(UpsampleNearest2dDown, u({1, 2, 5, 4}, 187), upsample_nearest2d(2, 3))
UNARY_FD(UpsampleBilinear2d, u({1, 2, 3, 4}, 188), upsample_bilinear2d(5, 7, false))
UNARY_FD(UpsampleBilinear2dAlign, u({1, 2, 3, 4}, 189), upsample_bilinear2d(5, 3, true))
UNARY_FD(UpsampleBilinear2dScale, u({1, 1, 3, 4}, 190), upsample_bilinear2d_with_scale(1.7, 2.5, false))

// ---- candle::nn ops (their composed, differentiable path) -----------------------------------------
TEST(GradFd, NnSoftmax) {
  check_fd([](const V& a) { return nn::ops::softmax(a[0], 1); }, {u({3, 4}, 200)});
}
TEST(GradFd, NnSoftmaxLastDim) {
  check_fd([](const V& a) { return nn::ops::softmax_last_dim(a[0]); }, {u({3, 4}, 201)});
}
TEST(GradFd, NnLogSoftmax) {
  check_fd([](const V& a) { return nn::ops::log_softmax(a[0], -1); }, {u({3, 4}, 202)});
}
TEST(GradFd, NnRmsNorm) {
  check_fd([](const V& a) { return nn::ops::rms_norm(a[0], a[1], 1e-5f); }, {u({3, 4}, 203), u({4}, 204)});
}
TEST(GradFd, NnLayerNorm) {
  check_fd([](const V& a) { return nn::ops::layer_norm(a[0], a[1], a[2], 1e-5f); },
           {u({3, 4}, 205), u({4}, 206), u({4}, 207)});
}
TEST(GradFd, NnSilu) {
  check_fd([](const V& a) { return nn::ops::silu(a[0]); }, {u({3, 4}, 208)});
}
TEST(GradFd, NnSigmoid) {
  check_fd([](const V& a) { return nn::ops::sigmoid(a[0]); }, {u({3, 4}, 209)});
}
