#include "candle/device.h"

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string_view>
#include <vector>

#include "candle/backend/cpu_storage.h"
#include "candle/backend/plugin.h"
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
  std::map<DeviceKind, BackendPicker> pickers;
  std::map<std::pair<DeviceKind, size_t>, std::shared_ptr<BackendDevice>> open;
};

// Never destroyed: GPU backend devices must not be torn down during static destruction, when
// the driver may already have run its own exit handlers (the NVIDIA Vulkan driver then
// crashed in vkDestroyDevice at exit); the process's exit releases them.
Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

// Resolves `name` in a plugin handle as a function of type Fn; nullptr when it is missing.
template <typename Fn>
Fn plugin_entry_point(void* handle, const char* name) {
  return reinterpret_cast<Fn>(dlsym(handle, name));
}

// Where a plugin handle was loaded from (the loader's path of the file), for error messages.
std::string plugin_path(void* handle, const std::string& fallback) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name) return map->l_name;
  return fallback;
}

// Checks the plugin's versions against the core's, then lets it register. The library was
// opened RTLD_LAZY | RTLD_LOCAL, so a plugin built against another core is refused here with
// both versions rather than by the loader as an undefined symbol, and nothing of it but its
// static initialisers has run (the contract forbids them side effects).
void check_and_register_plugin(void* handle, const std::string& where) {
  auto abi = plugin_entry_point<uint32_t (*)()>(handle, "candle_backend_abi_version");
  auto core = plugin_entry_point<const char* (*)()>(handle, "candle_backend_core_version");
  auto reg = plugin_entry_point<void (*)()>(handle, "candle_backend_register");
  if (!abi || !core || !reg) {
    std::string missing;
    for (auto [fn, name] : {std::pair<bool, const char*>{abi != nullptr, "candle_backend_abi_version"},
                            {core != nullptr, "candle_backend_core_version"},
                            {reg != nullptr, "candle_backend_register"}}) {
      if (!fn) missing += (missing.empty() ? "" : ", ") + std::string(name);
    }
    dlclose(handle);
    throw Error(ErrorKind::Device, where + " is not a candle backend plugin: it does not export " + missing +
                                       " (a plugin built before the versioned plugin contract, or not a "
                                       "candle backend); rebuild the plugin");
  }
  uint32_t plugin_abi = abi();
  const char* plugin_core_c = core();
  std::string plugin_core = plugin_core_c ? plugin_core_c : "unknown";
  if (plugin_abi != CANDLE_BACKEND_ABI_VERSION || plugin_core != CANDLE_VERSION_STRING) {
    dlclose(handle);
    throw Error(ErrorKind::Device, where + " was built for candle backend ABI " + std::to_string(plugin_abi) +
                                       " (core " + plugin_core + ") but this core is ABI " +
                                       std::to_string(CANDLE_BACKEND_ABI_VERSION) + " (core " +
                                       CANDLE_VERSION_STRING + "); rebuild the plugin");
  }
  // Accepted: make its symbols global, as a library linked at start-up would be (the handle
  // stays open for the life of the process).
  dlopen(where.c_str(), RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
  reg();
}

// The directories of CANDLE_BACKEND_PATH (colon-separated), searched before the defaults.
std::vector<std::string> backend_path_dirs() {
  std::vector<std::string> dirs;
  const char* env = std::getenv("CANDLE_BACKEND_PATH");
  if (!env) return dirs;
  std::string_view rest = env;
  while (!rest.empty()) {
    auto colon = rest.find(':');
    std::string_view dir = rest.substr(0, colon);
    if (!dir.empty()) dirs.emplace_back(dir);
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return dirs;
}

// Opens libcandle_<kind>.so from the first of: each CANDLE_BACKEND_PATH directory, the directory
// of the library holding this code (libcandle_core.so), the loader's search path. A file that
// cannot be opened is skipped (its loader message kept for the error); the first one opened is
// checked and registered, or refused: a refused plugin is not passed over for another one, so
// a stale build is reported instead of hidden.
void load_backend_library(DeviceKind kind) {
  std::string file = "libcandle_" + std::string(device_kind_name(kind)) + ".so";
  std::vector<std::string> candidates;
  for (const auto& dir : backend_path_dirs()) candidates.push_back(dir + "/" + file);
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&load_backend_library), &info) && info.dli_fname) {
    std::string self = info.dli_fname;
    auto slash = self.rfind('/');
    if (slash != std::string::npos) candidates.push_back(self.substr(0, slash + 1) + file);
  }
  candidates.push_back(file);
  std::string errors;
  for (const auto& path : candidates) {
    // A named path that does not exist is no news; the loader's message for the bare name is.
    if (path != file && access(path.c_str(), F_OK) != 0) continue;
    if (void* handle = dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL)) {
      check_and_register_plugin(handle, plugin_path(handle, path));
      return;
    }
    const char* e = dlerror();
    errors += (errors.empty() ? "" : "; ") + std::string(e ? e : path + ": unknown dlopen error");
  }
  throw Error(ErrorKind::Device, std::string(device_kind_name(kind)) + " backend not available: " + file +
                                     " could not be loaded (" + errors + ")");
}

}  // namespace

void register_backend(DeviceKind kind, BackendFactory factory, BackendPicker picker) {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  r.factories[kind] = std::move(factory);
  if (picker) r.pickers[kind] = std::move(picker);
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

namespace {

// A reason cut to its first clause: auto_select's summary stays one line.
std::string short_reason(const std::string& why) {
  constexpr size_t kMax = 160;
  return why.size() <= kMax ? why : why.substr(0, kMax) + "...";
}

}  // namespace

Device Device::auto_select(std::string* why) {
  std::string passed;  // why the better kinds were not chosen
  auto note = [&](DeviceKind k, const std::string& reason) {
    passed += (passed.empty() ? "" : "; ") + std::string(device_kind_name(k)) + ": " + short_reason(reason);
  };
  auto& r = registry();
  for (DeviceKind k : {DeviceKind::Cuda, DeviceKind::Rocm, DeviceKind::Vulkan}) {
    try {
      bool have_factory;
      {
        std::lock_guard lock(r.mu);
        have_factory = r.factories.count(k) != 0;
      }
      if (!have_factory) {
        try {
          load_backend_library(k);
        } catch (const Error& e) {
          const std::string file = "libcandle_" + std::string(device_kind_name(k)) + ".so";
          // a library that is not there is the usual case: say so briefly
          const std::string msg = e.what();
          note(k, msg.find("cannot open shared object file") != std::string::npos ? "no " + file : msg);
          continue;
        }
      }
      BackendPicker picker;
      {
        std::lock_guard lock(r.mu);
        if (auto it = r.pickers.find(k); it != r.pickers.end()) picker = it->second;
      }
      std::string reason;
      std::optional<size_t> ordinal = picker ? picker(reason) : std::optional<size_t>(0);
      if (!ordinal) {
        note(k, reason.empty() ? "no usable device" : reason);
        continue;
      }
      Device dev = open(k, *ordinal);
      if (why)
        *why = dev.to_string() + " (" + dev.backend().name() + (reason.empty() ? "" : ": " + reason) + ")";
      return dev;
    } catch (const Error& e) {
      note(k, e.what());
    }
  }
  if (why) *why = "cpu (" + passed + ")";
  return cpu();
}

Device Device::from_name(std::string_view name) {
  if (name == "auto") return auto_select();
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
                  "' (expected auto, cpu, cuda[:N], rocm[:N], vulkan[:N] or metal[:N])");
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
DeviceMemory Device::memory() const { return backend_->memory(); }
bool Device::records_graphs() const { return backend_->records_graphs(); }

}  // namespace candle
