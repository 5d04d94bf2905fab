// Internals of the safetensors loader shared with the tests (zero-copy checks). Internal.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include "candle/io/safetensors.h"
#include "io/mmap.h"

namespace candle::safetensors::detail {

struct MappedLoad {
  std::shared_ptr<io::MmapedFile> mapping;
  std::unordered_map<std::string, Tensor> tensors;
};

// load(), also returning the mapping that CPU tensors view.
MappedLoad load_mapped(const std::string& path, const Device& device);

}  // namespace candle::safetensors::detail
