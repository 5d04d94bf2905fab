// The CPU BackendDevice: allocation and the seedable random generator.
#include <cstdint>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <type_traits>

#include "candle/backend/cpu_storage.h"
#include "cpu/random.h"

namespace candle {

namespace cpu {

namespace {

// n values of Dist(a, b) (drawn in f64 for f64, else in f32 and rounded to dtype).
template <template <typename> class Dist>
std::shared_ptr<CpuStorage> draw(std::mt19937_64& rng, DType dtype, size_t n, double a, double b,
                                 const char* op) {
  auto out = CpuStorage::alloc(dtype, n);
  dispatch_float(dtype, op, [&]<typename T>() {
    T* d = out->data<T>();
    if constexpr (std::is_same_v<T, double>) {
      Dist<double> dist(a, b);
      for (size_t i = 0; i < n; ++i) d[i] = dist(rng);
    } else {
      Dist<float> dist(static_cast<float>(a), static_cast<float>(b));
      for (size_t i = 0; i < n; ++i) d[i] = cast_value<T>(dist(rng));
    }
  });
  return out;
}

}  // namespace

std::shared_ptr<CpuStorage> draw_uniform(std::mt19937_64& rng, DType dtype, size_t n, double lo, double up) {
  return draw<std::uniform_real_distribution>(rng, dtype, n, lo, up, "rand");
}

std::shared_ptr<CpuStorage> draw_normal(std::mt19937_64& rng, DType dtype, size_t n, double mean,
                                        double stddev) {
  return draw<std::normal_distribution>(rng, dtype, n, mean, stddev, "randn");
}

// Available system memory: /proc/meminfo's MemAvailable (what can be allocated without
// swapping), and the total, both within the cgroup v2 limit when one is set.
DeviceMemory system_memory() {
  DeviceMemory m;
  m.shared_with_system = true;
  std::ifstream info("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (info >> key >> kib) {
    std::getline(info, unit);
    if (key == "MemTotal:") m.total_bytes = kib * 1024;
    if (key == "MemAvailable:") m.free_bytes = kib * 1024;
  }
  auto read_u64 = [](const char* path, uint64_t& v) {
    std::ifstream f(path);
    return static_cast<bool>(f >> v);  // "max" (no limit) does not parse
  };
  uint64_t limit = 0, used = 0;
  if (read_u64("/sys/fs/cgroup/memory.max", limit) && limit < m.total_bytes) {
    m.total_bytes = limit;
    read_u64("/sys/fs/cgroup/memory.current", used);
    m.free_bytes = std::min(m.free_bytes, limit > used ? limit - used : 0);
  }
  return m;
}

}  // namespace cpu

namespace {

class CpuDevice final : public BackendDevice {
 public:
  DeviceKind kind() const override { return DeviceKind::Cpu; }
  size_t ordinal() const override { return 0; }
  std::string name() const override { return "cpu"; }
  StoragePtr alloc(DType dtype, size_t n) override { return CpuStorage::alloc(dtype, n); }
  StoragePtr adopt_host(std::shared_ptr<CpuStorage> src) override { return src; }
  StoragePtr from_host(const void* data, DType dtype, size_t n) override {
    auto s = CpuStorage::alloc(dtype, n);
    if (n) std::memcpy(s->bytes(), data, s->nbytes());
    return s;
  }
  StoragePtr zeros(DType dtype, size_t n) override { return CpuStorage::zeros(dtype, n); }
  DeviceMemory memory() const override { return cpu::system_memory(); }
  StoragePtr from_cpu(const CpuStorage& src) override {
    auto out = CpuStorage::alloc(src.dtype(), src.elem_count());
    std::memcpy(out->bytes(), src.bytes(), src.nbytes());
    return out;
  }
  void set_seed(uint64_t seed) override {
    std::lock_guard lock(mu_);
    rng_.seed(seed);
  }
  StoragePtr rand_uniform(DType dtype, size_t n, double lo, double up) override {
    std::lock_guard lock(mu_);
    return cpu::draw_uniform(rng_, dtype, n, lo, up);
  }
  StoragePtr rand_normal(DType dtype, size_t n, double mean, double stddev) override {
    std::lock_guard lock(mu_);
    return cpu::draw_normal(rng_, dtype, n, mean, stddev);
  }

 private:
  std::mutex mu_;
  std::mt19937_64 rng_{299792458};
};

}  // namespace

BackendDevice& cpu_backend_device() {
  static CpuDevice dev;
  return dev;
}

}  // namespace candle
