// candle's custom ops: the per-device dispatch of a user op's forward, the checks on what it
// returns, and the autograd node that calls its bwd.
#include "candle/custom_op.h"

#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/backprop_op.h"
#include "ops/op_util.h"

namespace candle {
namespace {

[[noreturn]] void no_forward(const std::string& op, DeviceKind kind) {
  throw Error(ErrorKind::UnsupportedOp,
              "custom op '" + op + "' has no forward for " + std::string(device_kind_name(kind)));
}

[[noreturn]] void no_backward(const std::string& op) {
  throw Error(
      ErrorKind::UnsupportedOp,
      "custom op '" + op + "' has no backward (bwd not implemented), but a gradient flows through it");
}

// The forward of a GPU `kind` (the same member for every op class, so one switch serves all).
template <typename Op>
auto device_fwd(DeviceKind kind, const std::string& op) {
  switch (kind) {
    case DeviceKind::Cuda: return &Op::cuda_fwd;
    case DeviceKind::Rocm: return &Op::rocm_fwd;
    case DeviceKind::Vulkan: return &Op::vulkan_fwd;
    case DeviceKind::Metal: return &Op::metal_fwd;
    case DeviceKind::Cpu: break;
  }
  throw Error(ErrorKind::Internal, "custom op '" + op + "': no forward slot for device kind " +
                                       std::string(device_kind_name(kind)));
}

// A CPU tensor's storage (the in-place forms write through it).
CpuStorage& cpu_storage(const Tensor& t) {
  auto* s = dynamic_cast<CpuStorage*>(t.storage().get());
  if (!s) throw Error(ErrorKind::Internal, "custom op: a CPU tensor without a CPU storage");
  return *s;
}

// The forward's result as a tensor on `dev`, after checking that it is one.
// (r by value: its storage is moved into the tensor)
// NOLINTNEXTLINE(performance-unnecessary-value-param)
Tensor make_output(const std::string& op, OpResult r, const Device& dev) {
  auto& [storage, shape] = r;
  if (!storage) throw Error(ErrorKind::Internal, "custom op '" + op + "' returned no storage");
  if (&storage->device() != &dev.backend()) {
    throw Error(ErrorKind::DeviceMismatch, "custom op '" + op + "' returned a storage on " +
                                               std::string(device_kind_name(storage->device().kind())) +
                                               " for inputs on " + dev.to_string());
  }
  if (storage->elem_count() != shape.elem_count()) {
    throw Error(ErrorKind::ShapeMismatch, "custom op '" + op + "' returned shape " + shape.to_string() +
                                              " (" + std::to_string(shape.elem_count()) +
                                              " elements) for a storage of " +
                                              std::to_string(storage->elem_count()) + " elements");
  }
  DType dtype = storage->dtype();
  return Tensor::from_storage(std::move(storage), Layout::contiguous(shape), dtype, dev);
}

// The name is copied into the node so that the engine's const char* stays valid with it.
struct NodeName {
  std::string value;
};

// The backward node of apply_opN: it owns the op (so the op outlives the graph) and passes
// the op's gradients on, one per input.
template <typename Op>
class CustomOpNode final : private NodeName, public autograd::BackpropOp {
 public:
  CustomOpNode(std::shared_ptr<const Op> op, std::vector<Tensor> inputs)
      : NodeName{op->name()}, BackpropOp(NodeName::value.c_str(), std::move(inputs)), op_(std::move(op)) {}

  void backward(const Tensor& out, const Tensor& grad, std::vector<Tensor>& grads) const override {
    const auto& in = inputs();
    auto put = [&](size_t i, std::optional<Tensor> g) {
      if (g) grads[i] = std::move(*g);
    };
    if constexpr (std::is_same_v<Op, CustomOp1>) {
      put(0, op_->bwd(in[0], out, grad));
    } else if constexpr (std::is_same_v<Op, CustomOp2>) {
      auto [g1, g2] = op_->bwd(in[0], in[1], out, grad);
      put(0, std::move(g1));
      put(1, std::move(g2));
    } else {
      auto [g1, g2, g3] = op_->bwd(in[0], in[1], in[2], out, grad);
      put(0, std::move(g1));
      put(1, std::move(g2));
      put(2, std::move(g3));
    }
  }

 private:
  std::shared_ptr<const Op> op_;
};

template <typename Op>
Tensor record_node(Tensor out, std::shared_ptr<const Op> c, std::vector<Tensor> inputs) {
  if (autograd::should_record(out, inputs))
    autograd::attach(out, std::make_shared<CustomOpNode<Op>>(std::move(c), std::move(inputs)));
  return out;
}

template <typename Op>
void check_not_null(const std::shared_ptr<const Op>& c) {
  if (!c) throw Error(ErrorKind::InvalidArgument, "apply_op: the custom op is null");
}

}  // namespace

// ---- default forwards and backwards: the op has none for that device ----------------------

OpResult CustomOp1::cuda_fwd(const BackendStorage&, const Layout&) const {
  no_forward(name(), DeviceKind::Cuda);
}
OpResult CustomOp1::rocm_fwd(const BackendStorage&, const Layout&) const {
  no_forward(name(), DeviceKind::Rocm);
}
OpResult CustomOp1::vulkan_fwd(const BackendStorage&, const Layout&) const {
  no_forward(name(), DeviceKind::Vulkan);
}
OpResult CustomOp1::metal_fwd(const BackendStorage&, const Layout&) const {
  no_forward(name(), DeviceKind::Metal);
}
std::optional<Tensor> CustomOp1::bwd(const Tensor&, const Tensor&, const Tensor&) const {
  no_backward(name());
}

OpResult CustomOp2::cuda_fwd(const BackendStorage&, const Layout&, const BackendStorage&,
                             const Layout&) const {
  no_forward(name(), DeviceKind::Cuda);
}
OpResult CustomOp2::rocm_fwd(const BackendStorage&, const Layout&, const BackendStorage&,
                             const Layout&) const {
  no_forward(name(), DeviceKind::Rocm);
}
OpResult CustomOp2::vulkan_fwd(const BackendStorage&, const Layout&, const BackendStorage&,
                               const Layout&) const {
  no_forward(name(), DeviceKind::Vulkan);
}
OpResult CustomOp2::metal_fwd(const BackendStorage&, const Layout&, const BackendStorage&,
                              const Layout&) const {
  no_forward(name(), DeviceKind::Metal);
}
std::pair<std::optional<Tensor>, std::optional<Tensor>> CustomOp2::bwd(const Tensor&, const Tensor&,
                                                                       const Tensor&, const Tensor&) const {
  no_backward(name());
}

OpResult CustomOp3::cuda_fwd(const BackendStorage&, const Layout&, const BackendStorage&, const Layout&,
                             const BackendStorage&, const Layout&) const {
  no_forward(name(), DeviceKind::Cuda);
}
OpResult CustomOp3::rocm_fwd(const BackendStorage&, const Layout&, const BackendStorage&, const Layout&,
                             const BackendStorage&, const Layout&) const {
  no_forward(name(), DeviceKind::Rocm);
}
OpResult CustomOp3::vulkan_fwd(const BackendStorage&, const Layout&, const BackendStorage&, const Layout&,
                               const BackendStorage&, const Layout&) const {
  no_forward(name(), DeviceKind::Vulkan);
}
OpResult CustomOp3::metal_fwd(const BackendStorage&, const Layout&, const BackendStorage&, const Layout&,
                              const BackendStorage&, const Layout&) const {
  no_forward(name(), DeviceKind::Metal);
}
std::tuple<std::optional<Tensor>, std::optional<Tensor>, std::optional<Tensor>> CustomOp3::bwd(
    const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&) const {
  no_backward(name());
}

void InplaceOp1::cuda_fwd(BackendStorage&, const Layout&) const { no_forward(name(), DeviceKind::Cuda); }
void InplaceOp1::rocm_fwd(BackendStorage&, const Layout&) const { no_forward(name(), DeviceKind::Rocm); }
void InplaceOp1::vulkan_fwd(BackendStorage&, const Layout&) const { no_forward(name(), DeviceKind::Vulkan); }
void InplaceOp1::metal_fwd(BackendStorage&, const Layout&) const { no_forward(name(), DeviceKind::Metal); }

void InplaceOp2::cuda_fwd(BackendStorage&, const Layout&, const BackendStorage&, const Layout&) const {
  no_forward(name(), DeviceKind::Cuda);
}
void InplaceOp2::rocm_fwd(BackendStorage&, const Layout&, const BackendStorage&, const Layout&) const {
  no_forward(name(), DeviceKind::Rocm);
}
void InplaceOp2::vulkan_fwd(BackendStorage&, const Layout&, const BackendStorage&, const Layout&) const {
  no_forward(name(), DeviceKind::Vulkan);
}
void InplaceOp2::metal_fwd(BackendStorage&, const Layout&, const BackendStorage&, const Layout&) const {
  no_forward(name(), DeviceKind::Metal);
}

void InplaceOp3::cuda_fwd(BackendStorage&, const Layout&, const BackendStorage&, const Layout&,
                          const BackendStorage&, const Layout&) const {
  no_forward(name(), DeviceKind::Cuda);
}
void InplaceOp3::rocm_fwd(BackendStorage&, const Layout&, const BackendStorage&, const Layout&,
                          const BackendStorage&, const Layout&) const {
  no_forward(name(), DeviceKind::Rocm);
}
void InplaceOp3::vulkan_fwd(BackendStorage&, const Layout&, const BackendStorage&, const Layout&,
                            const BackendStorage&, const Layout&) const {
  no_forward(name(), DeviceKind::Vulkan);
}
void InplaceOp3::metal_fwd(BackendStorage&, const Layout&, const BackendStorage&, const Layout&,
                           const BackendStorage&, const Layout&) const {
  no_forward(name(), DeviceKind::Metal);
}

// ---- Tensor::apply_op* -----------------------------------------------------------------------

Tensor Tensor::apply_op1_no_bwd(const CustomOp1& c) const {
  std::string op = c.name();
  DeviceKind kind = device().kind();
  OpResult r = kind == DeviceKind::Cpu ? OpResult(c.cpu_fwd(cpu_storage(*this), layout()))
                                       : (c.*device_fwd<CustomOp1>(kind, op))(*storage(), layout());
  return make_output(op, std::move(r), device());
}

Tensor Tensor::apply_op2_no_bwd(const Tensor& rhs, const CustomOp2& c) const {
  std::string op = c.name();
  ops::check_same_device(*this, rhs, op.c_str());
  DeviceKind kind = device().kind();
  OpResult r = kind == DeviceKind::Cpu
                   ? OpResult(c.cpu_fwd(cpu_storage(*this), layout(), cpu_storage(rhs), rhs.layout()))
                   : (c.*device_fwd<CustomOp2>(kind, op))(*storage(), layout(), *rhs.storage(), rhs.layout());
  return make_output(op, std::move(r), device());
}

Tensor Tensor::apply_op3_no_bwd(const Tensor& t2, const Tensor& t3, const CustomOp3& c) const {
  std::string op = c.name();
  ops::check_same_device(*this, t2, op.c_str());
  ops::check_same_device(*this, t3, op.c_str());
  DeviceKind kind = device().kind();
  OpResult r = kind == DeviceKind::Cpu
                   ? OpResult(c.cpu_fwd(cpu_storage(*this), layout(), cpu_storage(t2), t2.layout(),
                                        cpu_storage(t3), t3.layout()))
                   : (c.*device_fwd<CustomOp3>(kind, op))(*storage(), layout(), *t2.storage(), t2.layout(),
                                                          *t3.storage(), t3.layout());
  return make_output(op, std::move(r), device());
}

Tensor Tensor::apply_op1_arc(std::shared_ptr<const CustomOp1> c) const {
  check_not_null(c);
  Tensor out = apply_op1_no_bwd(*c);
  return record_node(std::move(out), std::move(c), {*this});
}

Tensor Tensor::apply_op2_arc(const Tensor& rhs, std::shared_ptr<const CustomOp2> c) const {
  check_not_null(c);
  Tensor out = apply_op2_no_bwd(rhs, *c);
  return record_node(std::move(out), std::move(c), {*this, rhs});
}

Tensor Tensor::apply_op3_arc(const Tensor& t2, const Tensor& t3, std::shared_ptr<const CustomOp3> c) const {
  check_not_null(c);
  Tensor out = apply_op3_no_bwd(t2, t3, *c);
  return record_node(std::move(out), std::move(c), {*this, t2, t3});
}

// ---- Tensor::inplace_op* ---------------------------------------------------------------------

void Tensor::inplace_op1(const InplaceOp1& c) const {
  DeviceKind kind = device().kind();
  if (kind == DeviceKind::Cpu) {
    c.cpu_fwd(cpu_storage(*this), layout());
  } else {
    (c.*device_fwd<InplaceOp1>(kind, c.name()))(*storage(), layout());
  }
}

void Tensor::inplace_op2(const Tensor& rhs, const InplaceOp2& c) const {
  std::string op = c.name();
  ops::check_same_device(*this, rhs, op.c_str());
  DeviceKind kind = device().kind();
  if (kind == DeviceKind::Cpu) {
    c.cpu_fwd(cpu_storage(*this), layout(), cpu_storage(rhs), rhs.layout());
  } else {
    (c.*device_fwd<InplaceOp2>(kind, op))(*storage(), layout(), *rhs.storage(), rhs.layout());
  }
}

void Tensor::inplace_op3(const Tensor& t2, const Tensor& t3, const InplaceOp3& c) const {
  std::string op = c.name();
  ops::check_same_device(*this, t2, op.c_str());
  ops::check_same_device(*this, t3, op.c_str());
  DeviceKind kind = device().kind();
  if (kind == DeviceKind::Cpu) {
    c.cpu_fwd(cpu_storage(*this), layout(), cpu_storage(t2), t2.layout(), cpu_storage(t3), t3.layout());
  } else {
    (c.*device_fwd<InplaceOp3>(kind, op))(*storage(), layout(), *t2.storage(), t2.layout(), *t3.storage(),
                                          t3.layout());
  }
}

}  // namespace candle
