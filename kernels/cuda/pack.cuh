// Vector moves shared by the CUDA kernels: packs of elements in one load or store, and
// asynchronous copies from global to shared memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common.cuh"

namespace candle::cuda_k {

// V elements of S moved by one load or store (alignas: the pointer must be aligned to the pack).
template <typename S, int V>
struct alignas(sizeof(S) * V) Pack {
  S v[V];
};
inline bool aligned_to(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

// 16 bytes from global to shared memory without passing through registers (sm_80 and later; a
// plain copy before), completed by cp_async_wait_all.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(a), "l"(gmem) : "memory");
#else
  *static_cast<uint4*>(smem) = *static_cast<const uint4*>(gmem);
#endif
}
__device__ __forceinline__ void cp_async_wait_all() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}

}  // namespace candle::cuda_k
