// cuDNN convolutions through the library's C API, resolved with dlsym (see cudnn_conv.h).
#include "cudnn_conv.h"

#include <atomic>

#include "candle/cuda.h"

namespace candle::cuda {
namespace {
// cuda::set_cudnn_enabled's switch, first set from CANDLE_CUDA_CUDNN.
std::atomic<bool>& cudnn_switch() {
  static std::atomic<bool> on{!cuda_backend::env_flag_off("CANDLE_CUDA_CUDNN")};
  return on;
}
}  // namespace

void set_cudnn_enabled(bool on) { cudnn_switch() = on; }
bool cudnn_enabled() { return cudnn_switch(); }

}  // namespace candle::cuda

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
bool cudnn_conv2d_grad_input(const CudaStorage&, const Layout&, const CudaStorage&, const Layout&,
                             const ParamsConv2D&, CudaStorage&) {
  return false;
}
bool cudnn_conv2d_grad_kernel(const CudaStorage&, const Layout&, const CudaStorage&, const Layout&,
                              const ParamsConv2D&, CudaStorage&) {
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
  X(cudnnConvolutionForward) \
  X(cudnnGetConvolutionBackwardDataAlgorithm_v7) \
  X(cudnnGetConvolutionBackwardDataWorkspaceSize) \
  X(cudnnConvolutionBackwardData) \
  X(cudnnGetConvolutionBackwardFilterAlgorithm_v7) \
  X(cudnnGetConvolutionBackwardFilterWorkspaceSize) \
  X(cudnnConvolutionBackwardFilter)
// clang-format on

struct Api {
  void* lib = nullptr;
  std::string why;
// NOLINTNEXTLINE(bugprone-macro-parentheses): a declaration; `name` cannot stand in parentheses
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

bool fits_int(size_t v) { return v <= static_cast<size_t>(INT_MAX); }

enum class Pass { Forward, BackwardData, BackwardFilter };

// The descriptors of one convolution: x [b, c_in, h, w] and y [b, c_out, oh, ow] with the given
// strides, the packed filter, the convolution with its math type.
struct Conv {
  const Api& a;
  Descs d;
  cudnnHandle_t h = nullptr;
  bool dbl = false;
  explicit Conv(const Api& api) : a(api), d(api) {}
};

std::array<int, 4> dense_strides(const int dims[4]) {
  return {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
}

// Sets up `c` for p with x's and y's element strides (nullptr: dense). False when the dtype or a
// size is not handled.
bool setup(Conv& c, Context& ctx, DType dt, const ParamsConv2D& p, const std::vector<size_t>* xs_in,
           const std::vector<size_t>* ys_in) {
  const Api& a = c.a;
  cudnnDataType_t type, compute;
  cudnnMathType_t math;
  switch (dt) {
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
  const size_t oh = p.out_h(), ow = p.out_w();
  for (size_t v : {p.b_size, p.c_in, p.i_h, p.i_w, p.c_out, p.k_h, p.k_w, oh, ow, p.padding, p.stride,
                   p.dilation, p.groups, p.b_size * p.c_in * p.i_h * p.i_w, p.b_size * p.c_out * oh * ow})
    if (!fits_int(v)) return false;
  for (const auto* st : {xs_in, ys_in})
    if (st)
      for (size_t v : *st)
        if (!fits_int(v)) return false;
  c.h = handle_for(ctx);
  if (!c.h) return false;
  c.dbl = dt == DType::F64;
  const int xd[4] = {int(p.b_size), int(p.c_in), int(p.i_h), int(p.i_w)};
  const int yd[4] = {int(p.b_size), int(p.c_out), int(oh), int(ow)};
  std::array<int, 4> xst = dense_strides(xd), yst = dense_strides(yd);
  if (xs_in)
    for (int i = 0; i < 4; ++i) xst[i] = int((*xs_in)[i]);
  if (ys_in)
    for (int i = 0; i < 4; ++i) yst[i] = int((*ys_in)[i]);
  const int wd[4] = {int(p.c_out), int(p.c_in / p.groups), int(p.k_h), int(p.k_w)};
  const int pad[2] = {int(p.padding), int(p.padding)}, str[2] = {int(p.stride), int(p.stride)},
            dil[2] = {int(p.dilation), int(p.dilation)};
  auto ok = [](cudnnStatus_t s) { return s == CUDNN_STATUS_SUCCESS; };
  Descs& d = c.d;
  return ok(a.cudnnCreateTensorDescriptor(&d.x)) &&
         ok(a.cudnnSetTensorNdDescriptor(d.x, type, 4, xd, xst.data())) &&
         ok(a.cudnnCreateTensorDescriptor(&d.y)) &&
         ok(a.cudnnSetTensorNdDescriptor(d.y, type, 4, yd, yst.data())) &&
         ok(a.cudnnCreateFilterDescriptor(&d.w)) &&
         ok(a.cudnnSetFilterNdDescriptor(d.w, type, CUDNN_TENSOR_NCHW, 4, wd)) &&
         ok(a.cudnnCreateConvolutionDescriptor(&d.conv)) &&
         ok(a.cudnnSetConvolutionNdDescriptor(d.conv, 2, pad, str, dil, CUDNN_CROSS_CORRELATION, compute)) &&
         ok(a.cudnnSetConvolutionGroupCount(d.conv, int(p.groups))) &&
         ok(a.cudnnSetConvolutionMathType(d.conv, math));
}

// The heuristics' first algorithm of a pass that runs (deterministic ones only for the
// backward passes, so a training run repeats) with a workspace of at most 1 GiB; cached per case.
struct Choice {
  int algo = -1;
  size_t workspace = 0;
};
using ChoiceKey = std::tuple<int, int, std::array<size_t, 13>, std::vector<size_t>, std::vector<size_t>, int>;

template <typename Perf, typename GetAlgos, typename GetWs>
Choice choose(const ChoiceKey& key, GetAlgos get_algos, GetWs get_ws, bool need_deterministic) {
  static std::mutex mu;
  static std::map<ChoiceKey, Choice> cache;
  {
    std::lock_guard lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  Perf perf[8];
  int n = 0;
  Choice ch;
  if (get_algos(perf, &n) == CUDNN_STATUS_SUCCESS) {
    for (int i = 0; i < n && ch.algo < 0; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > (size_t(1) << 30)) continue;
      if (need_deterministic && perf[i].determinism != CUDNN_DETERMINISTIC) continue;
      size_t ws = 0;
      if (get_ws(perf[i].algo, &ws) != CUDNN_STATUS_SUCCESS) continue;
      ch = {static_cast<int>(perf[i].algo), ws};
    }
  }
  std::lock_guard lock(mu);
  cache[key] = ch;
  return ch;
}

ChoiceKey key_of(Pass pass, const Context& ctx, DType dt, const ParamsConv2D& p,
                 const std::vector<size_t>* xs, const std::vector<size_t>* ys) {
  return {static_cast<int>(pass),
          ctx.ordinal(),
          {p.b_size, p.i_h, p.i_w, p.k_h, p.k_w, p.c_out, p.c_in, p.padding, p.output_padding, p.stride,
           p.dilation, p.groups, static_cast<size_t>(dt)},
          xs ? *xs : std::vector<size_t>{},
          ys ? *ys : std::vector<size_t>{},
          cuda::gemm_reduced_precision_f32() ? 1 : 0};
}

// cuDNN's alpha = 1 and beta = 0, as double for f64 and float otherwise.
struct Scale {
  float one_f = 1.0f, zero_f = 0.0f;
  double one_d = 1.0, zero_d = 0.0;
  const void* one;
  const void* zero;
  explicit Scale(bool dbl)
      : one(dbl ? static_cast<const void*>(&one_d) : &one_f),
        zero(dbl ? static_cast<const void*>(&zero_d) : &zero_f) {}
  Scale(const Scale&) = delete;
  Scale& operator=(const Scale&) = delete;
};

void check_status(const Api& a, cudnnStatus_t st, const char* what) {
  if (st != CUDNN_STATUS_SUCCESS) fail(std::string(what) + ": " + a.cudnnGetErrorString(st));
  counters().launches++;
}

}  // namespace

// The library is opened on the first use while the switch is on (never when it is off).
bool cudnn_available(std::string* why) {
  if (!cuda::cudnn_enabled()) {
    if (why) *why = "turned off (CANDLE_CUDA_CUDNN=0 or cuda::set_cudnn_enabled(false))";
    return false;
  }
  const Api& a = api();
  if (why) *why = a.lib ? "" : a.why;
  return a.lib != nullptr;
}

bool cudnn_conv2d(const CudaStorage& x, const Layout& xl, const CudaStorage& w_in, const Layout& wl_in,
                  const ParamsConv2D& p, CudaStorage& out) {
  if (!cudnn_available()) return false;
  const Api& a = api();
  Context& ctx = x.ctx();
  DeviceGuard g(ctx.ordinal());
  Conv c(a);
  if (!setup(c, ctx, x.dtype(), p, &xl.stride(), nullptr)) return false;
  Choice ch = choose<cudnnConvolutionFwdAlgoPerf_t>(
      key_of(Pass::Forward, ctx, x.dtype(), p, &xl.stride(), nullptr),
      [&](cudnnConvolutionFwdAlgoPerf_t* perf, int* n) {
        return a.cudnnGetConvolutionForwardAlgorithm_v7(c.h, c.d.x, c.d.w, c.d.conv, c.d.y, 8, n, perf);
      },
      [&](cudnnConvolutionFwdAlgo_t algo, size_t* ws) {
        return a.cudnnGetConvolutionForwardWorkspaceSize(c.h, c.d.x, c.d.w, c.d.conv, c.d.y, algo, ws);
      },
      false);
  if (ch.algo < 0) return false;
  Dense w = dense(w_in, wl_in);  // cuDNN wants a packed filter
  BlockPtr ws = ch.workspace ? ctx.alloc(ch.workspace) : nullptr;
  const Scale sc(c.dbl);
  check_status(a,
               a.cudnnConvolutionForward(c.h, sc.one, c.d.x, x.at(xl.start_offset()), c.d.w, w.s->at(w.first),
                                         c.d.conv, static_cast<cudnnConvolutionFwdAlgo_t>(ch.algo),
                                         ws ? ws->ptr : nullptr, ch.workspace, sc.zero, c.d.y, out.at(0)),
               "cudnnConvolutionForward");
  return true;
}

bool cudnn_conv2d_grad_input(const CudaStorage& g, const Layout& gl, const CudaStorage& w_in,
                             const Layout& wl_in, const ParamsConv2D& p, CudaStorage& dx) {
  if (!cudnn_available()) return false;
  const Api& a = api();
  Context& ctx = g.ctx();
  DeviceGuard guard(ctx.ordinal());
  Conv c(a);
  if (!setup(c, ctx, g.dtype(), p, nullptr, &gl.stride())) return false;
  Choice ch = choose<cudnnConvolutionBwdDataAlgoPerf_t>(
      key_of(Pass::BackwardData, ctx, g.dtype(), p, nullptr, &gl.stride()),
      [&](cudnnConvolutionBwdDataAlgoPerf_t* perf, int* n) {
        return a.cudnnGetConvolutionBackwardDataAlgorithm_v7(c.h, c.d.w, c.d.y, c.d.conv, c.d.x, 8, n, perf);
      },
      [&](cudnnConvolutionBwdDataAlgo_t algo, size_t* ws) {
        return a.cudnnGetConvolutionBackwardDataWorkspaceSize(c.h, c.d.w, c.d.y, c.d.conv, c.d.x, algo, ws);
      },
      true);
  if (ch.algo < 0) return false;
  Dense w = dense(w_in, wl_in);
  BlockPtr ws = ch.workspace ? ctx.alloc(ch.workspace) : nullptr;
  const Scale sc(c.dbl);
  check_status(
      a,
      a.cudnnConvolutionBackwardData(c.h, sc.one, c.d.w, w.s->at(w.first), c.d.y, g.at(gl.start_offset()),
                                     c.d.conv, static_cast<cudnnConvolutionBwdDataAlgo_t>(ch.algo),
                                     ws ? ws->ptr : nullptr, ch.workspace, sc.zero, c.d.x, dx.at(0)),
      "cudnnConvolutionBackwardData");
  return true;
}

bool cudnn_conv2d_grad_kernel(const CudaStorage& x, const Layout& xl, const CudaStorage& g, const Layout& gl,
                              const ParamsConv2D& p, CudaStorage& dw) {
  if (!cudnn_available()) return false;
  const Api& a = api();
  Context& ctx = x.ctx();
  DeviceGuard guard(ctx.ordinal());
  Conv c(a);
  if (!setup(c, ctx, x.dtype(), p, &xl.stride(), &gl.stride())) return false;
  Choice ch = choose<cudnnConvolutionBwdFilterAlgoPerf_t>(
      key_of(Pass::BackwardFilter, ctx, x.dtype(), p, &xl.stride(), &gl.stride()),
      [&](cudnnConvolutionBwdFilterAlgoPerf_t* perf, int* n) {
        return a.cudnnGetConvolutionBackwardFilterAlgorithm_v7(c.h, c.d.x, c.d.y, c.d.conv, c.d.w, 8, n,
                                                               perf);
      },
      [&](cudnnConvolutionBwdFilterAlgo_t algo, size_t* ws) {
        return a.cudnnGetConvolutionBackwardFilterWorkspaceSize(c.h, c.d.x, c.d.y, c.d.conv, c.d.w, algo, ws);
      },
      true);
  if (ch.algo < 0) return false;
  BlockPtr ws = ch.workspace ? ctx.alloc(ch.workspace) : nullptr;
  const Scale sc(c.dbl);
  check_status(a,
               a.cudnnConvolutionBackwardFilter(
                   c.h, sc.one, c.d.x, x.at(xl.start_offset()), c.d.y, g.at(gl.start_offset()), c.d.conv,
                   static_cast<cudnnConvolutionBwdFilterAlgo_t>(ch.algo), ws ? ws->ptr : nullptr,
                   ch.workspace, sc.zero, c.d.w, dw.at(0)),
               "cudnnConvolutionBackwardFilter");
  return true;
}

}  // namespace candle::cuda_backend
#endif  // CANDLE_CUDA_NO_CUDNN_H
