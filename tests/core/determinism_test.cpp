// Every op's bytes are identical for 1 thread and for N threads (DESIGN.md section 5).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <set>
#include <string>

#include "candle/candle.h"
#include "test_util.h"

using namespace candle;

namespace {

using test_util::bytes_of;

struct ThreadCountGuard {
  ~ThreadCountGuard() { set_num_threads(0); }
};

}  // namespace

TEST(Determinism, EveryOpSameBytesForAnyThreadCount) {
  ThreadCountGuard guard;
  Device dev = Device::cpu();
  dev.set_seed(7);
  // Big enough that every kernel splits its work (> 32K elements per op).
  Tensor a = Tensor::randn(0.f, 1.f, {384, 520}, dev);
  Tensor b = Tensor::randn(0.f, 1.f, {384, 520}, dev);
  Tensor row = Tensor::randn(0.f, 1.f, {1, 520}, dev);
  Tensor ids = Tensor::arange<int64_t>(0, 384, dev).flip({0});
  Tensor small_ids = Tensor::from_vec(std::vector<uint32_t>{3, 1, 3, 0, 7}, {5}, dev);
  Tensor m1 = Tensor::randn(0.f, 1.f, {4, 130, 257}, dev);
  Tensor m2 = Tensor::randn(0.f, 1.f, {4, 257, 190}, dev);

  std::vector<std::pair<const char*, std::function<Tensor()>>> ops = {
      {"exp", [&] { return a.exp(); }},
      {"gelu", [&] { return a.gelu(); }},
      {"silu", [&] { return a.silu(); }},
      {"tanh", [&] { return a.tanh(); }},
      {"affine", [&] { return a.affine(1.5, 0.25); }},
      {"add", [&] { return a + b; }},
      {"broadcast_mul", [&] { return a.broadcast_mul(row); }},
      {"maximum", [&] { return a.maximum(b); }},
      {"lt", [&] { return a.lt(b); }},
      {"where_cond", [&] { return a.lt(b).where_cond(a, b); }},
      {"sum_last", [&] { return a.sum_keepdim(-1); }},
      {"sum_first", [&] { return a.sum_keepdim(0); }},
      {"sum_all", [&] { return a.sum_all(); }},
      {"mean_all", [&] { return a.mean_all(); }},
      {"max_last", [&] { return a.max_keepdim(-1); }},
      {"argmax", [&] { return a.argmax_keepdim(0); }},
      {"log_sum_exp", [&] { return a.log_sum_exp(-1); }},
      {"var", [&] { return a.var_keepdim(-1); }},
      {"cumsum", [&] { return a.cumsum(-1); }},
      {"norm", [&] { return a.norm(); }},
      {"sort", [&] { return a.arg_sort_last_dim(true); }},
      {"matmul", [&] { return m1.matmul(m2); }},
      {"matmul_t", [&] { return a.matmul(b.t()); }},
      {"matmul_bf16", [&] { return m1.to_dtype(DType::BF16).matmul(m2.to_dtype(DType::BF16)); }},
      {"transpose_contiguous", [&] { return a.t().contiguous(); }},
      {"cat",
       [&] {
         return Tensor::cat({a, b}, 1);
       }},
      {"pad", [&] { return a.pad_with_zeros(0, 3, 5); }},
      {"flip",
       [&] {
         return a.flip({0, 1});
       }},
      {"to_f16", [&] { return a.to_dtype(DType::F16); }},
      {"index_select", [&] { return a.index_select(ids, 0); }},
      {"gather", [&] { return a.gather(a.argmax_keepdim(1), 1); }},
      {"index_add", [&] { return a.index_add(small_ids, b.narrow(1, 0, 5), 1); }},
      {"scatter_add",
       [&] {
         return Tensor::zeros({8, 520}, DType::F32, dev)
             .scatter_add(small_ids.to_dtype(DType::I64).unsqueeze(1).broadcast_as({5, 520}).contiguous(),
                          a.narrow(0, 0, 5), 0);
       }},
  };
  for (auto& [name, fn] : ops) {
    set_num_threads(1);
    auto one = bytes_of(fn());
    for (size_t n : {2, 3, 5}) {
      set_num_threads(n);
      EXPECT_EQ(bytes_of(fn()), one) << name << " differs between 1 and " << n << " threads";
    }
  }
}

// Loops of different widths keep the pool's threads: libgomp ends the threads that a smaller team
// leaves out and starts new ones for the next larger team, so narrow and wide loops in turn used
// to start threads on every wide loop (a pthread_create, its stack and TLS each); every parallel
// loop now starts the whole team. Elementwise ops split into chunks of 32K elements, so the
// narrow op runs 2 chunks and the wide one 8.
TEST(ThreadPool, LoopsOfDifferentWidthsKeepTheSameThreads) {
  namespace fs = std::filesystem;
  if (!fs::exists("/proc/self/task")) GTEST_SKIP() << "needs /proc/self/task (Linux)";
  ThreadCountGuard guard;
  set_num_threads(8);
  Device dev = Device::cpu();
  const Tensor narrow = Tensor::ones({size_t{2} * 32 * 1024}, DType::F32, dev);
  const Tensor wide = Tensor::ones({size_t{8} * 32 * 1024}, DType::F32, dev);
  auto threads = [] {
    std::set<std::string> t;
    for (const auto& e : fs::directory_iterator("/proc/self/task")) t.insert(e.path().filename().string());
    return t;
  };
  (void)(wide + wide);  // the team exists
  const std::set<std::string> before = threads();
  std::set<std::string> seen = before;
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ((narrow + narrow).sum_all().to_scalar<float>(), 2.0f * float(narrow.elem_count()));
    EXPECT_EQ((wide + wide).sum_all().to_scalar<float>(), 2.0f * float(wide.elem_count()));
    const std::set<std::string> now = threads();
    seen.insert(now.begin(), now.end());
  }
  EXPECT_EQ(seen.size(), before.size()) << "threads were started (and ended) between the loops";
}
