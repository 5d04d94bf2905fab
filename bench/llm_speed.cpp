// llm_speed: a language model's speed as llama-bench measures it, on random tokens: pp<N> (one
// batch of N tokens from an empty KV cache) and tg<N> (N single-token steps from an empty cache),
// each after a warm-up run, --reps times; tokens/s mean and standard deviation, then the peak
// resident memory. Needs no tokenizer (the model alone), so it builds where candle::tokenizers
// does not. tools/bench_llm_vs_llamacpp.py runs it beside llama.cpp on the same files.
//
//   llm_speed MODEL [--pp 512] [--tg 128] [--reps 3] [--threads N] [--device cpu] [--dtype f32]
//                   [--seed 0] [--tp N] [--depth D]
// --depth D (llama-bench's -d): each run first fills the KV cache with D random tokens (one batch,
// not timed), so pp / tg are timed from position D; the tests are named pp<N>_d<D> / tg<N>_d<D>
// (--decode cache only).
// --tp N: tensor-parallel over N ranks (models::load_causal_lm_parallel: N CUDA GPUs from --device's
// on, or N CPU ranks), with --decode cache.
// --host-profile 1 (--decode static / graph): where the host's time of a timed decode step goes, per
// token: writing the step's id and position, launching the step (the graph's replay) and waiting for
// its logits (a GPU idle while the host launches shows as launch time beside a short wait).
// prints one line per test:  BENCH test=pp512 t=512 tok_per_s=MEAN std=STD
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "candle/candle.h"
#include "candle/models/causal_lm.h"

using candle::DType;
using candle::Tensor;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void report(const std::string& test, size_t n, const std::vector<double>& secs) {
  std::vector<double> tps;
  tps.reserve(secs.size());
  for (double s : secs) tps.push_back(static_cast<double>(n) / s);
  double mean = 0, var = 0;
  for (double v : tps) mean += v;
  mean /= static_cast<double>(tps.size());
  for (double v : tps) var += (v - mean) * (v - mean);
  const double sd = tps.size() > 1 ? std::sqrt(var / static_cast<double>(tps.size() - 1)) : 0.0;
  std::printf("BENCH test=%s t=%zu tok_per_s=%.2f std=%.2f\n", test.c_str(), n, mean, sd);
  std::fflush(stdout);
}

int usage() {
  std::fprintf(stderr,
               "usage: llm_speed MODEL [--pp N] [--tg N] [--reps N] [--threads N] [--device NAME] "
               "[--dtype f32|f16|bf16] [--seed S] [--decode cache|static|graph] [--tp N] [--depth D] "
               "[--host-profile 0|1]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  std::string model_path = argv[1], device_name = "cpu", dtype_name = "f32", decode = "cache";
  long pp = 512, tg = 128, reps = 3, threads = 0, seed = 0, tp = 1, depth = 0, host_profile = 0;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage();
    const char* v = argv[++i];
    if (a == "--pp")
      pp = std::atol(v);
    else if (a == "--depth")
      depth = std::atol(v);
    else if (a == "--tg")
      tg = std::atol(v);
    else if (a == "--reps")
      reps = std::atol(v);
    else if (a == "--threads")
      threads = std::atol(v);
    else if (a == "--device")
      device_name = v;
    else if (a == "--decode")
      decode = v;
    else if (a == "--dtype")
      dtype_name = v;
    else if (a == "--seed")
      seed = std::atol(v);
    else if (a == "--tp")
      tp = std::atol(v);
    else if (a == "--host-profile")
      host_profile = std::atol(v);
    else
      return usage();
  }
  if (pp < 0 || tg < 0 || reps < 1 || threads < 0 || tp < 1 || tp > 64 || (tp > 1 && decode != "cache") ||
      depth < 0 || (depth > 0 && decode != "cache"))
    return usage();
  try {
    if (threads > 0) candle::set_num_threads(static_cast<size_t>(threads));
    const DType dtype = dtype_name == "f16" ? DType::F16 : dtype_name == "bf16" ? DType::BF16 : DType::F32;
    const auto t_load = Clock::now();
    const candle::Device device = candle::Device::from_name(device_name);
    std::vector<candle::Device> devices{device};
    for (long r = 1; r < tp; ++r)
      devices.push_back(device.kind() == candle::DeviceKind::Cpu
                            ? device
                            : candle::Device::open(device.kind(), device.ordinal() + static_cast<size_t>(r)));
    auto model = candle::models::load_causal_lm_parallel(model_path, devices, dtype);
    std::fprintf(stderr, "llm_speed: %s (%s) loaded in %.2f s, %zu threads\n", model_path.c_str(),
                 model->architecture().c_str(), seconds_since(t_load), candle::get_num_threads());
    std::mt19937 rng(static_cast<uint32_t>(seed));
    const size_t vocab = model->vocab_size();
    auto random_ids = [&](size_t n) {
      std::vector<uint32_t> v(n);
      for (auto& x : v) x = static_cast<uint32_t>(rng() % vocab);
      return v;
    };
    auto sync = [](const Tensor& logits) { (void)logits.to_dtype(DType::F32).flatten_to_vec<float>(); };
    // the KV cache emptied, then filled with --depth random tokens (not timed)
    const auto d0 = static_cast<size_t>(depth);
    auto fill = [&] {
      model->clear_kv_cache();
      if (d0 > 0) sync(model->forward(Tensor::from_vec(random_ids(d0), {1, d0}, device), 0));
    };
    auto pp_once = [&](size_t n) {
      fill();
      auto ids = random_ids(n);
      const auto t0 = Clock::now();
      sync(model->forward(Tensor::from_vec(ids, {1, n}, device), d0));
      return seconds_since(t0);
    };
    if (decode != "cache" && decode != "static" && decode != "graph") return usage();
    // --decode static: CausalLM::decode_step (the position a device tensor, KV buffers of the whole
    // context); graph: the same step recorded once as a CUDA graph and replayed for every token
    std::optional<candle::models::StaticDecode> st;
    Tensor step_ids, step_logits;
    std::optional<candle::Graph> graph;
    // --host-profile: seconds spent writing inputs, launching and waiting, over `profiled` steps
    double host_inputs = 0, host_launch = 0, host_wait = 0;
    size_t profiled = 0;
    auto set_u32 = [&](const Tensor& t, uint32_t v) {
      t.slice_set(Tensor::from_vec(std::vector<uint32_t>{v}, {1}, device).reshape(t.shape()), 0, 0);
    };
    auto static_step = [&](uint32_t id, size_t pos) {
      if (!st) {
        st = model->start_static_decode(1,
                                        std::min<size_t>(model->max_seq_len(), static_cast<size_t>(tg) + 16));
        step_ids = Tensor::from_vec(std::vector<uint32_t>{0}, {1, 1}, device);
      }
      const auto t0 = Clock::now();
      set_u32(step_ids, id);
      set_u32(st->pos, static_cast<uint32_t>(pos));
      const auto t1 = Clock::now();
      Tensor logits;
      if (decode == "static") {
        logits = model->decode_step(step_ids, *st);
      } else {
        if (!device.records_graphs())
          throw candle::Error(candle::ErrorKind::UnsupportedOp,
                              "llm_speed: --decode graph needs a device that records graphs (CUDA)");
        if (!graph)
          graph = candle::Graph::capture(device, [&] { step_logits = model->decode_step(step_ids, *st); });
        graph->replay();
        logits = step_logits;
      }
      host_inputs += std::chrono::duration<double>(t1 - t0).count();
      host_launch += seconds_since(t1);
      return logits;
    };
    auto tg_once = [&](size_t n) {
      fill();
      auto ids = random_ids(n);
      const auto t0 = Clock::now();
      for (size_t i = 0; i < n; ++i) {
        if (decode == "cache")
          sync(model->forward(Tensor::from_vec(std::vector<uint32_t>{ids[i]}, {1, 1}, device), d0 + i));
        else {
          const Tensor logits = static_step(ids[i], i);
          const auto tw = Clock::now();
          sync(logits);
          host_wait += seconds_since(tw);
          ++profiled;
        }
      }
      return seconds_since(t0);
    };
    const std::string suffix = d0 > 0 ? "_d" + std::to_string(d0) : "";
    if (pp > 0) {
      const size_t n = static_cast<size_t>(pp);
      pp_once(n);
      std::vector<double> secs;
      for (long r = 0; r < reps; ++r) secs.push_back(pp_once(n));
      report("pp" + std::to_string(n) + suffix, n, secs);
    }
    if (tg > 0) {
      const size_t n = static_cast<size_t>(tg);
      tg_once(std::min<size_t>(n, 16));
      host_inputs = host_launch = host_wait = 0;
      profiled = 0;
      std::vector<double> secs;
      for (long r = 0; r < reps; ++r) secs.push_back(tg_once(n));
      report("tg" + std::to_string(n) + suffix, n, secs);
      if (graph) std::fprintf(stderr, "llm_speed: the decode graph holds %zu nodes\n", graph->nodes());
      if (host_profile && graph) {
        // the recorded step replayed back to back (same inputs): the GPU's time a step with no host
        // round trip between steps
        constexpr int kQueued = 32;
        const auto tq = Clock::now();
        for (int r = 0; r < kQueued; ++r) graph->replay();
        sync(step_logits);
        std::fprintf(stderr, "llm_speed: %d steps queued back to back: %.1f us a step\n", kQueued,
                     seconds_since(tq) * 1e6 / kQueued);
      }
      if (host_profile && profiled > 0) {
        const double us = 1e6 / static_cast<double>(profiled);
        std::fprintf(stderr, "llm_speed: host time a token: inputs %.1f us, launch %.1f us, wait %.1f us\n",
                     host_inputs * us, host_launch * us, host_wait * us);
      }
    }
    // ops that left the device (a GPU backend without a kernel for them): each is a CPU round-trip
    for (const auto& [op, n] : candle::backend_stats())
      std::fprintf(stderr, "llm_speed: %zu CPU round-trip(s) of %s\n", n, op.c_str());
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    std::fprintf(stderr, "llm_speed: peak memory %.0f MiB\n", static_cast<double>(ru.ru_maxrss) / 1024.0);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "llm_speed: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
