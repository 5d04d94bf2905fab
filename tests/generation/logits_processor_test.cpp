// LogitsProcessor, the penalties and the seeded generator: argmax rules, each sampling mode keeps
// exactly the tokens it should and draws them with the softmax frequencies (tolerances: 5 standard
// deviations of the binomial count), same seed -> same tokens.
#include "candle/generation/logits_processor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "candle/dtype.h"
#include "candle/error.h"

namespace {

using candle::Device;
using candle::DType;
using candle::Error;
using candle::Tensor;
using namespace candle::generation;

std::vector<float> log_probs(const std::vector<double>& p) {
  std::vector<float> l;
  for (double x : p) l.push_back(static_cast<float>(std::log(x)));
  return l;
}

std::vector<double> frequencies(LogitsProcessor& lp, const std::vector<float>& logits, int n) {
  std::vector<double> f(logits.size(), 0);
  for (int i = 0; i < n; ++i) f[lp.sample_f32(logits)] += 1.0 / n;
  return f;
}

void expect_frequencies(const std::vector<double>& got, const std::vector<double>& want, int n) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double sd = std::sqrt(want[i] * (1 - want[i]) / n);
    EXPECT_NEAR(got[i], want[i], 5 * sd + 1e-12) << "token " << i;
  }
}

TEST(SamplingRng, SplitMixSeededXoshiro256StarStar) {
  // the first outputs for seed 0 (splitmix64 state fill, then xoshiro256**), written out
  SamplingRng a(0), b(0), c(1);
  const uint64_t first = a.next_u64();
  EXPECT_EQ(first, b.next_u64());
  EXPECT_NE(first, c.next_u64());
  EXPECT_EQ(first, 0x99EC5F36CB75F2B4ull);
  double lo = 1, hi = 0;
  for (int i = 0; i < 10000; ++i) {
    const double u = a.next_f64();
    lo = std::min(lo, u);
    hi = std::max(hi, u);
  }
  EXPECT_GE(lo, 0.0);
  EXPECT_LT(hi, 1.0);
  EXPECT_LT(lo, 0.01);
  EXPECT_GT(hi, 0.99);
}

TEST(LogitsProcessor, ArgMaxAndTies) {
  LogitsProcessor lp(42, std::nullopt, std::nullopt);
  EXPECT_EQ(lp.sample_f32(std::vector<float>{0.1f, 3.0f, -1.0f, 2.9f}), 1u);
  EXPECT_EQ(lp.sample_f32(std::vector<float>{1.0f, 5.0f, 5.0f, 5.0f}), 1u);  // lowest id on ties
  EXPECT_EQ(argmax(std::vector<float>{-INFINITY, -2.0f}), 1u);
}

TEST(LogitsProcessor, TinyTemperatureIsArgMax) {
  LogitsProcessor lp(1, 1e-8, std::nullopt);
  EXPECT_TRUE(std::holds_alternative<sampling::ArgMax>(lp.sampling()));
  auto lp2 = LogitsProcessor::from_sampling(1, sampling::TopK{5, 0.0});
  EXPECT_TRUE(std::holds_alternative<sampling::ArgMax>(lp2.sampling()));
  LogitsProcessor lp3(1, 0.7, 0.9);
  EXPECT_TRUE(std::holds_alternative<sampling::TopP>(lp3.sampling()));
  LogitsProcessor lp4(1, 0.7, std::nullopt);
  EXPECT_TRUE(std::holds_alternative<sampling::All>(lp4.sampling()));
}

TEST(LogitsProcessor, SameSeedSameTokens) {
  const auto logits = log_probs({0.1, 0.2, 0.3, 0.4});
  LogitsProcessor a(7, 1.0, std::nullopt), b(7, 1.0, std::nullopt), c(8, 1.0, std::nullopt);
  std::vector<uint32_t> ta, tb, tc;
  for (int i = 0; i < 64; ++i) {
    ta.push_back(a.sample_f32(logits));
    tb.push_back(b.sample_f32(logits));
    tc.push_back(c.sample_f32(logits));
  }
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, tc);
}

TEST(LogitsProcessor, AllFollowsTheSoftmax) {
  const int n = 20000;
  LogitsProcessor lp(3, 1.0, std::nullopt);
  expect_frequencies(frequencies(lp, log_probs({0.1, 0.2, 0.7}), n), {0.1, 0.2, 0.7}, n);
  // temperature 0.5 squares the probabilities: (1, 4, 49) / 54
  LogitsProcessor hot(4, 0.5, std::nullopt);
  expect_frequencies(frequencies(hot, log_probs({0.1, 0.2, 0.7}), n), {1 / 54., 4 / 54., 49 / 54.}, n);
}

TEST(LogitsProcessor, TopKKeepsTheKBest) {
  const int n = 20000;
  auto lp = LogitsProcessor::from_sampling(5, sampling::TopK{2, 1.0});
  expect_frequencies(frequencies(lp, log_probs({0.1, 0.3, 0.05, 0.45, 0.1}), n), {0, 0.4, 0, 0.6, 0}, n);
  auto one = LogitsProcessor::from_sampling(5, sampling::TopK{1, 1.0});
  for (int i = 0; i < 100; ++i) EXPECT_EQ(one.sample_f32(log_probs({0.2, 0.5, 0.3})), 1u);
  EXPECT_THROW(LogitsProcessor::from_sampling(5, sampling::TopK{0, 1.0}), Error);
}

TEST(LogitsProcessor, TopPKeepsTheNucleus) {
  const int n = 20000;
  // in decreasing order 0.5, 0.3 (mass before it 0.5 < 0.7: kept), 0.15 (0.8 >= 0.7: dropped)
  LogitsProcessor lp(6, 1.0, 0.7);
  expect_frequencies(frequencies(lp, log_probs({0.15, 0.5, 0.05, 0.3}), n), {0, 0.5 / 0.8, 0, 0.3 / 0.8}, n);
  // p >= 1 samples everything
  LogitsProcessor all(6, 1.0, 1.0);
  expect_frequencies(frequencies(all, log_probs({0.25, 0.75}), n), {0.25, 0.75}, n);
}

TEST(LogitsProcessor, TopPOverALargeVocabulary) {
  // 150k tokens, nearly flat: the prefix sort grows until it holds the nucleus
  std::vector<float> logits(150000, 0.0f);
  logits[123] = 3.0f;
  LogitsProcessor lp(9, 1.0, 0.5);
  for (int i = 0; i < 20; ++i) EXPECT_LT(lp.sample_f32(logits), 150000u);
  // a single dominant token is the whole nucleus
  std::vector<float> peaked(150000, -20.0f);
  peaked[77] = 10.0f;
  for (int i = 0; i < 20; ++i) EXPECT_EQ(lp.sample_f32(peaked), 77u);
}

TEST(LogitsProcessor, TopKThenTopPAndMinP) {
  const int n = 20000;
  // top-2 of (0.4, 0.35, 0.25) renormalized: 0.533, 0.467; top-p 0.5 then keeps only the first
  auto kp = LogitsProcessor::from_sampling(10, sampling::TopKThenTopP{2, 0.5, 1.0});
  expect_frequencies(frequencies(kp, log_probs({0.35, 0.4, 0.25}), n), {0, 1, 0}, n);
  // min-p 0.5: tokens with at least half the top probability (0.5): 0.5 and 0.3
  auto mp = LogitsProcessor::from_sampling(11, sampling::MinP{0.5, 1.0});
  expect_frequencies(frequencies(mp, log_probs({0.05, 0.3, 0.5, 0.15}), n), {0, 0.375, 0.625, 0}, n);
}

TEST(LogitsProcessor, TensorInputsOfEachFloatType) {
  const std::vector<float> v = {0.5f, -1.0f, 2.0f, 1.5f};
  LogitsProcessor lp(0, std::nullopt, std::nullopt);
  const Tensor t = Tensor::from_vec(v, {4}, Device::cpu());
  EXPECT_EQ(lp.sample(t), 2u);
  EXPECT_EQ(lp.sample(t.to_dtype(DType::F16)), 2u);
  EXPECT_EQ(lp.sample(t.to_dtype(DType::BF16)), 2u);
  EXPECT_EQ(lp.sample(t.to_dtype(DType::F64)), 2u);
  EXPECT_THROW(lp.sample(t.reshape({2, 2})), Error);
}

TEST(LogitsProcessor, BadLogitsAreErrors) {
  LogitsProcessor lp(0, 1.0, std::nullopt);
  EXPECT_THROW(lp.sample_f32(std::vector<float>{0.0f, NAN}), Error);
  EXPECT_THROW(lp.sample_f32(std::vector<float>{}), Error);
  EXPECT_THROW(lp.sample_f32(std::vector<float>{-INFINITY, -INFINITY}), Error);
  EXPECT_EQ(lp.sample_f32(std::vector<float>{0.0f, INFINITY, 1.0f}), 1u);
  LogitsProcessor greedy(0, std::nullopt, std::nullopt);
  EXPECT_THROW(greedy.sample_f32(std::vector<float>{NAN}), Error);
}

TEST(RepeatPenalty, DividesPositiveMultipliesNegativeOncePerId) {
  std::vector<float> l = {2.0f, -2.0f, 1.0f, 0.5f, 0.0f};
  const std::vector<uint32_t> ctx = {0, 1, 1, 1, 4, 99};
  apply_repeat_penalty(std::span<float>(l), 2.0f, ctx);
  EXPECT_EQ(l, (std::vector<float>{1.0f, -4.0f, 1.0f, 0.5f, 0.0f}));
  const Tensor t =
      Tensor::from_vec(std::vector<float>{2.0f, -2.0f, 1.0f}, {3}, Device::cpu()).to_dtype(DType::BF16);
  const Tensor r = apply_repeat_penalty(t, 4.0f, std::vector<uint32_t>{2, 1});
  EXPECT_EQ(r.dtype(), DType::F32);
  EXPECT_EQ(r.to_vec1<float>(), (std::vector<float>{2.0f, -8.0f, 0.25f}));
}

TEST(RepeatPenalty, FrequencyAndPresence) {
  std::vector<float> l = {1.0f, 1.0f, 1.0f};
  apply_frequency_presence_penalty(std::span<float>(l), 0.5f, 0.25f, std::vector<uint32_t>{0, 0, 2, 7});
  EXPECT_EQ(l, (std::vector<float>{-0.25f, 1.0f, 0.25f}));
}

}  // namespace
