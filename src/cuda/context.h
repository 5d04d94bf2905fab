// The CUDA device context: the device, its one stream, the caching allocator, pinned staging
// buffers, the cuBLAS handle and the index-fault word. Only host code (no kernels) uses it.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "candle/device.h"

struct cublasContext;

namespace candle::cuda_backend {

// Throws Error(Device) "cuda: <what>: <CUDA's message>" when e is not cudaSuccess.
void check(cudaError_t e, const char* what);
[[noreturn]] void fail(const std::string& msg);

class Context;

// A device allocation of `bytes` (its size class); given back to the context's cache when the
// last reference goes.
// The blocks a CUDA graph's captured work uses (cuda::Graph): a replay writes them again, so while
// the graph lives they never go back to the shared cache. Blocks released during the capture are
// reused by the capture's later allocations (stream order holds inside the graph too).
struct GraphPool {
  Context* ctx = nullptr;
  std::multimap<size_t, void*> free;
  ~GraphPool();  // the held blocks go back to the context's cache
};

struct Block {
  void* ptr = nullptr;
  size_t bytes = 0;
  Context* ctx = nullptr;
  std::weak_ptr<GraphPool> pool;  // set for the blocks of a graph's capture
  ~Block();
};
using BlockPtr = std::shared_ptr<Block>;

struct Counters {
  std::atomic<uint64_t> launches{0}, allocations{0}, cache_hits{0}, live_bytes{0}, cached_bytes{0},
      uploaded{0}, downloaded{0};
};
Counters& counters();

// Makes `ordinal` the calling thread's current device for its lifetime.
class DeviceGuard {
 public:
  explicit DeviceGuard(int ordinal);
};

// The ops that write the activations they make quantized too (ActsQ8, storage.h), in the order of
// their names in CANDLE_CUDA_FUSE_QUANT (kActsProducerNames[p - 1] names producer p).
enum class ActsProducer : uint64_t { RmsNorm = 1, AddRmsNorm, SiluMul, Attention };
inline constexpr const char* kActsProducerNames[] = {"rms_norm", "add_rms_norm", "silu_mul", "attention"};

class Context {
 public:
  // Opens device `ordinal`: throws Error(Device) when the driver is missing, there is no such
  // device, or it cannot be initialised.
  static std::shared_ptr<Context> open(size_t ordinal);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int ordinal() const { return ordinal_; }
  const std::string& name() const { return name_; }
  // The stream, with this device made the calling thread's current one first: a kernel launched
  // into another device's stream fails, and a thread may have made another device current since
  // (ops on two devices, a rank's thread in tensor parallelism, a freed block of another device).
  // Every launch takes its stream here.
  cudaStream_t stream() const {
    make_current();
    return stream_;
  }
  // Makes this device the calling thread's current one (cudaSetDevice when it is not); an error is
  // left to the call that follows to report.
  void make_current() const noexcept;
  // SM count, compute capability (major * 10 + minor).
  int sm_count() const { return sm_count_; }
  int compute_capability() const { return cc_; }

  // Device memory of at least `bytes` (rounded to a size class), from the cache when one is free.
  // Out of memory: the cache is emptied and the allocation retried, then Error(Device) names the
  // size and what is free.
  BlockPtr alloc(size_t bytes);
  void release(void* ptr, size_t bytes);  // Block's destructor

  // Stream capture for cuda::Graph: between begin_capture and end_capture the stream records
  // instead of running, allocations come from the cache into `pool` (a miss takes a plain
  // cudaMalloc: a stream-ordered allocation cannot be recorded), and copies to or from the host
  // and synchronisation are errors naming the op.
  void begin_capture(std::shared_ptr<GraphPool> pool);
  cudaGraph_t end_capture();  // nullptr when the capture failed
  bool capturing() const { return capture_on_.load(std::memory_order_relaxed); }
  std::mutex& pool_mutex() { return mu_; }  // guards GraphPool::free too
  // Throws Error(Device) naming `op` while a capture is in progress.
  void check_not_capturing(const char* op) const;
  // Frees every cached block.
  void empty_cache();

  // Host <-> device copies through pinned staging buffers (large copies are pipelined).
  void upload(void* dst, const void* src, size_t bytes);
  void download(void* dst, const void* src, size_t bytes);

  // Waits for the stream, then throws the first index fault a kernel reported, if any.
  void synchronize();
  DeviceMemory memory() const;

  // The cuBLAS handle bound to the stream (created on first use).
  cublasContext* cublas();

  // Index checks of the indexing kernels: a kernel that meets an out-of-range id writes
  // {tag, position, id low, id high} into the fault words once (atomicCAS on word 0 from 0) and
  // skips the element; the next synchronize() or download throws Error(IndexOutOfRange) naming
  // the op, the dim, its size and the operand's shape registered under that tag.
  struct IdCheck {
    uint32_t tag;
    uint32_t* fault;  // device-visible pointer to the 4 fault words
  };
  IdCheck register_id_check(const char* op, size_t dim, size_t limit, const std::string& shape);
  // The same for a count read by a kernel (attention's key count): a kernel that finds it outside
  // [lo, hi] writes {tag, 0, count, 0} and clamps it; the error (InvalidArgument) names `op`.
  IdCheck register_count_check(const char* op, size_t lo, size_t hi, const std::string& what);

  // cuda_k::kAttnCounters zeroed words for the attention's splits to count themselves in (each
  // launch leaves them zeroed; stream order keeps launches apart).
  uint32_t* attention_counters() const { return attn_counters_; }

  // The quantized activation forms (bit 0: blocks of 32, bit 1: blocks of 256) that quantized
  // matmuls have taken of the outputs of a producer of activations (ActsQ8, storage.h: a key for
  // the op and its row length), learnt at their first use: the producer then writes its outputs in
  // those forms too, so that the matmul after it needs no quantization launch. 0 for a producer
  // whose outputs no quantized matmul has taken. CANDLE_CUDA_FUSE_QUANT=0: always 0; a comma list
  // of producers (kActsProducerNames): only those. `producer`: the ActsProducer in the top 16 bits.
  unsigned acts_q8_forms(uint64_t producer) const;
  void acts_q8_taken(uint64_t producer, size_t group);

  // Counts one kernel launch (cuda::stats().launches) and throws on a launch error.
  void launched(cudaError_t e, const char* kernel);

 private:
  Context() = default;
  void throw_fault();
  void* raw_alloc(size_t bytes);

  int ordinal_ = 0;
  std::string name_;
  int sm_count_ = 0, cc_ = 0;
  cudaStream_t stream_ = nullptr;

  std::mutex mu_;  // the allocator's cache
  std::multimap<size_t, void*> free_;
  std::shared_ptr<GraphPool> capturing_;  // the capture in progress (one at a time)
  std::atomic<bool> capture_on_{false};
  std::unordered_set<void*> sync_blocks_;  // blocks from cudaMalloc (made during a capture)
  size_t cache_limit_ = 0;

  std::mutex copy_mu_;  // the staging buffers
  void* staging_[2] = {nullptr, nullptr};
  cudaEvent_t staged_[2] = {nullptr, nullptr};

  std::mutex blas_mu_;
  cublasContext* cublas_ = nullptr;
  void* blas_ws_ = nullptr;
  size_t blas_ws_bytes_ = 0;

  std::mutex fault_mu_;
  uint32_t* fault_host_ = nullptr;  // pinned, mapped
  uint32_t* fault_dev_ = nullptr;
  uint32_t* attn_counters_ = nullptr;
  unsigned fuse_producers_ = ~0u;  // bit p: producer p writes quantized forms
  mutable std::mutex acts_mu_;
  std::map<uint64_t, unsigned> acts_q8_forms_;
  uint32_t next_tag_ = 1;
  struct Check {
    std::string op, shape;
    size_t dim, limit;
    bool count = false;  // a count check: dim..limit is the allowed range, shape what is counted
    bool keep = false;   // registered while a graph was captured: its replays may report it
  };
  IdCheck add_check(Check c);
  std::map<uint32_t, Check> checks_;
};

// Size classes: multiples of 512 bytes up to 1 MiB, then quarter steps between powers of two.
size_t size_class(size_t bytes);

bool env_flag(const char* name);
// The variable is set to "0" (an opt-out).
bool env_flag_off(const char* name);

}  // namespace candle::cuda_backend
