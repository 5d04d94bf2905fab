// Device: a small value naming where a tensor lives (kind + ordinal + the backend device).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace candle {

enum class DeviceKind : uint8_t { Cpu, Cuda, Rocm, Vulkan, Metal };

std::string_view device_kind_name(DeviceKind kind);

class BackendDevice;

// The memory a device has for tensors, in bytes: free now (what this process could still
// allocate, counting its own reusable cache as free), the total, and the largest single
// buffer (one tensor's storage). 0 for free/total when the backend cannot tell.
struct DeviceMemory {
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
  uint64_t max_buffer_bytes = UINT64_MAX;
  // The memory is the machine's own (the CPU): everything else the machine runs shares it.
  bool shared_with_system = false;
};

class Device {
 public:
  // The CPU device (one per process).
  static Device cpu();
  // GPU devices: the backend's shared library (libcandle_<kind>.so) is opened on first use;
  // a missing library, driver or ordinal throws Error(Device) naming what is missing.
  static Device cuda(size_t ordinal);
  static Device rocm(size_t ordinal);
  static Device vulkan(size_t ordinal);
  static Device metal(size_t ordinal);
  // As above, but fall back to the CPU when the device cannot be opened.
  static Device cuda_if_available(size_t ordinal);
  static Device vulkan_if_available(size_t ordinal);
  // The best device present, for programs that choose for the user: CUDA when a CUDA device
  // opens, else ROCm, else the best Vulkan adapter (its plugin's choice: never a software
  // device, never a discrete card with only a small BAR window), else the CPU. Never throws
  // for a missing backend; `why`, when given, receives the choice and the reasons the better
  // kinds were passed over ("vulkan:0 (NVIDIA H200: ...)", "cpu (cuda: ...; vulkan: ...)").
  static Device auto_select(std::string* why = nullptr);
  // "auto" (auto_select), "cpu", "cuda", "cuda:1", "rocm:0", "vulkan", "metal"; throws
  // Error(InvalidArgument) otherwise.
  static Device from_name(std::string_view name);
  // Opens `kind`:`ordinal` (what cuda()/vulkan()/... call).
  static Device open(DeviceKind kind, size_t ordinal);

  Device() : Device(cpu()) {}
  DeviceKind kind() const;
  size_t ordinal() const;
  bool is_cpu() const { return kind() == DeviceKind::Cpu; }
  bool is_cuda() const { return kind() == DeviceKind::Cuda; }
  bool is_vulkan() const { return kind() == DeviceKind::Vulkan; }
  bool same_device(const Device& other) const;
  bool operator==(const Device& other) const { return same_device(other); }
  // "cpu", "cuda:0", ...
  std::string to_string() const;
  // Seeds the device's random generator (rand, randn, dropout).
  void set_seed(uint64_t seed) const;
  // Waits for the device's queued work.
  void synchronize() const;
  // Free and total tensor memory (the CPU: available system memory, within the cgroup limit).
  DeviceMemory memory() const;
  // Whether candle::Graph::capture records work on this device (CUDA) rather than re-running it.
  bool records_graphs() const;

  BackendDevice& backend() const { return *backend_; }
  const std::shared_ptr<BackendDevice>& backend_ptr() const { return backend_; }
  explicit Device(std::shared_ptr<BackendDevice> backend) : backend_(std::move(backend)) {}

 private:
  std::shared_ptr<BackendDevice> backend_;
};

// How often each op ran on the CPU for a device without a native kernel for it (copied to the
// host, computed there, copied back), by op name; zero for every op a backend implements.
std::map<std::string, size_t> backend_stats();
void reset_backend_stats();

}  // namespace candle
