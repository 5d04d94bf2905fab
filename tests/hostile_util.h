// The crafted files of tools/make-hostile-models.py, written once per test process into a
// temporary directory, and what a loader threw on one.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>

#include "candle/candle.h"

namespace candle::hostile {

// The directory holding the crafted files (generated on first use; removed at exit).
inline const std::string& dir() {
  static const std::string path = [] {
    std::string tmpl = (std::filesystem::temp_directory_path() / "candle-hostile-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    const std::string script = std::string(CANDLE_TEST_DATA_DIR) + "/../../tools/make-hostile-models.py";
    const std::string cmd = "python3 '" + script + "' '" + tmpl + "'";
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
    static struct Cleanup {
      std::string p;
      ~Cleanup() {
        std::error_code ec;
        std::filesystem::remove_all(p, ec);
      }
    } cleanup{tmpl};
    return tmpl;
  }();
  return path;
}

inline std::string file(const std::string& name) { return dir() + "/" + name; }

struct Thrown {
  std::optional<ErrorKind> kind;  // nullopt: fn threw no candle::Error
  std::string message;
};

inline Thrown thrown(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return {e.kind(), e.what()};
  }
  return {};
}

// fn throws a candle::Error of `kind` whose message contains `part`.
#define EXPECT_HOSTILE_ERROR(fn, want_kind, part)                                                     \
  do {                                                                                                \
    const ::candle::hostile::Thrown t_ = ::candle::hostile::thrown(fn);                               \
    ASSERT_TRUE(t_.kind.has_value()) << "no candle::Error";                                           \
    EXPECT_EQ(*t_.kind, want_kind) << t_.message;                                                     \
    EXPECT_NE(t_.message.find(part), std::string::npos) << t_.message;                                \
    EXPECT_LT(t_.message.size(), 1000u) << "the message is not short: " << t_.message.substr(0, 300); \
  } while (0)

}  // namespace candle::hostile
