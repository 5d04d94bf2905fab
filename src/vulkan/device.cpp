// VulkanDevice, the plugin entry points (registration), vulkan::stats() and the CPU round-trip bookkeeping.
#include <cstdio>
#include <cstring>
#include <map>

#include "candle/backend/plugin.h"
#include "candle/vulkan.h"
#include "cpu/random.h"
#include "storage.h"

namespace candle::vk_backend {
namespace {

struct RoundTrips {
  std::mutex mu;
  std::map<std::string, size_t> counts;
};
RoundTrips& round_trips() {
  static RoundTrips r;
  return r;
}

}  // namespace

void note_round_trip(const char* op) {
  {
    auto& r = round_trips();
    std::lock_guard lock(r.mu);
    ++r.counts[op];
  }
  static const bool trace = env_flag("CANDLE_VULKAN_TRACE");
  if (trace) std::fprintf(stderr, "candle vulkan: CPU round-trip for %s\n", op);
}

VkStoragePtr VulkanDevice::make(DType dtype, size_t n) {
  size_t bytes = std::max<size_t>(n * dtype_size(dtype), 4);
  return std::make_shared<VulkanStorage>(shared_from_this(), dtype, n, ctx_->alloc(bytes));
}

StoragePtr VulkanDevice::alloc(DType dtype, size_t n) { return make(dtype, n); }

StoragePtr VulkanDevice::from_cpu(const CpuStorage& src) {
  auto out = make(src.dtype(), src.elem_count());
  ctx_->write(out->block(), 0, src.bytes(), src.nbytes());
  return out;
}

std::shared_ptr<CpuStorage> VulkanStorage::to_cpu() const {
  auto out = CpuStorage::alloc(dtype_, n_);
  ctx().read(*block_, 0, out->bytes(), out->nbytes());
  return out;
}

// Straight into dst: the elements of a contiguous layout are one range of the block (a strided
// one is made dense on the device first); no host copy of the whole storage.
void VulkanStorage::copy_to_host(const Layout& l, void* dst) const {
  const size_t n = l.elem_count(), es = dtype_size(dtype_);
  if (n == 0) return;
  Dense d = dense(*this, l);
  ctx().read(d.s->block(), d.first * es, dst, n * es);
}

void VulkanDevice::set_seed(uint64_t seed) {
  std::lock_guard lock(rng_mu_);
  rng_.seed(seed);
}

// Random numbers are drawn on the CPU (the same generator and distributions as the CPU
// device) and uploaded: a counted round-trip.
StoragePtr VulkanDevice::rand_uniform(DType dtype, size_t n, double lo, double up) {
  std::shared_ptr<CpuStorage> host;
  {
    std::lock_guard lock(rng_mu_);
    host = cpu::draw_uniform(rng_, dtype, n, lo, up);
  }
  note_round_trip("rand_uniform");
  count_cpu_fallback("rand_uniform");
  return from_cpu(*host);
}

StoragePtr VulkanDevice::rand_normal(DType dtype, size_t n, double mean, double stddev) {
  std::shared_ptr<CpuStorage> host;
  {
    std::lock_guard lock(rng_mu_);
    host = cpu::draw_normal(rng_, dtype, n, mean, stddev);
  }
  note_round_trip("rand_normal");
  count_cpu_fallback("rand_normal");
  return from_cpu(*host);
}

}  // namespace candle::vk_backend

namespace candle::vulkan {

Stats stats() {
  using namespace vk_backend;
  Stats s;
  {
    auto& r = round_trips();
    std::lock_guard lock(r.mu);
    s.round_trips = r.counts;
  }
  auto& c = counters();
  s.dispatches = c.dispatches;
  s.submits = c.submits;
  s.allocations = c.allocations;
  s.cache_hits = c.cache_hits;
  s.live_bytes = c.live_bytes;
  s.cached_bytes = c.cached_bytes;
  s.bytes_uploaded = c.uploaded;
  s.bytes_downloaded = c.downloaded;
  return s;
}

void reset_stats() {
  using namespace vk_backend;
  {
    auto& r = round_trips();
    std::lock_guard lock(r.mu);
    r.counts.clear();
  }
  auto& c = counters();
  c.dispatches = 0;
  c.submits = 0;
  c.allocations = 0;
  c.cache_hits = 0;
  c.uploaded = 0;
  c.downloaded = 0;
}

}  // namespace candle::vulkan

// The plugin contract (candle/backend/plugin.h): Device::open checks the versions, then calls
// candle_backend_register(); nothing registers at load time, so a mismatched build is refused
// before any of its code runs.
extern "C" uint32_t candle_backend_abi_version() { return CANDLE_BACKEND_ABI_VERSION; }
extern "C" const char* candle_backend_core_version() { return CANDLE_VERSION_STRING; }
extern "C" void candle_backend_register() {
  candle::register_backend(
      candle::DeviceKind::Vulkan,
      [](size_t ordinal) -> std::shared_ptr<candle::BackendDevice> {
        return std::make_shared<candle::vk_backend::VulkanDevice>(candle::vk_backend::Context::open(ordinal),
                                                                  ordinal);
      },
      [](std::string& why) { return candle::vulkan::best_adapter(&why); });
}
