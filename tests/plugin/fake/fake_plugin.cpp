// A stand-in backend plugin for tests/plugin/plugin_test.cpp, built several ways by
// tests/CMakeLists.txt (each a libcandle_<kind>.so in its own folder):
//  - as it should be (a rocm plugin whose factory throws a recognisable error);
//  - with FAKE_PLUGIN_ABI or FAKE_PLUGIN_CORE_VERSION overridden, as a plugin built against
//    another backend.h or another core would be;
//  - with FAKE_PLUGIN_NO_ENTRY_POINTS, as a library that is not a plugin of this contract.
#include <cstdlib>
#include <memory>
#include <string>

#include "candle/backend/plugin.h"
#include "candle/error.h"

#ifdef FAKE_PLUGIN_NO_ENTRY_POINTS
// Some code, so the library is an ordinary shared object; hidden by the version script like
// any name that is not an entry point.
extern "C" int candle_fake_plugin_without_entry_points() { return 0; }
#else
#ifndef FAKE_PLUGIN_ABI
#define FAKE_PLUGIN_ABI CANDLE_BACKEND_ABI_VERSION
#endif
#ifndef FAKE_PLUGIN_CORE_VERSION
#define FAKE_PLUGIN_CORE_VERSION CANDLE_VERSION_STRING
#endif

extern "C" uint32_t candle_backend_abi_version() { return FAKE_PLUGIN_ABI; }
extern "C" const char* candle_backend_core_version() { return FAKE_PLUGIN_CORE_VERSION; }
extern "C" void candle_backend_register() {
  // The core must refuse a mismatched build before calling into it: if it did not, the test
  // process dies here instead of passing.
  if (FAKE_PLUGIN_ABI != CANDLE_BACKEND_ABI_VERSION ||
      std::string(FAKE_PLUGIN_CORE_VERSION) != CANDLE_VERSION_STRING) {
    std::abort();
  }
  candle::register_backend(
      candle::DeviceKind::Rocm, [](size_t ordinal) -> std::shared_ptr<candle::BackendDevice> {
        throw candle::Error(candle::ErrorKind::Device,
                            "fake rocm plugin: factory called for ordinal " + std::to_string(ordinal));
      });
}
#endif
