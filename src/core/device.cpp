#include "candle/device.h"

#include <dlfcn.h>

#include <map>
#include <mutex>
#include <random>

#include "candle/backend/cpu_storage.h"
#include "candle/error.h"

namespace candle {

std::string_view device_kind_name(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::Cpu: return "cpu";
    case DeviceKind::Cuda: return "cuda";
    case DeviceKind::Rocm: return "rocm";
    case DeviceKind::Vulkan: return "vulkan";
    case DeviceKind::Metal: return "metal";
  }
  return "unknown";
}

namespace {

struct Registry {
  std::mutex mu;
  std::map<DeviceKind, BackendFactory> factories;
  std::map<std::pair<DeviceKind, size_t>, std::shared_ptr<BackendDevice>> open;
};

// Never destroyed: GPU backend devices must not be torn down during static destruction, when
// the driver may already have run its own exit handlers (the NVIDIA Vulkan driver then
// crashed in vkDestroyDevice at exit); the process's exit releases them.
Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

// Opens libcandle_<kind>.so, first beside the library holding this code, then on the
// loader's search path. The library registers its factory from a static initialiser.
void load_backend_library(DeviceKind kind) {
  std::string file = "libcandle_" + std::string(device_kind_name(kind)) + ".so";
  std::string errors;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&load_backend_library), &info) && info.dli_fname) {
    std::string self = info.dli_fname;
    auto slash = self.rfind('/');
    if (slash != std::string::npos) {
      std::string beside = self.substr(0, slash + 1) + file;
      if (dlopen(beside.c_str(), RTLD_NOW | RTLD_GLOBAL)) return;
      if (const char* e = dlerror()) errors = e;
    }
  }
  if (dlopen(file.c_str(), RTLD_NOW | RTLD_GLOBAL)) return;
  const char* e = dlerror();
  throw Error(ErrorKind::Device, std::string(device_kind_name(kind)) + " backend not available: " + file +
                                     " could not be loaded (" + (e ? e : errors) + ")");
}

}  // namespace

void register_backend(DeviceKind kind, BackendFactory factory) {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  r.factories[kind] = std::move(factory);
}

Device Device::cpu() {
  static const Device dev(std::shared_ptr<BackendDevice>(&cpu_backend_device(), [](BackendDevice*) {}));
  return dev;
}

Device Device::open(DeviceKind kind, size_t ordinal) {
  if (kind == DeviceKind::Cpu) return cpu();
  auto& r = registry();
  {
    std::lock_guard lock(r.mu);
    auto it = r.open.find({kind, ordinal});
    if (it != r.open.end()) return Device(it->second);
  }
  bool have_factory;
  {
    std::lock_guard lock(r.mu);
    have_factory = r.factories.count(kind) != 0;
  }
  if (!have_factory) load_backend_library(kind);
  BackendFactory factory;
  {
    std::lock_guard lock(r.mu);
    auto it = r.factories.find(kind);
    if (it == r.factories.end()) {
      throw Error(ErrorKind::Device, std::string(device_kind_name(kind)) +
                                         " backend library loaded but registered no device factory");
    }
    factory = it->second;
  }
  std::shared_ptr<BackendDevice> dev = factory(ordinal);
  std::lock_guard lock(r.mu);
  auto [it, inserted] = r.open.emplace(std::make_pair(kind, ordinal), dev);
  return Device(it->second);
}

Device Device::cuda(size_t ordinal) { return open(DeviceKind::Cuda, ordinal); }
Device Device::rocm(size_t ordinal) { return open(DeviceKind::Rocm, ordinal); }
Device Device::vulkan(size_t ordinal) { return open(DeviceKind::Vulkan, ordinal); }
Device Device::metal(size_t ordinal) { return open(DeviceKind::Metal, ordinal); }

Device Device::cuda_if_available(size_t ordinal) {
  try {
    return cuda(ordinal);
  } catch (const Error&) {
    return cpu();
  }
}

Device Device::vulkan_if_available(size_t ordinal) {
  try {
    return vulkan(ordinal);
  } catch (const Error&) {
    return cpu();
  }
}

Device Device::from_name(std::string_view name) {
  std::string_view kind_s = name;
  size_t ordinal = 0;
  if (auto colon = name.find(':'); colon != std::string_view::npos) {
    kind_s = name.substr(0, colon);
    std::string_view num = name.substr(colon + 1);
    if (num.empty() || num.size() > 6) {
      throw Error(ErrorKind::InvalidArgument, "invalid device name '" + std::string(name) + "'");
    }
    for (char c : num) {
      if (c < '0' || c > '9') {
        throw Error(ErrorKind::InvalidArgument, "invalid device name '" + std::string(name) + "'");
      }
      ordinal = ordinal * 10 + static_cast<size_t>(c - '0');
    }
  }
  for (DeviceKind k :
       {DeviceKind::Cpu, DeviceKind::Cuda, DeviceKind::Rocm, DeviceKind::Vulkan, DeviceKind::Metal}) {
    if (kind_s == device_kind_name(k)) {
      if (k == DeviceKind::Cpu && ordinal != 0) break;
      return open(k, ordinal);
    }
  }
  throw Error(ErrorKind::InvalidArgument,
              "unknown device '" + std::string(name) +
                  "' (expected cpu, cuda[:N], rocm[:N], vulkan[:N] or metal[:N])");
}

DeviceKind Device::kind() const { return backend_->kind(); }
size_t Device::ordinal() const { return backend_->ordinal(); }
bool Device::same_device(const Device& other) const { return backend_.get() == other.backend_.get(); }

std::string Device::to_string() const {
  if (is_cpu()) return "cpu";
  return std::string(device_kind_name(kind())) + ":" + std::to_string(ordinal());
}

void Device::set_seed(uint64_t seed) const { backend_->set_seed(seed); }
void Device::synchronize() const { backend_->synchronize(); }

}  // namespace candle
