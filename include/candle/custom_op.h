// candle's custom ops (candle-core's custom_op.rs): user kernels applied to tensors.
//
//   Tensor::apply_op1/2/3(op)         a new tensor; recorded for autograd through op.bwd
//   Tensor::apply_op1/2/3_no_bwd(op)  a new tensor; records nothing
//   Tensor::inplace_op1/2/3(op)       writes into the first tensor's storage
//
// One object carries a forward per device. cpu_fwd is required; cuda_fwd, rocm_fwd,
// vulkan_fwd and metal_fwd receive the device's storage as a BackendStorage (a backend
// plugin's author reaches its own storage type with dynamic_cast) and default to an error
// naming the op and the device. A forward returns the result's storage (contiguous,
// row-major, on the input's device) and its shape; a shape whose element count differs from
// the storage's is an error, never a tensor. Layouts are the inputs' own: they may be
// strided, offset or broadcast.
//
// This is the backend SDK's level (it includes candle/backend/cpu_storage.h); tensor.h only
// forward-declares these classes.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "candle/backend/cpu_storage.h"
#include "candle/tensor.h"

namespace candle {

// What a forward returns: the result's storage and shape.
using CpuOpResult = std::pair<std::shared_ptr<CpuStorage>, Shape>;
using OpResult = std::pair<StoragePtr, Shape>;

class CustomOp1 {
 public:
  virtual ~CustomOp1() = default;
  // Names the op in errors and in the backward profile.
  virtual std::string name() const = 0;
  virtual CpuOpResult cpu_fwd(const CpuStorage& s, const Layout& l) const = 0;
  virtual OpResult cuda_fwd(const BackendStorage& s, const Layout& l) const;
  virtual OpResult rocm_fwd(const BackendStorage& s, const Layout& l) const;
  virtual OpResult vulkan_fwd(const BackendStorage& s, const Layout& l) const;
  virtual OpResult metal_fwd(const BackendStorage& s, const Layout& l) const;
  // The gradient of the argument given the result and the result's gradient (nullopt: none
  // flows). The default throws: an op without a backward fails at backward(), and only when a
  // gradient has to pass through it.
  virtual std::optional<Tensor> bwd(const Tensor& arg, const Tensor& res, const Tensor& grad_res) const;
};

class CustomOp2 {
 public:
  virtual ~CustomOp2() = default;
  virtual std::string name() const = 0;
  virtual CpuOpResult cpu_fwd(const CpuStorage& s1, const Layout& l1, const CpuStorage& s2,
                              const Layout& l2) const = 0;
  virtual OpResult cuda_fwd(const BackendStorage& s1, const Layout& l1, const BackendStorage& s2,
                            const Layout& l2) const;
  virtual OpResult rocm_fwd(const BackendStorage& s1, const Layout& l1, const BackendStorage& s2,
                            const Layout& l2) const;
  virtual OpResult vulkan_fwd(const BackendStorage& s1, const Layout& l1, const BackendStorage& s2,
                              const Layout& l2) const;
  virtual OpResult metal_fwd(const BackendStorage& s1, const Layout& l1, const BackendStorage& s2,
                             const Layout& l2) const;
  virtual std::pair<std::optional<Tensor>, std::optional<Tensor>> bwd(const Tensor& arg1, const Tensor& arg2,
                                                                      const Tensor& res,
                                                                      const Tensor& grad_res) const;
};

class CustomOp3 {
 public:
  virtual ~CustomOp3() = default;
  virtual std::string name() const = 0;
  virtual CpuOpResult cpu_fwd(const CpuStorage& s1, const Layout& l1, const CpuStorage& s2, const Layout& l2,
                              const CpuStorage& s3, const Layout& l3) const = 0;
  virtual OpResult cuda_fwd(const BackendStorage& s1, const Layout& l1, const BackendStorage& s2,
                            const Layout& l2, const BackendStorage& s3, const Layout& l3) const;
  virtual OpResult rocm_fwd(const BackendStorage& s1, const Layout& l1, const BackendStorage& s2,
                            const Layout& l2, const BackendStorage& s3, const Layout& l3) const;
  virtual OpResult vulkan_fwd(const BackendStorage& s1, const Layout& l1, const BackendStorage& s2,
                              const Layout& l2, const BackendStorage& s3, const Layout& l3) const;
  virtual OpResult metal_fwd(const BackendStorage& s1, const Layout& l1, const BackendStorage& s2,
                             const Layout& l2, const BackendStorage& s3, const Layout& l3) const;
  virtual std::tuple<std::optional<Tensor>, std::optional<Tensor>, std::optional<Tensor>> bwd(
      const Tensor& arg1, const Tensor& arg2, const Tensor& arg3, const Tensor& res,
      const Tensor& grad_res) const;
};

// In-place ops write into the first storage (through its layout); the others are read only.
// Like candle's, they are not recorded for autograd.
class InplaceOp1 {
 public:
  virtual ~InplaceOp1() = default;
  virtual std::string name() const = 0;
  virtual void cpu_fwd(CpuStorage& s, const Layout& l) const = 0;
  virtual void cuda_fwd(BackendStorage& s, const Layout& l) const;
  virtual void rocm_fwd(BackendStorage& s, const Layout& l) const;
  virtual void vulkan_fwd(BackendStorage& s, const Layout& l) const;
  virtual void metal_fwd(BackendStorage& s, const Layout& l) const;
};

class InplaceOp2 {
 public:
  virtual ~InplaceOp2() = default;
  virtual std::string name() const = 0;
  virtual void cpu_fwd(CpuStorage& s1, const Layout& l1, const CpuStorage& s2, const Layout& l2) const = 0;
  virtual void cuda_fwd(BackendStorage& s1, const Layout& l1, const BackendStorage& s2,
                        const Layout& l2) const;
  virtual void rocm_fwd(BackendStorage& s1, const Layout& l1, const BackendStorage& s2,
                        const Layout& l2) const;
  virtual void vulkan_fwd(BackendStorage& s1, const Layout& l1, const BackendStorage& s2,
                          const Layout& l2) const;
  virtual void metal_fwd(BackendStorage& s1, const Layout& l1, const BackendStorage& s2,
                         const Layout& l2) const;
};

class InplaceOp3 {
 public:
  virtual ~InplaceOp3() = default;
  virtual std::string name() const = 0;
  virtual void cpu_fwd(CpuStorage& s1, const Layout& l1, const CpuStorage& s2, const Layout& l2,
                       const CpuStorage& s3, const Layout& l3) const = 0;
  virtual void cuda_fwd(BackendStorage& s1, const Layout& l1, const BackendStorage& s2, const Layout& l2,
                        const BackendStorage& s3, const Layout& l3) const;
  virtual void rocm_fwd(BackendStorage& s1, const Layout& l1, const BackendStorage& s2, const Layout& l2,
                        const BackendStorage& s3, const Layout& l3) const;
  virtual void vulkan_fwd(BackendStorage& s1, const Layout& l1, const BackendStorage& s2, const Layout& l2,
                          const BackendStorage& s3, const Layout& l3) const;
  virtual void metal_fwd(BackendStorage& s1, const Layout& l1, const BackendStorage& s2, const Layout& l2,
                         const BackendStorage& s3, const Layout& l3) const;
};

}  // namespace candle
