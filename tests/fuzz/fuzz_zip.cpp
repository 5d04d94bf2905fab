// libFuzzer: the ZIP reader (src/io/zip.cpp): the central directory, then every member read
// and CRC-checked. candle::Error is the expected outcome for bad input.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "candle/error.h"
#include "io/zip.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> archive(reinterpret_cast<const std::byte*>(data), size);
  try {
    candle::io::zip::Reader zip(archive, "fuzz archive");
    std::vector<std::byte> scratch;
    for (const auto& e : zip.entries()) {
      (void)zip.find(e.name);
      try {
        std::span<const std::byte> member = zip.read(e, scratch);
        volatile std::byte sink{};
        if (!member.empty()) sink = member[member.size() - 1];
        (void)sink;
      } catch (const candle::Error&) {
      }
    }
  } catch (const candle::Error&) {
  }
  return 0;
}
