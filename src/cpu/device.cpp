// The CPU BackendDevice: allocation and the seedable random generator.
#include <cstring>
#include <mutex>
#include <random>
#include <type_traits>

#include "candle/backend.h"
#include "cpu/random.h"

namespace candle {

namespace cpu {

std::shared_ptr<CpuStorage> draw_uniform(std::mt19937_64& rng, DType dtype, size_t n, double lo, double up) {
  auto out = CpuStorage::alloc(dtype, n);
  dispatch_float(dtype, "rand", [&]<typename T>() {
    T* d = out->data<T>();
    if constexpr (std::is_same_v<T, double>) {
      std::uniform_real_distribution<double> dist(lo, up);
      for (size_t i = 0; i < n; ++i) d[i] = dist(rng);
    } else {
      std::uniform_real_distribution<float> dist(static_cast<float>(lo), static_cast<float>(up));
      for (size_t i = 0; i < n; ++i) d[i] = cast_value<T>(dist(rng));
    }
  });
  return out;
}

std::shared_ptr<CpuStorage> draw_normal(std::mt19937_64& rng, DType dtype, size_t n, double mean,
                                        double stddev) {
  auto out = CpuStorage::alloc(dtype, n);
  dispatch_float(dtype, "randn", [&]<typename T>() {
    T* d = out->data<T>();
    if constexpr (std::is_same_v<T, double>) {
      std::normal_distribution<double> dist(mean, stddev);
      for (size_t i = 0; i < n; ++i) d[i] = dist(rng);
    } else {
      std::normal_distribution<float> dist(static_cast<float>(mean), static_cast<float>(stddev));
      for (size_t i = 0; i < n; ++i) d[i] = cast_value<T>(dist(rng));
    }
  });
  return out;
}

}  // namespace cpu

namespace {

class CpuDevice final : public BackendDevice {
 public:
  DeviceKind kind() const override { return DeviceKind::Cpu; }
  size_t ordinal() const override { return 0; }
  std::string name() const override { return "cpu"; }
  StoragePtr alloc(DType dtype, size_t n) override { return CpuStorage::alloc(dtype, n); }
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
