// The shipped programs (candle-upscale, candle-tfjs-convert, candle-mnist-training) run from the tests: found
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
  std::string out;  // only when asked for
};

namespace detail {
inline std::string temp_name(const char* what) {
  std::string f =
      (std::filesystem::temp_directory_path() / (std::string("candle-test-") + what + "-XXXXXX")).string();
  const int fd = mkstemp(f.data());
  if (fd < 0) return {};
  close(fd);
  return f;
}
inline std::string slurp_and_remove(const std::string& path) {
  std::ifstream f(path);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::error_code ec;
  std::filesystem::remove(path, ec);
  return s;
}
}  // namespace detail

// Runs `cmd`, returning its exit code (-1 when killed), its stderr and (with keep_stdout) its
// stdout; otherwise stdout is discarded.
inline ProgramResult run(const std::string& cmd, bool keep_stdout = false) {
  const std::string errf = detail::temp_name("stderr");
  const std::string outf = keep_stdout ? detail::temp_name("stdout") : std::string();
  if (errf.empty() || (keep_stdout && outf.empty())) return {-1, "mkstemp failed", {}};
  const int status = std::system((cmd + " >" + (keep_stdout ? outf : "/dev/null") + " 2>" + errf).c_str());
  ProgramResult r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, detail::slurp_and_remove(errf), {}};
  if (keep_stdout) r.out = detail::slurp_and_remove(outf);
  return r;
}

// Lines of a program's output.
inline size_t lines(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

}  // namespace candle::test_models
