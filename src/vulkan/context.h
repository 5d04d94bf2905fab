// The Vulkan context behind a small interface that does not include vulkan.hpp: kernels'
// host code (ops_*.cpp) goes through it, so only context.cpp compiles the heavy headers.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

#include "candle/device.h"

namespace candle::vk_backend {

// A device buffer (storage buffer, host-visible memory); defined in context.cpp. Freed blocks
// go back to the context's size-class cache once the GPU is done with them.
struct Block;
using BlockPtr = std::shared_ptr<Block>;
size_t block_bytes(const Block& b);

// One descriptor binding: bytes [offset, offset + size) of a block. offset must be a multiple
// of Features::offset_align and size at most Features::max_range.
struct Binding {
  const Block* block;
  uint64_t offset;
  uint64_t size;
};

struct Features {
  bool f16 = false;            // shaderFloat16 + storageBuffer16BitAccess: float16_t buffers
  bool int16 = false;          // shaderInt16 + storageBuffer16BitAccess: uint16_t buffers
  bool int8 = false;           // shaderInt8 + storageBuffer8BitAccess: uint8_t buffers
  bool int64 = false;          // shaderInt64
  uint64_t max_range = 0;      // maxStorageBufferRange
  uint64_t offset_align = 16;  // minStorageBufferOffsetAlignment
  uint64_t max_alloc = 0;      // largest block
  uint32_t max_groups[3] = {65535, 65535, 65535};
};

class Context {
 public:
  // Opens adapter `index` (enumeration order); throws Error(Device) when it is refused.
  static std::shared_ptr<Context> open(size_t index);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const std::string& name() const;
  size_t index() const;
  const Features& features() const;
  // Free / total bytes of the heap tensors live in (VK_EXT_memory_budget's budget less the
  // heap's usage, where the driver has it; else the heap less this process's live blocks), the
  // blocks this process keeps cached counted as free; max_buffer_bytes: the largest binding.
  DeviceMemory memory() const;

  // A block of at least `bytes` (uninitialised), from the cache when one fits.
  BlockPtr alloc(size_t bytes);
  // Host -> block through the mapping; the block must not be in use by queued GPU work (a
  // block fresh from alloc()).
  void write(const Block& b, size_t offset, const void* src, size_t bytes);
  // Block -> host: submits queued work and waits for it first.
  void read(const Block& b, size_t offset, void* dst, size_t bytes);

  // Records a dispatch of kernel `kernel` (a name from kernels/vulkan, e.g. "unary_f32") with
  // storage buffers at bindings 0.. in order and push constants `push` (at most 128 bytes).
  // Work is batched: it runs at the next read()/synchronize() or when the batch is full.
  void dispatch(const char* kernel, const Binding* bindings, size_t n_bindings, const void* push,
                size_t push_bytes, uint32_t groups_x, uint32_t groups_y = 1, uint32_t groups_z = 1);
  void dispatch(const char* kernel, std::initializer_list<Binding> bindings, const void* push,
                size_t push_bytes, uint32_t groups_x, uint32_t groups_y = 1, uint32_t groups_z = 1) {
    dispatch(kernel, bindings.begin(), bindings.size(), push, push_bytes, groups_x, groups_y, groups_z);
  }
  // Records buffer-to-buffer copies (any size, no binding limits): bytes [src_off, +bytes) of
  // src to dst_off of dst, per region.
  struct CopyRegion {
    uint64_t src_off, dst_off, bytes;
  };
  void copy(const Block& src, const Block& dst, const CopyRegion* regions, size_t n);
  // Records a buffer fill with a 32-bit pattern (offset and bytes multiples of 4).
  void fill(const Block& b, uint64_t offset, uint64_t bytes, uint32_t pattern);
  // Submits queued work and waits for all of it.
  void synchronize();

  // Index checks on the device. A kernel that finds an out-of-range id records it in a small
  // fault block (bound with fault_binding()) under the tag this returns; the error
  // (IndexOutOfRange naming `op`, the id, `dim`, `limit` and `shape`) is thrown by the next
  // read() or synchronize(), once the GPU is idle. Words of the fault block: [0] the tag of the
  // first failed check, [1] the first bad position in its ids, [2..3] that id (low, high),
  // [4] non-zero when later checks failed too.
  uint32_t register_id_check(const char* op, size_t dim, size_t limit, const std::string& shape);
  Binding fault_binding() const;

  struct Impl;

 private:
  explicit Context(std::unique_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

// Process-wide counters (vulkan::stats()).
struct Counters {
  std::atomic<size_t> dispatches{0}, submits{0}, allocations{0}, cache_hits{0};
  std::atomic<uint64_t> live_bytes{0}, cached_bytes{0}, uploaded{0}, downloaded{0};
};
Counters& counters();

// Environment switches.
bool env_flag(const char* name);

}  // namespace candle::vk_backend
