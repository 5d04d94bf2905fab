// PyTorch checkpoints (.pt / .pth / .bin written by torch.save): the zip format (torch >= 1.6)
// and the legacy format before it, read through a pickle subset that executes nothing.
//
// The unpickler builds a tree of values and allows only the globals that tensors, storages
// and state dicts need (PyTorch's `weights_only=True` rules, narrowed): collections.OrderedDict,
// torch._utils._rebuild_tensor / _rebuild_tensor_v2 / _rebuild_tensor_v3 / _rebuild_parameter /
// _rebuild_parameter_with_state, torch._tensor._rebuild_from_type_v2 (over those), the storage
// types torch.<X>Storage, the dtypes torch.<dtype>, torch.Tensor, torch.nn.parameter.Parameter,
// torch.Size, torch.device, _codecs.encode (bytes in protocol 2), builtins set / frozenset /
// bytearray. Any other global is an Error(Parse) naming it ("pickle: global 'os.system' is
// not allowed"), raised when the GLOBAL opcode is read, before anything could use it.
//
// Tensors become candle dtypes: float32/64, float16, bfloat16, int64, int32, int16, uint8 as
// themselves, float8_e4m3fn as F8E4M3; int8 -> I16, bool -> U8 (0/1), uint16 -> U32 (widened
// without loss: candle has no i8/bool/u16). Other dtypes (complex, quantized, uint32/64,
// float8_e5m2) throw UnsupportedOp naming the tensor. Tensors are returned contiguous: a
// contiguous CPU tensor views the memory-mapped file (copy-on-write, no copy), any other one
// is copied once. Malformed files throw Error(Parse) naming the file and what was wrong.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "candle/tensor.h"

namespace candle::pickle {

struct TensorInfo {
  std::string name;  // dotted path in the (flattened) dict
  DType dtype;       // the candle dtype the tensor loads as
  std::vector<size_t> shape;
  std::vector<size_t> stride;  // in elements, as saved
  size_t storage_offset = 0;   // in elements
  std::string storage;         // the storage's key
  size_t storage_size = 0;     // elements in the storage
  bool requires_grad = false;
};

// A checkpoint opened once (memory-mapped); tensors are loaded one at a time on demand.
class PthTensors {
 public:
  // `key` selects one entry of a top-level dict (e.g. "state_dict") to read instead of the
  // whole object. Nested dicts (and lists) are flattened into names joined by '.'.
  explicit PthTensors(const std::string& path, const std::optional<std::string>& key = std::nullopt);
  // The same from a checkpoint held in memory (copied; for tests and fuzzing).
  static PthTensors from_buffer(std::span<const std::byte> data,
                                const std::optional<std::string>& key = std::nullopt);

  // In the order the pickle lists them.
  const std::vector<TensorInfo>& tensor_infos() const;
  bool contains(const std::string& name) const;
  const TensorInfo* info(const std::string& name) const;
  // The tensor `name` (nullopt when there is none).
  std::optional<Tensor> get(const std::string& name, const Device& device = Device::cpu()) const;
  // get(), throwing Error(InvalidArgument) when there is no tensor `name`.
  Tensor load(const std::string& name, const Device& device = Device::cpu()) const;

 private:
  struct Impl;
  explicit PthTensors(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// Every tensor of the checkpoint (a state dict, or any nest of dicts and lists holding
// tensors; a lone saved tensor is named ""), in pickle order.
std::vector<std::pair<std::string, Tensor>> read_all(const std::string& path,
                                                     const Device& device = Device::cpu());
// The tensors under the top-level dict's entry `key` (e.g. "state_dict", "model").
std::vector<std::pair<std::string, Tensor>> read_all_with_key(const std::string& path, const std::string& key,
                                                              const Device& device = Device::cpu());

}  // namespace candle::pickle
