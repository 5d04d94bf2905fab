// candle::Comm's CPU group: one thread per rank in this process.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "candle/candle.h"

using namespace candle;

namespace {

// Runs body(rank) on one thread per rank of `comms`; the first error of each rank, or "".
std::vector<std::string> on_ranks(const std::vector<std::shared_ptr<Comm>>& comms,
                                  const std::function<void(size_t)>& body) {
  std::vector<std::string> errors(comms.size());
  std::vector<std::thread> ts;
  for (size_t r = 0; r < comms.size(); ++r)
    ts.emplace_back([&, r] {
      try {
        body(r);
      } catch (const Error& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : ts) t.join();
  return errors;
}

Tensor rank_tensor(size_t r, Shape shape) {
  const size_t n = shape.elem_count();
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(r * 100 + i) * 0.5f;
  return Tensor::from_vec(v, shape, Device::cpu());
}

}  // namespace

TEST(Comm, CpuGroupReducesGathersAndBroadcasts) {
  for (size_t world : {1, 2, 3}) {
    auto comms = Comm::create_group(std::vector<Device>(world, Device::cpu()));
    ASSERT_EQ(comms.size(), world);
    std::vector<Tensor> sum(world), g0(world), g1(world), b(world);
    auto errors = on_ranks(comms, [&](size_t r) {
      EXPECT_EQ(comms[r]->rank(), r);
      EXPECT_EQ(comms[r]->world_size(), world);
      const Tensor t = rank_tensor(r, {2, 3});
      for (int rep = 0; rep < 3; ++rep) sum[r] = comms[r]->all_reduce_sum(t);  // the slots are reused safely
      g0[r] = comms[r]->all_gather(t, 0);
      g1[r] = comms[r]->all_gather(t.t(), 1);  // a strided input
      b[r] = comms[r]->broadcast(t, world - 1);
    });
    for (const auto& e : errors) EXPECT_EQ(e, "");
    Tensor want = rank_tensor(0, {2, 3});
    std::vector<Tensor> parts{rank_tensor(0, {2, 3})}, parts_t{rank_tensor(0, {2, 3}).t()};
    for (size_t r = 1; r < world; ++r) {
      want = want + rank_tensor(r, {2, 3});
      parts.push_back(rank_tensor(r, {2, 3}));
      parts_t.push_back(rank_tensor(r, {2, 3}).t());
    }
    for (size_t r = 0; r < world; ++r) {
      EXPECT_EQ(sum[r].to_vec2<float>(), want.to_vec2<float>()) << world << " ranks, rank " << r;
      EXPECT_EQ(g0[r].shape(), (Shape{2 * world, 3}));
      EXPECT_EQ(g0[r].to_vec2<float>(), Tensor::cat(parts, 0).to_vec2<float>());
      EXPECT_EQ(g1[r].to_vec2<float>(), Tensor::cat(parts_t, 1).to_vec2<float>());
      EXPECT_EQ(b[r].to_vec2<float>(), rank_tensor(world - 1, {2, 3}).to_vec2<float>());
    }
  }
}

// A bad input on one rank fails on every rank (none is left waiting); so does an abort.
TEST(Comm, CpuGroupErrorsReachEveryRank) {
  auto comms = Comm::create_group({Device::cpu(), Device::cpu()});
  auto errors = on_ranks(comms, [&](size_t r) { comms[r]->all_reduce_sum(rank_tensor(r, {2, r + 1})); });
  for (const auto& e : errors) EXPECT_NE(e.find("rank 1 passed [2, 2]"), std::string::npos) << e;
  errors = on_ranks(comms, [&](size_t r) {
    comms[r]->all_reduce_sum(r == 0 ? rank_tensor(r, {4}) : rank_tensor(r, {4}).to_dtype(DType::F64));
  });
  for (const auto& e : errors) EXPECT_NE(e.find("f64"), std::string::npos) << e;
  errors = on_ranks(comms, [&](size_t r) { comms[r]->all_gather(rank_tensor(r, {4}), 1); });
  for (const auto& e : errors) EXPECT_NE(e.find("dim 1"), std::string::npos) << e;
  // the group still works after those errors
  errors = on_ranks(comms, [&](size_t r) {
    EXPECT_EQ(comms[r]->all_reduce_sum(rank_tensor(r, {1})).to_vec1<float>()[0], 50.0f);
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  // rank 1 stops: rank 0, waiting in a collective, fails instead of hanging
  errors = on_ranks(comms, [&](size_t r) {
    if (r == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      comms[r]->abort("the model failed to load");
      return;
    }
    comms[r]->all_reduce_sum(rank_tensor(r, {1}));
  });
  EXPECT_NE(errors[0].find("rank 1: the model failed to load"), std::string::npos) << errors[0];
  EXPECT_THROW(comms[1]->broadcast(rank_tensor(1, {1}), 0), Error);
  EXPECT_THROW(Comm::create_group({}), Error);
  EXPECT_THROW(Comm::create(std::string(256, '0'), 0, 1, Device::cpu()), Error);
  EXPECT_THROW(Comm::unique_id(DeviceKind::Cpu), Error);
}
