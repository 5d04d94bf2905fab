// Where the example programs find the bundled models (models/ in the source tree):
// $CANDLE_MODELS_DIR, <exe>/../share/candle/models (installed), or the source tree's models/
// (a build tree; CANDLE_SOURCE_MODELS_DIR names it).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace candle_examples {

inline std::filesystem::path models_dir() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("CANDLE_MODELS_DIR")) return env;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    fs::path installed = exe.parent_path().parent_path() / "share" / "candle" / "models";
    if (fs::is_directory(installed, ec)) return installed;
  }
#ifdef CANDLE_SOURCE_MODELS_DIR
  return CANDLE_SOURCE_MODELS_DIR;
#else
  return "models";
#endif
}

}  // namespace candle_examples
