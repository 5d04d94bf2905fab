#pragma once
// candle_transformers::generation in C++: LogitsProcessor picks the next token from a vector of
// logits (argmax, temperature sampling, top-k, top-p, top-k then top-p, min-p), seeded and
// deterministic; apply_repeat_penalty and llama.cpp-style frequency / presence penalties.

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <variant>
#include <vector>

#include "candle/tensor.h"

namespace candle::generation {

// xoshiro256** (Blackman and Vigna), its state filled from the seed by splitmix64: the same seed
// gives the same numbers on every platform and standard library.
class SamplingRng {
 public:
  explicit SamplingRng(uint64_t seed);
  uint64_t next_u64();
  // uniform in [0, 1), 53 random bits
  double next_f64();

 private:
  uint64_t s_[4];
};

namespace sampling {
struct ArgMax {};
struct All {
  double temperature;
};
struct TopK {
  size_t k;
  double temperature;
};
struct TopP {
  double p;
  double temperature;
};
struct TopKThenTopP {
  size_t k;
  double p;
  double temperature;
};
// keeps the tokens whose probability is at least p times the largest one
struct MinP {
  double p;
  double temperature;
};
}  // namespace sampling

using Sampling = std::variant<sampling::ArgMax, sampling::All, sampling::TopK, sampling::TopP,
                              sampling::TopKThenTopP, sampling::MinP>;

class LogitsProcessor {
 public:
  // candle's LogitsProcessor::new: no temperature (or one below 1e-7) is argmax; a temperature
  // with top_p is TopP, without it All.
  LogitsProcessor(uint64_t seed, std::optional<double> temperature, std::optional<double> top_p);
  static LogitsProcessor from_sampling(uint64_t seed, Sampling sampling);

  // logits: a 1-D f32, f16, bf16 or f64 tensor over the vocabulary, on any device.
  uint32_t sample(const Tensor& logits);
  uint32_t sample_f32(std::span<const float> logits);

  const Sampling& sampling() const { return sampling_; }

 private:
  LogitsProcessor(uint64_t seed, Sampling sampling);
  uint32_t sample_weighted(const std::vector<float>& weights);

  SamplingRng rng_;
  Sampling sampling_;
  using Candidate = std::pair<float, uint32_t>;
  std::vector<float> probs_;      // scratch
  std::vector<Candidate> cands_;  // scratch
};

// The index of the largest logit (the lowest such index on ties); throws on NaN or an empty span.
uint32_t argmax(std::span<const float> logits);

// candle_transformers::utils::apply_repeat_penalty: each token id of `context`, once, has its
// logit divided by `penalty` when non-negative and multiplied by it when negative. Ids past the
// vocabulary are ignored. Returns an f32 tensor on the logits' device.
Tensor apply_repeat_penalty(const Tensor& logits, float penalty, std::span<const uint32_t> context);
void apply_repeat_penalty(std::span<float> logits, float penalty, std::span<const uint32_t> context);

// llama.cpp / OpenAI penalties: logit -= count * frequency_penalty + (count > 0) * presence_penalty,
// count being how often the id occurs in `context`.
void apply_frequency_presence_penalty(std::span<float> logits, float frequency_penalty,
                                      float presence_penalty, std::span<const uint32_t> context);

}  // namespace candle::generation
