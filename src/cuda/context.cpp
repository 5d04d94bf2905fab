// The CUDA context: device opening, the caching allocator, staged copies, faults, cuBLAS.
#include "context.h"

#include <cublas_v2.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>

#include "candle/error.h"
#include "launch_nn.h"

namespace candle::cuda_backend {

void fail(const std::string& msg) { throw Error(ErrorKind::Device, "cuda: " + msg); }

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error
  fail(std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

bool env_flag_off(const char* name) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, "0") == 0;
}

Counters& counters() {
  static Counters c;
  return c;
}

DeviceGuard::DeviceGuard(int ordinal) {
  int cur = -1;
  if (cudaGetDevice(&cur) != cudaSuccess || cur != ordinal) check(cudaSetDevice(ordinal), "cudaSetDevice");
}

void Context::make_current() const noexcept {
  int cur = -1;
  if (cudaGetDevice(&cur) == cudaSuccess && cur == ordinal_) return;
  if (cudaSetDevice(ordinal_) != cudaSuccess) cudaGetLastError();
}

size_t size_class(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  if (bytes <= (size_t(1) << 20)) return (bytes + 511) / 512 * 512;
  size_t p = size_t(1) << (63 - __builtin_clzll(bytes));  // largest power of two <= bytes
  size_t step = p / 4;
  return (bytes + step - 1) / step * step;
}

Block::~Block() {
  if (!ptr || !ctx) return;
  if (auto p = pool.lock()) {
    // a block of a live graph: held for its replays (and for the rest of its capture)
    std::lock_guard lock(ctx->pool_mutex());
    counters().live_bytes -= bytes;
    counters().cached_bytes += bytes;
    p->free.emplace(bytes, ptr);
    return;
  }
  ctx->release(ptr, bytes);
}

namespace {

constexpr size_t kStagingBytes = size_t(8) << 20;
constexpr size_t kDirectCopyBytes = size_t(256) << 10;

std::string mib(uint64_t b) { return std::to_string((b + (1 << 19)) >> 20) + " MiB"; }

}  // namespace

std::shared_ptr<Context> Context::open(size_t ordinal) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice || e == cudaErrorInitializationError) {
    cudaGetLastError();
    fail(std::string("no usable CUDA driver or device (") + cudaGetErrorString(e) +
         "): Device::cuda needs the NVIDIA driver (libcuda.so.1) and a GPU");
  }
  check(e, "cudaGetDeviceCount");
  if (ordinal >= static_cast<size_t>(count))
    fail("no device cuda:" + std::to_string(ordinal) + " (" + std::to_string(count) + " CUDA device" +
         (count == 1 ? "" : "s") + " present)");
  std::shared_ptr<Context> c(new Context());
  c->ordinal_ = static_cast<int>(ordinal);
  DeviceGuard g(c->ordinal_);
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, c->ordinal_), "cudaGetDeviceProperties");
  c->name_ = prop.name;
  c->sm_count_ = prop.multiProcessorCount;
  c->cc_ = prop.major * 10 + prop.minor;
  check(cudaStreamCreateWithFlags(&c->stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  for (int i = 0; i < 2; ++i) {
    check(cudaMallocHost(&c->staging_[i], kStagingBytes), "cudaMallocHost (staging buffer)");
    check(cudaEventCreateWithFlags(&c->staged_[i], cudaEventDisableTiming), "cudaEventCreate");
  }
  check(cudaHostAlloc(reinterpret_cast<void**>(&c->fault_host_), 64, cudaHostAllocMapped), "cudaHostAlloc");
  std::memset(c->fault_host_, 0, 64);
  check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&c->fault_dev_), c->fault_host_, 0),
        "cudaHostGetDevicePointer");
  const size_t counter_bytes = sizeof(uint32_t) * cuda_k::kAttnCounters;
  check(cudaMalloc(reinterpret_cast<void**>(&c->attn_counters_), counter_bytes),
        "cudaMalloc (attention counters)");
  check(cudaMemset(c->attn_counters_, 0, counter_bytes), "cudaMemset (attention counters)");
  if (const char* v = std::getenv("CANDLE_CUDA_FUSE_QUANT")) {
    // "0": none; else the producers named (bit p for ActsProducer p)
    const std::string list = std::string(",") + v + ",";
    c->fuse_producers_ = 0;
    for (unsigned i = 0; i < std::size(kActsProducerNames); ++i)
      if (list.find(std::string(",") + kActsProducerNames[i] + ",") != std::string::npos)
        c->fuse_producers_ |= 2u << i;
    if (std::strcmp(v, "0") != 0 && c->fuse_producers_ == 0)
      std::fprintf(stderr,
                   "candle: CANDLE_CUDA_FUSE_QUANT=%s names no producer (rms_norm, add_rms_norm, silu_mul, "
                   "attention): none fuses\n",
                   v);
  }
  size_t free_b = 0, total_b = 0;
  check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  c->cache_limit_ = total_b / 2;
  if (const char* v = std::getenv("CANDLE_CUDA_CACHE_LIMIT_MB")) {
    char* end = nullptr;
    unsigned long long mb = std::strtoull(v, &end, 10);
    if (!end || *end != '\0' || end == v)
      throw Error(ErrorKind::InvalidArgument,
                  std::string("CANDLE_CUDA_CACHE_LIMIT_MB must be a number of MiB, got '") + v + "'");
    c->cache_limit_ = static_cast<size_t>(mb) << 20;
  }
  return c;
}

Context::~Context() {
  // The process may be exiting with the driver already torn down: errors are ignored here.
  cudaSetDevice(ordinal_);
  cudaStreamSynchronize(stream_);
  if (cublas_) cublasDestroy(cublas_);
  if (blas_ws_) cudaFree(blas_ws_);
  for (auto& [bytes, p] : free_) cudaFree(p);
  for (int i = 0; i < 2; ++i) {
    if (staging_[i]) cudaFreeHost(staging_[i]);
    if (staged_[i]) cudaEventDestroy(staged_[i]);
  }
  if (fault_host_) cudaFreeHost(fault_host_);
  if (attn_counters_) cudaFree(attn_counters_);
  if (stream_) cudaStreamDestroy(stream_);
}

void* Context::raw_alloc(size_t bytes) {
  void* p = nullptr;
  cudaError_t e = cudaMallocAsync(&p, bytes, stream_);
  if (e == cudaSuccess) return p;
  cudaGetLastError();
  if (e != cudaErrorMemoryAllocation) check(e, "cudaMallocAsync");
  return nullptr;
}

BlockPtr Context::alloc(size_t bytes) {
  const size_t cls = size_class(bytes);
  DeviceGuard g(ordinal_);
  auto& cnt = counters();
  void* p = nullptr;
  std::shared_ptr<GraphPool> pool;
  {
    std::lock_guard lock(mu_);
    pool = capturing_;
    // a capture takes its own released blocks first, then the shared cache's
    for (auto* list : {pool ? &pool->free : nullptr, &free_}) {
      if (!list) continue;
      auto it = list->find(cls);
      if (it == list->end()) continue;
      p = it->second;
      list->erase(it);
      cnt.cached_bytes -= cls;
      cnt.cache_hits++;
      break;
    }
  }
  if (!p && pool) {
    // a capture cannot record a stream-ordered allocation: a plain cudaMalloc (legal in a relaxed
    // capture), remembered so that it is given back with cudaFree
    if (cudaMalloc(&p, cls) != cudaSuccess) {
      cudaGetLastError();
      throw Error(ErrorKind::Device,
                  "cuda: out of memory allocating " + mib(cls) + " while capturing a CUDA graph");
    }
    std::lock_guard lock(mu_);
    sync_blocks_.insert(p);
    cnt.allocations++;
  }
  if (!p) {
    p = raw_alloc(cls);
    if (!p) {
      empty_cache();
      p = raw_alloc(cls);
    }
    if (!p) {
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      throw Error(ErrorKind::Device, "cuda: out of memory allocating " + mib(cls) + " (" +
                                         std::to_string(cls) + " bytes) on cuda:" + std::to_string(ordinal_) +
                                         " (" + name_ + "): " + mib(free_b) + " free of " + mib(total_b) +
                                         ", " + mib(counters().live_bytes) + " held by candle's tensors");
    }
    cnt.allocations++;
  }
  cnt.live_bytes += cls;
  auto b = std::make_shared<Block>();
  b->ptr = p;
  b->bytes = cls;
  b->ctx = this;
  b->pool = pool;
  return b;
}

GraphPool::~GraphPool() {
  for (auto& [bytes, p] : free) {
    counters().cached_bytes -= bytes;  // release() counts them again
    counters().live_bytes += bytes;
    ctx->release(p, bytes);
  }
}

void Context::begin_capture(std::shared_ptr<GraphPool> pool) {
  DeviceGuard g(ordinal_);
  {
    std::lock_guard lock(mu_);
    if (capturing_)
      throw Error(ErrorKind::Device, "cuda: a CUDA graph is already being captured on this device");
    capturing_ = std::move(pool);
    capture_on_ = true;
  }
  const cudaError_t e = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed);
  if (e != cudaSuccess) {
    {
      std::lock_guard lock(mu_);
      capturing_.reset();
      capture_on_ = false;
    }
    check(e, "cudaStreamBeginCapture");
  }
}

cudaGraph_t Context::end_capture() {
  DeviceGuard g(ordinal_);
  cudaGraph_t graph = nullptr;
  const cudaError_t e = cudaStreamEndCapture(stream_, &graph);
  {
    std::lock_guard lock(mu_);
    capturing_.reset();
    capture_on_ = false;
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (graph) cudaGraphDestroy(graph);
    return nullptr;
  }
  return graph;
}

void Context::check_not_capturing(const char* op) const {
  if (capturing())
    throw Error(ErrorKind::Device,
                std::string("cuda: ") + op +
                    " while a CUDA graph is being captured (the captured work must stay on the "
                    "device: no copies to or from the host, no synchronisation)");
}

// Stream-ordered reuse: every kernel runs on the one stream, so a block freed here may be handed
// to the next allocation at once (its next use is queued after the last use of its old tensor).
void Context::release(void* ptr, size_t bytes) {
  auto& cnt = counters();
  cnt.live_bytes -= bytes;
  std::lock_guard lock(mu_);
  // (never a stream-ordered free while a graph is captured: it would be recorded into the graph)
  if (cnt.cached_bytes + bytes > cache_limit_ && !capturing()) {
    // over the limit: the oldest-size-first eviction is not worth it; give this one back
    cudaSetDevice(ordinal_);
    if (sync_blocks_.erase(ptr))
      cudaFree(ptr);  // (waits for the device)
    else
      cudaFreeAsync(ptr, stream_);
    return;
  }
  free_.emplace(bytes, ptr);
  cnt.cached_bytes += bytes;
}

void Context::empty_cache() {
  DeviceGuard g(ordinal_);
  std::lock_guard lock(mu_);
  std::vector<void*> sync_freed;
  for (auto& [bytes, p] : free_) {
    if (sync_blocks_.erase(p))
      sync_freed.push_back(p);
    else
      cudaFreeAsync(p, stream_);
    counters().cached_bytes -= bytes;
  }
  free_.clear();
  cudaStreamSynchronize(stream_);
  for (void* p : sync_freed) cudaFree(p);
  // give the pool's memory back to the driver too
  cudaMemPool_t pool;
  if (cudaDeviceGetDefaultMemPool(&pool, ordinal_) == cudaSuccess) cudaMemPoolTrimTo(pool, 0);
  cudaGetLastError();
}

void Context::upload(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  check_not_capturing("a copy to the device");
  DeviceGuard g(ordinal_);
  counters().uploaded += bytes;
  if (bytes <= kDirectCopyBytes) {
    // pageable source: the driver stages it before the call returns
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync (upload)");
    return;
  }
  std::lock_guard lock(copy_mu_);
  auto* d = static_cast<char*>(dst);
  auto* s = static_cast<const char*>(src);
  for (size_t off = 0, i = 0; off < bytes; off += kStagingBytes, i ^= 1) {
    const size_t len = std::min(kStagingBytes, bytes - off);
    check(cudaEventSynchronize(staged_[i]), "cudaEventSynchronize");  // the buffer's last copy is done
    std::memcpy(staging_[i], s + off, len);
    check(cudaMemcpyAsync(d + off, staging_[i], len, cudaMemcpyHostToDevice, stream_),
          "cudaMemcpyAsync (upload)");
    check(cudaEventRecord(staged_[i], stream_), "cudaEventRecord");
  }
}

void Context::download(void* dst, const void* src, size_t bytes) {
  check_not_capturing("a copy to the host");
  DeviceGuard g(ordinal_);
  if (bytes == 0) {
    synchronize();
    return;
  }
  counters().downloaded += bytes;
  if (bytes <= kDirectCopyBytes) {
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync (download)");
    synchronize();
    return;
  }
  std::lock_guard lock(copy_mu_);
  auto* d = static_cast<char*>(dst);
  auto* s = static_cast<const char*>(src);
  // chunk i + 1 is copied by the GPU while the host copies chunk i out of its buffer
  const size_t chunks = (bytes + kStagingBytes - 1) / kStagingBytes;
  auto issue = [&](size_t c) {
    const size_t off = c * kStagingBytes, len = std::min(kStagingBytes, bytes - off);
    check(cudaMemcpyAsync(staging_[c & 1], s + off, len, cudaMemcpyDeviceToHost, stream_),
          "cudaMemcpyAsync (download)");
    check(cudaEventRecord(staged_[c & 1], stream_), "cudaEventRecord");
  };
  issue(0);
  for (size_t c = 0; c < chunks; ++c) {
    if (c + 1 < chunks) issue(c + 1);
    check(cudaEventSynchronize(staged_[c & 1]), "cudaEventSynchronize (download)");
    const size_t off = c * kStagingBytes, len = std::min(kStagingBytes, bytes - off);
    std::memcpy(d + off, staging_[c & 1], len);
  }
  synchronize();
}

void Context::synchronize() {
  check_not_capturing("synchronize()");
  DeviceGuard g(ordinal_);
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  throw_fault();
}

DeviceMemory Context::memory() const {
  DeviceGuard g(ordinal_);
  size_t free_b = 0, total_b = 0;
  check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  DeviceMemory m;
  m.free_bytes = free_b + counters().cached_bytes;
  m.total_bytes = total_b;
  return m;
}

cublasContext* Context::cublas() {
  std::lock_guard lock(blas_mu_);
  if (!cublas_) {
    DeviceGuard g(ordinal_);
    cublasStatus_t st = cublasCreate(&cublas_);
    if (st != CUBLAS_STATUS_SUCCESS) {
      cublas_ = nullptr;
      fail(std::string("cublasCreate failed: ") + cublasGetStatusString(st));
    }
    cublasSetStream(cublas_, stream_);
    blas_ws_bytes_ = size_t(32) << 20;
    check(cudaMalloc(&blas_ws_, blas_ws_bytes_), "cudaMalloc (cuBLAS workspace)");
    cublasSetWorkspace(cublas_, blas_ws_, blas_ws_bytes_);
  }
  return cublas_;
}

Context::IdCheck Context::add_check(Check c) {
  std::lock_guard lock(fault_mu_);
  // a check made in a graph capture stays for the graph's replays: one per distinct check
  c.keep = capturing();
  if (c.keep)
    for (const auto& [tag, k] : checks_)
      if (k.keep && k.count == c.count && k.op == c.op && k.shape == c.shape && k.dim == c.dim &&
          k.limit == c.limit)
        return {tag, fault_dev_};
  uint32_t tag;
  do {  // 0 means "no fault", and a kept tag is not reused
    tag = next_tag_++;
  } while (tag == 0 || checks_.count(tag));
  checks_[tag] = std::move(c);
  return {tag, fault_dev_};
}

Context::IdCheck Context::register_id_check(const char* op, size_t dim, size_t limit,
                                            const std::string& shape) {
  return add_check(Check{op, shape, dim, limit});
}

Context::IdCheck Context::register_count_check(const char* op, size_t lo, size_t hi,
                                               const std::string& what) {
  return add_check(Check{op, what, lo, hi, true});
}

void Context::throw_fault() {
  std::lock_guard lock(fault_mu_);
  volatile uint32_t* w = fault_host_;
  auto forget = [&] {  // every check so far is done with, except a graph's
    std::erase_if(checks_, [](const auto& kv) { return !kv.second.keep; });
  };
  if (w[0] == 0) {
    forget();  // every check so far passed
    return;
  }
  std::string msg = "index out of range in an indexing op (its record is gone)";
  ErrorKind kind = ErrorKind::IndexOutOfRange;
  auto it = checks_.find(static_cast<uint32_t>(w[0]));
  if (it != checks_.end() && it->second.count) {
    kind = ErrorKind::InvalidArgument;
    msg = it->second.op + ": " + it->second.shape + " " + std::to_string(w[2]) + " is not between " +
          std::to_string(it->second.dim) + " and " + std::to_string(it->second.limit);
  } else if (it != checks_.end()) {
    const uint64_t raw = uint64_t(w[2]) | uint64_t(w[3]) << 32;
    const bool neg = w[3] != 0;
    msg = "index out of range in " + it->second.op + ": index " +
          (neg ? std::to_string(static_cast<int64_t>(raw)) : std::to_string(raw)) + " at position " +
          std::to_string(w[1]) + " for dim " + std::to_string(it->second.dim) + " of size " +
          std::to_string(it->second.limit) + " (shape " + it->second.shape + ")";
  }
  forget();
  for (int i = 0; i < 4; ++i) w[i] = 0;
  throw Error(kind, msg + "; found by a kernel on " + name_ + " and reported at the next synchronisation");
}

unsigned Context::acts_q8_forms(uint64_t producer) const {
  std::lock_guard<std::mutex> lock(acts_mu_);
  auto it = acts_q8_forms_.find(producer);
  return it == acts_q8_forms_.end() ? 0u : it->second;
}

void Context::acts_q8_taken(uint64_t producer, size_t group) {
  if (!(fuse_producers_ >> std::min<uint64_t>(producer >> 48, 31) & 1u)) return;
  std::lock_guard<std::mutex> lock(acts_mu_);
  acts_q8_forms_[producer] |= group == 32 ? 1u : 2u;
}

void Context::launched(cudaError_t e, const char* kernel) {
  counters().launches++;
  if (e == cudaErrorNotSupported)
    throw Error(ErrorKind::UnsupportedOp, std::string("cuda: no kernel for this dtype in ") + kernel);
  check(e, kernel);
}

}  // namespace candle::cuda_backend
