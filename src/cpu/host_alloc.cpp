#include "cpu/host_alloc.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "candle/error.h"
#include "candle/utils.h"
#include "core/sanitizer.h"
#include "cpu/parallel.h"

namespace candle {
namespace {

// Below kSmall: plain aligned_alloc, no cache. From 64 KiB up, blocks are cached: glibc maps
// allocations that large as fresh pages (its mmap threshold starts at 128 KiB) or trims them off
// its heap once freed, so a tensor of that size took a page fault per 4 KiB at its first writes,
// in every op: a 22-layer model of 256-wide layers took 37.8k faults in 11 pp128 runs and spent
// three quarters of its norms' and activations' time in them.
constexpr size_t kSmall = size_t{64} << 10;
constexpr size_t kHuge = 2 << 20;  // blocks from this size on are aligned to huge pages

// Rounds a size up to a size class (at most 1/8 above the request), so that tensors of nearly the
// same size share cached blocks: whole huge pages from kHuge up, whole 4 KiB pages below.
size_t size_class(size_t bytes) {
  size_t p = 1;
  while (p < bytes) p <<= 1;
  size_t step = std::max<size_t>(p / 16, bytes >= kHuge ? kHuge : 4096);
  return (bytes + step - 1) / step * step;
}

size_t default_limit() {
#if CANDLE_ASAN
  return 0;  // let AddressSanitizer see every use after free
#else
  if (const char* env = std::getenv("CANDLE_CPU_CACHE_LIMIT_MB")) {
    char* end = nullptr;
    long v = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && v >= 0) return static_cast<size_t>(v) << 20;
  }
  // An eighth of the machine's memory, between 1 and 4 GiB: enough to keep the 1 GiB
  // feature maps of a 64-channel 2048x2048 conv net (measured: a 5x5 64->64 conv at 2048x2048
  // took 4.6 s with fresh pages and 3.1 s with a cached output block on the dev machine).
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  size_t ram = pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : 0;
  return std::clamp(ram / 8, size_t{1} << 30, size_t{4} << 30);
#endif
}

class BlockCache {
 public:
  // A cached block of class `cls`, else the smallest one of at most twice its size (a block
  // that is already faulted in costs nothing to reuse; a fresh one costs its first touch of
  // every page, which made a process's first pass slower than its later ones). Sets `got` to
  // the block's class; nullptr when none fits.
  void* take(size_t cls, size_t& got) {
    std::lock_guard lock(mu_);
    for (auto it = free_.lower_bound(cls); it != free_.end() && it->first <= 2 * cls; ++it) {
      if (it->second.empty()) continue;
      void* p = it->second.back();
      it->second.pop_back();
      got = it->first;
      cached_ -= got;
      return p;
    }
    return nullptr;
  }
  void give(void* p, size_t cls) {
    {
      std::lock_guard lock(mu_);
      if (cached_ + cls <= limit_) {
        free_[cls].push_back(p);
        cached_ += cls;
        return;
      }
    }
    std::free(p);
  }
  size_t limit() {
    std::lock_guard lock(mu_);
    return limit_;
  }
  void set_limit(size_t bytes) {
    {
      std::lock_guard lock(mu_);
      limit_ = bytes;
      if (cached_ <= limit_) return;
    }
    clear();
  }
  size_t cached_bytes() {
    std::lock_guard lock(mu_);
    return cached_;
  }
  void clear() {
    std::lock_guard lock(mu_);
    for (auto& [cls, blocks] : free_)
      for (void* p : blocks) std::free(p);
    free_.clear();
    cached_ = 0;
  }

 private:
  std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;
  size_t cached_ = 0;
  size_t limit_ = default_limit();
};

// Never destroyed: storages released during static destruction still find it.
BlockCache& cache() {
  static BlockCache* c = new BlockCache();
  return *c;
}

[[noreturn]] void out_of_memory(size_t bytes) {
  throw Error(ErrorKind::Device, "cpu: out of memory allocating " + std::to_string(bytes) + " bytes");
}

}  // namespace

namespace cpu {
namespace {

// Faults in the pages of a fresh block far larger than the caches, in parallel chunks, with
// MADV_POPULATE_WRITE (Linux 5.14): the kernel maps and zeroes them without a trap per page,
// which the first writes of a kernel would otherwise take one by one (the 12.9 GB output of
// an x8 upsample of 192 channels took 3 million of them). Older kernels: a no-op.
void prefault(void* p, size_t bytes) {
#ifndef MADV_POPULATE_WRITE
  constexpr int MADV_POPULATE_WRITE = 23;
#endif
  static std::atomic<bool> supported{true};
  if (!supported.load(std::memory_order_relaxed) || bytes < (size_t{256} << 20)) return;
  // the whole pages inside [p, p + bytes), as a pointer and a length (no integer-to-pointer casts)
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t head = (page - reinterpret_cast<uintptr_t>(p) % page) % page;
  if (bytes <= head) return;
  char* const lo = static_cast<char*>(p) + head;
  const size_t span = (bytes - head) / page * page;
  constexpr size_t kChunk = size_t{64} << 20;
  const size_t chunks = (span + kChunk - 1) / kChunk;
  parallel_for(chunks, 1, [&](size_t c0, size_t c1) {
    for (size_t c = c0; c < c1; ++c) {
      const size_t off = c * kChunk, len = std::min(span - off, kChunk);
      if (madvise(lo + off, len, MADV_POPULATE_WRITE) != 0) supported.store(false, std::memory_order_relaxed);
    }
  });
}

}  // namespace

std::shared_ptr<void> host_alloc(size_t bytes) {
  if (bytes == 0) return nullptr;
  if (bytes < kSmall) {
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) out_of_memory(bytes);
    return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  }
  size_t cls = size_class(bytes);
  if (cls > cache().limit()) {
    // Too big to ever be cached: a plain allocation, without the huge-page hint (with the
    // kernel's defrag=madvise default, first touch of a 3.2 GB block measured 1.4-3.4x slower
    // with MADV_HUGEPAGE; reused cached blocks pay that once).
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) out_of_memory(bytes);
    prefault(p, bytes);
    return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  }
  size_t got = cls;
  void* p = cache().take(cls, got);
  if (p) {
    cls = got;
  } else {
    const size_t align = cls >= kHuge ? kHuge : 4096;
    p = std::aligned_alloc(align, cls);
    if (!p) {
      cache().clear();
      p = std::aligned_alloc(align, cls);
      if (!p) out_of_memory(bytes);
    }
#ifdef MADV_HUGEPAGE
    if (cls >= kHuge) madvise(p, cls, MADV_HUGEPAGE);
#endif
  }
  return std::shared_ptr<void>(p, [cls](void* q) { cache().give(q, cls); });
}

}  // namespace cpu

size_t cpu_cache_bytes() { return cache().cached_bytes(); }
size_t cpu_cache_limit() { return cache().limit(); }
void set_cpu_cache_limit(size_t bytes) { cache().set_limit(bytes); }
void empty_cpu_cache() { cache().clear(); }

}  // namespace candle
