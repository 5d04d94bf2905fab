// vk_memtypes: lists the Vulkan adapters with their memory heaps and types, whether each one
// would open (and why not), and which adapter candle::vulkan::best_adapter() picks.
#include <cstdio>
#include <string>

#include "candle/error.h"
#include "candle/vulkan.h"

int main() {
  using namespace candle::vulkan;
  try {
    auto list = adapters();
    if (list.empty()) std::printf("no Vulkan adapters\n");
    for (const auto& a : list) {
      std::printf("adapter %zu: %s (%s, vendor 0x%04x, device 0x%04x, Vulkan %u.%u)\n", a.index,
                  a.name.c_str(), a.type.c_str(), a.vendor_id, a.device_id, a.api_version >> 22,
                  (a.api_version >> 12) & 0x3ff);
      for (size_t h = 0; h < a.heaps.size(); ++h) {
        std::printf("  heap %zu: %8.1f MiB%s\n", h, static_cast<double>(a.heaps[h].size) / (1024.0 * 1024.0),
                    a.heaps[h].device_local ? "  device-local" : "");
      }
      for (size_t t = 0; t < a.memory_types.size(); ++t) {
        const auto& m = a.memory_types[t];
        std::printf("  type %2zu: heap %u %s%s%s%s\n", t, m.heap, m.device_local ? " device-local" : "",
                    m.host_visible ? " host-visible" : "", m.host_coherent ? " host-coherent" : "",
                    m.host_cached ? " host-cached" : "");
      }
      std::printf("  host-visible device-local heap: %.1f MiB, Resizable BAR: %s, f16 kernels: %s\n",
                  static_cast<double>(a.host_visible_device_local_bytes) / (1024.0 * 1024.0),
                  a.resizable_bar ? "yes" : "no", a.f16 ? "yes" : "no");
      std::printf("  maxStorageBufferRange: %.1f MiB\n",
                  static_cast<double>(a.max_storage_buffer_range) / (1024.0 * 1024.0));
      std::printf("  %s\n", a.verdict.c_str());
    }
    std::string why;
    auto best = best_adapter(&why);
    std::printf("best_adapter: %s\n", best ? std::to_string(*best).c_str() : "none");
    std::printf("  %s\n", why.c_str());
  } catch (const candle::Error& e) {
    std::printf("vk_memtypes: %s\n", e.what());
    return 1;
  }
  return 0;
}
