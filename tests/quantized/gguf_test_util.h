// Helpers of the GGUF / GGML tests: the corpus directory, file bytes, expected errors.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "candle/error.h"
#include "candle/quantized/quantized.h"

namespace candle::quantized::test {

inline std::string corpus_path(const std::string& dir, const std::string& name) {
  return std::string(CANDLE_TEST_DATA_DIR) + "/../fuzz/corpus/" + dir + "/" + name;
}
inline std::string fixture_path(const std::string& name) {
  return std::string(CANDLE_TEST_DATA_DIR) + "/quantized/" + name;
}
inline std::string source_path(const std::string& rel) {
  return std::string(CANDLE_TEST_DATA_DIR) + "/../../" + rel;
}

inline std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << "cannot read " << path;
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

inline void put_file(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// Runs fn, which must throw candle::Error; returns its what().
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected candle::Error, got std::exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected candle::Error, nothing was thrown";
  return "";
}

inline std::vector<float> f32s(const QTensor& t) {
  std::vector<float> v(t.data().size() / 4);
  if (!v.empty()) std::memcpy(v.data(), t.data().data(), v.size() * 4);
  return v;
}

// A little-endian byte builder for hand-made files.
struct Bytes {
  std::vector<uint8_t> b;
  template <typename T>
  Bytes& pod(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof v);
    return *this;
  }
  Bytes& u32(uint32_t v) { return pod(v); }
  Bytes& u64(uint64_t v) { return pod(v); }
  Bytes& f32(float v) { return pod(v); }
  Bytes& str(const std::string& s) {
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& zeros(size_t n) {
    b.insert(b.end(), n, 0);
    return *this;
  }
  Bytes& pad_to(size_t a) { return zeros((a - b.size() % a) % a); }
};

// The blocks of a Q8_0 tensor: block i has the f16 scale bits scale_bits(i) and quants q(i, j).
inline std::vector<uint8_t> q8_0_blocks(size_t n_blocks, uint16_t (*scale_bits)(size_t),
                                        int8_t (*q)(size_t, size_t)) {
  Bytes out;
  for (size_t i = 0; i < n_blocks; ++i) {
    out.pod(scale_bits(i));
    for (size_t j = 0; j < 32; ++j) out.pod(q(i, j));
  }
  return out.b;
}

}  // namespace candle::quantized::test
