#include "candle/nn/var_builder.h"

#include <utility>

#include "candle/io/npy.h"
#include "candle/io/pickle.h"
#include "candle/io/safetensors.h"

namespace candle::nn {
namespace {

Error missing(const std::string& name, const std::string& source) {
  return Error(ErrorKind::InvalidArgument, "cannot find tensor " + name + " in " + source);
}

class SafetensorsBackend final : public VarBuilderBackend {
 public:
  explicit SafetensorsBackend(const std::vector<std::string>& paths) {
    if (paths.empty()) throw Error(ErrorKind::InvalidArgument, "VarBuilder: no safetensors file given");
    for (const auto& p : paths) files_.emplace_back(p, safetensors::MmapedSafetensors(p));
  }
  Tensor get(const Shape&, const std::string& name, const Init&, DType, const Device& device) const override {
    return get_unchecked(name, DType::F32, device);
  }
  Tensor get_unchecked(const std::string& name, DType, const Device& device) const override {
    for (const auto& [path, file] : files_) {
      const auto& f = file;  // (a lambda may not capture a structured binding before clang 16)
      if (f.contains(name))
        return with_context("loading tensor " + name + " from " + path, [&] { return f.load(name, device); });
    }
    throw missing(name, all_paths());
  }
  bool contains_tensor(const std::string& name) const override {
    for (const auto& [path, f] : files_)
      if (f.contains(name)) return true;
    return false;
  }
  std::string source_of(const std::string& name) const override {
    for (const auto& [path, f] : files_)
      if (f.contains(name)) return path;
    return all_paths();
  }

 private:
  std::string all_paths() const {
    std::string s;
    for (const auto& [path, f] : files_) s += (s.empty() ? "" : ", ") + path;
    return s;
  }
  std::vector<std::pair<std::string, safetensors::MmapedSafetensors>> files_;
};

class PthBackend final : public VarBuilderBackend {
 public:
  PthBackend(const std::string& path, const std::optional<std::string>& key) : path_(path), pth_(path, key) {}
  Tensor get(const Shape&, const std::string& name, const Init&, DType dtype,
             const Device& device) const override {
    return get_unchecked(name, dtype, device);
  }
  Tensor get_unchecked(const std::string& name, DType, const Device& device) const override {
    auto t = pth_.get(name, device);
    if (!t) throw missing(name, path_);
    return *t;
  }
  bool contains_tensor(const std::string& name) const override { return pth_.contains(name); }
  std::string source_of(const std::string&) const override { return path_; }

 private:
  std::string path_;
  pickle::PthTensors pth_;
};

class TensorMapBackend final : public VarBuilderBackend {
 public:
  TensorMapBackend(std::unordered_map<std::string, Tensor> tensors, std::string source)
      : tensors_(std::move(tensors)), source_(std::move(source)) {}
  Tensor get(const Shape&, const std::string& name, const Init&, DType dtype,
             const Device& device) const override {
    return get_unchecked(name, dtype, device);
  }
  Tensor get_unchecked(const std::string& name, DType, const Device&) const override {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) throw missing(name, source_);
    return it->second;
  }
  bool contains_tensor(const std::string& name) const override { return tensors_.count(name) != 0; }
  std::string source_of(const std::string&) const override { return source_; }

 private:
  std::unordered_map<std::string, Tensor> tensors_;
  std::string source_;
};

class VarMapBackend final : public VarBuilderBackend {
 public:
  explicit VarMapBackend(VarMap map) : map_(std::move(map)) {}
  Tensor get(const Shape& shape, const std::string& name, const Init& hints, DType dtype,
             const Device& device) const override {
    return map_.get(shape, name, hints, dtype, device);
  }
  Tensor get_unchecked(const std::string& name, DType, const Device&) const override {
    for (auto& [n, v] : map_.named_vars())
      if (n == name) return v.as_tensor();
    throw missing(name, "a VarMap");
  }
  bool contains_tensor(const std::string& name) const override { return map_.contains(name); }
  std::string source_of(const std::string&) const override { return "a VarMap"; }

 private:
  VarMap map_;
};

class ZerosBackend final : public VarBuilderBackend {
 public:
  Tensor get(const Shape& shape, const std::string&, const Init&, DType dtype,
             const Device& device) const override {
    return Tensor::zeros(shape, dtype, device);
  }
  Tensor get_unchecked(const std::string& name, DType, const Device&) const override {
    throw Error(ErrorKind::InvalidArgument,
                "get_unchecked of " + name + " needs a shape on a zeros VarBuilder");
  }
  bool contains_tensor(const std::string&) const override { return true; }
  std::string source_of(const std::string&) const override { return "a zeros VarBuilder"; }
};

Tensor convert(const Tensor& t, DType dtype, const Device& device) {
  Tensor r = t.dtype() == dtype ? t : t.to_dtype(dtype);
  return r.device() == device ? r : r.to_device(device);
}

}  // namespace

VarBuilder VarBuilder::from_mmaped_safetensors(const std::vector<std::string>& paths, DType dtype,
                                               const Device& device) {
  return from_backend(std::make_shared<SafetensorsBackend>(paths), dtype, device);
}

VarBuilder VarBuilder::from_npz(const std::string& path, DType dtype, const Device& device) {
  std::unordered_map<std::string, Tensor> m;
  for (auto& [name, t] : npy::read_npz(path, Device::cpu())) m.emplace(name, t);
  return from_backend(std::make_shared<TensorMapBackend>(std::move(m), path), dtype, device);
}

VarBuilder VarBuilder::from_pth(const std::string& path, DType dtype, const Device& device,
                                const std::optional<std::string>& key) {
  return from_backend(std::make_shared<PthBackend>(path, key), dtype, device);
}

VarBuilder VarBuilder::from_tensors(std::unordered_map<std::string, Tensor> tensors, DType dtype,
                                    const Device& device) {
  return from_backend(std::make_shared<TensorMapBackend>(std::move(tensors), "a tensor map"), dtype, device);
}

VarBuilder VarBuilder::from_varmap(const VarMap& varmap, DType dtype, const Device& device) {
  return from_backend(std::make_shared<VarMapBackend>(varmap), dtype, device);
}

VarBuilder VarBuilder::zeros(DType dtype, const Device& device) {
  return from_backend(std::make_shared<ZerosBackend>(), dtype, device);
}

VarBuilder VarBuilder::from_backend(std::shared_ptr<const VarBuilderBackend> backend, DType dtype,
                                    const Device& device) {
  return VarBuilder(std::move(backend), {}, dtype, device);
}

VarBuilder VarBuilder::push_prefix(const std::string& s) const {
  auto p = path_;
  p.push_back(s);
  return VarBuilder(backend_, std::move(p), dtype_, device_);
}

VarBuilder VarBuilder::root() const { return VarBuilder(backend_, {}, dtype_, device_); }

std::string VarBuilder::prefix() const {
  std::string s;
  for (const auto& p : path_) s += (s.empty() ? "" : ".") + p;
  return s;
}

VarBuilder VarBuilder::set_dtype(DType dtype) const { return VarBuilder(backend_, path_, dtype, device_); }
VarBuilder VarBuilder::set_device(const Device& device) const {
  return VarBuilder(backend_, path_, dtype_, device);
}

std::string VarBuilder::path(const std::string& name) const {
  std::string p = prefix();
  return p.empty() ? name : p + "." + name;
}

Tensor VarBuilder::get(const Shape& shape, const std::string& name) const {
  return get_with_hints_dtype(shape, name, init::DEFAULT_KAIMING_NORMAL, dtype_);
}

Tensor VarBuilder::get_with_hints(const Shape& shape, const std::string& name, const Init& hints) const {
  return get_with_hints_dtype(shape, name, hints, dtype_);
}

Tensor VarBuilder::get_with_hints_dtype(const Shape& shape, const std::string& name, const Init& hints,
                                        DType dtype) const {
  std::string p = path(name);
  Tensor t = backend_->get(shape, p, hints, dtype, device_);
  if (t.shape() != shape)
    throw Error(ErrorKind::ShapeMismatch, "shape mismatch for " + p + " in " + backend_->source_of(p) +
                                              ", expected: " + shape.to_string() +
                                              ", got: " + t.shape().to_string());
  return convert(t, dtype, device_);
}

Tensor VarBuilder::get_narrow(const Shape& full, const std::string& name, size_t dim, size_t start,
                              size_t len) const {
  const std::string p = path(name);
  if (dim >= full.rank() || start > full.dims()[dim] || len > full.dims()[dim] - start || len == 0)
    throw Error(ErrorKind::IndexOutOfRange, "VarBuilder::get_narrow: " + std::to_string(start) + ".." +
                                                std::to_string(start + len) + " of dim " +
                                                std::to_string(dim) + " of " + p + " " + full.to_string());
  // on the CPU first (a view of a mapped file), so that only the part is converted and moved
  Tensor t = backend_->get(full, p, init::DEFAULT_KAIMING_NORMAL, dtype_, Device::cpu());
  if (t.shape() != full)
    throw Error(ErrorKind::ShapeMismatch, "shape mismatch for " + p + " in " + backend_->source_of(p) +
                                              ", expected: " + full.to_string() +
                                              ", got: " + t.shape().to_string());
  Tensor part = t.narrow(static_cast<int64_t>(dim), start, len);
  part = part.contiguous();  // on the CPU: only the part is copied
  return convert(part, dtype_, device_);
}

Tensor VarBuilder::get_unchecked(const std::string& name) const { return get_unchecked_dtype(name, dtype_); }

Tensor VarBuilder::get_unchecked_dtype(const std::string& name, DType dtype) const {
  return convert(backend_->get_unchecked(path(name), dtype, device_), dtype, device_);
}

bool VarBuilder::contains_tensor(const std::string& name) const {
  return backend_->contains_tensor(path(name));
}

}  // namespace candle::nn
