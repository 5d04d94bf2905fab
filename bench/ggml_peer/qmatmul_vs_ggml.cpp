// candle's qmatmul_cpu beside llama.cpp's CPU mul_mat, in one process, on the same weights
// (quantized by ggml_quantize_chunk) and activations, with the same thread count. The ggml
// libraries are dlopened from a directory (tools/peers' prebuilt node-llama-cpp binaries); the
// CPU variant is the one whose ggml_backend_score() is highest on this CPU. The few prototypes
// of ggml's public C API that this needs are declared here (no headers are shipped).
//
//   qmatmul_vs_ggml --lib-dir DIR [--threads N] [--rounds R] [--types q4_0,q8_0] [--shapes 4096x4096]
//                   [--m 1,128,512] [--packed 1] [--ggml-repack q4_0,q4_K] [--cold-mb MB]
// --packed 1 (the default, what QMatMul::from_arc_repacked and the GGUF models use): the types with a
// packed layout (qmm_pack) run packed ("+packed" after the kernel name); 0: the plain blocks.
// --ggml-repack LIST (default q4_0,q4_K; 0: none): those types go to llama.cpp's CPU_REPACK buffer
// (its interleaved rows and their GEMM kernels, what its model loader uses on this CPU where the row
// count allows), "(ggml: CPU_REPACK)" after the kernel name; the others are ggml's plain blocks.
// --ggml-buft NAME (default CPU_REPACK): another of the CPU device's extra buffer types for them, e.g.
// AMX (what llama.cpp's loader prefers on a CPU with AMX, for the types its AMX kernels take).
// --cold-mb MB (default 0): enough distinct copies of the weights to fill MB MiB, multiplied one after
// the other (ggml: one graph of a mul_mat per copy), as a model's decode passes over its matrices:
// the weights come from DRAM, not from the caches that one repeated matrix stays in; the times are
// per copy.
// prints one line per (type, n, k, m): the median seconds per call of each (R rounds of about
// 0.15 s each, taken alternately), the weights' GB/s, the ratio (ours / ggml throughput) and the
// largest difference between the two outputs relative to the output's largest magnitude.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "candle/quantized/ggml_dtype.h"
#include "candle/utils.h"
#include "quantized/qmatmul_cpu.h"

namespace {

struct ggml_context;
struct ggml_tensor;
struct ggml_cgraph;
struct ggml_threadpool;
struct ggml_backend_reg;
struct ggml_backend_device;
struct ggml_backend_buffer_type;
struct ggml_backend_buffer;
struct InitParams {
  size_t mem_size;
  void* mem_buffer;
  bool no_alloc;
};
// ggml_cplan: only its first two fields are read here; the padding covers the rest of it
struct CPlan {
  size_t work_size;
  uint8_t* work_data;
  unsigned char rest[256];
};
// ggml_threadpool_params, opaque (512 bools of cpu mask and a few fields), padded generously
struct TpParams {
  unsigned char bytes[4096];
};

struct Ggml {
  ggml_context* (*init)(InitParams);
  void (*free)(ggml_context*);
  ggml_tensor* (*new_tensor_2d)(ggml_context*, int, int64_t, int64_t);
  ggml_tensor* (*mul_mat)(ggml_context*, ggml_tensor*, ggml_tensor*);
  ggml_cgraph* (*new_graph)(ggml_context*);
  void (*build_forward_expand)(ggml_cgraph*, ggml_tensor*);
  void* (*get_data)(const ggml_tensor*);
  size_t (*quantize_chunk)(int, const float*, void*, int64_t, int64_t, int64_t, const float*);
  size_t (*tensor_overhead)();
  size_t (*graph_overhead)();
  void (*cpu_init)();
  CPlan (*graph_plan)(const ggml_cgraph*, int, ggml_threadpool*);
  int (*graph_compute)(ggml_cgraph*, CPlan*);
  TpParams (*threadpool_params_default)(int);
  ggml_threadpool* (*threadpool_new)(TpParams*);
  void (*threadpool_free)(ggml_threadpool*);
  void (*threadpool_pause)(ggml_threadpool*);
  void (*threadpool_resume)(ggml_threadpool*);
  // llama.cpp's extra buffer types (CPU_REPACK, AMX: its own weight layouts and kernels), for --ggml-repack
  ggml_backend_reg* (*cpu_reg)();
  void* (*reg_get_proc_address)(ggml_backend_reg*, const char*);
  ggml_backend_device* (*reg_dev_get)(ggml_backend_reg*, size_t);
  const char* (*buft_name)(ggml_backend_buffer_type*);
  ggml_backend_buffer* (*alloc_ctx_tensors_from_buft)(ggml_context*, ggml_backend_buffer_type*);
  void (*tensor_set)(ggml_tensor*, const void*, size_t, size_t);
  void (*buffer_free)(ggml_backend_buffer*);
  std::string variant;
};

// the CPU device's extra buffer type of that name (CPU_REPACK, AMX), or nullptr
ggml_backend_buffer_type* extra_buft(const Ggml& g, const std::string& name) {
  ggml_backend_reg* reg = g.cpu_reg();
  using ExtraBufts = ggml_backend_buffer_type** (*)(ggml_backend_device*);
  auto extra = reinterpret_cast<ExtraBufts>(g.reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts"));
  if (!extra) return nullptr;
  for (ggml_backend_buffer_type** b = extra(g.reg_dev_get(reg, 0)); b && *b; ++b)
    if (g.buft_name(*b) == name) return *b;
  return nullptr;
}

template <typename F>
void sym(void* lib, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  if (!f) {
    std::fprintf(stderr, "missing symbol %s\n", name);
    std::exit(1);
  }
}

Ggml load(const std::string& dir) {
  Ggml g;
  void* base = dlopen((dir + "/libggml-base.so").c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!base) {
    std::fprintf(stderr, "dlopen libggml-base.so: %s\n", dlerror());
    std::exit(1);
  }
  void* best = nullptr;
  int best_score = 0;
  // GGML_CPU_VARIANT=haswell (say) takes that variant instead of the best-scoring one
  const char* forced = std::getenv("GGML_CPU_VARIANT");
  for (const char* v :
       {"x64", "sse42", "sandybridge", "ivybridge", "piledriver", "haswell", "alderlake", "skylakex",
        "cannonlake", "cascadelake", "cooperlake", "icelake", "zen4", "sapphirerapids"}) {
    void* lib = dlopen((dir + "/libggml-cpu-" + v + ".so").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) continue;
    auto score = reinterpret_cast<int (*)()>(dlsym(lib, "ggml_backend_score"));
    int s = score ? score() : 0;
    if (forced && *forced) s = std::string(forced) == v && s > 0 ? 1 : 0;
    if (s > best_score) {
      best_score = s;
      best = lib;
      g.variant = v;
    }
  }
  if (!best) {
    std::fprintf(stderr, "no libggml-cpu-*.so in %s runs on this CPU\n", dir.c_str());
    std::exit(1);
  }
  sym(base, "ggml_init", g.init);
  sym(base, "ggml_free", g.free);
  sym(base, "ggml_new_tensor_2d", g.new_tensor_2d);
  sym(base, "ggml_mul_mat", g.mul_mat);
  sym(base, "ggml_new_graph", g.new_graph);
  sym(base, "ggml_build_forward_expand", g.build_forward_expand);
  sym(base, "ggml_get_data", g.get_data);
  sym(base, "ggml_quantize_chunk", g.quantize_chunk);
  sym(base, "ggml_tensor_overhead", g.tensor_overhead);
  sym(base, "ggml_graph_overhead", g.graph_overhead);
  sym(base, "ggml_threadpool_params_default", g.threadpool_params_default);
  sym(best, "ggml_cpu_init", g.cpu_init);
  sym(best, "ggml_graph_plan", g.graph_plan);
  sym(best, "ggml_graph_compute", g.graph_compute);
  sym(best, "ggml_threadpool_new", g.threadpool_new);
  sym(best, "ggml_threadpool_free", g.threadpool_free);
  sym(best, "ggml_threadpool_pause", g.threadpool_pause);
  sym(best, "ggml_threadpool_resume", g.threadpool_resume);
  sym(best, "ggml_backend_cpu_reg", g.cpu_reg);
  sym(base, "ggml_backend_reg_get_proc_address", g.reg_get_proc_address);
  sym(base, "ggml_backend_reg_dev_get", g.reg_dev_get);
  sym(base, "ggml_backend_buft_name", g.buft_name);
  sym(base, "ggml_backend_alloc_ctx_tensors_from_buft", g.alloc_ctx_tensors_from_buft);
  sym(base, "ggml_backend_tensor_set", g.tensor_set);
  sym(base, "ggml_backend_buffer_free", g.buffer_free);
  g.cpu_init();
  return g;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep))
    if (!item.empty()) out.push_back(item);
  return out;
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <typename F>
double seconds_per_call(F&& f, double budget) {
  double t0 = now();
  int it = 0;
  do {
    f();
    ++it;
  } while (now() - t0 < budget);
  return (now() - t0) / it;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

double memcpy_gbps() {
  const size_t bytes = size_t{256} << 20;
  std::vector<char> a(bytes, 1), b(bytes, 2);
  std::vector<double> t;
  t.reserve(5);
  for (int r = 0; r < 5; ++r)
    t.push_back(seconds_per_call([&] { std::memcpy(b.data(), a.data(), bytes); }, 0.2));
  return double(bytes) / median(t) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  std::string lib_dir, types = "q4_0,q8_0,q4_K,q6_K,iq4_xs", shapes = "4096x4096,11008x4096,4096x11008",
                       ms = "1,128,512", ggml_repack = "q4_0,q4_K", ggml_buft = "CPU_REPACK";
  int threads = 2, rounds = 5, packed_opt = 1, cold_mb = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--lib-dir")
      lib_dir = v;
    else if (a == "--threads")
      threads = std::atoi(v.c_str());
    else if (a == "--rounds")
      rounds = std::atoi(v.c_str());
    else if (a == "--types")
      types = v;
    else if (a == "--shapes")
      shapes = v;
    else if (a == "--m")
      ms = v;
    else if (a == "--packed")
      packed_opt = std::atoi(v.c_str());
    else if (a == "--ggml-repack")
      ggml_repack = v == "0" ? "" : v;
    else if (a == "--ggml-buft")
      ggml_buft = v;
    else if (a == "--cold-mb")
      cold_mb = std::atoi(v.c_str());
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (lib_dir.empty() || threads < 1 || rounds < 1 || cold_mb < 0) {
    std::fprintf(stderr,
                 "usage: %s --lib-dir DIR [--threads N] [--rounds R] [--types ..] [--shapes NxK,..] [--m ..] "
                 "[--packed 0|1] [--ggml-repack LIST|0] [--ggml-buft NAME] [--cold-mb MB]\n",
                 argv[0]);
    return 2;
  }
  Ggml g = load(lib_dir);
  // the types given to llama.cpp's extra buffer (--ggml-buft), as its model loader does where it has a
  // layout for them on this CPU (CPU_REPACK: Q4_0 and Q4_K with AVX2 in the llama.cpp of tools/peers)
  ggml_backend_buffer_type* rbuft = ggml_repack.empty() ? nullptr : extra_buft(g, ggml_buft);
  if (!ggml_repack.empty() && !rbuft) {
    std::fprintf(stderr,
                 "ggml's CPU device has no extra buffer type %s (--ggml-buft; --ggml-repack 0 for none)\n",
                 ggml_buft.c_str());
    return 2;
  }
  std::set<candle::quantized::GgmlDType> repack_types;
  for (const std::string& tn : split(ggml_repack, ',')) {
    auto t = candle::quantized::ggml_dtype_from_name(tn);
    if (!t) {
      std::fprintf(stderr, "--ggml-repack: unknown type %s\n", tn.c_str());
      return 2;
    }
    repack_types.insert(*t);
  }
  candle::set_num_threads(static_cast<size_t>(threads));
  TpParams tpp = g.threadpool_params_default(threads);
  ggml_threadpool* tp = g.threadpool_new(&tpp);
  std::printf(
      "# ggml cpu variant: %s, threads: %d, memcpy: %.1f GB/s, rounds: %d (median)%s\n", g.variant.c_str(),
      threads, memcpy_gbps(), rounds,
      cold_mb ? (", weights from DRAM: copies filling " + std::to_string(cold_mb) + " MiB").c_str() : "");
  std::printf("%-7s %6s %6s %4s  %10s %10s  %8s %8s  %6s  %9s  %s\n", "type", "n", "k", "m", "ours_ms",
              "ggml_ms", "ours_GB/s", "ggml_GB/s", "ratio", "max_rdiff", "kernel");
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (const std::string& tn : split(types, ',')) {
    auto t = candle::quantized::ggml_dtype_from_name(tn);
    if (!t) {
      std::fprintf(stderr, "unknown type %s\n", tn.c_str());
      return 2;
    }
    // the activations' types: no weight kernel here, and ggml_quantize_chunk aborts on them
    if (*t == candle::quantized::GgmlDType::Q8_1 || *t == candle::quantized::GgmlDType::Q8K) {
      std::fprintf(
          stderr,
          "%s is one of ggml's activation types (what the weights are multiplied with), not a weight type\n",
          tn.c_str());
      return 2;
    }
    for (const std::string& sh : split(shapes, ',')) {
      auto nk = split(sh, 'x');
      const size_t n = std::stoul(nk.at(0)), k = std::stoul(nk.at(1));
      const size_t wbytes = candle::quantized::ggml_row_bytes(*t, k) * n;
      for (const std::string& mstr : split(ms, ',')) {
        const size_t m = std::stoul(mstr);
        const size_t copies = std::max<size_t>(1, ((size_t(cold_mb) << 20) + wbytes - 1) / wbytes);
        InitParams ip{copies * (wbytes + m * n * 4 + 2 * g.tensor_overhead()) + m * k * 4 +
                          g.tensor_overhead() + g.graph_overhead() + (1 << 20),
                      nullptr, false};
        ggml_context* ctx = g.init(ip);
        std::vector<ggml_tensor*> W(copies), Wm(copies), Ys(copies);
        for (auto& w : W)
          w = g.new_tensor_2d(ctx, static_cast<int>(*t), static_cast<int64_t>(k), static_cast<int64_t>(n));
        ggml_tensor* X = g.new_tensor_2d(ctx, 0, static_cast<int64_t>(k), static_cast<int64_t>(m));
        {
          std::vector<float> wf(n * k);
          for (auto& v : wf) v = nd(rng) * 0.02f;
          g.quantize_chunk(static_cast<int>(*t), wf.data(), g.get_data(W[0]), 0, static_cast<int64_t>(n),
                           static_cast<int64_t>(k), nullptr);
          for (size_t i = 1; i < copies; ++i) std::memcpy(g.get_data(W[i]), g.get_data(W[0]), wbytes);
        }
        float* xd = static_cast<float*>(g.get_data(X));
        for (size_t i = 0; i < m * k; ++i) xd[i] = nd(rng);
        // llama.cpp's own layout where its model loader would choose it for this type
        Wm = W;
        ggml_context* ctx_r = nullptr;
        ggml_backend_buffer* rbuf = nullptr;
        if (rbuft && repack_types.count(*t) && n % 8 == 0) {
          InitParams rp{(copies + 1) * g.tensor_overhead(), nullptr, true};
          ctx_r = g.init(rp);
          for (auto& w : Wm)
            w = g.new_tensor_2d(ctx_r, static_cast<int>(*t), static_cast<int64_t>(k),
                                static_cast<int64_t>(n));
          rbuf = g.alloc_ctx_tensors_from_buft(ctx_r, rbuft);
          for (ggml_tensor* w : Wm) g.tensor_set(w, g.get_data(W[0]), 0, wbytes);
        }
        ggml_cgraph* gf = g.new_graph(ctx);
        for (size_t i = 0; i < copies; ++i) {
          Ys[i] = g.mul_mat(ctx, Wm[i], X);
          g.build_forward_expand(gf, Ys[i]);
        }
        ggml_tensor* Y = Ys[0];
        CPlan plan = g.graph_plan(gf, threads, tp);
        std::vector<uint8_t> work(plan.work_size + 64);
        plan.work_data = work.data();
        std::vector<float> ours(m * n);
        const auto isa = candle::quantized::qmm_isa();
        const bool packed = packed_opt != 0 && candle::quantized::qmm_packable(*t, n, k, isa);
        const size_t pbytes = packed ? candle::quantized::qmm_packed_row_bytes(*t, k) * n : 0;
        std::vector<uint8_t> wpacked(pbytes * copies);
        if (packed) {
          candle::quantized::qmm_pack(*t, g.get_data(W[0]), n, k, wpacked.data());
          for (size_t i = 1; i < copies; ++i)
            std::memcpy(wpacked.data() + i * pbytes, wpacked.data(), pbytes);
        }
        auto run_ggml = [&] { g.graph_compute(gf, &plan); };
        // copy 0 last, whose output is compared
        auto run_ours = [&] {
          for (size_t i = copies; i-- > 0;) {
            if (packed)
              candle::quantized::qmatmul_cpu_packed(*t, wpacked.data() + i * pbytes, n, k, xd, m, ours.data(),
                                                    isa);
            else
              candle::quantized::qmatmul_cpu(*t, g.get_data(W[i]), n, k, xd, m, ours.data());
          }
        };
        run_ggml();
        run_ours();
        const float* yd = static_cast<const float*>(g.get_data(Y));
        double maxabs = 0, maxdiff = 0;
        for (size_t i = 0; i < m * n; ++i) {
          maxabs = std::max(maxabs, std::fabs(double(yd[i])));
          maxdiff = std::max(maxdiff, std::fabs(double(yd[i]) - ours[i]));
        }
        std::vector<double> tg, to;
        for (int r = 0; r < rounds; ++r) {
          g.threadpool_resume(tp);
          tg.push_back(seconds_per_call(run_ggml, 0.15));
          g.threadpool_pause(tp);
          to.push_back(seconds_per_call(run_ours, 0.15));
        }
        const double sg = median(tg) / double(copies), so = median(to) / double(copies);
        std::printf("%-7s %6zu %6zu %4zu  %10.3f %10.3f  %8.1f %8.1f  %6.2f  %9.2e  %s%s%s\n", tn.c_str(), n,
                    k, m, so * 1e3, sg * 1e3, wbytes / so / 1e9, wbytes / sg / 1e9, sg / so, maxdiff / maxabs,
                    candle::quantized::qmatmul_cpu_kernel_name(*t), packed ? "+packed" : "",
                    rbuf ? (" (ggml: " + ggml_buft + ")").c_str() : "");
        std::fflush(stdout);
        if (rbuf) g.buffer_free(rbuf);
        if (ctx_r) g.free(ctx_r);
        g.free(ctx);
      }
    }
  }
  g.threadpool_free(tp);
  return 0;
}
