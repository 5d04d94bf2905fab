// candle's Display format (`println!("{t}")`), checked character for character. The
// "Candle*" tests carry the expected strings of candle-core/tests/display_tests.rs; the
// others are derived from the rules in candle-core/src/display.rs (explained where needed).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "candle/candle.h"
#include "test_util.h"

using namespace candle;

namespace {

// Restores candle's default print options when a test ends, whatever it changed.
class Display : public ::testing::Test {
 protected:
  void SetUp() override { set_print_options_default(); }
  void TearDown() override { set_print_options_default(); }
  Device dev = Device::cpu();
};

std::vector<float> iota(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  return v;
}

// "42., 42., ..." with n items, as candle writes a run of 42s on one line.
std::string forty_twos(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += i ? ", 42." : "42.";
  return s;
}

}  // namespace

// ---- candle-core/tests/display_tests.rs ------------------------------------------------------

TEST_F(Display, CandleScalarU32) {
  EXPECT_EQ(to_string(Tensor::new_(uint32_t{1234}, dev)), "[1234]\nTensor[[], u32]");
}

TEST_F(Display, CandleScalarF32Fixed) {
  EXPECT_EQ(to_string(Tensor::new_(-123.4f, dev)), "[-123.4000]\nTensor[[], f32]");
}

TEST_F(Display, CandleScalarF32SciSmall) {
  EXPECT_EQ(to_string(Tensor::new_(-1.234e-5f, dev)), "[-1.2340e-5]\nTensor[[], f32]");
}

TEST_F(Display, CandleScalarF32SciLarge) {
  EXPECT_EQ(to_string(Tensor::new_(-1.234e11f, dev)), "[-1.2340e11]\nTensor[[], f32]");
}

TEST_F(Display, CandleScalarZero) { EXPECT_EQ(to_string(Tensor::new_(0.0f, dev)), "[0.]\nTensor[[], f32]"); }

TEST_F(Display, CandleEmptyVector) {
  Tensor t = Tensor::from_vec(std::vector<uint32_t>{}, {0}, dev);
  EXPECT_EQ(to_string(t), "[]\nTensor[[0], u32]");
}

TEST_F(Display, CandleVectorWithNaN) {
  Tensor t = Tensor::new_({0.1234567, 1.0, -1.2, 4.1, std::nan("")}, dev);
  EXPECT_EQ(to_string(t), "[ 0.1235,  1.0000, -1.2000,  4.1000,     NaN]\nTensor[[5], f64]");
}

TEST_F(Display, CandleLongVectorWraps) {
  Tensor t = Tensor::full(42.0f, {50}, dev);
  const std::string expected =
      "[42., 42., 42., 42., 42., 42., 42., 42., 42., 42., 42., 42., 42., 42., 42., 42.,\n"
      " 42., 42., 42., 42., 42., 42., 42., 42., 42., 42., 42., 42., 42., 42., 42., 42.,\n"
      " 42., 42., 42., 42., 42., 42., 42., 42., 42., 42., 42., 42., 42., 42., 42., 42.,\n"
      " 42., 42.]\n"
      "Tensor[[50], f32]";
  EXPECT_EQ(to_string(t), expected);
}

TEST_F(Display, CandleSummarisedVector) {
  Tensor t = Tensor::full(42.0f, {11000}, dev);
  EXPECT_EQ(to_string(t), "[42., 42., 42., ..., 42., 42., 42.]\nTensor[[11000], f32]");
}

TEST_F(Display, CandleSummarisedMatrix) {
  Tensor t = Tensor::full(42.0f, {200, 100}, dev);
  const std::string expected =
      "[[42., 42., 42., ..., 42., 42., 42.],\n"
      " [42., 42., 42., ..., 42., 42., 42.],\n"
      " [42., 42., 42., ..., 42., 42., 42.],\n"
      " ...\n"
      " [42., 42., 42., ..., 42., 42., 42.],\n"
      " [42., 42., 42., ..., 42., 42., 42.],\n"
      " [42., 42., 42., ..., 42., 42., 42.]]\n"
      "Tensor[[200, 100], f32]";
  EXPECT_EQ(to_string(t), expected);
}

TEST_F(Display, CandleSummarisedRank5) {
  Tensor t = Tensor::full(42.0f, {2, 1, 1, 100, 100}, dev);
  const std::string expected =
      "[[[[[42., 42., 42., ..., 42., 42., 42.],\n"
      "    [42., 42., 42., ..., 42., 42., 42.],\n"
      "    [42., 42., 42., ..., 42., 42., 42.],\n"
      "    ...\n"
      "    [42., 42., 42., ..., 42., 42., 42.],\n"
      "    [42., 42., 42., ..., 42., 42., 42.],\n"
      "    [42., 42., 42., ..., 42., 42., 42.]]]],\n"
      " [[[[42., 42., 42., ..., 42., 42., 42.],\n"
      "    [42., 42., 42., ..., 42., 42., 42.],\n"
      "    [42., 42., 42., ..., 42., 42., 42.],\n"
      "    ...\n"
      "    [42., 42., 42., ..., 42., 42., 42.],\n"
      "    [42., 42., 42., ..., 42., 42., 42.],\n"
      "    [42., 42., 42., ..., 42., 42., 42.]]]]]\n"
      "Tensor[[2, 1, 1, 100, 100], f32]";
  EXPECT_EQ(to_string(t), expected);
}

// ---- the operator and the layouts --------------------------------------------------------------

TEST_F(Display, StreamOperatorPrintsTheSameTextWithoutTrailingNewline) {
  Tensor t = Tensor::new_({{1.f, 2.f}, {3.f, 4.f}}, dev);
  std::ostringstream os;
  os << t;
  EXPECT_EQ(os.str(), "[[1., 2.],\n [3., 4.]]\nTensor[[2, 2], f32]");
}

TEST_F(Display, TransposedViewPrintsLogicalValues) {
  Tensor t = Tensor::new_({{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}}, dev);
  Tensor tt = test_util::view(t, t.layout().transpose(0, 1));
  ASSERT_FALSE(tt.is_contiguous());
  EXPECT_EQ(to_string(tt), "[[1., 4.],\n [2., 5.],\n [3., 6.]]\nTensor[[3, 2], f32]");
}

TEST_F(Display, OffsetViewPrintsLogicalValues) {
  Tensor t = Tensor::new_({{int64_t{1}, int64_t{2}}, {int64_t{3}, int64_t{4}}}, dev);
  Tensor v = test_util::offset_view(t);
  ASSERT_NE(v.layout().start_offset(), 0u);
  EXPECT_EQ(to_string(v), "[[1, 2],\n [3, 4]]\nTensor[[2, 2], i64]");
}

TEST_F(Display, BroadcastViewPrintsLogicalValues) {
  Tensor row = Tensor::new_({1.5f, -2.5f}, dev);
  Tensor b = test_util::view(row, row.layout().broadcast_as(Shape{3, 2}));
  EXPECT_EQ(to_string(b),
            "[[ 1.5000, -2.5000],\n [ 1.5000, -2.5000],\n [ 1.5000, -2.5000]]\nTensor[[3, 2], f32]");
}

// A stride-0 view of 10^12 logical elements: only the 36 shown ones may be read (reading or
// copying them all would not finish). Rows 0-2 and the last 3, cols 0-2 and 997-999; the
// shown values 0..999 are integral with max/min = 999 (not > 1000): int mode, width 4.
TEST_F(Display, HugeBroadcastViewReadsOnlyShownElements) {
  Tensor row = Tensor::from_vec(iota(1000), {1, 1000}, dev);
  Tensor b = test_util::view(row, row.layout().broadcast_as(Shape{1000000000, 1000}));
  const std::string r = "[  0.,   1.,   2., ..., 997., 998., 999.]";
  const std::string expected = "[" + r + ",\n " + r + ",\n " + r + ",\n ...\n " + r + ",\n " + r + ",\n " +
                               r + "]\nTensor[[1000000000, 1000], f32]";
  EXPECT_EQ(to_string(b), expected);
}

// ---- dtypes ------------------------------------------------------------------------------------

TEST_F(Display, SignedIntegersArePaddedToTheWidestValue) {
  EXPECT_EQ(to_string(Tensor::new_({int64_t{-1}, int64_t{20}, int64_t{300}}, dev)),
            "[ -1,  20, 300]\nTensor[[3], i64]");
  EXPECT_EQ(to_string(Tensor::from_vec(std::vector<int32_t>{-7, 12}, {2}, dev)),
            "[-7, 12]\nTensor[[2], i32]");
  EXPECT_EQ(to_string(Tensor::from_vec(std::vector<int16_t>{-32768, 5}, {2}, dev)),
            "[-32768,      5]\nTensor[[2], i16]");
}

TEST_F(Display, I64Extremes) {
  Tensor t = Tensor::from_vec(
      std::vector<int64_t>{std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()}, {2},
      dev);
  EXPECT_EQ(to_string(t), "[-9223372036854775808,  9223372036854775807]\nTensor[[2], i64]");
}

TEST_F(Display, UnsignedIntegers) {
  EXPECT_EQ(to_string(Tensor::from_vec(std::vector<uint32_t>{4000000000u, 7u}, {2}, dev)),
            "[4000000000,          7]\nTensor[[2], u32]");
  // a comparison mask (u8 0/1) prints as integers
  EXPECT_EQ(to_string(Tensor::from_vec(std::vector<uint8_t>{1, 0, 1}, {3}, dev)),
            "[1, 0, 1]\nTensor[[3], u8]");
  EXPECT_EQ(to_string(Tensor::from_vec(std::vector<uint8_t>{0, 1, 255}, {3}, dev)),
            "[  0,   1, 255]\nTensor[[3], u8]");
}

// f16/bf16 print their exact value as f32 does: f16(0.1) = 0.0999755..., bf16(0.1) = 0.1000976...
TEST_F(Display, F16) {
  Tensor t = Tensor::new_({f16(0.1f), f16(1.5f), f16(-2.0f)}, dev);
  EXPECT_EQ(to_string(t), "[ 0.1000,  1.5000, -2.0000]\nTensor[[3], f16]");
}

TEST_F(Display, BF16) {
  Tensor t = Tensor::new_({bf16(0.1f), bf16(1.5f), bf16(-2.0f)}, dev);
  EXPECT_EQ(to_string(t), "[ 0.1001,  1.5000, -2.0000]\nTensor[[3], bf16]");
}

TEST_F(Display, HalfIntegralValuesUseIntMode) {
  Tensor t = Tensor::new_({{bf16(1.0f), bf16(-256.0f)}}, dev);
  EXPECT_EQ(to_string(t), "[[   1., -256.]]\nTensor[[1, 2], bf16]");
}

// candle compares max/min in the tensor's type: 1001 / 1.0009765625 = 1000.024 is 1000 once
// rounded to f16, which is not > 1000, so f16 stays in fixed mode where f32 switches to sci.
TEST_F(Display, SciModeDecisionRunsInTheTensorsType) {
  Tensor h = Tensor::new_({f16(1.0009765625f), f16(1001.0f)}, dev);
  EXPECT_EQ(to_string(h), "[   1.0010, 1001.0000]\nTensor[[2], f16]");
  Tensor f = Tensor::new_({1.0009765625f, 1001.0f}, dev);
  EXPECT_EQ(to_string(f), "[1.0010e0, 1.0010e3]\nTensor[[2], f32]");
}

// f16(1e-5) is 1.00135803...e-5. candle's f16 sci mode goes through half's LowerExp, which drops
// precision and width ("1.001358e-5", unaligned: half-rs issue #112); we print as for f32.
TEST_F(Display, F16SciModeKeepsPrecisionAndWidth) {
  Tensor t = Tensor::new_({f16(1e-5f), f16(1.0f)}, dev);
  EXPECT_EQ(to_string(t), "[1.0014e-5,  1.0000e0]\nTensor[[2], f16]");
}

TEST_F(Display, F8E4M3) {
  Tensor t = Tensor::new_({f8e4m3(0.5f), f8e4m3(1.5f), f8e4m3(-2.0f)}, dev);
  EXPECT_EQ(to_string(t), "[ 0.5000,  1.5000, -2.0000]\nTensor[[3], f8e4m3]");
}

// In f8e4m3 candle's thresholds saturate (1000 -> 448, 1e-4 -> 0), so it never picks sci
// mode itself: 2^-9 and 448 stay fixed (an f32 tensor with them would be in sci mode).
TEST_F(Display, F8E4M3NeverPicksSciModeItself) {
  Tensor t = Tensor::new_({f8e4m3(0.001953125f), f8e4m3(448.0f)}, dev);
  EXPECT_EQ(to_string(t), "[  0.0020, 448.0000]\nTensor[[2], f8e4m3]");
}

// ---- ranks and shapes ---------------------------------------------------------------------------

TEST_F(Display, Rank0F64) { EXPECT_EQ(to_string(Tensor::new_(3.0, dev)), "[3.]\nTensor[[], f64]"); }

TEST_F(Display, Rank1) {
  EXPECT_EQ(to_string(Tensor::new_({0.5f, 0.25f}, dev)), "[0.5000, 0.2500]\nTensor[[2], f32]");
}

TEST_F(Display, Rank3) {
  Tensor t = Tensor::from_vec(iota(8), {2, 2, 2}, dev);
  EXPECT_EQ(to_string(t), "[[[0., 1.],\n  [2., 3.]],\n [[4., 5.],\n  [6., 7.]]]\nTensor[[2, 2, 2], f32]");
}

TEST_F(Display, Rank4) {
  Tensor t = Tensor::from_vec(std::vector<uint32_t>{0, 1, 2, 3}, {1, 2, 1, 2}, dev);
  EXPECT_EQ(to_string(t), "[[[[0, 1]],\n  [[2, 3]]]]\nTensor[[1, 2, 1, 2], u32]");
}

TEST_F(Display, EmptyMatrices) {
  EXPECT_EQ(to_string(Tensor::zeros({2, 0}, DType::F32, dev)), "[[],\n []]\nTensor[[2, 0], f32]");
  EXPECT_EQ(to_string(Tensor::zeros({0, 3}, DType::F32, dev)), "[]\nTensor[[0, 3], f32]");
}

// Rows wrap after line_width / (width + 2) = 80 / 5 = 16 items, indented past the open brackets.
TEST_F(Display, LongRowsOfAMatrixWrap) {
  Tensor t = Tensor::full(42.0f, {2, 20}, dev);
  std::string row = "[";
  row += forty_twos(16);
  row += ",\n  ";
  row += forty_twos(4);
  row += "]";
  std::string expected = "[";
  expected += row;
  expected += ",\n ";
  expected += row;
  expected += "]\nTensor[[2, 20], f32]";
  EXPECT_EQ(to_string(t), expected);
}

// ---- float modes --------------------------------------------------------------------------------

// Non-finite values do not affect the mode; they are padded to the common width.
TEST_F(Display, NonFiniteValuesInIntMode) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor t = Tensor::new_({1.0f, inf, -inf, std::nanf("")}, dev);
  EXPECT_EQ(to_string(t), "[  1.,  inf, -inf,  NaN]\nTensor[[4], f32]");
}

TEST_F(Display, OnlyNonFiniteValues) {
  Tensor t = Tensor::new_({std::nanf(""), std::numeric_limits<float>::infinity()}, dev);
  EXPECT_EQ(to_string(t), "[NaN, inf]\nTensor[[2], f32]");
}

TEST_F(Display, SciModeForSmallMagnitudes) {
  Tensor t = Tensor::new_({1e-5f, 2e-5f}, dev);
  EXPECT_EQ(to_string(t), "[1.0000e-5, 2.0000e-5]\nTensor[[2], f32]");
}

TEST_F(Display, SciModeForLargeMagnitudes) {
  Tensor t = Tensor::new_({-1e9f, 1.0f}, dev);
  EXPECT_EQ(to_string(t), "[-1.0000e9,  1.0000e0]\nTensor[[2], f32]");
}

TEST_F(Display, SciModeForWideRatio) {
  Tensor t = Tensor::new_({0.5, 1234.5}, dev);
  EXPECT_EQ(to_string(t), "[5.0000e-1,  1.2345e3]\nTensor[[2], f64]");
}

// Exact ties round to even, as Rust's formatting does: 1.03125 -> 1.0312, 1.09375 -> 1.0938.
TEST_F(Display, FixedModeRoundsTiesToEven) {
  Tensor t = Tensor::new_({1.03125f, 1.09375f}, dev);
  EXPECT_EQ(to_string(t), "[1.0312, 1.0938]\nTensor[[2], f32]");
}

TEST_F(Display, FixedModeAtTheRatioLimit) {
  // max / min == 1000 exactly is not > 1000
  Tensor t = Tensor::new_({0.5, 500.0}, dev);
  EXPECT_EQ(to_string(t), "[  0.5000, 500.0000]\nTensor[[2], f64]");
}

// 10^7 elements, summarised: rows 0, 1, 2, 9997, 9998, 9999 and the same cols are shown;
// value = 10 * (row % 10) + col % 10, so the shown values are integral, 1 <= |v| <= 99
// (no sci mode), and the widest is "99." (3 chars).
TEST_F(Display, SummarisedTenMillionElements) {
  const size_t rows = 10000, cols = 1000;
  std::vector<float> v(rows * cols);
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) v[r * cols + c] = static_cast<float>(10 * (r % 10) + c % 10);
  Tensor t = Tensor::from_vec(v, {rows, cols}, dev);
  const std::string expected =
      "[[ 0.,  1.,  2., ...,  7.,  8.,  9.],\n"
      " [10., 11., 12., ..., 17., 18., 19.],\n"
      " [20., 21., 22., ..., 27., 28., 29.],\n"
      " ...\n"
      " [70., 71., 72., ..., 77., 78., 79.],\n"
      " [80., 81., 82., ..., 87., 88., 89.],\n"
      " [90., 91., 92., ..., 97., 98., 99.]]\n"
      "Tensor[[10000, 1000], f32]";
  EXPECT_EQ(to_string(t), expected);
}

// 8000 > 1000 elements: all 4 rows (4 <= 2 * 3), cols 0-2 and 1997-1999. The shown values run
// from 0 to 7999, so max/min = 7999 > 1000 picks sci mode; every value is 8 chars wide.
TEST_F(Display, SummarisedSciMode) {
  Tensor t = Tensor::from_vec(iota(8000), {4, 2000}, dev);
  const std::string expected =
      "[[0.0000e0, 1.0000e0, 2.0000e0, ..., 1.9970e3, 1.9980e3, 1.9990e3],\n"
      " [2.0000e3, 2.0010e3, 2.0020e3, ..., 3.9970e3, 3.9980e3, 3.9990e3],\n"
      " [4.0000e3, 4.0010e3, 4.0020e3, ..., 5.9970e3, 5.9980e3, 5.9990e3],\n"
      " [6.0000e3, 6.0010e3, 6.0020e3, ..., 7.9970e3, 7.9980e3, 7.9990e3]]\n"
      "Tensor[[4, 2000], f32]";
  EXPECT_EQ(to_string(t), expected);
}

// Only the shown values choose the mode: the hidden 1e-7 would force sci mode.
TEST_F(Display, HiddenValuesDoNotChooseTheMode) {
  std::vector<float> v(2000, 2.0f);
  v[1000] = 1e-7f;
  EXPECT_EQ(to_string(Tensor::from_vec(v, {2000}, dev)),
            "[2., 2., 2., ..., 2., 2., 2.]\nTensor[[2000], f32]");
}

// ---- print options ------------------------------------------------------------------------------

TEST_F(Display, DefaultOptionsAreCandles) {
  PrintOptions po = print_options();
  EXPECT_EQ(po.precision, 4u);
  EXPECT_EQ(po.threshold, 1000u);
  EXPECT_EQ(po.edge_items, 3u);
  EXPECT_EQ(po.line_width, 80u);
  EXPECT_FALSE(po.sci_mode_set);
}

TEST_F(Display, ShortPreset) {
  set_print_options_short();
  PrintOptions po = print_options();
  EXPECT_EQ(po.precision, 2u);
  EXPECT_EQ(po.threshold, 1000u);
  EXPECT_EQ(po.edge_items, 2u);
  EXPECT_EQ(po.line_width, 80u);
  EXPECT_EQ(to_string(Tensor::new_({0.123456f, 1.5f}, dev)), "[0.12, 1.50]\nTensor[[2], f32]");
  EXPECT_EQ(to_string(Tensor::full(42.0f, {11000}, dev)), "[42., 42., ..., 42., 42.]\nTensor[[11000], f32]");
}

TEST_F(Display, FullPresetNeverSummarises) {
  set_print_options_full();
  EXPECT_EQ(print_options().threshold, std::numeric_limits<size_t>::max());
  std::string s = to_string(Tensor::full(42.0f, {1100}, dev));
  EXPECT_EQ(s.find("..."), std::string::npos);
  // 1100 values at 16 per line: 69 lines of values, then the dtype line
  EXPECT_EQ(std::count(s.begin(), s.end(), '\n'), 69);
  EXPECT_EQ(s.substr(0, 10), "[42., 42.,");
  const std::string tail = "\n " + forty_twos(12) + "]\nTensor[[1100], f32]";  // 1100 - 68 * 16 = 12
  EXPECT_EQ(s.substr(s.size() - tail.size()), tail);
}

TEST_F(Display, SetPrintOptionsDefaultRestores) {
  set_print_options_short();
  set_print_options_default();
  EXPECT_EQ(to_string(Tensor::new_({0.123456f, 1.5f}, dev)), "[0.1235, 1.5000]\nTensor[[2], f32]");
}

TEST_F(Display, PrecisionOption) {
  PrintOptions po;
  po.precision = 6;
  set_print_options(po);
  EXPECT_EQ(to_string(Tensor::new_({0.125, -2.0}, dev)), "[ 0.125000, -2.000000]\nTensor[[2], f64]");
  EXPECT_EQ(to_string(Tensor::new_(1e-6, dev)), "[1.000000e-6]\nTensor[[], f64]");
}

TEST_F(Display, ThresholdAndEdgeItemsOptions) {
  PrintOptions po;
  po.threshold = 5;
  po.edge_items = 1;
  set_print_options(po);
  std::vector<float> v = iota(10);
  for (float& x : v) x += 1.0f;  // 1 .. 10
  EXPECT_EQ(to_string(Tensor::from_vec(v, {10}, dev)), "[ 1., ..., 10.]\nTensor[[10], f32]");
  // 5 elements is not more than the threshold
  EXPECT_EQ(to_string(Tensor::from_vec(std::vector<float>(v.begin(), v.begin() + 5), {5}, dev)),
            "[1., 2., 3., 4., 5.]\nTensor[[5], f32]");
}

TEST_F(Display, LineWidthOption) {
  PrintOptions po;
  po.line_width = 20;  // 20 / (3 + 2) = 4 items a line
  set_print_options(po);
  EXPECT_EQ(to_string(Tensor::full(42.0f, {6}, dev)), "[42., 42., 42., 42.,\n 42., 42.]\nTensor[[6], f32]");
}

TEST_F(Display, SciModeForcedOn) {
  PrintOptions po;
  po.sci_mode_set = true;
  po.sci_mode = true;
  set_print_options(po);
  EXPECT_EQ(to_string(Tensor::new_({1.5f, 2.0f}, dev)), "[1.5000e0, 2.0000e0]\nTensor[[2], f32]");
  EXPECT_EQ(to_string(Tensor::new_({1, 2}, dev)), "[1, 2]\nTensor[[2], i32]");  // ints unaffected
}

TEST_F(Display, SciModeForcedOff) {
  PrintOptions po;
  po.sci_mode_set = true;
  po.sci_mode = false;
  set_print_options(po);
  EXPECT_EQ(to_string(Tensor::new_({1e-5f, 1.0f}, dev)), "[0.0000, 1.0000]\nTensor[[2], f32]");
}

TEST_F(Display, OptionsAreProcessWideAndThreadSafe) {
  std::vector<std::thread> threads;
  std::vector<std::string> got(4);
  Tensor t = Tensor::new_({0.123456f, 1.5f}, dev);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 200; ++k) {
        if (i % 2)
          set_print_options_short();
        else
          set_print_options_default();
        got[i] = to_string(t);
        if (got[i] != "[0.12, 1.50]\nTensor[[2], f32]" && got[i] != "[0.1235, 1.5000]\nTensor[[2], f32]")
          return;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& s : got)
    EXPECT_TRUE(s == "[0.12, 1.50]\nTensor[[2], f32]" || s == "[0.1235, 1.5000]\nTensor[[2], f32]") << s;
}
