// The one translation unit that includes vulkan.hpp: the loader and instance, adapter probing
// (vulkan.h), and Context: device, memory blocks with a size-class cache, pipelines and the
// batched command submission.
#include "context.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>
#include <vulkan/vulkan.hpp>

#include "candle/error.h"
#include "candle/vulkan.h"
#include "kernels_spv.h"

VULKAN_HPP_DEFAULT_DISPATCH_LOADER_DYNAMIC_STORAGE

namespace candle::vk_backend {

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

Counters& counters() {
  static Counters c;
  return c;
}

namespace {

constexpr uint64_t kMiB = uint64_t{1024} * 1024;
constexpr uint64_t kBarWindow = 256 * kMiB;
constexpr uint32_t kPushBytes = 128;
constexpr uint32_t kBatchDispatches = 256;  // a full batch is submitted without waiting
constexpr size_t kMaxInflight = 3;
constexpr uint32_t kSetsPerPool = 128;
constexpr uint32_t kMaxBindings = 8;

[[noreturn]] void fail(const std::string& msg) { throw Error(ErrorKind::Device, "vulkan: " + msg); }

struct Loader {
  vk::DynamicLoader dl;
  vk::Instance instance;
  std::vector<vk::PhysicalDevice> pds;
};

// The process-wide loader and instance, made on first use and kept for the process's life.
Loader& loader() {
  static std::mutex mu;
  static Loader* l = nullptr;
  std::lock_guard lock(mu);
  if (l) return *l;
  Loader* nl = nullptr;
  try {
    nl = new Loader();
  } catch (const std::exception& e) {
    fail(std::string("the Vulkan loader (libvulkan.so.1) could not be loaded: ") + e.what());
  }
  try {
    auto gipa = nl->dl.getProcAddress<PFN_vkGetInstanceProcAddr>("vkGetInstanceProcAddr");
    if (!gipa) fail("libvulkan.so.1 has no vkGetInstanceProcAddr");
    VULKAN_HPP_DEFAULT_DISPATCHER.init(gipa);
    vk::ApplicationInfo app("candle", 1, "candle", 1, VK_API_VERSION_1_1);
    vk::InstanceCreateInfo ci({}, &app);
    nl->instance = vk::createInstance(ci);
    VULKAN_HPP_DEFAULT_DISPATCHER.init(nl->instance);
    nl->pds = nl->instance.enumeratePhysicalDevices();
  } catch (const vk::SystemError& e) {
    delete nl;
    fail(std::string("cannot create a Vulkan instance (no driver installed?): ") + e.what());
  }
  l = nl;
  return *l;
}

bool has_extension(vk::PhysicalDevice pd, const char* name) {
  for (const auto& e : pd.enumerateDeviceExtensionProperties())
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

struct DeviceFeatures {
  vk::PhysicalDeviceFeatures2 f2;
  vk::PhysicalDevice16BitStorageFeatures s16;
  vk::PhysicalDevice8BitStorageFeatures s8;
  vk::PhysicalDeviceShaderFloat16Int8Features f16i8;
  bool has12 = false;  // 8-bit storage and float16/int8 queryable (1.2 or the extensions)
  bool ext8 = false, extf16 = false;

  void chain() {
    f2.pNext = &s16;
    s16.pNext = has12 ? static_cast<void*>(&s8) : nullptr;
    s8.pNext = &f16i8;
    f16i8.pNext = nullptr;
  }
  void query(vk::PhysicalDevice pd, uint32_t api) {
    ext8 = api < VK_API_VERSION_1_2 && has_extension(pd, VK_KHR_8BIT_STORAGE_EXTENSION_NAME);
    extf16 = api < VK_API_VERSION_1_2 && has_extension(pd, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
    has12 = api >= VK_API_VERSION_1_2 || (ext8 && extf16);
    chain();
    pd.getFeatures2(&f2);
  }
  bool f16() const { return has12 && f16i8.shaderFloat16 && s16.storageBuffer16BitAccess; }
  bool int16() const { return f2.features.shaderInt16 && s16.storageBuffer16BitAccess; }
  bool int8() const { return has12 && f16i8.shaderInt8 && s8.storageBuffer8BitAccess; }
  bool int64() const { return f2.features.shaderInt64; }
};

const char* type_name(vk::PhysicalDeviceType t) {
  switch (t) {
    case vk::PhysicalDeviceType::eDiscreteGpu: return "discrete";
    case vk::PhysicalDeviceType::eIntegratedGpu: return "integrated";
    case vk::PhysicalDeviceType::eVirtualGpu: return "virtual";
    case vk::PhysicalDeviceType::eCpu: return "cpu";
    default: return "other";
  }
}

std::string mib(uint64_t b) { return std::to_string(b / kMiB) + " MiB"; }

enum class MemMode { Refused, DeviceMemory, SystemMemory };

struct Probe {
  vulkan::AdapterInfo info;
  MemMode mode = MemMode::Refused;
  int rank = 0;  // best_adapter's preference; 0: never picked
};

constexpr auto kHV = vk::MemoryPropertyFlagBits::eHostVisible;
constexpr auto kHC = vk::MemoryPropertyFlagBits::eHostCoherent;
constexpr auto kDL = vk::MemoryPropertyFlagBits::eDeviceLocal;
constexpr auto kCached = vk::MemoryPropertyFlagBits::eHostCached;

Probe probe(size_t index, vk::PhysicalDevice pd) {
  Probe p;
  auto& a = p.info;
  auto props = pd.getProperties();
  auto mem = pd.getMemoryProperties();
  a.index = index;
  a.name = props.deviceName.data();
  a.type = type_name(props.deviceType);
  a.vendor_id = props.vendorID;
  a.device_id = props.deviceID;
  a.api_version = props.apiVersion;
  a.max_storage_buffer_range = props.limits.maxStorageBufferRange;
  for (uint32_t i = 0; i < mem.memoryHeapCount; ++i)
    a.heaps.push_back(
        {mem.memoryHeaps[i].size, bool(mem.memoryHeaps[i].flags & vk::MemoryHeapFlagBits::eDeviceLocal)});
  bool system_hv = false;
  for (uint32_t i = 0; i < mem.memoryTypeCount; ++i) {
    auto f = mem.memoryTypes[i].propertyFlags;
    vulkan::MemoryTypeInfo t{mem.memoryTypes[i].heapIndex, bool(f & kDL), bool(f & kHV), bool(f & kHC),
                             bool(f & kCached)};
    a.memory_types.push_back(t);
    if (t.device_local && t.host_visible && t.host_coherent)
      a.host_visible_device_local_bytes = std::max(a.host_visible_device_local_bytes, a.heaps[t.heap].size);
    if (!t.device_local && t.host_visible && t.host_coherent) system_hv = true;
  }
  const bool discrete = props.deviceType == vk::PhysicalDeviceType::eDiscreteGpu;
  a.resizable_bar = discrete && a.host_visible_device_local_bytes > kBarWindow;
  if (props.apiVersion >= VK_API_VERSION_1_1) {
    DeviceFeatures df;
    df.query(pd, props.apiVersion);
    a.f16 = df.f16();
  }

  bool compute = false;
  for (const auto& q : pd.getQueueFamilyProperties())
    if (q.queueFlags & vk::QueueFlagBits::eCompute) compute = true;
  const bool allow_cpu = env_flag("CANDLE_VULKAN_ALLOW_CPU");
  const bool allow_sys = env_flag("CANDLE_VULKAN_SYSTEM_MEMORY");
  auto refuse = [&](const std::string& why) {
    a.usable = false;
    a.verdict = "refused: " + why;
    p.mode = MemMode::Refused;
  };
  auto accept = [&](MemMode m, int rank, const std::string& why) {
    a.usable = true;
    a.verdict = "usable: " + why;
    p.mode = m;
    p.rank = rank;
  };
  const uint64_t hvdl = a.host_visible_device_local_bytes;
  if (props.apiVersion < VK_API_VERSION_1_1) {
    refuse("needs Vulkan 1.1");
  } else if (!compute) {
    refuse("no compute queue");
  } else if (props.deviceType == vk::PhysicalDeviceType::eCpu) {
    if (allow_cpu && hvdl)
      accept(MemMode::DeviceMemory, 0, "software device, allowed by CANDLE_VULKAN_ALLOW_CPU=1");
    else
      refuse("software device (" + a.name + "); set CANDLE_VULKAN_ALLOW_CPU=1 to use it");
  } else if (discrete) {
    if (a.resizable_bar)
      accept(MemMode::DeviceMemory, 3,
             "discrete GPU with Resizable BAR (" + mib(hvdl) + " host-visible VRAM)");
    else if (allow_sys && system_hv)
      accept(MemMode::SystemMemory, 1,
             "discrete GPU without Resizable BAR; tensors in host-visible system memory "
             "(CANDLE_VULKAN_SYSTEM_MEMORY=1)");
    else
      refuse("discrete GPU whose host-visible VRAM is only a " + mib(hvdl) +
             " BAR window; enable Resizable BAR, or set CANDLE_VULKAN_SYSTEM_MEMORY=1 to keep tensors in "
             "system memory");
  } else if (hvdl) {
    accept(MemMode::DeviceMemory, props.deviceType == vk::PhysicalDeviceType::eIntegratedGpu ? 2 : 1,
           std::string(a.type) + " GPU with " + mib(hvdl) + " of host-visible device memory");
  } else if (allow_sys && system_hv) {
    accept(MemMode::SystemMemory, 1, a.type + " GPU; tensors in host-visible system memory");
  } else {
    refuse("no host-visible device memory (set CANDLE_VULKAN_SYSTEM_MEMORY=1 to use system memory)");
  }
  return p;
}

Probe probe_index(size_t index) {
  auto& l = loader();
  if (index >= l.pds.size()) {
    fail("no adapter " + std::to_string(index) + " (" + std::to_string(l.pds.size()) + " found" +
         (l.pds.empty() ? ": no Vulkan driver for any device" : "") + ")");
  }
  return probe(index, l.pds[index]);
}

// Picks a memory type: all of `need`, preferring `want`, then `dl` as asked, on the largest heap.
int32_t pick_type(const vk::PhysicalDeviceMemoryProperties& mem, vk::MemoryPropertyFlags need,
                  vk::MemoryPropertyFlags want, int want_dl) {
  int32_t best = -1;
  int64_t best_score = -1;
  for (uint32_t i = 0; i < mem.memoryTypeCount; ++i) {
    auto f = mem.memoryTypes[i].propertyFlags;
    if ((f & need) != need) continue;
    int64_t score = 0;
    if ((f & want) == want) score += int64_t(1) << 62;
    if (want_dl >= 0 && bool(f & kDL) == bool(want_dl)) score += int64_t(1) << 61;
    score += static_cast<int64_t>(mem.memoryHeaps[mem.memoryTypes[i].heapIndex].size >> 20);
    if (score > best_score) {
      best_score = score;
      best = static_cast<int32_t>(i);
    }
  }
  return best;
}

}  // namespace

struct Block {
  vk::Buffer buf;
  vk::DeviceMemory mem;
  std::byte* map = nullptr;
  size_t bytes = 0;
  // The batch that may still read or write the block (0: none). A released block is reused
  // at once by later GPU work (every dispatch is ordered after all earlier ones by a full
  // barrier), but the host waits for that batch before touching its memory, and it is not
  // destroyed before then.
  uint64_t busy_serial = 0;
};

size_t block_bytes(const Block& b) { return b.bytes; }

struct Context::Impl : std::enable_shared_from_this<Context::Impl> {
  size_t index = 0;
  std::string name;
  Features feat;
  vk::PhysicalDevice pd;
  vk::Device dev;
  vk::Queue queue;
  uint32_t qfam = 0;
  uint32_t mem_type = 0;
  bool mem_cached = false;
  uint32_t heap = 0;        // the heap of mem_type
  bool has_budget = false;  // VK_EXT_memory_budget
  int32_t staging_type = -1;
  vk::CommandPool cmd_pool;
  vk::PipelineCache pcache;
  std::mutex mu;

  struct Pipe {
    vk::ShaderModule mod;
    vk::DescriptorSetLayout dsl;
    vk::PipelineLayout layout;
    vk::Pipeline pipe;
    uint32_t nbind = 0;
  };
  std::unordered_map<std::string, Pipe> pipes;

  struct Pool {
    vk::DescriptorPool pool;
    uint32_t sets = 0;
  };
  struct Batch {
    vk::CommandBuffer cb;
    vk::Fence fence;
    std::vector<Pool> pools;
    size_t pool_i = 0;
    uint64_t serial = 0;
    uint32_t n = 0;
  };
  std::vector<std::unique_ptr<Batch>> spare;
  std::deque<std::unique_ptr<Batch>> inflight;
  std::unique_ptr<Batch> rec;
  uint64_t next_serial = 1, completed_serial = 0;

  struct Deferred {
    uint64_t serial;
    Block* b;
  };
  std::vector<Deferred> deferred;
  std::multimap<size_t, std::pair<uint64_t, Block*>> cache;
  // index checks (register_id_check): the fault block and the checks not yet known to pass
  struct IdCheck {
    uint64_t serial;
    uint32_t tag;
    std::string op, shape;
    size_t dim, limit;
  };
  static constexpr size_t kFaultBytes = 256;
  Block* fault = nullptr;
  std::deque<IdCheck> checks;
  uint32_t next_tag = 1;
  std::optional<std::string> fault_msg;  // the first failed check since the last report
  bool fault_more = false;               // and later ones failed too
  uint64_t cache_bytes = 0, cache_limit = 1024 * kMiB, tick = 0;
  Block* staging = nullptr;

  ~Impl() {
    try {
      if (!dev) return;
      wait_all();
      dev.waitIdle();
      for (auto& d : deferred) destroy(d.b);
      for (auto& [c, e] : cache) destroy(e.second);
      if (staging) destroy(staging);
      if (fault) destroy(fault);
      counters().cached_bytes -= cache_bytes;
      auto drop = [&](std::unique_ptr<Batch>& b) {
        for (auto& p : b->pools) dev.destroyDescriptorPool(p.pool);
        dev.destroyFence(b->fence);
      };
      for (auto& b : spare) drop(b);
      if (rec) drop(rec);
      for (auto& [n, p] : pipes) {
        dev.destroyPipeline(p.pipe);
        dev.destroyPipelineLayout(p.layout);
        dev.destroyDescriptorSetLayout(p.dsl);
        dev.destroyShaderModule(p.mod);
      }
      dev.destroyPipelineCache(pcache);
      dev.destroyCommandPool(cmd_pool);
      dev.destroy();
    } catch (...) {
    }
  }

  // ---- memory --------------------------------------------------------------------------

  static size_t size_class(size_t bytes) {
    size_t c = std::max<size_t>(bytes, 256);
    size_t p = std::bit_floor(c);
    size_t step = std::max<size_t>(p / 4, 256);
    return (c + step - 1) / step * step;
  }

  Block* create(size_t bytes, uint32_t type, bool storage) {
    auto* b = new Block();
    b->bytes = bytes;
    try {
      vk::BufferUsageFlags usage =
          vk::BufferUsageFlagBits::eTransferSrc | vk::BufferUsageFlagBits::eTransferDst;
      if (storage) usage |= vk::BufferUsageFlagBits::eStorageBuffer;
      b->buf = dev.createBuffer(vk::BufferCreateInfo({}, bytes, usage, vk::SharingMode::eExclusive));
      auto req = dev.getBufferMemoryRequirements(b->buf);
      if (!(req.memoryTypeBits & (1u << type))) fail("the chosen memory type cannot hold storage buffers");
      b->mem = dev.allocateMemory(vk::MemoryAllocateInfo(req.size, type));
      dev.bindBufferMemory(b->buf, b->mem, 0);
      b->map = static_cast<std::byte*>(dev.mapMemory(b->mem, 0, VK_WHOLE_SIZE));
    } catch (...) {
      destroy(b);
      throw;
    }
    return b;
  }

  // Waits until the GPU is done with `b` (submitting the batch being recorded if needed).
  void wait_idle_for(const Block* b) {
    if (b->busy_serial > completed_serial) wait_all();
  }

  void destroy(Block* b) {
    if (b->busy_serial > completed_serial) {
      try {
        wait_all();
      } catch (...) {
      }
    }
    if (b->map) dev.unmapMemory(b->mem);
    if (b->buf) dev.destroyBuffer(b->buf);
    if (b->mem) dev.freeMemory(b->mem);
    delete b;
  }

  void drain_cache() {
    for (auto& [c, e] : cache) destroy(e.second);
    cache.clear();
    counters().cached_bytes -= cache_bytes;
    cache_bytes = 0;
  }

  Block* take(size_t bytes) {
    const size_t cls = size_class(bytes);
    if (cls > feat.max_alloc) {
      throw Error(ErrorKind::Device, "vulkan: cannot allocate " + std::to_string(bytes) + " bytes on " +
                                         name + " (largest allocation " + std::to_string(feat.max_alloc) +
                                         ")");
    }
    auto it = cache.find(cls);
    if (it != cache.end()) {
      Block* b = it->second.second;
      cache.erase(it);
      cache_bytes -= cls;
      counters().cached_bytes -= cls;
      ++counters().cache_hits;
      return b;
    }
    for (int attempt = 0;; ++attempt) {
      try {
        Block* b = create(cls, mem_type, true);
        ++counters().allocations;
        return b;
      } catch (const vk::SystemError& e) {
        if (attempt == 0 && !cache.empty()) {
          drain_cache();
          continue;
        }
        throw Error(ErrorKind::Device, "vulkan: out of memory allocating " + std::to_string(cls) +
                                           " bytes on " + name + " (" + e.what() + ")");
      }
    }
  }

  void to_cache(Block* b) {
    if (b->bytes > cache_limit) {
      destroy(b);
      return;
    }
    cache.emplace(b->bytes, std::make_pair(++tick, b));
    cache_bytes += b->bytes;
    counters().cached_bytes += b->bytes;
    while (cache_bytes > cache_limit) {
      auto oldest = cache.begin();
      for (auto i = cache.begin(); i != cache.end(); ++i)
        if (i->second.first < oldest->second.first) oldest = i;
      cache_bytes -= oldest->first;
      counters().cached_bytes -= oldest->first;
      destroy(oldest->second.second);
      cache.erase(oldest);
    }
  }

  void release(Block* b) {
    std::lock_guard lock(mu);
    counters().live_bytes -= b->bytes;
    b->busy_serial = rec ? rec->serial : (inflight.empty() ? 0 : inflight.back()->serial);
    to_cache(b);
  }

  // ---- batches -------------------------------------------------------------------------

  Batch& recording() {
    if (rec) return *rec;
    if (!spare.empty()) {
      rec = std::move(spare.back());
      spare.pop_back();
    } else {
      rec = std::make_unique<Batch>();
      rec->cb = dev.allocateCommandBuffers(
          vk::CommandBufferAllocateInfo(cmd_pool, vk::CommandBufferLevel::ePrimary, 1))[0];
      rec->fence = dev.createFence({});
    }
    rec->serial = next_serial++;
    rec->n = 0;
    rec->pool_i = 0;
    for (auto& p : rec->pools) {
      dev.resetDescriptorPool(p.pool);
      p.sets = 0;
    }
    rec->cb.begin(vk::CommandBufferBeginInfo(vk::CommandBufferUsageFlagBits::eOneTimeSubmit));
    return *rec;
  }

  // Orders everything recorded (or submitted) before against what follows.
  void barrier(Batch& b) {
    vk::MemoryBarrier mb(vk::AccessFlagBits::eShaderWrite | vk::AccessFlagBits::eTransferWrite,
                         vk::AccessFlagBits::eShaderRead | vk::AccessFlagBits::eShaderWrite |
                             vk::AccessFlagBits::eTransferRead | vk::AccessFlagBits::eTransferWrite);
    auto stages = vk::PipelineStageFlagBits::eComputeShader | vk::PipelineStageFlagBits::eTransfer;
    b.cb.pipelineBarrier(stages, stages, {}, mb, {}, {});
  }

  void submit() {
    if (!rec) return;
    vk::MemoryBarrier mb(vk::AccessFlagBits::eShaderWrite | vk::AccessFlagBits::eTransferWrite,
                         vk::AccessFlagBits::eHostRead);
    rec->cb.pipelineBarrier(vk::PipelineStageFlagBits::eComputeShader | vk::PipelineStageFlagBits::eTransfer,
                            vk::PipelineStageFlagBits::eHost, {}, mb, {}, {});
    rec->cb.end();
    vk::SubmitInfo si({}, {}, rec->cb, {});
    queue.submit(si, rec->fence);
    ++counters().submits;
    inflight.push_back(std::move(rec));
  }

  void finish_front() {
    auto& b = inflight.front();
    while (dev.waitForFences(b->fence, VK_TRUE, UINT64_MAX) == vk::Result::eTimeout) {
    }
    dev.resetFences(b->fence);
    b->cb.reset();
    uint64_t done = b->serial;
    completed_serial = std::max(completed_serial, done);
    spare.push_back(std::move(b));
    inflight.pop_front();
    // checks recorded up to this batch passed unless a fault is set (kept for the report)
    if (fault && fault_words()[0] == 0)
      while (!checks.empty() && checks.front().serial <= done) checks.pop_front();
    size_t keep = 0;
    for (auto& d : deferred) {
      if (d.serial <= done)
        to_cache(d.b);
      else
        deferred[keep++] = d;
    }
    deferred.resize(keep);
  }

  void retire_finished() {
    while (!inflight.empty() && dev.getFenceStatus(inflight.front()->fence) == vk::Result::eSuccess)
      finish_front();
  }

  void wait_all() {
    submit();
    while (!inflight.empty()) finish_front();
    if (fault && fault_words()[0] != 0) take_fault();
  }

  uint32_t* fault_words() const { return reinterpret_cast<uint32_t*>(fault->map); }

  void reset_fault() {
    uint32_t w[8] = {0, 0xffffffffu, 0, 0, 0, 0, 0, 0};
    std::memcpy(fault->map, w, sizeof(w));
  }

  // The GPU is idle and a check failed: turns the fault into the error the next read() or
  // synchronize() throws, and clears the fault block.
  void take_fault() {
    const uint32_t* w = fault_words();
    std::string msg;
    for (const auto& c : checks) {
      if (c.tag != w[0]) continue;
      const uint64_t raw = uint64_t(w[2]) | uint64_t(w[3]) << 32;
      const bool wide = w[3] != 0 || raw > 0xffffffffull;
      msg = "index out of range in " + c.op + ": index " +
            (wide ? std::to_string(static_cast<int64_t>(raw)) : std::to_string(raw)) + " at position " +
            std::to_string(w[1]) + " for dim " + std::to_string(c.dim) + " of size " +
            std::to_string(c.limit) + " (shape " + c.shape + ")";
      break;
    }
    if (msg.empty()) msg = "index out of range in an indexing op (its record is gone)";
    if (fault_msg || w[4]) fault_more = true;
    if (!fault_msg)
      fault_msg = msg + "; found by a kernel on " + name + " and reported at the next synchronisation";
    checks.clear();
    reset_fault();
  }

  void throw_fault() {
    if (!fault_msg) return;
    std::string msg = *fault_msg + (fault_more ? " (later indexing ops had out-of-range ids too)" : "");
    fault_msg.reset();
    fault_more = false;
    throw Error(ErrorKind::IndexOutOfRange, msg);
  }

  void after_record() {
    ++rec->n;
    if (rec->n >= kBatchDispatches) {
      submit();
      retire_finished();
      while (inflight.size() > kMaxInflight) finish_front();
    }
  }

  vk::DescriptorSet alloc_set(Batch& b, vk::DescriptorSetLayout dsl) {
    if (b.pool_i < b.pools.size() && b.pools[b.pool_i].sets == kSetsPerPool) ++b.pool_i;
    if (b.pool_i == b.pools.size()) {
      vk::DescriptorPoolSize ps(vk::DescriptorType::eStorageBuffer, kSetsPerPool * kMaxBindings);
      b.pools.push_back({dev.createDescriptorPool(vk::DescriptorPoolCreateInfo({}, kSetsPerPool, ps)), 0});
    }
    Pool& p = b.pools[b.pool_i];
    ++p.sets;
    return dev.allocateDescriptorSets(vk::DescriptorSetAllocateInfo(p.pool, dsl))[0];
  }

  Pipe& pipeline(const char* kernel, uint32_t nbind) {
    auto it = pipes.find(kernel);
    if (it != pipes.end()) {
      if (it->second.nbind != nbind) {
        throw Error(ErrorKind::Internal, std::string("vulkan: kernel ") + kernel + " dispatched with " +
                                             std::to_string(nbind) + " bindings, first with " +
                                             std::to_string(it->second.nbind));
      }
      return it->second;
    }
    const KernelSpirv* k = find_kernel_spirv(kernel);
    if (!k) throw Error(ErrorKind::Internal, std::string("vulkan: no kernel named ") + kernel);
    Pipe p;
    p.nbind = nbind;
    p.mod = dev.createShaderModule(vk::ShaderModuleCreateInfo({}, k->bytes, k->words));
    std::vector<vk::DescriptorSetLayoutBinding> lb;
    for (uint32_t i = 0; i < nbind; ++i)
      lb.emplace_back(i, vk::DescriptorType::eStorageBuffer, 1, vk::ShaderStageFlagBits::eCompute);
    p.dsl = dev.createDescriptorSetLayout(vk::DescriptorSetLayoutCreateInfo({}, lb));
    vk::PushConstantRange pcr(vk::ShaderStageFlagBits::eCompute, 0, kPushBytes);
    p.layout = dev.createPipelineLayout(vk::PipelineLayoutCreateInfo({}, p.dsl, pcr));
    vk::ComputePipelineCreateInfo ci(
        {}, vk::PipelineShaderStageCreateInfo({}, vk::ShaderStageFlagBits::eCompute, p.mod, "main"),
        p.layout);
    auto r = dev.createComputePipeline(pcache, ci);
    if (r.result != vk::Result::eSuccess) fail(std::string("cannot create the pipeline of kernel ") + kernel);
    p.pipe = r.value;
    return pipes.emplace(kernel, p).first->second;
  }
};

namespace {
template <typename Fn>
auto guarded(const char* what, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const vk::SystemError& e) {
    fail(std::string(what) + ": " + e.what());
  }
}
}  // namespace

std::shared_ptr<Context> Context::open(size_t index) {
  Probe p = probe_index(index);
  if (!p.info.usable) fail("adapter " + std::to_string(index) + " (" + p.info.name + ") " + p.info.verdict);
  return guarded("cannot open the device", [&] {
    auto impl = std::make_unique<Impl>();
    auto& l = loader();
    impl->index = index;
    impl->name = p.info.name;
    impl->pd = l.pds[index];
    auto props = impl->pd.getProperties();
    auto mem = impl->pd.getMemoryProperties();

    // memory: every storage buffer is host-visible (mapped uploads/downloads)
    int32_t t = p.mode == MemMode::DeviceMemory ? pick_type(mem, kDL | kHV | kHC, kCached, 1)
                                                : pick_type(mem, kHV | kHC, kCached, 0);
    if (t < 0) fail("no usable memory type on " + impl->name);
    impl->mem_type = static_cast<uint32_t>(t);
    impl->mem_cached = bool(mem.memoryTypes[t].propertyFlags & kCached);
    impl->heap = mem.memoryTypes[t].heapIndex;
    impl->has_budget =
        props.apiVersion >= VK_API_VERSION_1_1 && has_extension(impl->pd, "VK_EXT_memory_budget");
    if (!impl->mem_cached) impl->staging_type = pick_type(mem, kHV | kHC | kCached, {}, 0);
    // Default: 1 GiB, or 1/16 of the tensor memory's heap when that is larger. A fresh block
    // costs a driver allocation and mapping: on the H200 (143 GB heap), the medium x4 upscaler
    // (a 671 MB concat, 10 feature maps of 67 MB at 512x512) re-allocated its big blocks every
    // pass with a 1 GiB cache: 85.5 ms compute at 512x512 against 29.4 ms with a 4 GiB one, and
    // at 1024x1024 349 ms (4.5 GiB) against 173 ms (9 GiB). An allocation that fails drains the
    // cache and retries, so the cache never costs the process memory it needs.
    impl->cache_limit = std::max<uint64_t>(
        1024 * kMiB, static_cast<uint64_t>(mem.memoryHeaps[mem.memoryTypes[t].heapIndex].size) / 16);
    if (const char* lim = std::getenv("CANDLE_VULKAN_CACHE_LIMIT_MB"))
      impl->cache_limit = std::strtoull(lim, nullptr, 10) * kMiB;

    // queue family with compute
    auto qprops = impl->pd.getQueueFamilyProperties();
    bool found = false;
    for (uint32_t i = 0; i < qprops.size() && !found; ++i) {
      if (qprops[i].queueFlags & vk::QueueFlagBits::eCompute) {
        impl->qfam = i;
        found = true;
      }
    }
    if (!found) fail("no compute queue on " + impl->name);

    // features: enable what the kernels use, where present
    DeviceFeatures have;
    have.query(impl->pd, props.apiVersion);
    DeviceFeatures want;
    want.has12 = have.has12;
    want.chain();
    want.f2.features.shaderInt64 = have.f2.features.shaderInt64;
    want.f2.features.shaderInt16 = have.f2.features.shaderInt16;
    want.s16.storageBuffer16BitAccess = have.s16.storageBuffer16BitAccess;
    if (have.has12) {
      want.s8.storageBuffer8BitAccess = have.s8.storageBuffer8BitAccess;
      want.f16i8.shaderFloat16 = have.f16i8.shaderFloat16;
      want.f16i8.shaderInt8 = have.f16i8.shaderInt8;
    }
    std::vector<const char*> exts;
    if (have.ext8) exts.push_back(VK_KHR_8BIT_STORAGE_EXTENSION_NAME);
    if (have.extf16) exts.push_back(VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
    if (has_extension(impl->pd, "VK_KHR_portability_subset")) exts.push_back("VK_KHR_portability_subset");
    float prio = 1.0f;
    vk::DeviceQueueCreateInfo qci({}, impl->qfam, 1, &prio);
    vk::DeviceCreateInfo dci({}, qci, {}, exts, nullptr);
    dci.pNext = &want.f2;
    impl->dev = impl->pd.createDevice(dci);
    VULKAN_HPP_DEFAULT_DISPATCHER.init(impl->dev);
    impl->queue = impl->dev.getQueue(impl->qfam, 0);
    impl->cmd_pool = impl->dev.createCommandPool(
        vk::CommandPoolCreateInfo(vk::CommandPoolCreateFlagBits::eResetCommandBuffer, impl->qfam));
    impl->pcache = impl->dev.createPipelineCache({});
    impl->fault = impl->create(Impl::kFaultBytes, impl->mem_type, true);
    impl->reset_fault();

    Features& f = impl->feat;
    f.f16 = have.f16();
    f.int16 = have.int16();
    f.int8 = have.int8();
    f.int64 = have.int64();
    f.max_range = props.limits.maxStorageBufferRange;
    // a lower limit for tests (the kernels' splitting on small tensors) or a driver that fails
    // near its advertised one
    if (const char* mb = std::getenv("CANDLE_VULKAN_MAX_BINDING_MB"); mb && std::strtoull(mb, nullptr, 10))
      f.max_range = std::min<uint64_t>(f.max_range, std::strtoull(mb, nullptr, 10) * kMiB);
    f.offset_align = std::max<uint64_t>(props.limits.minStorageBufferOffsetAlignment, 4);
    f.max_alloc = mem.memoryHeaps[mem.memoryTypes[t].heapIndex].size;
    if (props.apiVersion >= VK_API_VERSION_1_1) {
      auto p11 =
          impl->pd.getProperties2<vk::PhysicalDeviceProperties2, vk::PhysicalDeviceMaintenance3Properties>();
      f.max_alloc = std::min<uint64_t>(
          f.max_alloc, p11.get<vk::PhysicalDeviceMaintenance3Properties>().maxMemoryAllocationSize);
    }
    for (int i = 0; i < 3; ++i) f.max_groups[i] = props.limits.maxComputeWorkGroupCount[i];
    return std::shared_ptr<Context>(new Context(std::move(impl)));
  });
}

DeviceMemory Context::memory() const {
  const uint32_t heap = impl_->heap;
  DeviceMemory m;
  m.max_buffer_bytes = std::min<uint64_t>(impl_->feat.max_range, impl_->feat.max_alloc);
  const uint64_t cached = counters().cached_bytes, live = counters().live_bytes;
  if (impl_->has_budget) {
    auto chain = impl_->pd.getMemoryProperties2<vk::PhysicalDeviceMemoryProperties2,
                                                vk::PhysicalDeviceMemoryBudgetPropertiesEXT>();
    const auto& props = chain.get<vk::PhysicalDeviceMemoryProperties2>().memoryProperties;
    const auto& budget = chain.get<vk::PhysicalDeviceMemoryBudgetPropertiesEXT>();
    m.total_bytes = props.memoryHeaps[heap].size;
    const uint64_t b = budget.heapBudget[heap], u = budget.heapUsage[heap];
    m.free_bytes = std::min<uint64_t>(m.total_bytes, (b > u ? b - u : 0) + cached);
  } else {
    m.total_bytes = impl_->pd.getMemoryProperties().memoryHeaps[heap].size;
    m.free_bytes = m.total_bytes > live ? m.total_bytes - live : 0;  // live excludes the cache
  }
  return m;
}

Context::Context(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Context::~Context() = default;

const std::string& Context::name() const { return impl_->name; }
size_t Context::index() const { return impl_->index; }
const Features& Context::features() const { return impl_->feat; }

BlockPtr Context::alloc(size_t bytes) {
  std::lock_guard lock(impl_->mu);
  Block* b = guarded("allocation", [&] { return impl_->take(bytes); });
  counters().live_bytes += b->bytes;
  std::shared_ptr<Impl> keep = impl_;
  return BlockPtr(b, [keep](Block* blk) {
    try {
      keep->release(blk);
    } catch (...) {
    }
  });
}

void Context::write(const Block& b, size_t offset, const void* src, size_t bytes) {
  if (offset + bytes > b.bytes) throw Error(ErrorKind::Internal, "vulkan: write out of the block's bounds");
  if (b.busy_serial > impl_->completed_serial) {
    std::lock_guard lock(impl_->mu);
    guarded("write", [&] { impl_->wait_idle_for(&b); });
  }
  if (bytes) std::memcpy(b.map + offset, src, bytes);
  counters().uploaded += bytes;
}

void Context::read(const Block& b, size_t offset, void* dst, size_t bytes) {
  if (offset + bytes > b.bytes) throw Error(ErrorKind::Internal, "vulkan: read out of the block's bounds");
  std::lock_guard lock(impl_->mu);
  guarded("read", [&] {
    Impl& m = *impl_;
    counters().downloaded += bytes;
    if (m.mem_cached || m.staging_type < 0 || bytes == 0) {
      m.wait_all();
      m.throw_fault();
      if (bytes) std::memcpy(dst, b.map + offset, bytes);
      return;
    }
    // write-combined memory: the GPU copies into host-cached staging memory first (the first
    // chunk's copy goes into the batch that computes the data: one submission and wait)
    const size_t chunk = 64 * kMiB;
    if (!m.staging) m.staging = m.create(chunk, static_cast<uint32_t>(m.staging_type), false);
    for (size_t done = 0; done < bytes; done += chunk) {
      size_t len = std::min(chunk, bytes - done);
      auto& batch = m.recording();
      m.barrier(batch);
      batch.cb.copyBuffer(b.buf, m.staging->buf, vk::BufferCopy(offset + done, 0, len));
      m.wait_all();
      if (done == 0) m.throw_fault();
      std::memcpy(static_cast<std::byte*>(dst) + done, m.staging->map, len);
    }
  });
}

void Context::dispatch(const char* kernel, const Binding* bind, size_t nb, const void* push,
                       size_t push_bytes, uint32_t gx, uint32_t gy, uint32_t gz) {
  const Features& f = impl_->feat;
  std::span<const Binding> bindings(bind, nb);
  if (bindings.size() > kMaxBindings || push_bytes > kPushBytes || gx == 0 || gy == 0 || gz == 0 ||
      gx > f.max_groups[0] || gy > f.max_groups[1] || gz > f.max_groups[2]) {
    throw Error(ErrorKind::Internal, std::string("vulkan: bad dispatch of ") + kernel);
  }
  for (const auto& b : bindings) {
    if (b.offset % f.offset_align || b.size == 0 || b.size > f.max_range ||
        b.offset + b.size > b.block->bytes) {
      throw Error(ErrorKind::Internal, std::string("vulkan: bad binding in ") + kernel + " (offset " +
                                           std::to_string(b.offset) + ", size " + std::to_string(b.size) +
                                           ")");
    }
  }
  std::lock_guard lock(impl_->mu);
  guarded(kernel, [&] {
    Impl& m = *impl_;
    auto& pipe = m.pipeline(kernel, static_cast<uint32_t>(bindings.size()));
    auto& batch = m.recording();
    m.barrier(batch);
    vk::DescriptorSet set = m.alloc_set(batch, pipe.dsl);
    vk::DescriptorBufferInfo infos[kMaxBindings];
    vk::WriteDescriptorSet writes[kMaxBindings];
    uint32_t i = 0;
    for (const auto& b : bindings) {
      infos[i] = vk::DescriptorBufferInfo(b.block->buf, b.offset, b.size);
      writes[i] =
          vk::WriteDescriptorSet(set, i, 0, 1, vk::DescriptorType::eStorageBuffer, nullptr, &infos[i]);
      ++i;
    }
    m.dev.updateDescriptorSets(i, writes, 0, nullptr);
    batch.cb.bindPipeline(vk::PipelineBindPoint::eCompute, pipe.pipe);
    batch.cb.bindDescriptorSets(vk::PipelineBindPoint::eCompute, pipe.layout, 0, set, {});
    if (push_bytes)
      batch.cb.pushConstants(pipe.layout, vk::ShaderStageFlagBits::eCompute, 0,
                             static_cast<uint32_t>(push_bytes), push);
    batch.cb.dispatch(gx, gy, gz);
    ++counters().dispatches;
    m.after_record();
  });
}

void Context::fill(const Block& b, uint64_t offset, uint64_t bytes, uint32_t pattern) {
  if (offset % 4 || bytes % 4 || offset + bytes > b.bytes)
    throw Error(ErrorKind::Internal, "vulkan: bad fill range");
  if (!bytes) return;
  std::lock_guard lock(impl_->mu);
  guarded("fill", [&] {
    Impl& m = *impl_;
    auto& batch = m.recording();
    m.barrier(batch);
    batch.cb.fillBuffer(b.buf, offset, bytes, pattern);
    m.after_record();
  });
}

void Context::copy(const Block& src, const Block& dst, const CopyRegion* regions, size_t n) {
  std::vector<vk::BufferCopy> r;
  r.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const auto& g = regions[i];
    if (g.src_off + g.bytes > src.bytes || g.dst_off + g.bytes > dst.bytes)
      throw Error(ErrorKind::Internal, "vulkan: copy out of the blocks' bounds");
    if (g.bytes) r.emplace_back(g.src_off, g.dst_off, g.bytes);
  }
  if (r.empty()) return;
  std::lock_guard lock(impl_->mu);
  guarded("copy", [&] {
    Impl& m = *impl_;
    auto& batch = m.recording();
    m.barrier(batch);
    batch.cb.copyBuffer(src.buf, dst.buf, r);
    m.after_record();
  });
}

void Context::synchronize() {
  std::lock_guard lock(impl_->mu);
  guarded("synchronize", [&] {
    impl_->wait_all();
    impl_->throw_fault();
  });
}

uint32_t Context::register_id_check(const char* op, size_t dim, size_t limit, const std::string& shape) {
  std::lock_guard lock(impl_->mu);
  return guarded("index check", [&] {
    Impl& m = *impl_;
    uint32_t tag = m.next_tag++;
    if (m.next_tag == 0) m.next_tag = 1;
    m.checks.push_back({m.recording().serial, tag, op, shape, dim, limit});
    return tag;
  });
}

Binding Context::fault_binding() const { return {impl_->fault, 0, Impl::kFaultBytes}; }

}  // namespace candle::vk_backend

// ---- vulkan.h: adapters ------------------------------------------------------------------

namespace candle::vulkan {

std::vector<AdapterInfo> adapters() {
  auto& l = vk_backend::loader();
  std::vector<AdapterInfo> out;
  for (size_t i = 0; i < l.pds.size(); ++i) out.push_back(vk_backend::probe(i, l.pds[i]).info);
  return out;
}

std::optional<size_t> best_adapter(std::string* why) {
  auto& l = vk_backend::loader();
  std::optional<size_t> best;
  vk_backend::Probe best_p;
  for (size_t i = 0; i < l.pds.size(); ++i) {
    auto p = vk_backend::probe(i, l.pds[i]);
    if (!p.info.usable || p.rank == 0) continue;
    if (!best || p.rank > best_p.rank ||
        (p.rank == best_p.rank &&
         p.info.host_visible_device_local_bytes > best_p.info.host_visible_device_local_bytes)) {
      best = i;
      best_p = p;
    }
  }
  if (why) {
    if (best)
      *why = "adapter " + std::to_string(*best) + " (" + best_p.info.name + "): " + best_p.info.verdict;
    else
      *why = "no usable hardware adapter (software devices are never picked; see each adapter's verdict)";
  }
  return best;
}

void probe_adapter(size_t index) {
  auto p = vk_backend::probe_index(index);
  if (!p.info.usable)
    vk_backend::fail("adapter " + std::to_string(index) + " (" + p.info.name + ") " + p.info.verdict);
}

}  // namespace candle::vulkan
