// Helpers of the io tests: temporary directories, file bytes, expected errors.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "candle/candle.h"

namespace candle::io_test {

inline std::string data_path(const std::string& name) {
  return std::string(CANDLE_TEST_DATA_DIR) + "/" + name;
}

// A fresh directory under the system temp dir, removed with its contents at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "candle-io-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  // Names of the entries in the directory, sorted.
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path_))
      out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::filesystem::path path_;
};

inline std::vector<std::byte> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << "cannot read " << path;
  std::vector<char> c((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(c.size());
  if (!c.empty()) std::memcpy(out.data(), c.data(), c.size());
  return out;
}

inline void write_bytes(const std::string& path, const std::vector<std::byte>& bytes) {
  std::filesystem::remove(path);  // a fresh file: truncating one is slow on some file systems
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline std::vector<std::byte> to_bytes(const std::string& s) {
  std::vector<std::byte> out(s.size());
  if (!s.empty()) std::memcpy(out.data(), s.data(), s.size());
  return out;
}

// Runs fn, which must throw candle::Error (and nothing else); returns the error.
template <typename Fn>
Error expect_error(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected candle::Error, got std::exception: " << e.what();
    return Error(ErrorKind::Internal, "<std::exception>");
  }
  ADD_FAILURE() << "expected candle::Error, nothing was thrown";
  return Error(ErrorKind::Internal, "<no error>");
}

// Runs fn, which may succeed or throw candle::Error, but nothing else (corrupted input).
template <typename Fn>
void expect_no_crash(Fn&& fn, const std::string& what) {
  try {
    fn();
  } catch (const Error&) {
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": expected candle::Error, got std::exception: " << e.what();
  }
}

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The raw bytes of a tensor's elements (row-major), for byte-exact comparisons.
inline std::vector<std::byte> tensor_bytes(const Tensor& t) {
  std::vector<std::byte> out(t.elem_count() * dtype_size(t.dtype()));
  dispatch(t.dtype(), [&]<typename T>() {
    auto v = t.flatten_to_vec<T>();
    if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
  });
  return out;
}

// A tensor of every dtype with distinctive bit patterns (negative values, NaN, infinity).
inline Tensor sample_tensor(DType dt, const Shape& shape) {
  size_t n = shape.elem_count();
  std::vector<std::byte> raw(n * dtype_size(dt));
  for (size_t i = 0; i < raw.size(); ++i) raw[i] = std::byte((i * 37 + 11) & 0xff);
  return Tensor::from_raw_buffer(raw, dt, shape, Device::cpu());
}

}  // namespace candle::io_test
