// candle::Comm on CUDA devices through NCCL (src/cuda/nccl.cpp): a one-rank group on cuda:0 (its
// collectives give their input back), the errors of the CPU group, ids for ranks in other
// processes, abort; where two GPUs are present, two ranks on two threads, and ordinary ops driven
// from two threads on two devices at once. The tests skip with the reason where cuda:0 does not
// open, where libnccl.so.2 does not, and (the two-GPU ones) where cuda:1 does not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "candle/candle.h"
#include "candle/comm.h"
#include "candle/io/safetensors.h"
#include "candle/models/causal_lm.h"
#include "candle/nn/ops.h"
#include "cuda_device.h"

namespace candle {
namespace {

// A one-rank group on dev, or none when NCCL does not open (why then names libnccl.so.2).
std::vector<std::shared_ptr<Comm>> one_rank_group(const Device& dev, std::string* why) {
  try {
    return Comm::create_group({dev});
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Device || std::string(e.what()).find("libnccl.so.2") == std::string::npos)
      throw;
    *why = e.what();
    return {};
  }
}

// Skips the test where cuda:0 or NCCL does not open; else `dev` is cuda:0 and `comm` its one-rank
// group's communicator.
#define NEED_NCCL()                                                                             \
  NEED_CUDA_DEVICE();                                                                           \
  std::string nccl_why_;                                                                        \
  const auto group_ = one_rank_group(dev, &nccl_why_);                                          \
  if (group_.empty()) GTEST_SKIP() << "NCCL does not open (needs libnccl.so.2): " << nccl_why_; \
  Comm& comm = *group_[0]

// cuda:1, or a skip naming why it does not open.
#define NEED_SECOND_GPU()                                                                  \
  std::optional<Device> dev1_;                                                             \
  std::string dev1_why_;                                                                   \
  try {                                                                                    \
    dev1_ = Device::cuda(1);                                                               \
  } catch (const Error& e) {                                                               \
    dev1_why_ = e.what();                                                                  \
  }                                                                                        \
  if (!dev1_) GTEST_SKIP() << "needs 2 CUDA devices, cuda:1 does not open: " << dev1_why_; \
  const Device& dev1 = *dev1_

std::vector<double> host(const Tensor& t) {
  return t.to_device(Device::cpu()).to_dtype(DType::F64).flatten_to_vec<double>();
}

// shape and values equal (the values exactly)
void expect_same(const Tensor& got, const Tensor& want, const std::string& what) {
  EXPECT_EQ(got.shape(), want.shape()) << what;
  EXPECT_EQ(got.dtype(), want.dtype()) << what;
  if (got.shape() == want.shape()) {
    EXPECT_EQ(host(got), host(want)) << what;
  }
}

// The message of the Error f throws, checked to be of kind `want`.
std::string error_of(const std::function<void()>& f, ErrorKind want) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(want)) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

// [shape] of f32 values (r * 100 + i) / 2, exact in f16 and bf16 for small r and i
Tensor rank_tensor(size_t r, const Shape& shape, const Device& dev) {
  std::vector<float> v(shape.elem_count());
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(r * 100 + i) * 0.5f;
  return Tensor::from_vec(v, shape, Device::cpu()).to_device(dev);
}

// Runs body(rank) on one thread per rank; the first error of each rank, or "".
std::vector<std::string> on_ranks(size_t n, const std::function<void(size_t)>& body) {
  std::vector<std::string> errors(n);
  std::vector<std::thread> ts;
  for (size_t r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      try {
        body(r);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : ts) t.join();
  return errors;
}

// The transformers fixture `family` (tests/data/llm): its prompt and greedy continuation
struct Fixture {
  std::vector<uint32_t> prompt, greedy;
};
Fixture fixture(const std::string& family) {
  auto t = safetensors::load(std::string(CANDLE_TEST_DATA_DIR) + "/llm/" + family + "/expected.safetensors",
                             Device::cpu());
  auto as_u32 = [](const Tensor& x) { return x.flatten_all().to_dtype(DType::U32).to_vec1<uint32_t>(); };
  return {as_u32(t.at("input_ids")), as_u32(t.at("greedy"))};
}
std::string fixture_dir(const std::string& family) {
  return std::string(CANDLE_TEST_DATA_DIR) + "/llm/" + family;
}

// the logits after the prompt and the greedy continuation to greedy's length, through the KV cache
std::pair<std::vector<float>, std::vector<uint32_t>> run_greedy(models::CausalLM& lm, const Fixture& f,
                                                                const Device& dev) {
  auto ids = [&](const std::vector<uint32_t>& v) {
    return Tensor::from_vec(v, {1, v.size()}, Device::cpu()).to_device(dev);
  };
  Tensor last = lm.forward(ids(f.prompt), 0);
  const std::vector<float> logits = last.to_device(Device::cpu()).flatten_all().to_vec1<float>();
  std::vector<uint32_t> seq = f.prompt;
  while (seq.size() < f.greedy.size()) {
    seq.push_back(last.to_device(Device::cpu()).flatten_all().argmax(0).to_scalar<uint32_t>());
    last = lm.forward(ids({seq.back()}), seq.size() - 1);
  }
  return {logits, seq};
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float d = a.size() == b.size() ? 0.0f : 1e30f;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

}  // namespace

// A model on cuda:0 with a one-rank NCCL group: every row-parallel sum goes through ncclAllReduce,
// and the logits are the plain model's, bit for bit, its greedy tokens transformers'.
TEST(NcclModel, OneRankGroupInsideTheDecoderGivesThePlainModel) {
  NEED_NCCL();
  for (const std::string family : {"qwen2", "mixtral"}) {
    const Fixture f = fixture(family);
    auto plain = models::load_causal_lm(fixture_dir(family), dev, DType::F32);
    auto ranked = models::load_causal_lm(fixture_dir(family), dev, DType::F32, group_[0]);
    const auto [want, want_seq] = run_greedy(*plain, f, dev);
    const auto [got, seq] = run_greedy(*ranked, f, dev);
    EXPECT_EQ(max_abs_diff(got, want), 0.0f) << family;
    EXPECT_EQ(seq, f.greedy) << family;
    EXPECT_EQ(want_seq, f.greedy) << family;
  }
  (void)comm;
}

// Two ranks on two GPUs (load_causal_lm_parallel: a thread each, NCCL between them): the one-GPU
// model's logits within 1e-4 and transformers' greedy tokens.
TEST(NcclTwoGpus, TensorParallelModelGivesTheOneGpuModel) {
  NEED_NCCL();
  NEED_SECOND_GPU();
  (void)comm;
  for (const std::string family : {"qwen2", "phi3", "mixtral"}) {
    const Fixture f = fixture(family);
    auto one = models::load_causal_lm(fixture_dir(family), dev, DType::F32);
    auto two = models::load_causal_lm_parallel(fixture_dir(family), {dev, dev1}, DType::F32);
    const auto [want, want_seq] = run_greedy(*one, f, dev);
    const auto [got, seq] = run_greedy(*two, f, dev);
    EXPECT_LT(max_abs_diff(got, want), 1e-4f) << family;  // as the CPU ranks (1.1e-5 seen there)
    EXPECT_EQ(seq, f.greedy) << family;
  }
}

namespace {

TEST(Nccl, OneRankCollectivesGiveTheInput) {
  NEED_NCCL();
  EXPECT_EQ(comm.rank(), 0u);
  EXPECT_EQ(comm.world_size(), 1u);
  EXPECT_EQ(comm.device(), dev);
  const Tensor x = rank_tensor(1, {3, 4}, dev);
  for (DType dt :
       {DType::F32, DType::F16, DType::I64, DType::BF16, DType::F64, DType::U8, DType::U32, DType::I32}) {
    const Tensor t = x.to_dtype(dt);
    const std::string name(dtype_name(dt));
    expect_same(comm.all_reduce_sum(t), t, "all_reduce_sum " + name);
    expect_same(comm.all_reduce_sum(t.t()), t.t(), "all_reduce_sum of a transposed " + name);
    expect_same(comm.all_reduce_sum(t.narrow(1, 1, 2)), t.narrow(1, 1, 2),
                "all_reduce_sum of a narrowed " + name);
    expect_same(comm.all_gather(t, 0), t, "all_gather dim 0 " + name);
    expect_same(comm.all_gather(t, 1), t, "all_gather dim 1 " + name);
    expect_same(comm.all_gather(t.t(), 1), t.t(), "all_gather dim 1 of a transposed " + name);
    expect_same(comm.broadcast(t, 0), t, "broadcast " + name);
    expect_same(comm.broadcast(t.t(), 0), t.t(), "broadcast of a transposed " + name);
  }
  // a 3-d tensor along its middle dim; dtypes NCCL lacks are gathered and broadcast as bytes
  const Tensor y = rank_tensor(2, {2, 3, 4}, dev);
  expect_same(comm.all_gather(y, 1), y, "all_gather of [2, 3, 4] along dim 1");
  expect_same(comm.all_gather(y, 2), y, "all_gather of [2, 3, 4] along dim 2");
  const Tensor y16 = rank_tensor(2, {2, 3, 4}, Device::cpu()).to_dtype(DType::I16).to_device(dev);
  expect_same(comm.all_gather(y16, 1), y16, "all_gather of i16");
  expect_same(comm.broadcast(y16, 0), y16, "broadcast of i16");
  // an empty tensor
  const Tensor e = Tensor::zeros({0, 3}, DType::F32, dev);
  expect_same(comm.all_reduce_sum(e), e, "all_reduce_sum of [0, 3]");
  EXPECT_EQ(comm.all_gather(e, 1).shape(), (Shape{0, 3}));
  // the output is a new tensor
  const Tensor s = comm.all_reduce_sum(x);
  EXPECT_NE(s.storage().get(), x.storage().get());
}

TEST(Nccl, OneRankErrorsAreTheCpuGroups) {
  NEED_NCCL();
  const Tensor x = rank_tensor(0, {3, 4}, dev);
  std::string msg = error_of([&] { comm.broadcast(x, 1); }, ErrorKind::InvalidArgument);
  EXPECT_NE(msg.find("Comm::broadcast: root 1 of a group of 1"), std::string::npos) << msg;
  msg = error_of([&] { comm.all_gather(x, 2); }, ErrorKind::DimOutOfRange);
  EXPECT_NE(msg.find("Comm::all_gather: dim 2 of a rank-2 tensor"), std::string::npos) << msg;
  const Tensor on_cpu = rank_tensor(0, {3, 4}, Device::cpu());
  msg = error_of([&] { comm.all_reduce_sum(on_cpu); }, ErrorKind::InvalidArgument);
  EXPECT_NE(msg.find("Comm::all_reduce_sum: rank 0: its tensor is on cpu, not cuda:0"), std::string::npos)
      << msg;
  msg = error_of([&] { comm.all_reduce_sum(x.to_device(Device::cpu()).to_dtype(DType::I16).to_device(dev)); },
                 ErrorKind::UnsupportedOp);
  EXPECT_NE(msg.find("i16"), std::string::npos) << msg;
  // the group still works after those errors
  expect_same(comm.all_reduce_sum(x), x, "all_reduce_sum after errors");
}

TEST(Nccl, OneRankThroughAnId) {
  NEED_NCCL();
  const std::string id = Comm::unique_id(DeviceKind::Cuda);
  ASSERT_EQ(id.size(), 256u);
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
  auto c = Comm::create(id, 0, 1, dev);
  EXPECT_EQ(c->rank(), 0u);
  EXPECT_EQ(c->world_size(), 1u);
  EXPECT_EQ(c->device(), dev);
  const Tensor x = rank_tensor(3, {5, 2}, dev);
  expect_same(c->all_reduce_sum(x), x, "all_reduce_sum of a created rank");
  expect_same(c->all_gather(x, 1), x, "all_gather of a created rank");
  (void)comm;
}

TEST(Nccl, MalformedIdsAndDuplicateDevicesAreRefused) {
  NEED_NCCL();
  std::string bad = std::string(255, 'a') + "g";
  std::string msg = error_of([&] { Comm::create(bad, 0, 1, dev); }, ErrorKind::InvalidArgument);
  EXPECT_EQ(msg.find(bad), std::string::npos) << "the id is not echoed: " << msg;
  EXPECT_NE(msg.find("character 255"), std::string::npos) << msg;
  error_of([&] { Comm::create(std::string(256, 'A'), 0, 1, dev); }, ErrorKind::InvalidArgument);
  msg = error_of([&] { Comm::create("abc", 0, 1, dev); }, ErrorKind::InvalidArgument);
  EXPECT_NE(msg.find("got 3 characters"), std::string::npos) << msg;
  error_of([&] { Comm::create(std::string(257, '0'), 0, 1, dev); }, ErrorKind::InvalidArgument);
  error_of([&] { Comm::create("", 0, 1, dev); }, ErrorKind::InvalidArgument);
  error_of([&] { Comm::create(std::string(256, '0'), 1, 1, dev); }, ErrorKind::InvalidArgument);
  msg = error_of([&] { Comm::create_group({dev, dev}); }, ErrorKind::InvalidArgument);
  EXPECT_NE(msg.find("cuda:0"), std::string::npos) << msg;
  error_of([&] { Comm::create_group({dev, Device::cpu()}); }, ErrorKind::InvalidArgument);
  (void)comm;
}

TEST(Nccl, AbortMakesLaterCallsFail) {
  NEED_NCCL();
  const Tensor x = rank_tensor(0, {4}, dev);
  expect_same(comm.all_reduce_sum(x), x, "before the abort");
  comm.abort("x");
  comm.abort("a second reason");  // harmless; the first reason stays
  for (const auto& call : std::vector<std::function<void()>>{
           [&] { comm.all_reduce_sum(x); }, [&] { comm.all_gather(x, 0); }, [&] { comm.broadcast(x, 0); }}) {
    const std::string msg = error_of(call, ErrorKind::Device);
    EXPECT_NE(msg.find("tensor-parallel group aborted: rank 0: x"), std::string::npos) << msg;
  }
  // the device itself still works
  EXPECT_EQ(host(x + x), (std::vector<double>{0, 1, 2, 3}));
}

TEST(NcclTwoGpus, TwoRanksOnTwoThreads) {
  NEED_NCCL();
  NEED_SECOND_GPU();
  (void)comm;
  auto comms = Comm::create_group({dev, dev1});
  ASSERT_EQ(comms.size(), 2u);
  const Device cpu = Device::cpu();
  std::vector<Tensor> sum(2), sum64(2), g0(2), g1(2), g3(2), b(2);
  auto errors = on_ranks(2, [&](size_t r) {
    Comm& c = *comms[r];
    EXPECT_EQ(c.rank(), r);
    EXPECT_EQ(c.world_size(), 2u);
    const Tensor t = rank_tensor(r, {2, 3}, c.device());
    for (int rep = 0; rep < 3; ++rep) sum[r] = c.all_reduce_sum(t);
    sum64[r] = c.all_reduce_sum(t.to_dtype(DType::I64).t());
    g0[r] = c.all_gather(t, 0);
    g1[r] = c.all_gather(t.t(), 1);  // a strided input
    g3[r] = c.all_gather(rank_tensor(r, {2, 3, 4}, c.device()), 1);
    b[r] = c.broadcast(t, 1);
    // read on the rank's thread: the collectives are queued, the read waits for them
    for (Tensor* out : {&sum[r], &sum64[r], &g0[r], &g1[r], &g3[r], &b[r]}) *out = out->to_device(cpu);
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  const Tensor t0 = rank_tensor(0, {2, 3}, cpu), t1 = rank_tensor(1, {2, 3}, cpu);
  for (size_t r = 0; r < 2; ++r) {
    const std::string rank = "rank " + std::to_string(r);
    expect_same(sum[r], t0 + t1, "all_reduce_sum, " + rank);
    expect_same(sum64[r], (t0.to_dtype(DType::I64) + t1.to_dtype(DType::I64)).t(),
                "i64 all_reduce_sum, " + rank);
    expect_same(g0[r], Tensor::cat({t0, t1}, 0), "all_gather dim 0, " + rank);
    expect_same(g1[r], Tensor::cat({t0.t(), t1.t()}, 1), "all_gather dim 1, " + rank);
    expect_same(g3[r], Tensor::cat({rank_tensor(0, {2, 3, 4}, cpu), rank_tensor(1, {2, 3, 4}, cpu)}, 1),
                "all_gather dim 1 of [2, 3, 4], " + rank);
    expect_same(b[r], t1, "broadcast from rank 1, " + rank);
  }
  // rank 1 stops: rank 0's next call names why
  comms[1]->abort("the model failed to load");
  const std::string msg =
      error_of([&] { comms[0]->all_reduce_sum(rank_tensor(0, {2}, dev)); }, ErrorKind::Device);
  EXPECT_NE(msg.find("rank 1: the model failed to load"), std::string::npos) << msg;
}

// The backend's ordinary ops driven from two threads on two devices at once: each thread's first
// call is an in-place copy (no allocation before it makes its device current), then matmuls,
// softmax and reductions, compared with the CPU.
Tensor ops_step(const Tensor& x, const Tensor& w) {
  const Tensor h = x.matmul(w);
  return (nn::ops::softmax(h, 1) * h + h.silu()).sum_keepdim(1);
}

TEST(NcclTwoGpus, OrdinaryOpsFromTwoThreadsOnTwoDevices) {
  NEED_CUDA_DEVICE();
  NEED_SECOND_GPU();
  Device cpu = Device::cpu();
  const std::vector<Device> devs{dev, dev1};
  cpu.set_seed(7);
  const Tensor w = Tensor::randn(0.f, 0.5f, {32, 16}, cpu), src = Tensor::randn(0.f, 1.f, {32, 8}, cpu);
  const Tensor want = ops_step(src.t(), w);
  std::vector<Tensor> dst, srcs, ws;
  for (const Device& d : devs) {
    dst.push_back(Tensor::zeros({8, 32}, DType::F32, d));
    srcs.push_back(src.to_device(d));
    ws.push_back(w.to_device(d));
  }
  std::vector<Tensor> got(2);
  auto errors = on_ranks(2, [&](size_t r) {
    dst[r].slice_set(srcs[r].t(), 0, 0);  // the thread's first call: a strided copy kernel
    for (int rep = 0; rep < 20; ++rep) got[r] = ops_step(dst[r], ws[r]);
    got[r] = got[r].to_device(Device::cpu());
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  for (size_t r = 0; r < 2; ++r) {
    ASSERT_EQ(got[r].shape(), want.shape());
    const auto g = host(got[r]), h = host(want);
    for (size_t i = 0; i < g.size(); ++i)
      EXPECT_NEAR(g[i], h[i], 1e-4) << devs[r].to_string() << " row " << i;
  }
}

}  // namespace
}  // namespace candle
