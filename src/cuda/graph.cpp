// cuda::Graph: a device's work recorded by stream capture and replayed with one launch. The
// blocks the recorded run allocates are tagged with the graph's pool (context.h) and held by it.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "candle/cuda.h"
#include "storage.h"

namespace candle::cuda {

struct Graph::Impl {
  std::shared_ptr<cuda_backend::Context> ctx;
  std::shared_ptr<cuda_backend::GraphPool> pool;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  size_t nodes = 0, programmatic = 0;
  ~Impl() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
  }
};

namespace {

bool is_kernel(cudaGraphNode_t node) {
  cudaGraphNodeType t{};
  return cudaGraphNodeGetType(node, &t) == cudaSuccess && t == cudaGraphNodeTypeKernel;
}

// One of this library's kernels (kernels/cuda: each begins with pdl_entry(), which waits for the
// kernels it depends on), told by its name; cuBLAS / cuDNN kernels are not.
bool waits_for_its_inputs(cudaGraphNode_t node) {
  cudaKernelNodeParams p{};
  const char* name = nullptr;
  if (!is_kernel(node) || cudaGraphKernelNodeGetParams(node, &p) != cudaSuccess ||
      cudaFuncGetName(&name, p.func) != cudaSuccess || !name) {
    (void)cudaGetLastError();
    return false;
  }
  return std::strstr(name, "candle") && std::strstr(name, "cuda_k");
}

// Turns each edge kernel -> our kernel (its only dependency) into a programmatic one: the later
// kernel may launch once every block of the earlier one has passed its own wait (launch_dependents),
// and then waits for the earlier one's results in griddepcontrol.wait: the later one's launch is
// hidden behind the earlier one's run. Returns the edges changed.
size_t make_programmatic(cudaGraph_t graph) {
  size_t n = 0;
  if (cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &n) != cudaSuccess || n == 0) return 0;
  std::vector<cudaGraphNode_t> from(n), to(n);
  std::vector<cudaGraphEdgeData> data(n);
  if (cudaGraphGetEdges(graph, from.data(), to.data(), data.data(), &n) != cudaSuccess) return 0;
  std::unordered_map<cudaGraphNode_t, int> incoming;
  for (size_t i = 0; i < n; ++i) ++incoming[to[i]];
  size_t changed = 0;
  for (size_t i = 0; i < n; ++i) {
    if (data[i].type != cudaGraphDependencyTypeDefault || incoming[to[i]] != 1 || !is_kernel(from[i]) ||
        !waits_for_its_inputs(to[i]))
      continue;
    cudaGraphEdgeData pe{};
    pe.type = cudaGraphDependencyTypeProgrammatic;
    pe.from_port = cudaGraphKernelNodePortProgrammatic;
    if (cudaGraphRemoveDependencies(graph, &from[i], &to[i], &data[i], 1) != cudaSuccess) {
      (void)cudaGetLastError();
      continue;
    }
    if (cudaGraphAddDependencies(graph, &from[i], &to[i], &pe, 1) != cudaSuccess) {
      (void)cudaGetLastError();
      cuda_backend::check(cudaGraphAddDependencies(graph, &from[i], &to[i], &data[i], 1),
                          "cudaGraphAddDependencies (restoring an edge)");
      continue;
    }
    ++changed;
  }
  return changed;
}

bool programmatic_launch_on(int ordinal) {
  const char* e = std::getenv("CANDLE_CUDA_PDL");
  if (e && e[0] == '0') return false;
  int major = 0;
  return cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ordinal) == cudaSuccess &&
         major >= 9;
}

// CANDLE_CUDA_GRAPH_STATS=1: the recorded graph's nodes by type on stderr (a measurement aid: what
// besides kernels a replay runs)
void print_node_types(cudaGraph_t graph, size_t n, size_t programmatic) {
  std::vector<cudaGraphNode_t> nodes(n);
  if (cudaGraphGetNodes(graph, nodes.data(), &n) != cudaSuccess) return;
  std::unordered_map<int, size_t> by_type;
  for (size_t i = 0; i < n; ++i) {
    cudaGraphNodeType t{};
    if (cudaGraphNodeGetType(nodes[i], &t) == cudaSuccess) ++by_type[static_cast<int>(t)];
  }
  std::fprintf(stderr, "cuda graph: %zu nodes, %zu programmatic edges; by cudaGraphNodeType:", n,
               programmatic);
  for (const auto& [t, c] : by_type) std::fprintf(stderr, " %d: %zu", t, c);
  std::fprintf(stderr, "\n");
}

}  // namespace

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
  if (programmatic_launch_on(ctx.ordinal())) impl->programmatic = make_programmatic(impl->graph);
  cuda_backend::check(cudaGraphInstantiate(&impl->exec, impl->graph, 0), "cudaGraphInstantiate");
  // (the first replay would upload it: done here, so that it is not timed as a step)
  cuda_backend::check(cudaGraphUpload(impl->exec, ctx.stream()), "cudaGraphUpload");
  if (const char* e = std::getenv("CANDLE_CUDA_GRAPH_STATS"); e && e[0] == '1')
    print_node_types(impl->graph, impl->nodes, impl->programmatic);
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

size_t Graph::programmatic_edges() const { return impl_->programmatic; }

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
