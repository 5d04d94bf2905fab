// Batcher: deterministic shuffles, batch contents, the last partial batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "candle/datasets/mnist.h"

using namespace candle;

namespace {

// images [n, 2] with rows (i, -i), labels [n] = i (u32).
std::pair<Tensor, Tensor> samples(size_t n) {
  std::vector<float> img;
  std::vector<uint32_t> lab;
  for (size_t i = 0; i < n; ++i) {
    img.push_back(static_cast<float>(i));
    img.push_back(-static_cast<float>(i));
    lab.push_back(static_cast<uint32_t>(i));
  }
  return {Tensor::from_vec(img, {n, 2}, Device::cpu()), Tensor::from_vec(lab, {n}, Device::cpu())};
}

}  // namespace

TEST(DatasetsBatcher, ShuffleIsAPermutationAndDeterministic) {
  auto a = datasets::shuffled_indices(1000, 7, 0);
  auto b = datasets::shuffled_indices(1000, 7, 0);
  EXPECT_EQ(a, b);
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<uint32_t> iota(1000);
  std::iota(iota.begin(), iota.end(), 0u);
  EXPECT_EQ(sorted, iota);
  EXPECT_NE(a, iota);
}

TEST(DatasetsBatcher, ShuffleDependsOnSeedAndEpoch) {
  auto base = datasets::shuffled_indices(100, 7, 0);
  EXPECT_NE(base, datasets::shuffled_indices(100, 8, 0));
  EXPECT_NE(base, datasets::shuffled_indices(100, 7, 1));
}

// The order is fixed by our own Fisher-Yates over std::mt19937_64 (whose output the C++
// standard pins down), so these values hold on every platform and library.
TEST(DatasetsBatcher, ShuffleIsPinned) {
  // computed independently by a Python MT19937-64 running the same shuffle
  EXPECT_EQ(datasets::shuffled_indices(8, 42, 0), (std::vector<uint32_t>{3, 2, 6, 7, 4, 1, 0, 5}));
}

TEST(DatasetsBatcher, BatchesFollowTheOrder) {
  auto [img, lab] = samples(10);
  datasets::Batcher b(img, lab, 4, 3);
  EXPECT_EQ(b.num_batches(), 2u);
  const auto order = b.order();
  size_t seen = 0;
  while (auto batch = b.next()) {
    auto l = batch->second.to_vec1<uint32_t>();
    auto x = batch->first.to_vec2<float>();
    ASSERT_EQ(l.size(), 4u);
    for (size_t i = 0; i < l.size(); ++i) {
      EXPECT_EQ(l[i], order[seen + i]);
      EXPECT_EQ(x[i][0], static_cast<float>(l[i]));
      EXPECT_EQ(x[i][1], -static_cast<float>(l[i]));
    }
    seen += l.size();
  }
  EXPECT_EQ(seen, 8u);  // the last 2 samples are dropped by default
}

TEST(DatasetsBatcher, LastIncompleteBatchOnRequest) {
  auto [img, lab] = samples(10);
  datasets::Batcher b(img, lab, 4, 3);
  b.return_last_incomplete_batch(true);
  EXPECT_EQ(b.num_batches(), 3u);
  std::vector<size_t> sizes;
  std::vector<uint32_t> all;
  while (auto batch = b.next()) {
    auto l = batch->second.to_vec1<uint32_t>();
    sizes.push_back(l.size());
    all.insert(all.end(), l.begin(), l.end());
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{4, 4, 2}));
  std::sort(all.begin(), all.end());
  std::vector<uint32_t> iota(10);
  std::iota(iota.begin(), iota.end(), 0u);
  EXPECT_EQ(all, iota);
}

TEST(DatasetsBatcher, StartEpochReshufflesAndRestarts) {
  auto [img, lab] = samples(50);
  datasets::Batcher b(img, lab, 10, 5);
  auto first = b.next()->second.to_vec1<uint32_t>();
  b.start_epoch(1);
  auto e1 = b.next()->second.to_vec1<uint32_t>();
  EXPECT_NE(first, e1);
  b.start_epoch(0);
  EXPECT_EQ(b.next()->second.to_vec1<uint32_t>(), first);
  // a second batcher with the same seed gives the same epoch-1 batches
  datasets::Batcher c(img, lab, 10, 5);
  c.start_epoch(1);
  EXPECT_EQ(c.next()->second.to_vec1<uint32_t>(), e1);
}

TEST(DatasetsBatcher, RejectsBadArguments) {
  auto [img, lab] = samples(10);
  EXPECT_THROW(datasets::Batcher(img, lab, 0, 1), Error);
  EXPECT_THROW(datasets::Batcher(img, lab.narrow(0, 0, 9), 2, 1), Error);
}
