// candle_nn::VarBuilder: fetches a model's named weights from a backend (safetensors files,
// npz, PyTorch checkpoints, a tensor map, a VarMap), with a path prefix, shape checks and dtype/device
// conversion.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "candle/nn/init.h"
#include "candle/nn/var_map.h"
#include "candle/tensor.h"

namespace candle::nn {

// Where the tensors come from (candle's SimpleBackend).
class VarBuilderBackend {
 public:
  virtual ~VarBuilderBackend() = default;
  // The tensor `name` as stored (any dtype/device: the builder converts); `shape` and `hints`
  // let a backend create it (VarMap) or check it. Throws Error naming the tensor when missing.
  virtual Tensor get(const Shape& shape, const std::string& name, const Init& hints, DType dtype,
                     const Device& device) const = 0;
  // The stored tensor without a shape check.
  virtual Tensor get_unchecked(const std::string& name, DType dtype, const Device& device) const = 0;
  virtual bool contains_tensor(const std::string& name) const = 0;
  // Where `name` comes from (or would), for error messages: "model.safetensors", "a VarMap".
  virtual std::string source_of(const std::string& name) const = 0;
};

class VarBuilder {
 public:
  // Memory-mapped safetensors files (several shards act as one).
  static VarBuilder from_mmaped_safetensors(const std::vector<std::string>& paths, DType dtype,
                                            const Device& device);
  static VarBuilder from_npz(const std::string& path, DType dtype, const Device& device);
  // A PyTorch checkpoint (.pt/.pth/.bin, candle::pickle): tensors are loaded when asked for;
  // `key` selects one entry of a top-level dict (e.g. "state_dict").
  static VarBuilder from_pth(const std::string& path, DType dtype, const Device& device,
                             const std::optional<std::string>& key = std::nullopt);
  static VarBuilder from_tensors(std::unordered_map<std::string, Tensor> tensors, DType dtype,
                                 const Device& device);
  // Variables are created in the map (with the hints' Init) on first get.
  static VarBuilder from_varmap(const VarMap& varmap, DType dtype, const Device& device);
  // Every get returns zeros of the asked shape.
  static VarBuilder zeros(DType dtype, const Device& device);
  static VarBuilder from_backend(std::shared_ptr<const VarBuilderBackend> backend, DType dtype,
                                 const Device& device);

  // A builder whose names are prefixed by "<prefix>.<s>".
  VarBuilder pp(const std::string& s) const { return push_prefix(s); }
  VarBuilder push_prefix(const std::string& s) const;
  // The builder at the root (no prefix).
  VarBuilder root() const;
  // The current prefix ("a.b").
  std::string prefix() const;
  DType dtype() const { return dtype_; }
  const Device& device() const { return device_; }
  VarBuilder set_dtype(DType dtype) const;
  VarBuilder set_device(const Device& device) const;

  // The tensor `name` (under the prefix), checked to have `shape`, in the builder's dtype and
  // on its device. Errors name the tensor, the shapes and the source file.
  Tensor get(const Shape& shape, const std::string& name) const;
  Tensor get_with_hints(const Shape& shape, const std::string& name, const Init& hints) const;
  Tensor get_with_hints_dtype(const Shape& shape, const std::string& name, const Init& hints,
                              DType dtype) const;
  // Part of the tensor `name`, whose whole shape is `full`: [start, start + len) along `dim`
  // (tensor parallelism: a rank's rows or columns; candle's Shard hint). A memory-mapped file reads
  // only that part; the result is contiguous, in the builder's dtype, on its device.
  Tensor get_narrow(const Shape& full, const std::string& name, size_t dim, size_t start, size_t len) const;
  // The tensor with whatever shape it has.
  Tensor get_unchecked(const std::string& name) const;
  Tensor get_unchecked_dtype(const std::string& name, DType dtype) const;
  bool contains_tensor(const std::string& name) const;

 private:
  VarBuilder(std::shared_ptr<const VarBuilderBackend> backend, std::vector<std::string> path, DType dtype,
             Device device)
      : backend_(std::move(backend)), path_(std::move(path)), dtype_(dtype), device_(std::move(device)) {}
  std::string path(const std::string& name) const;
  std::shared_ptr<const VarBuilderBackend> backend_;
  std::vector<std::string> path_;
  DType dtype_;
  Device device_;
};

}  // namespace candle::nn
