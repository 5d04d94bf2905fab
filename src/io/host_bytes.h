// The row-major little-endian bytes of a tensor, on the host. Internal (src/io).
#pragma once

#include <bit>
#include <memory>
#include <span>

#include "candle/backend/cpu_storage.h"
#include "candle/tensor.h"

namespace candle::io {

// The file formats are little-endian; so is every host we build for.
static_assert(std::endian::native == std::endian::little, "candle-cpp io assumes a little-endian host");

// Keeps the (possibly copied) contiguous tensor and its CPU storage alive for `bytes`.
struct HostBytes {
  Tensor contiguous;
  std::shared_ptr<CpuStorage> cpu;
  std::span<const std::byte> bytes;
};

inline HostBytes host_bytes(const Tensor& t) {
  HostBytes h;
  h.contiguous = t.contiguous();
  size_t nbytes = t.elem_count() * dtype_size(t.dtype());
  if (nbytes == 0) return h;
  h.cpu = h.contiguous.storage()->to_cpu();
  size_t offset = h.contiguous.layout().start_offset() * dtype_size(t.dtype());
  h.bytes = std::span<const std::byte>(h.cpu->bytes() + offset, nbytes);
  return h;
}

}  // namespace candle::io
