// cuDNN convolutions through the library's C API, resolved with dlsym (see cudnn_conv.h).
#include "cudnn_conv.h"

#if CANDLE_CUDA_NO_CUDNN_H
namespace candle::cuda_backend {
bool cudnn_available(std::string* why) {
  if (why) *why = "built without cudnn.h";
  return false;
}
bool cudnn_conv2d(const CudaStorage&, const Layout&, const CudaStorage&, const Layout&, const ParamsConv2D&,
                  CudaStorage&) {
  return false;
}
}  // namespace candle::cuda_backend
#else
#include <cudnn.h>
#include <dlfcn.h>

#include <array>
#include <climits>
#include <cstdio>
#include <map>
#include <mutex>
#include <tuple>

#include "candle/cuda.h"

namespace candle::cuda_backend {
namespace {

// The cuDNN functions used here.
// clang-format off
#define CANDLE_CUDNN_FUNCTIONS(X) \
  X(cudnnCreate) \
  X(cudnnSetStream) \
  X(cudnnGetErrorString) \
  X(cudnnCreateTensorDescriptor) \
  X(cudnnSetTensorNdDescriptor) \
  X(cudnnDestroyTensorDescriptor) \
  X(cudnnCreateFilterDescriptor) \
  X(cudnnSetFilterNdDescriptor) \
  X(cudnnDestroyFilterDescriptor) \
  X(cudnnCreateConvolutionDescriptor) \
  X(cudnnSetConvolutionNdDescriptor) \
  X(cudnnSetConvolutionGroupCount) \
  X(cudnnSetConvolutionMathType) \
  X(cudnnDestroyConvolutionDescriptor) \
  X(cudnnGetConvolutionForwardAlgorithm_v7) \
  X(cudnnGetConvolutionForwardWorkspaceSize) \
  X(cudnnConvolutionForward)
// clang-format on

struct Api {
  void* lib = nullptr;
  std::string why;
#define CANDLE_CUDNN_FN(name) decltype(&::name) name = nullptr;
  CANDLE_CUDNN_FUNCTIONS(CANDLE_CUDNN_FN)
#undef CANDLE_CUDNN_FN
};

template <typename F>
bool resolve(void* lib, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  return f != nullptr;
}

const Api& api() {
  static const Api a = [] {
    Api r;
    if (env_flag_off("CANDLE_CUDA_CUDNN")) {
      r.why = "turned off by CANDLE_CUDA_CUDNN=0";
      return r;
    }
    for (const char* name : {"libcudnn.so.9", "libcudnn.so"}) {
      r.lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (r.lib) break;
      const char* e = dlerror();
      r.why = e ? e : "libcudnn.so.9 not found";
    }
    if (!r.lib) return r;
    bool ok = true;
#define CANDLE_CUDNN_FN(name) ok = resolve(r.lib, #name, r.name) && ok;
    CANDLE_CUDNN_FUNCTIONS(CANDLE_CUDNN_FN)
#undef CANDLE_CUDNN_FN
    if (!ok) {
      r.why = "libcudnn lacks the convolution API";
      dlclose(r.lib);
      r.lib = nullptr;
    }
    return r;
  }();
  return a;
}

// One handle per context, bound to its stream.
cudnnHandle_t handle_for(Context& ctx) {
  static std::mutex mu;
  static std::map<Context*, cudnnHandle_t> handles;
  std::lock_guard lock(mu);
  auto it = handles.find(&ctx);
  if (it != handles.end()) return it->second;
  const Api& a = api();
  cudnnHandle_t h = nullptr;
  if (a.cudnnCreate(&h) != CUDNN_STATUS_SUCCESS) return nullptr;
  a.cudnnSetStream(h, ctx.stream());
  handles[&ctx] = h;
  return h;
}

// The descriptors of one call, destroyed at scope end.
struct Descs {
  const Api& a;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  explicit Descs(const Api& api) : a(api) {}
  ~Descs() {
    if (x) a.cudnnDestroyTensorDescriptor(x);
    if (y) a.cudnnDestroyTensorDescriptor(y);
    if (w) a.cudnnDestroyFilterDescriptor(w);
    if (conv) a.cudnnDestroyConvolutionDescriptor(conv);
  }
};

using AlgoKey = std::tuple<std::array<int, 8>, std::array<int, 8>, int, int, int, int>;
struct Algo {
  cudnnConvolutionFwdAlgo_t algo;
  size_t workspace;
};

bool fits_int(size_t v) { return v <= static_cast<size_t>(INT_MAX); }

}  // namespace

bool cudnn_available(std::string* why) {
  const Api& a = api();
  if (why) *why = a.lib ? "" : a.why;
  return a.lib != nullptr;
}

bool cudnn_conv2d(const CudaStorage& x, const Layout& xl, const CudaStorage& w_in, const Layout& wl_in,
                  const ParamsConv2D& p, CudaStorage& out) {
  const Api& a = api();
  if (!a.lib) return false;
  cudnnDataType_t type, compute;
  cudnnMathType_t math;
  switch (x.dtype()) {
    case DType::F32:
      type = compute = CUDNN_DATA_FLOAT;
      math = cuda::gemm_reduced_precision_f32() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
      break;
    case DType::F16:
      type = CUDNN_DATA_HALF;
      compute = CUDNN_DATA_FLOAT;
      math = CUDNN_TENSOR_OP_MATH;
      break;
    case DType::BF16:
      type = CUDNN_DATA_BFLOAT16;
      compute = CUDNN_DATA_FLOAT;
      math = CUDNN_TENSOR_OP_MATH;
      break;
    case DType::F64:
      type = compute = CUDNN_DATA_DOUBLE;
      math = CUDNN_FMA_MATH;
      break;
    default: return false;
  }
  const auto& xs = xl.stride();
  const size_t oh = p.out_h(), ow = p.out_w();
  for (size_t v : {p.b_size, p.c_in, p.i_h, p.i_w, p.c_out, p.k_h, p.k_w, oh, ow, p.padding, p.stride,
                   p.dilation, p.groups, xs[0], xs[1], xs[2], xs[3]})
    if (!fits_int(v)) return false;
  // cuDNN wants a packed filter
  Dense w = dense(w_in, wl_in);
  Context& ctx = x.ctx();
  DeviceGuard g(ctx.ordinal());
  cudnnHandle_t h = handle_for(ctx);
  if (!h) return false;
  Descs d(a);
  auto ok = [](cudnnStatus_t s) { return s == CUDNN_STATUS_SUCCESS; };
  const int xd[4] = {int(p.b_size), int(p.c_in), int(p.i_h), int(p.i_w)};
  const int xst[4] = {int(xs[0]), int(xs[1]), int(xs[2]), int(xs[3])};
  const int yd[4] = {int(p.b_size), int(p.c_out), int(oh), int(ow)};
  const int yst[4] = {int(p.c_out * oh * ow), int(oh * ow), int(ow), 1};
  const int wd[4] = {int(p.c_out), int(p.c_in / p.groups), int(p.k_h), int(p.k_w)};
  const int pad[2] = {int(p.padding), int(p.padding)}, str[2] = {int(p.stride), int(p.stride)},
            dil[2] = {int(p.dilation), int(p.dilation)};
  if (!ok(a.cudnnCreateTensorDescriptor(&d.x)) || !ok(a.cudnnSetTensorNdDescriptor(d.x, type, 4, xd, xst)) ||
      !ok(a.cudnnCreateTensorDescriptor(&d.y)) || !ok(a.cudnnSetTensorNdDescriptor(d.y, type, 4, yd, yst)) ||
      !ok(a.cudnnCreateFilterDescriptor(&d.w)) ||
      !ok(a.cudnnSetFilterNdDescriptor(d.w, type, CUDNN_TENSOR_NCHW, 4, wd)) ||
      !ok(a.cudnnCreateConvolutionDescriptor(&d.conv)) ||
      !ok(a.cudnnSetConvolutionNdDescriptor(d.conv, 2, pad, str, dil, CUDNN_CROSS_CORRELATION, compute)) ||
      !ok(a.cudnnSetConvolutionGroupCount(d.conv, int(p.groups))) ||
      !ok(a.cudnnSetConvolutionMathType(d.conv, math)))
    return false;
  // the heuristics' first algorithm that runs with a workspace of at most 1 GiB, cached per case
  static std::mutex mu;
  static std::map<AlgoKey, Algo> algos;
  AlgoKey key{{xd[0], xd[1], xd[2], xd[3], xst[0], xst[1], xst[2], xst[3]},
              {wd[0], wd[1], wd[2], wd[3], pad[0], str[0], dil[0], int(p.groups)},
              int(type),
              int(math),
              ctx.ordinal(),
              0};
  Algo algo{};
  bool found = false;
  {
    std::lock_guard lock(mu);
    auto it = algos.find(key);
    if (it != algos.end()) {
      algo = it->second;
      found = true;
    }
  }
  if (!found) {
    cudnnConvolutionFwdAlgoPerf_t perf[8];
    int n = 0;
    if (!ok(a.cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y, 8, &n, perf))) return false;
    for (int i = 0; i < n && !found; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > (size_t(1) << 30)) continue;
      size_t ws = 0;
      if (!ok(a.cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y, perf[i].algo, &ws)))
        continue;
      algo = {perf[i].algo, ws};
      found = true;
    }
    if (!found) return false;
    std::lock_guard lock(mu);
    algos[key] = algo;
  }
  BlockPtr ws = algo.workspace ? ctx.alloc(algo.workspace) : nullptr;
  const float one_f = 1.0f, zero_f = 0.0f;
  const double one_d = 1.0, zero_d = 0.0;
  const bool dbl = x.dtype() == DType::F64;
  const cudnnStatus_t st = a.cudnnConvolutionForward(
      h, dbl ? static_cast<const void*>(&one_d) : &one_f, d.x, x.at(xl.start_offset()), d.w, w.s->at(w.first),
      d.conv, algo.algo, ws ? ws->ptr : nullptr, algo.workspace,
      dbl ? static_cast<const void*>(&zero_d) : &zero_f, d.y, out.at(0));
  if (!ok(st)) fail(std::string("cudnnConvolutionForward: ") + a.cudnnGetErrorString(st));
  counters().launches++;
  return true;
}

}  // namespace candle::cuda_backend
#endif  // CANDLE_CUDA_NO_CUDNN_H
