// CudaDevice, cuda::stats() and the plugin entry points (registration).
#include <cstring>
#include <mutex>
#include <vector>

#include "candle/backend/plugin.h"
#include "candle/cuda.h"
#include "storage.h"

namespace candle::cuda_backend {

std::map<std::string, size_t> round_trip_counts();
void clear_round_trips();
CommProvider nccl_comm_provider();  // nccl.cpp

namespace {
std::mutex contexts_mu;
std::vector<std::weak_ptr<Context>>& contexts() {
  static std::vector<std::weak_ptr<Context>> v;
  return v;
}
}  // namespace

CuStoragePtr CudaDevice::make(DType dtype, size_t n) {
  return std::make_shared<CudaStorage>(shared_from_this(), dtype, n, ctx_->alloc(n * dtype_size(dtype)));
}

StoragePtr CudaDevice::alloc(DType dtype, size_t n) { return make(dtype, n); }

StoragePtr CudaDevice::from_cpu(const CpuStorage& src) {
  auto out = make(src.dtype(), src.elem_count());
  ctx_->upload(out->at(0), src.bytes(), src.nbytes());
  return out;
}

StoragePtr CudaDevice::from_host(const void* data, DType dtype, size_t n) {
  auto out = make(dtype, n);
  ctx_->upload(out->at(0), data, n * dtype_size(dtype));
  return out;
}

StoragePtr CudaDevice::zeros(DType dtype, size_t n) {
  auto out = make(dtype, n);
  if (n) check(cudaMemsetAsync(out->at(0), 0, n * dtype_size(dtype), ctx_->stream()), "cudaMemsetAsync");
  return out;
}

void CudaDevice::set_seed(uint64_t seed) {
  std::lock_guard lock(rng_mu_);
  seed_ = seed;
  counter_ = 0;
}

StoragePtr CudaDevice::rand_uniform(DType dtype, size_t n, double lo, double up) {
  if (!dtype_is_float(dtype)) unsupported(dtype, "rand_uniform");
  auto out = make(dtype, n);
  uint64_t seed, ctr;
  {
    std::lock_guard lock(rng_mu_);
    seed = seed_;
    ctr = counter_;
    counter_ += n / 2 + 1;  // each counter value gives at least 2 elements
  }
  ctx_->launched(cuda_k::rand_uniform(dt_of(dtype), out->at(0), n, seed, ctr, lo, up, ctx_->stream()),
                 "rand_uniform");
  return out;
}

StoragePtr CudaDevice::rand_normal(DType dtype, size_t n, double mean, double stddev) {
  if (!dtype_is_float(dtype)) unsupported(dtype, "rand_normal");
  auto out = make(dtype, n);
  uint64_t seed, ctr;
  {
    std::lock_guard lock(rng_mu_);
    seed = seed_;
    ctr = counter_;
    counter_ += n / 2 + 1;
  }
  ctx_->launched(cuda_k::rand_normal(dt_of(dtype), out->at(0), n, seed, ctr, mean, stddev, ctx_->stream()),
                 "rand_normal");
  return out;
}

std::shared_ptr<BackendDevice> open_device(size_t ordinal) {
  auto ctx = Context::open(ordinal);
  // CANDLE_CUDA_TF32=1: f32 matmuls and convolutions on TF32 tensor cores, for programs that take
  // no flag for it (candle-upscale, the training examples)
  static std::once_flag tf32_once;
  std::call_once(tf32_once, [] {
    if (env_flag("CANDLE_CUDA_TF32")) cuda::set_gemm_reduced_precision_f32(true);
  });
  {
    std::lock_guard lock(contexts_mu);
    contexts().push_back(ctx);
  }
  return std::make_shared<CudaDevice>(std::move(ctx), ordinal);
}

static_assert(static_cast<int>(DType::F8E4M3) == static_cast<int>(cuda_k::Dt::F8E4M3) &&
              static_cast<int>(DType::BF16) == static_cast<int>(cuda_k::Dt::BF16) &&
              static_cast<int>(DType::I64) == static_cast<int>(cuda_k::Dt::I64));

}  // namespace candle::cuda_backend

namespace candle::cuda {

Stats stats() {
  using namespace cuda_backend;
  Stats s;
  s.round_trips = round_trip_counts();
  auto& c = counters();
  s.launches = c.launches;
  s.allocations = c.allocations;
  s.cache_hits = c.cache_hits;
  s.live_bytes = c.live_bytes;
  s.cached_bytes = c.cached_bytes;
  s.bytes_uploaded = c.uploaded;
  s.bytes_downloaded = c.downloaded;
  return s;
}

int compute_capability(const Device& dev) {
  auto* cd = dynamic_cast<cuda_backend::CudaDevice*>(&dev.backend());
  if (!cd)
    throw Error(ErrorKind::Device, "cuda::compute_capability needs a CUDA device, not " + dev.to_string());
  return cd->ctx().compute_capability();
}

void reset_stats() {
  using namespace cuda_backend;
  clear_round_trips();
  auto& c = counters();
  c.launches = 0;
  c.allocations = 0;
  c.cache_hits = 0;
  c.uploaded = 0;
  c.downloaded = 0;
}

void empty_cache() {
  using namespace cuda_backend;
  std::lock_guard lock(contexts_mu);
  for (auto& w : contexts())
    if (auto c = w.lock()) c->empty_cache();
}

}  // namespace candle::cuda

// The plugin contract (candle/backend/plugin.h): Device::open checks the versions, then calls
// candle_backend_register(); nothing registers at load time.
extern "C" uint32_t candle_backend_abi_version() { return CANDLE_BACKEND_ABI_VERSION; }
extern "C" const char* candle_backend_core_version() { return CANDLE_VERSION_STRING; }
// Device::auto_select takes cuda:0 first (before ROCm and Vulkan) when it opens; CANDLE_CUDA_AUTO=0
// passes CUDA over (then Vulkan, if any, runs on the same GPU). The collectives (candle::Comm) go
// through NCCL, opened at their first call (nccl.cpp).
extern "C" void candle_backend_register() {
  candle::register_backend(
      candle::DeviceKind::Cuda, [](size_t ordinal) { return candle::cuda_backend::open_device(ordinal); },
      [](std::string& why) -> std::optional<size_t> {
        if (!candle::cuda_backend::env_flag_off("CANDLE_CUDA_AUTO")) return 0;
        why = "CANDLE_CUDA_AUTO=0";
        return std::nullopt;
      });
  candle::register_comm_provider(candle::DeviceKind::Cuda, candle::cuda_backend::nccl_comm_provider());
}
