// The CUDA backend's own API (libcandle_cuda.so; link candle::cuda to call it).
//
// Tensors on CUDA are made with Device::cuda(i) (core), which opens this library with dlopen;
// Device::cuda_if_available(i) falls back to the CPU. The library links the CUDA runtime
// statically and cuBLAS dynamically: a machine without the NVIDIA driver (libcuda.so.1) or a GPU
// gets Error(Device) from Device::cuda naming what is missing, never a failure to start.
//
// Environment:
//  CANDLE_CUDA_CACHE_LIMIT_MB=N   MiB of freed device blocks kept for reuse (default: half the
//                                 device's memory); out of memory empties the cache and retries
//  CANDLE_CUDA_TRACE=1            log every CPU round-trip to stderr
//  CANDLE_CUDA_TF32=1             start with set_gemm_reduced_precision_f32(true) (f32 matmuls and
//                                 cuDNN convolutions on TF32 tensor cores)
//  CANDLE_CUDA_CUDNN=0            start with set_cudnn_enabled(false) (cuDNN is opened at run
//                                 time when present)
//  CANDLE_CUDA_AUTO=0             Device::auto_select passes CUDA over (by default it takes cuda:0
//                                 first when it opens)
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "candle/device.h"

namespace candle::cuda {

// Matmuls in reduced precision (candle's set_gemm_reduced_precision_*): f32 products on TF32
// tensor cores, f16 / bf16 products accumulated in f16 / bf16-friendly fast modes. Off by default.
void set_gemm_reduced_precision_f32(bool on);
bool gemm_reduced_precision_f32();
void set_gemm_reduced_precision_f16(bool on);
bool gemm_reduced_precision_f16();
void set_gemm_reduced_precision_bf16(bool on);
bool gemm_reduced_precision_bf16();

// Convolutions through cuDNN where libcudnn.so.9 opens (on by default, off with CANDLE_CUDA_CUDNN=0);
// off: the backend's own kernels (conv2d / conv1d on tensor cores for f16 / bf16, and for f32
// when set_gemm_reduced_precision_f32 is on). Applies to the ops queued after the call.
void set_cudnn_enabled(bool on);
bool cudnn_enabled();

struct Stats {
  // CPU round-trips by op name (ops without a CUDA kernel for the case)
  std::map<std::string, size_t> round_trips;
  uint64_t launches = 0;     // kernels and cuBLAS calls
  uint64_t allocations = 0;  // cudaMallocAsync calls (cache misses)
  uint64_t cache_hits = 0;
  uint64_t live_bytes = 0, cached_bytes = 0;
  uint64_t bytes_uploaded = 0, bytes_downloaded = 0;
};
Stats stats();
// The device's compute capability as major * 10 + minor (90 for an H100 / H200); throws
// Error(Device) for a device that is not a CUDA one.
int compute_capability(const Device& dev);
void reset_stats();

// Frees the blocks the allocator keeps for reuse on every open device.
void empty_cache();

// A CUDA graph: a sequence of a device's work recorded once and replayed with one launch, which
// removes the host's cost per kernel (about 6 us on the H200) from work made of many small ops, such
// as an LLM's decode step.
//   Graph g = Graph::capture(dev, [&] { out = model_step(in); });
//   ... write new values into `in` in place (Tensor::slice_set, inplace ops) ...
//   g.replay();   // `out` holds the new result once the device has run it
// capture() runs `work` once as usual (so that the allocator caches the blocks it needs), then
// records it: the tensors the recorded run made are written by the replays, not by capture(). A replay reads
// and writes the very same device memory as the recorded run: the tensors the work reads (weights, inputs)
// must stay alive and be updated in place, and the tensors it made (outputs) are rewritten by every replay.
// Device memory the recorded run used is held for the graph's lifetime. Inside the work, copies to or from
// the host and synchronisation throw Error(Device) (the work must stay on the device), and so does the
// capture.
class Graph {
 public:
  static Graph capture(const Device& dev, const std::function<void()>& work);
  // Queues the recorded work on the device's stream (asynchronous, like any op).
  void replay() const;
  // Kernels and library calls recorded.
  size_t nodes() const;
  // Dependencies between kernels that let the later one start before the earlier one ends (it
  // waits for the earlier one's results itself: programmatic dependent launch, sm_90 and later;
  // CANDLE_CUDA_PDL=0 turns it off). 0 on older GPUs.
  size_t programmatic_edges() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace candle::cuda
