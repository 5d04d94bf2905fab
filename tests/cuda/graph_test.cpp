// cuda::Graph: work recorded once and replayed; new inputs written in place give new outputs, the
// recorded run's memory is held while the graph lives, and host copies inside the work are errors.
#include "candle/graph.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <vector>

#include "candle/cuda.h"
#include "candle/nn/ops.h"
#include "cuda_device.h"

namespace candle {
namespace {

// a small step of the kinds an LLM decode is made of: matmul (cuBLAS), softmax, element-wise ops,
// a reduction
Tensor step(const Tensor& x, const Tensor& w) {
  Tensor h = x.matmul(w);
  Tensor p = nn::ops::softmax_last_dim(h);
  return (p * 3.0 + h.silu()).sum_keepdim(1);
}

std::vector<float> host(const Tensor& t) { return t.to_device(Device::cpu()).flatten_to_vec<float>(); }

// a weight [k, n] (std 0.5) and an input [m, k] (std 1) drawn on the CPU from `seed`, on dev
std::pair<Tensor, Tensor> weight_and_input(const Device& dev, uint64_t seed, size_t m, size_t k, size_t n) {
  Device cpu = Device::cpu();
  cpu.set_seed(seed);
  Tensor w = Tensor::randn(0.f, 0.5f, {k, n}, cpu).to_device(dev);
  return {w, Tensor::randn(0.f, 1.f, {m, k}, cpu).to_device(dev)};
}

TEST(CudaGraph, ReplaysGiveTheResultsOfTheNewInputs) {
  NEED_CUDA_DEVICE();
  Device cpu = Device::cpu();
  auto [w, x] = weight_and_input(dev, 1, 4, 64, 48);
  Tensor out;
  int runs = 0, recording = 0;
  EXPECT_FALSE(Graph::recording());
  cuda::Graph g = cuda::Graph::capture(dev, [&] {
    ++runs;
    recording += Graph::recording() ? 1 : 0;
    out = step(x, w);
  });
  EXPECT_EQ(recording, runs) << "Graph::recording() inside every run of the work the capture makes";
  EXPECT_FALSE(Graph::recording());
  EXPECT_GE(g.nodes(), 4u);
  for (int r = 0; r < 3; ++r) {
    Tensor next = Tensor::randn(0.f, 1.f, {4, 64}, cpu);
    x.slice_set(next.to_device(dev), 0, 0);  // in place: the graph reads x's memory
    const uint64_t launches = cuda::stats().launches;
    g.replay();
    EXPECT_EQ(cuda::stats().launches - launches, 1u) << "one launch per replay";
    const std::vector<float> got = host(out), want = host(step(next.to_device(dev), w));
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_FLOAT_EQ(got[i], want[i]) << "replay " << r << " row " << i;
  }
}

// Programmatic dependent launch (CANDLE_CUDA_PDL=1, sm_90+): the edges into this library's kernels
// let them launch early and wait inside; the replays give the eager results bit for bit, replay
// after replay (a kernel that read its inputs before waiting would race and differ).
TEST(CudaGraph, ProgrammaticEdgesGiveTheSameResults) {
  NEED_CUDA_DEVICE();
  auto [w, x] = weight_and_input(dev, 3, 64, 256, 192);
  // a chain of our own kernels (element-wise, row ops, reductions) around a cuBLAS matmul
  auto chain = [&] {
    Tensor h = nn::ops::rms_norm(x, Tensor::ones({256}, DType::F32, dev), 1e-5f);
    for (int i = 0; i < 6; ++i) h = (h * 1.01 + 0.5).silu();
    return step(h, w) + nn::ops::softmax_last_dim(h).sum_keepdim(1);
  };
  const std::vector<float> want = host(chain());
  for (const char* pdl : {"0", "1"}) {
    ::setenv("CANDLE_CUDA_PDL", pdl, 1);
    Tensor out;
    cuda::Graph g = cuda::Graph::capture(dev, [&] { out = chain(); });
    ::unsetenv("CANDLE_CUDA_PDL");
    if (pdl[0] == '1' && cuda::compute_capability(dev) >= 90)
      EXPECT_GE(g.programmatic_edges(), 10u) << "the kernel-to-kernel edges of the chain";
    else
      EXPECT_EQ(g.programmatic_edges(), 0u);
    for (int r = 0; r < 20; ++r) {
      g.replay();
      ASSERT_EQ(host(out), want) << "CANDLE_CUDA_PDL=" << pdl << " replay " << r;
    }
  }
}

TEST(CudaGraph, TheRecordedRunsMemoryIsHeldUntilTheGraphGoes) {
  NEED_CUDA_DEVICE();
  Tensor x = Tensor::ones({256, 256}, DType::F32, dev);
  std::vector<float> want;
  {
    Tensor out;
    cuda::Graph g = cuda::Graph::capture(dev, [&] { out = (x * 2.0).exp() + 1.0; });
    g.replay();  // the recorded run only recorded: its outputs are written by the replays
    want = host(out);
    EXPECT_FLOAT_EQ(want[0], std::exp(2.0f) + 1.0f);
    // the output's block stays with the graph: tensors of the same size made now get other
    // memory, and a replay (which writes the graph's blocks) leaves them alone
    out = Tensor();
    Tensor other = x * 5.0;
    Tensor other2 = x * 7.0;
    g.replay();
    EXPECT_EQ(host(other), std::vector<float>(256 * 256, 5.0f));
    EXPECT_EQ(host(other2), std::vector<float>(256 * 256, 7.0f));
  }
  // the graph is gone: its blocks are cached again and new work runs as before
  EXPECT_EQ(host((x * 2.0).exp() + 1.0), want);
}

TEST(CudaGraph, HostCopiesInsideTheWorkAreErrorsAndTheDeviceStillWorks) {
  NEED_CUDA_DEVICE();
  Tensor x = Tensor::ones({16}, DType::F32, dev);
  try {
    cuda::Graph::capture(dev, [&] { (void)(x + 1.0).to_vec1<float>(); });
    FAIL() << "a download inside the captured work was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Device);
    EXPECT_NE(std::string(e.what()).find("graph"), std::string::npos) << e.what();
  }
  // not capturing any more: ordinary work and copies run
  EXPECT_EQ((x + 1.0).to_vec1<float>(), std::vector<float>(16, 2.0f));
}

TEST(CudaGraph, CaptureNeedsACudaDevice) {
  try {
    cuda::Graph::capture(Device::cpu(), [] {});
    FAIL() << "captured on the CPU";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Device);
    EXPECT_NE(std::string(e.what()).find("CUDA device"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace candle
