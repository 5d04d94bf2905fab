// The shipped programs (candle-upscale, candle-tfjs-convert) run from the model tests: found
// next to the test binary, run through the shell with their stderr captured.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace candle::test_models {

// The program `name` built next to this test binary; empty when it is not built.
inline std::filesystem::path program(const char* name) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / name;
  return std::filesystem::exists(p, ec) ? p : std::filesystem::path();
}

struct ProgramResult {
  int rc;
  std::string err;
};

// Runs `cmd` (stdout discarded), returning its exit code (-1 when killed) and its stderr.
inline ProgramResult run(const std::string& cmd) {
  std::string errf = (std::filesystem::temp_directory_path() / "candle-test-stderr-XXXXXX").string();
  const int fd = mkstemp(errf.data());
  if (fd < 0) return {-1, "mkstemp failed"};
  close(fd);
  const int status = std::system((cmd + " >/dev/null 2>" + errf).c_str());
  std::ifstream f(errf);
  std::string err((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::error_code ec;
  std::filesystem::remove(errf, ec);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, err};
}

// Lines of a program's output.
inline size_t lines(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

}  // namespace candle::test_models
