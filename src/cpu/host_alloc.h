// Host memory for CPU storages: 64-byte aligned; large blocks are 2 MiB aligned (transparent
// huge pages) and kept in a bounded cache after release, so that the next tensor of the same
// size class reuses them without page faults.
#pragma once

#include <cstddef>
#include <memory>

namespace candle::cpu {

// A block of at least `bytes` bytes, released through the returned owner. Throws Error(Device)
// when the system has no memory left.
std::shared_ptr<void> host_alloc(size_t bytes);

}  // namespace candle::cpu
