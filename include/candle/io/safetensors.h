// safetensors files: load (memory-mapped; zero-copy on the CPU) and save.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "candle/tensor.h"

namespace candle::safetensors {

// Loads every tensor of the file onto `device`. On the CPU the tensors are views of the
// memory-mapped file (no copy). Malformed files throw Error(Parse) naming the file and tensor.
std::unordered_map<std::string, Tensor> load(const std::string& path, const Device& device);
// Parses an in-memory safetensors buffer (the tensors are copied).
std::unordered_map<std::string, Tensor> load_buffer(const std::vector<std::byte>& data, const Device& device);
// Writes the tensors (sorted by name) with optional string metadata ("__metadata__").
// The file is written to a temporary name and renamed, so a failed save leaves no half file.
void save(const std::unordered_map<std::string, Tensor>& tensors, const std::string& path,
          const std::map<std::string, std::string>& metadata = {});
// The serialized bytes of a save().
std::vector<std::byte> serialize(const std::unordered_map<std::string, Tensor>& tensors,
                                 const std::map<std::string, std::string>& metadata = {});

// A memory-mapped file, for lazy access by name (VarBuilder uses it).
class MmapedSafetensors {
 public:
  explicit MmapedSafetensors(const std::string& path);
  // Several shards opened as one: a name is looked up in each file.
  explicit MmapedSafetensors(const std::vector<std::string>& paths);
  Tensor load(const std::string& name, const Device& device) const;
  bool contains(const std::string& name) const;
  std::vector<std::string> names() const;
  const std::map<std::string, std::string>& metadata() const;
  // Dtype and shape of a tensor without loading it.
  std::pair<DType, Shape> info(const std::string& name) const;
  // Tells the system that the tensor's bytes in the file are done with for now: its pages leave
  // the process's resident memory and are read again on the next access; loaded tensors that
  // view them stay valid. For one pass over a model larger than memory (candle-quantize); the
  // last 2 MiB or less go with the tensor that follows it in the file.
  void release(const std::string& name) const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace candle::safetensors
