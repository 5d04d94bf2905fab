// cuda::Graph: a device's work recorded by stream capture and replayed with one launch. The
// blocks the recorded run allocates are tagged with the graph's pool (context.h) and held by it.
#include <cuda_runtime.h>

#include "candle/cuda.h"
#include "storage.h"

namespace candle::cuda {

struct Graph::Impl {
  std::shared_ptr<cuda_backend::Context> ctx;
  std::shared_ptr<cuda_backend::GraphPool> pool;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  size_t nodes = 0;
  ~Impl() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
  }
};

Graph Graph::capture(const Device& dev, const std::function<void()>& work) {
  auto* cd = dynamic_cast<cuda_backend::CudaDevice*>(&dev.backend());
  if (!cd) throw Error(ErrorKind::Device, "cuda::Graph::capture needs a CUDA device, not " + dev.to_string());
  auto impl = std::make_shared<Impl>();
  impl->ctx = cd->ctx_ptr();
  cuda_backend::Context& ctx = *impl->ctx;
  const GraphRecordingScope recording;  // both runs take the paths a recording needs (Graph::recording)
  // the run that fills the allocator's cache with every block size the work takes
  work();
  ctx.synchronize();
  impl->pool = std::make_shared<cuda_backend::GraphPool>();
  impl->pool->ctx = &ctx;
  ctx.begin_capture(impl->pool);
  try {
    work();
  } catch (...) {
    ctx.end_capture();
    throw;
  }
  impl->graph = ctx.end_capture();
  if (!impl->graph)
    throw Error(ErrorKind::Device,
                "cuda: the stream capture of a CUDA graph failed (the work queued something "
                "that cannot be recorded)");
  cuda_backend::DeviceGuard g(ctx.ordinal());
  cuda_backend::check(cudaGraphGetNodes(impl->graph, nullptr, &impl->nodes), "cudaGraphGetNodes");
  cuda_backend::check(cudaGraphInstantiate(&impl->exec, impl->graph, 0), "cudaGraphInstantiate");
  Graph out;
  out.impl_ = std::move(impl);
  return out;
}

void Graph::replay() const {
  cuda_backend::Context& ctx = *impl_->ctx;
  ctx.check_not_capturing("Graph::replay");
  cuda_backend::DeviceGuard g(ctx.ordinal());
  ctx.launched(cudaGraphLaunch(impl_->exec, ctx.stream()), "cudaGraphLaunch");
}

size_t Graph::nodes() const { return impl_->nodes; }

}  // namespace candle::cuda

namespace candle::cuda_backend {

namespace {
// candle::Graph's recording on CUDA: a cuda::Graph
class CudaGraph final : public BackendGraph {
 public:
  explicit CudaGraph(cuda::Graph g) : g_(std::move(g)) {}
  void replay() const override { g_.replay(); }
  size_t nodes() const override { return g_.nodes(); }

 private:
  cuda::Graph g_;
};
}  // namespace

std::unique_ptr<BackendGraph> CudaDevice::capture_graph(const std::function<void()>& work) {
  return std::make_unique<CudaGraph>(cuda::Graph::capture(Device(shared_from_this()), work));
}

}  // namespace candle::cuda_backend
