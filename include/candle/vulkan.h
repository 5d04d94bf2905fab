// The Vulkan backend's own API (libcandle_vulkan.so; link candle::vulkan to call it).
//
// Tensors on Vulkan are made with Device::vulkan(i) (core), which opens this library with
// dlopen; these functions list the adapters, say which one best_adapter() picks, and report
// the backend's counters. libvulkan.so.1 is loaded at run time: where it is missing every
// function here throws candle::Error(Device).
//
// Environment:
//  CANDLE_VULKAN_ALLOW_CPU=1        allow software devices (lavapipe, deviceType CPU)
//  CANDLE_VULKAN_SYSTEM_MEMORY=1    allow a discrete card without Resizable BAR (tensors then
//                                   live in host-visible system memory)
//  CANDLE_VULKAN_CACHE_LIMIT_MB=N   MiB of freed blocks kept for reuse (default 1024, or 1/16
//                                   of the device's tensor-memory heap when that is larger)
//  CANDLE_VULKAN_TRACE=1            log every CPU round-trip to stderr
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace candle::vulkan {

struct MemoryHeapInfo {
  uint64_t size = 0;
  bool device_local = false;
};

struct MemoryTypeInfo {
  uint32_t heap = 0;
  bool device_local = false, host_visible = false, host_coherent = false, host_cached = false;
};

struct AdapterInfo {
  size_t index = 0;  // the ordinal of Device::vulkan(i): enumeration order
  std::string name;
  std::string type;  // "discrete", "integrated", "virtual", "cpu" or "other"
  uint32_t vendor_id = 0, device_id = 0;
  uint32_t api_version = 0;
  std::vector<MemoryHeapInfo> heaps;
  std::vector<MemoryTypeInfo> memory_types;
  // the largest heap with a device-local + host-visible + host-coherent memory type
  uint64_t host_visible_device_local_bytes = 0;
  bool resizable_bar = false;  // discrete, and that heap is bigger than 256 MiB
  bool f16 = false;            // shaderFloat16 + 16-bit storage: f16 kernels
  uint64_t max_storage_buffer_range = 0;
  // Whether Device::vulkan(index) would open it under the current environment, and why (not).
  bool usable = false;
  std::string verdict;
};

// Every adapter in enumeration order, probed afresh (the environment is read on each call).
std::vector<AdapterInfo> adapters();

// The adapter to use: a discrete card with Resizable BAR, else an integrated GPU, else (with
// CANDLE_VULKAN_SYSTEM_MEMORY=1) a discrete card without it; never a software device.
// nullopt when there is none. `why`, when given, receives the reason for the choice.
std::optional<size_t> best_adapter(std::string* why = nullptr);

// Throws the Error that Device::vulkan(index) would throw for this adapter (missing, software
// device without CANDLE_VULKAN_ALLOW_CPU, small BAR without CANDLE_VULKAN_SYSTEM_MEMORY), under
// the current environment; returns normally when it would open.
void probe_adapter(size_t index);

struct Stats {
  // CPU round-trips taken by Vulkan storages, by op name (also counted in backend_stats()).
  std::map<std::string, size_t> round_trips;
  size_t dispatches = 0;      // compute dispatches recorded
  size_t submits = 0;         // command buffers submitted
  size_t allocations = 0;     // new device blocks
  size_t cache_hits = 0;      // blocks reused from the cache
  uint64_t live_bytes = 0;    // bytes held by storages
  uint64_t cached_bytes = 0;  // bytes of freed blocks kept for reuse
  uint64_t bytes_uploaded = 0, bytes_downloaded = 0;
};

// Counters summed over every open Vulkan device.
Stats stats();
void reset_stats();

}  // namespace candle::vulkan
