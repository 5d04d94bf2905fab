// The end-to-end speed of a causal LM (models::load_causal_lm): llama-bench's two tests, pp = one
// prompt of --pp random tokens from an empty cache, tg = --tg single-token greedy decodes from an
// empty cache, each after a warm-up run; tools/llama_run.py --bench gives llama.cpp's numbers for
// the same GGUF.
//
//   llm_generate MODEL [--pp 128] [--tg 64] [--reps 3]
//   -> BENCH test=pp128 tok_per_s=... / BENCH test=tg64 tok_per_s=...
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "candle/candle.h"
#include "candle/models/causal_lm.h"

using namespace candle;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: llm_generate MODEL [--pp N] [--tg N] [--reps N]\n");
    return 2;
  }
  size_t pp = 128, tg = 64, reps = 3;
  for (int i = 2; i + 1 < argc; i += 2) {
    size_t v = std::strtoull(argv[i + 1], nullptr, 10);
    if (!std::strcmp(argv[i], "--pp"))
      pp = v;
    else if (!std::strcmp(argv[i], "--tg"))
      tg = v;
    else if (!std::strcmp(argv[i], "--reps"))
      reps = std::max<size_t>(v, 1);
  }
  try {
    auto lm = models::load_causal_lm(argv[1], Device::cpu(), DType::F32);
    const size_t vocab = lm->vocab_size();
    std::vector<uint32_t> prompt(pp);
    for (size_t i = 0; i < pp; ++i) prompt[i] = static_cast<uint32_t>((i * 7919 + 3) % vocab);
    auto now = [] { return std::chrono::steady_clock::now(); };
    auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
    auto run_pp = [&] {
      lm->clear_kv_cache();
      auto t0 = now();
      lm->forward(Tensor::from_vec(prompt, {1, pp}, Device::cpu()), 0);
      return pp / secs(t0, now());
    };
    auto run_tg = [&] {
      lm->clear_kv_cache();
      uint32_t tok = 1;
      auto t0 = now();
      for (size_t i = 0; i < tg; ++i) {
        Tensor logits = lm->forward(Tensor::from_vec(std::vector<uint32_t>{tok}, {1, 1}, Device::cpu()), i);
        tok = logits.flatten_all().argmax(0).to_scalar<uint32_t>();
      }
      return tg / secs(t0, now());
    };
    for (auto [name, n, fn] : {std::tuple<const char*, size_t, std::function<double()>>{"pp", pp, run_pp},
                               std::tuple<const char*, size_t, std::function<double()>>{"tg", tg, run_tg}}) {
      if (n == 0) continue;
      fn();  // warm-up
      double best = 0, sum = 0;
      for (size_t r = 0; r < reps; ++r) {
        double s = fn();
        sum += s;
        best = std::max(best, s);
      }
      std::printf("BENCH test=%s%zu t=%zu tok_per_s=%.2f best=%.2f\n", name, n, get_num_threads(), sum / reps,
                  best);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "llm_generate: %s\n", e.what());
    return 1;
  }
  return 0;
}
