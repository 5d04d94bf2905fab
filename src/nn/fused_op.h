// candle::nn's fused ops (softmax_last_dim, rms_norm, layer_norm, rope / rope_i / rope_thd) as
// candle custom ops, as candle-nn has them. Every device's forward calls the storage's fused
// kernel, one of the BackendStorage hooks of the same names (the CPU's: src/cpu/nn_fused.cpp;
// Vulkan's: src/vulkan/ops_nn.cpp). Where a device has no kernel for the case (the hook returns
// nullptr) the forward runs `composed`, the same op built from tensor ops on the tensors the op
// was applied to, so every op works on every device with no CPU round-trip.
//
// The ops are applied with apply_opN_no_bwd only (as candle-nn does): a call where an operand
// is tracked takes the composed version instead, whose gradient the tensor ops give. So an op
// object never outlives its call, and `composed` may capture the call's tensors by reference.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "candle/custom_op.h"

namespace candle::nn::detail {

// The kernel's result, or the composed op's as a dense storage of its own.
inline StoragePtr kernel_or_composed(StoragePtr kernel_result, const std::function<Tensor()>& composed) {
  if (kernel_result) return kernel_result;
  Tensor y = composed();
  if (!y.is_contiguous() || y.layout().start_offset() != 0 || y.storage()->elem_count() != y.elem_count())
    y = y.copy();
  return y.storage();
}

inline std::shared_ptr<CpuStorage> as_cpu_result(StoragePtr s, const char* op) {
  auto c = std::dynamic_pointer_cast<CpuStorage>(std::move(s));  // custom-op SDK
  if (!c) throw Error(ErrorKind::Internal, std::string(op) + ": the CPU forward gave a non-CPU storage");
  return c;
}

// Kernel: StoragePtr(const BackendStorage&, const Layout&), a hook call. The result has xs' shape.
template <typename Kernel>
class FusedOp1 final : public CustomOp1 {
 public:
  FusedOp1(const char* name, Kernel kernel, std::function<Tensor()> composed)
      : name_(name), kernel_(std::move(kernel)), composed_(std::move(composed)) {}
  std::string name() const override { return name_; }
  CpuOpResult cpu_fwd(const CpuStorage& s, const Layout& l) const override {
    auto [r, shape] = run(s, l);
    return {as_cpu_result(std::move(r), name_), shape};
  }
  OpResult cuda_fwd(const BackendStorage& s, const Layout& l) const override { return run(s, l); }
  OpResult rocm_fwd(const BackendStorage& s, const Layout& l) const override { return run(s, l); }
  OpResult vulkan_fwd(const BackendStorage& s, const Layout& l) const override { return run(s, l); }
  OpResult metal_fwd(const BackendStorage& s, const Layout& l) const override { return run(s, l); }

 private:
  OpResult run(const BackendStorage& s, const Layout& l) const {
    return {kernel_or_composed(kernel_(s, l), composed_), l.shape()};
  }
  const char* name_;
  Kernel kernel_;
  std::function<Tensor()> composed_;
};

// Kernel: StoragePtr(s1, l1, s2, l2).
template <typename Kernel>
class FusedOp2 final : public CustomOp2 {
 public:
  FusedOp2(const char* name, Kernel kernel, std::function<Tensor()> composed)
      : name_(name), kernel_(std::move(kernel)), composed_(std::move(composed)) {}
  std::string name() const override { return name_; }
  CpuOpResult cpu_fwd(const CpuStorage& s1, const Layout& l1, const CpuStorage& s2,
                      const Layout& l2) const override {
    auto [r, shape] = run(s1, l1, s2, l2);
    return {as_cpu_result(std::move(r), name_), shape};
  }
  OpResult cuda_fwd(const BackendStorage& s1, const Layout& l1, const BackendStorage& s2,
                    const Layout& l2) const override {
    return run(s1, l1, s2, l2);
  }
  OpResult rocm_fwd(const BackendStorage& s1, const Layout& l1, const BackendStorage& s2,
                    const Layout& l2) const override {
    return run(s1, l1, s2, l2);
  }
  OpResult vulkan_fwd(const BackendStorage& s1, const Layout& l1, const BackendStorage& s2,
                      const Layout& l2) const override {
    return run(s1, l1, s2, l2);
  }
  OpResult metal_fwd(const BackendStorage& s1, const Layout& l1, const BackendStorage& s2,
                     const Layout& l2) const override {
    return run(s1, l1, s2, l2);
  }

 private:
  OpResult run(const BackendStorage& s1, const Layout& l1, const BackendStorage& s2, const Layout& l2) const {
    return {kernel_or_composed(kernel_(s1, l1, s2, l2), composed_), l1.shape()};
  }
  const char* name_;
  Kernel kernel_;
  std::function<Tensor()> composed_;
};

// Kernel: StoragePtr(s1, l1, s2, l2, s3, l3).
template <typename Kernel>
class FusedOp3 final : public CustomOp3 {
 public:
  // out: the result's shape when it is not the first operand's (attention: [b, h, tq, dv])
  FusedOp3(const char* name, Kernel kernel, std::function<Tensor()> composed, std::optional<Shape> out = {})
      : name_(name), kernel_(std::move(kernel)), composed_(std::move(composed)), out_(std::move(out)) {}
  std::string name() const override { return name_; }
  CpuOpResult cpu_fwd(const CpuStorage& s1, const Layout& l1, const CpuStorage& s2, const Layout& l2,
                      const CpuStorage& s3, const Layout& l3) const override {
    auto [r, shape] = run(s1, l1, s2, l2, s3, l3);
    return {as_cpu_result(std::move(r), name_), shape};
  }
  OpResult cuda_fwd(const BackendStorage& s1, const Layout& l1, const BackendStorage& s2, const Layout& l2,
                    const BackendStorage& s3, const Layout& l3) const override {
    return run(s1, l1, s2, l2, s3, l3);
  }
  OpResult rocm_fwd(const BackendStorage& s1, const Layout& l1, const BackendStorage& s2, const Layout& l2,
                    const BackendStorage& s3, const Layout& l3) const override {
    return run(s1, l1, s2, l2, s3, l3);
  }
  OpResult vulkan_fwd(const BackendStorage& s1, const Layout& l1, const BackendStorage& s2, const Layout& l2,
                      const BackendStorage& s3, const Layout& l3) const override {
    return run(s1, l1, s2, l2, s3, l3);
  }
  OpResult metal_fwd(const BackendStorage& s1, const Layout& l1, const BackendStorage& s2, const Layout& l2,
                     const BackendStorage& s3, const Layout& l3) const override {
    return run(s1, l1, s2, l2, s3, l3);
  }

 private:
  OpResult run(const BackendStorage& s1, const Layout& l1, const BackendStorage& s2, const Layout& l2,
               const BackendStorage& s3, const Layout& l3) const {
    return {kernel_or_composed(kernel_(s1, l1, s2, l2, s3, l3), composed_), out_ ? *out_ : l1.shape()};
  }
  const char* name_;
  Kernel kernel_;
  std::function<Tensor()> composed_;
  std::optional<Shape> out_;
};

// t in dtype dt (the hooks take every operand in xs' dtype; the composed versions cast too).
inline Tensor in_dtype(const Tensor& t, DType dt) { return t.dtype() == dt ? t : t.to_dtype(dt); }

}  // namespace candle::nn::detail
