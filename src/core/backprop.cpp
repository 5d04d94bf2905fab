// GradStore, the backward pass (Tensor::backward) and the autograd bookkeeping: grad mode,
// node attachment, the iterative graph teardown and the live-TensorImpl debug counter.
#include "candle/backprop.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/backprop_op.h"
#include "core/tensor_impl.h"

namespace candle {

std::optional<Tensor> GradStore::get_id(TensorId id) const {
  auto it = grads_.find(id);
  if (it == grads_.end()) return std::nullopt;
  return it->second;
}

std::optional<Tensor> GradStore::remove(const Tensor& t) {
  auto it = grads_.find(t.id());
  if (it == grads_.end()) return std::nullopt;
  Tensor g = std::move(it->second);
  grads_.erase(it);
  return g;
}

std::optional<Tensor> GradStore::insert(const Tensor& t, Tensor grad) {
  return insert_id(t.id(), std::move(grad));
}

std::optional<Tensor> GradStore::insert_id(TensorId id, Tensor grad) {
  auto [it, inserted] = grads_.try_emplace(id, grad);
  if (inserted) return std::nullopt;
  Tensor old = std::move(it->second);
  it->second = std::move(grad);
  return old;
}

std::vector<TensorId> GradStore::get_ids() const {
  std::vector<TensorId> ids;
  ids.reserve(grads_.size());
  for (const auto& [id, g] : grads_) ids.push_back(id);
  return ids;
}

// ---- TensorImpl lifetime ----------------------------------------------------------------------

namespace {
std::atomic<int64_t> g_live_impls{0};
}  // namespace

int64_t live_tensor_impls() { return g_live_impls.load(std::memory_order_relaxed); }

TensorImpl::TensorImpl() { g_live_impls.fetch_add(1, std::memory_order_relaxed); }

namespace autograd {
namespace {

// Destroys a graph without recursion: a node's inputs are released one by one, and the
// node of an input this node held the last reference to is moved onto the work list
// before that input's TensorImpl dies (so its destructor finds no node to release).
void release_graph(std::shared_ptr<BackpropOp> root) noexcept {
  std::vector<std::shared_ptr<BackpropOp>> pending;
  pending.push_back(std::move(root));
  while (!pending.empty()) {
    std::shared_ptr<BackpropOp> cur = std::move(pending.back());
    pending.pop_back();
    if (cur.use_count() != 1) continue;  // still referenced elsewhere (an engine in flight)
    std::vector<Tensor> inputs = std::move(cur->mutable_inputs());
    cur.reset();  // the rest of the node (saved constants) holds no tracked tensors' nodes
    for (Tensor& in : inputs) {
      Tensor t = std::move(in);
      const auto& impl = t.impl();
      if (impl && impl->op && impl.use_count() == 1) pending.push_back(std::move(impl->op));
    }
  }
}

thread_local bool t_grad_enabled = true;

}  // namespace
}  // namespace autograd

TensorImpl::~TensorImpl() {
  g_live_impls.fetch_sub(1, std::memory_order_relaxed);
  if (op) autograd::release_graph(std::move(op));
}

namespace autograd {

bool grad_enabled() { return t_grad_enabled; }

NoGradGuard::NoGradGuard() : prev_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = prev_; }

void attach(const Tensor& out, std::shared_ptr<BackpropOp> op) {
  out.impl()->track_op = true;
  out.impl()->op = std::move(op);
}

bool should_record(const Tensor& out, const std::vector<Tensor>& inputs) {
  if (!t_grad_enabled || !dtype_is_float(out.dtype())) return false;
  bool any = false;
  for (const Tensor& in : inputs) {
    if (!in.defined()) continue;
    if (in.impl() == out.impl()) return false;
    any = any || in.track_op();
  }
  return any;
}

Tensor sum_to_shape(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const size_t extra = g.rank() - shape.rank();
  std::vector<int64_t> dims;
  for (size_t i = 0; i < g.rank(); ++i) {
    if (i < extra || (shape[i - extra] == 1 && g.dims()[i] != 1)) dims.push_back(static_cast<int64_t>(i));
  }
  Tensor s = dims.empty() ? g : g.sum_keepdim(dims);
  return s.reshape(shape);
}

}  // namespace autograd

// ---- the backward pass ------------------------------------------------------------------------

// Walks the graph from this (single-element) root in topological order and returns the
// gradient of every Var the root depends on. Only tensors that track_op() are visited, so
// only paths that reach a Var cost anything.
//
// Unlike candle, intermediate gradients are not kept: once a node's gradient has been sent
// to its inputs it is dropped from the store, and only the Vars' gradients are returned.
// This bounds the peak memory of a pass by the live frontier of the graph rather than by
// its whole size. The pass runs with recording off, so gradients never track_op().
GradStore Tensor::backward() const {
  if (elem_count() != 1) {
    throw Error(ErrorKind::ShapeMismatch,
                "backward: the root must be a single-element tensor (a loss), got shape " +
                    shape().to_string() + "; reduce it first (e.g. sum_all())");
  }
  GradStore store;
  if (!track_op()) return store;
  autograd::NoGradGuard no_grad;

  // Post-order of the tracked graph (inputs before the ops that read them), iteratively.
  std::vector<Tensor> order;
  {
    std::unordered_set<const TensorImpl*> seen;
    std::vector<std::pair<Tensor, size_t>> stack;
    seen.insert(impl().get());
    stack.emplace_back(*this, 0);
    while (!stack.empty()) {
      auto& [t, next] = stack.back();
      const auto& op = t.impl()->op;
      if (!t.is_variable() && op && next < op->inputs().size()) {
        const Tensor& in = op->inputs()[next++];
        if (in.defined() && in.track_op() && seen.insert(in.impl().get()).second) stack.emplace_back(in, 0);
        continue;
      }
      order.push_back(std::move(t));
      stack.pop_back();
    }
  }

  store.insert(*this, ones_like());
  std::vector<Tensor> in_grads;
  // CANDLE_BACKPROP_PROFILE=1: the time of each node's backward on stderr, summed by op.
  static const bool profile = std::getenv("CANDLE_BACKPROP_PROFILE") != nullptr;
  std::map<std::string, std::pair<double, size_t>> op_times;
  for (size_t i = order.size(); i-- > 0;) {
    Tensor node = std::move(order[i]);
    if (node.is_variable()) continue;  // a leaf: its gradient stays in the store
    std::optional<Tensor> grad = store.remove(node);
    std::shared_ptr<autograd::BackpropOp> op = node.impl()->op;
    if (!grad || !op) continue;  // no gradient reached it, or a tracked tensor with no recorded op
    in_grads.assign(op->inputs().size(), Tensor());
    const auto t0 = profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    op->backward(node, *grad, in_grads);
    if (profile) {
      auto& [ms, n] = op_times[op->name()];
      ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      ++n;
    }
    grad.reset();
    for (size_t k = 0; k < in_grads.size(); ++k) {
      Tensor g = std::move(in_grads[k]);
      const Tensor& in = op->inputs()[k];
      if (!g.defined() || !in.defined() || !in.track_op()) continue;
      if (g.shape() != in.shape() || g.dtype() != in.dtype()) {
        throw Error(ErrorKind::Internal,
                    std::string("backward of ") + op->name() + ": gradient " + g.shape().to_string() + " " +
                        std::string(dtype_name(g.dtype())) + " does not match input " + std::to_string(k) +
                        " " + in.shape().to_string() + " " + std::string(dtype_name(in.dtype())));
      }
      if (auto prev = store.get(in)) {
        store.insert(in, prev->add(g));
      } else {
        store.insert(in, std::move(g));
      }
    }
  }
  if (profile) {
    for (const auto& [name, t] : op_times)
      std::fprintf(stderr, "  backward %-20s %4zu x %9.3f ms\n", name.c_str(), t.second, t.first);
  }
  return store;
}

}  // namespace candle
