// The backend plugin contract (candle/backend/plugin.h): Device::open loads libcandle_<kind>.so
// from CANDLE_BACKEND_PATH first, refuses a build for another ABI or core naming both versions,
// refuses a library without the entry points, and registers a matching one.
#include "candle/backend/plugin.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "candle/candle.h"

using namespace candle;

namespace {

// Sets CANDLE_BACKEND_PATH for one test; the loader reads it on every load attempt.
class BackendPath {
 public:
  explicit BackendPath(const std::string& dirs) { setenv("CANDLE_BACKEND_PATH", dirs.c_str(), 1); }
  ~BackendPath() { unsetenv("CANDLE_BACKEND_PATH"); }
};

const std::string kPluginDir = CANDLE_TEST_PLUGIN_DIR;

// The message of the Error(Device) that opening kind:ordinal throws.
std::string open_error(DeviceKind kind, size_t ordinal = 0) {
  try {
    Device::open(kind, ordinal);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Device);
    return e.message();
  }
  ADD_FAILURE() << "opened " << device_kind_name(kind) << ":" << ordinal;
  return {};
}

const std::string kCoreAbi = std::to_string(CANDLE_BACKEND_ABI_VERSION);

}  // namespace

TEST(BackendPlugin, OtherAbiIsRefusedNamingBothVersions) {
  BackendPath path(kPluginDir + "/abi_mismatch");
  std::string msg = open_error(DeviceKind::Metal);
  EXPECT_EQ(msg, kPluginDir + "/abi_mismatch/libcandle_metal.so was built for candle backend ABI " +
                     std::to_string(CANDLE_BACKEND_ABI_VERSION + 1) +
                     " (core " CANDLE_VERSION_STRING ") but this core is ABI " + kCoreAbi +
                     " (core " CANDLE_VERSION_STRING "); rebuild the plugin");
  // Refused before it could register (its candle_backend_register() aborts): a second attempt
  // loads and refuses it again rather than finding a factory.
  EXPECT_EQ(open_error(DeviceKind::Metal), msg);
}

TEST(BackendPlugin, OtherCoreIsRefusedNamingBothVersions) {
  BackendPath path(kPluginDir + "/core_mismatch");
  EXPECT_EQ(open_error(DeviceKind::Metal),
            kPluginDir + "/core_mismatch/libcandle_metal.so was built for candle backend ABI " + kCoreAbi +
                " (core 0.0.0-other) but this core is ABI " + kCoreAbi +
                " (core " CANDLE_VERSION_STRING "); rebuild the plugin");
}

TEST(BackendPlugin, LibraryWithoutEntryPointsIsRefused) {
  BackendPath path(kPluginDir + "/no_entry_points");
  EXPECT_EQ(open_error(DeviceKind::Metal),
            kPluginDir +
                "/no_entry_points/libcandle_metal.so is not a candle backend plugin: it does not export "
                "candle_backend_abi_version, candle_backend_core_version, candle_backend_register (a "
                "plugin built before the versioned plugin contract, or not a candle backend); rebuild "
                "the plugin");
}

TEST(BackendPlugin, FirstPluginFoundIsTheOneChecked) {
  // A refused plugin early in the path is reported, not passed over for a later one.
  BackendPath path(kPluginDir + "/empty:" + kPluginDir + "/abi_mismatch:" + kPluginDir + "/core_mismatch");
  EXPECT_NE(open_error(DeviceKind::Metal).find("/abi_mismatch/libcandle_metal.so was built for"),
            std::string::npos);
}

TEST(BackendPlugin, MissingLibraryNamesTheFile) {
  BackendPath path(kPluginDir + "/empty");
  std::string msg = open_error(DeviceKind::Metal);
  EXPECT_EQ(msg.rfind("metal backend not available: libcandle_metal.so could not be loaded (", 0), 0u) << msg;
}

TEST(BackendPlugin, MatchingPluginOnTheBackendPathRegisters) {
  BackendPath path(kPluginDir + "/matching");
  // the fake plugin's factory throws to show that it was registered and called
  EXPECT_EQ(open_error(DeviceKind::Rocm, 3), "fake rocm plugin: factory called for ordinal 3");
}
