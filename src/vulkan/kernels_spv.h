// The SPIR-V of the kernels in kernels/vulkan/*.comp, embedded at build time (embed_spirv.cmake).
#pragma once

#include <cstddef>
#include <cstdint>

namespace candle::vk_backend {

struct KernelSpirv {
  const char* name;  // "<file stem>" or "<file stem>_<variant>"
  const uint32_t* words;
  size_t bytes;
};

// nullptr when no kernel of that name was built.
const KernelSpirv* find_kernel_spirv(const char* name);

}  // namespace candle::vk_backend
