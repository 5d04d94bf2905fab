// The backend plugin contract: what a GPU backend library (libcandle_<kind>.so) exports so that
// the core can open it with dlopen, refuse it when it was built against another core, and only
// then let it register its device factory.
//
// A plugin defines the three C entry points below (and nothing that runs at load time: no
// static initialiser with side effects, since a mismatched plugin's initialisers run before
// the check can refuse it):
//
//   extern "C" uint32_t candle_backend_abi_version() { return CANDLE_BACKEND_ABI_VERSION; }
//   extern "C" const char* candle_backend_core_version() { return CANDLE_VERSION_STRING; }
//   extern "C" void candle_backend_register() { candle::register_backend(kind, factory); }
//
// src/core/device.cpp resolves the first two with dlsym, compares them with its own values and
// refuses the library (Error(Device) naming both versions) on any difference; only then does it
// call candle_backend_register(). The C names are exported by the plugin's version script
// (cmake/backend_plugin_exports.map), which candle_add_backend_plugin() applies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "candle/device.h"
#include "candle/version.h"

// The version of the interface between the core and a backend plugin: the virtual methods of
// BackendDevice / BackendStorage and the types they take (backend.h, cpu_storage.h), candle::Comm's
// (comm.h: a plugin implements it), and the entry points here. Bump it with every change to that interface,
// however small: a plugin built for another number is refused instead of calling through a stale vtable.
#define CANDLE_BACKEND_ABI_VERSION 8

namespace candle {

// A backend library registers a factory for its kind from candle_backend_register();
// Device::open calls it for each ordinal it has not opened yet.
using BackendFactory = std::function<std::shared_ptr<BackendDevice>(size_t ordinal)>;
// Optional: the ordinal Device::auto_select() should open for this kind, or nullopt when none
// is worth using (it then sets `why` to the reason); without a picker auto_select tries
// ordinal 0.
using BackendPicker = std::function<std::optional<size_t>(std::string& why)>;
void register_backend(DeviceKind kind, BackendFactory factory, BackendPicker picker = {});

// Optional: collective communication among the kind's devices (candle::Comm, candle/comm.h),
// registered from candle_backend_register(). Comm::create_group, unique_id and create call these;
// a kind without them has no collectives (Error(Device)).
class Comm;
struct CommProvider {
  std::function<std::vector<std::shared_ptr<Comm>>(const std::vector<Device>& devices)> group;
  std::function<std::string()> unique_id;
  std::function<std::shared_ptr<Comm>(const std::string& id, size_t rank, size_t world_size,
                                      const Device& device)>
      create;
};
void register_comm_provider(DeviceKind kind, CommProvider provider);

}  // namespace candle

extern "C" {
// The CANDLE_BACKEND_ABI_VERSION the plugin was compiled with.
uint32_t candle_backend_abi_version(void);
// The CANDLE_VERSION_STRING of the core the plugin was compiled against.
const char* candle_backend_core_version(void);
// Registers the plugin's factory (register_backend); called once, after the version check.
void candle_backend_register(void);
}
