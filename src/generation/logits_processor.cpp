// LogitsProcessor: softmax with temperature, then a weighted draw from the kept tokens. Top-k keeps
// the k best by partial selection; top-p sorts only as many candidates as it needs.
#include "candle/generation/logits_processor.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "candle/error.h"

namespace candle::generation {

namespace {

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

double temperature_of(const Sampling& s) {
  return std::visit(
      [](const auto& v) -> double {
        if constexpr (requires { v.temperature; })
          return v.temperature;
        else
          return 0.0;
      },
      s);
}

void check_temperature(double t) {
  if (!(t > 0) || !std::isfinite(t))
    throw Error(ErrorKind::InvalidArgument, "LogitsProcessor: temperature must be positive and finite");
}

}  // namespace

SamplingRng::SamplingRng(uint64_t seed) {
  for (auto& w : s_) w = splitmix64(seed);
}

uint64_t SamplingRng::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double SamplingRng::next_f64() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

uint32_t argmax(std::span<const float> logits) {
  if (logits.empty()) throw Error(ErrorKind::InvalidArgument, "LogitsProcessor: empty logits");
  // two branch-free passes (they vectorize): the maximum and whether a NaN is there, then the
  // first index holding the maximum
  float m = logits[0];
  bool nan = false;
  for (const float x : logits) {
    nan |= x != x;
    m = x > m ? x : m;
  }
  if (nan) {
    const auto it = std::find_if(logits.begin(), logits.end(), [](float x) { return std::isnan(x); });
    throw Error(ErrorKind::InvalidArgument,
                "LogitsProcessor: logit " + std::to_string(it - logits.begin()) + " is NaN");
  }
  return static_cast<uint32_t>(std::find(logits.begin(), logits.end(), m) - logits.begin());
}

LogitsProcessor::LogitsProcessor(uint64_t seed, Sampling sampling) : rng_(seed), sampling_(sampling) {}

LogitsProcessor::LogitsProcessor(uint64_t seed, std::optional<double> temperature,
                                 std::optional<double> top_p)
    : rng_(seed) {
  if (!temperature || *temperature < 1e-7)
    sampling_ = sampling::ArgMax{};
  else if (top_p)
    sampling_ = sampling::TopP{*top_p, *temperature};
  else
    sampling_ = sampling::All{*temperature};
}

LogitsProcessor LogitsProcessor::from_sampling(uint64_t seed, Sampling sampling) {
  if (!std::holds_alternative<sampling::ArgMax>(sampling)) {
    const double t = temperature_of(sampling);
    if (t < 1e-7) return LogitsProcessor(seed, sampling::ArgMax{});
    check_temperature(t);
  }
  if (const auto* k = std::get_if<sampling::TopK>(&sampling); k && k->k == 0)
    throw Error(ErrorKind::InvalidArgument, "LogitsProcessor: top-k with k = 0");
  if (const auto* k = std::get_if<sampling::TopKThenTopP>(&sampling); k && k->k == 0)
    throw Error(ErrorKind::InvalidArgument, "LogitsProcessor: top-k with k = 0");
  return LogitsProcessor(seed, sampling);
}

uint32_t LogitsProcessor::sample(const Tensor& logits) {
  if (logits.rank() != 1)
    throw Error(ErrorKind::ShapeMismatch,
                "LogitsProcessor::sample: logits must be 1-D, got shape " + logits.shape().to_string());
  const Tensor host = logits.dtype() == DType::F32 ? logits : logits.to_dtype(DType::F32);
  const std::vector<float> v = host.to_vec1<float>();
  return sample_f32(v);
}

uint32_t LogitsProcessor::sample_weighted(const std::vector<float>& weights) {
  double total = 0;
  for (float w : weights) total += w;
  if (!(total > 0))
    throw Error(ErrorKind::InvalidArgument, "LogitsProcessor: no token has a positive probability");
  const double u = rng_.next_f64() * total;
  double acc = 0;
  size_t last_positive = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] <= 0) continue;
    acc += weights[i];
    last_positive = i;
    if (u < acc) return static_cast<uint32_t>(i);
  }
  return static_cast<uint32_t>(last_positive);  // rounding at the top end
}

uint32_t LogitsProcessor::sample_f32(std::span<const float> logits) {
  const uint32_t best = argmax(logits);  // also the NaN check
  if (std::holds_alternative<sampling::ArgMax>(sampling_)) return best;
  const float max_logit = logits[best];
  if (std::isinf(max_logit)) {
    if (max_logit > 0) return best;  // an infinite logit takes all the probability
    throw Error(ErrorKind::InvalidArgument, "LogitsProcessor: every logit is -inf");
  }
  const float inv_t = static_cast<float>(1.0 / temperature_of(sampling_));
  const size_t n = logits.size();
  // candidates as contiguous (value, id) pairs, best first: larger value, then lower id
  auto better = [](const Candidate& a, const Candidate& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };

  // top-k selects on the logits (the order is the probabilities'), and only the k survivors
  // go through exp; top-p after it works on their renormalized probabilities, as in candle
  size_t top_k = 0;
  double then_p = 1;
  if (const auto* s = std::get_if<sampling::TopK>(&sampling_)) top_k = s->k;
  if (const auto* s = std::get_if<sampling::TopKThenTopP>(&sampling_)) top_k = s->k, then_p = s->p;
  if (top_k > 0 && top_k < n) {
    // a heap of the k best so far with the worst in front: most logits cost one comparison
    cands_.clear();
    for (size_t i = 0; i < top_k; ++i) cands_.push_back({logits[i], static_cast<uint32_t>(i)});
    std::make_heap(cands_.begin(), cands_.end(), better);
    for (size_t i = top_k; i < n; ++i) {
      const Candidate c{logits[i], static_cast<uint32_t>(i)};
      if (!better(c, cands_.front())) continue;
      std::pop_heap(cands_.begin(), cands_.end(), better);
      cands_.back() = c;
      std::push_heap(cands_.begin(), cands_.end(), better);
    }
    double total = 0;
    for (auto& c : cands_) {
      c.first = std::exp((c.first - max_logit) * inv_t);
      total += c.first;
    }
    if (then_p > 0 && then_p < 1) {
      std::sort(cands_.begin(), cands_.end(), better);
      const double p = then_p * total;
      double cumsum = 0;
      for (auto& c : cands_) {
        if (cumsum >= p)
          c.first = 0;
        else
          cumsum += c.first;
      }
    }
    probs_.resize(top_k);
    for (size_t j = 0; j < top_k; ++j) probs_[j] = cands_[j].first;
    return cands_[sample_weighted(probs_)].second;
  }

  // softmax with temperature

  probs_.resize(n);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    probs_[i] = std::exp((logits[i] - max_logit) * inv_t);
    sum += probs_[i];
  }
  const auto inv_sum = static_cast<float>(1.0 / sum);
  for (float& p : probs_) p *= inv_sum;

  // candle's sample_topp: in decreasing probability, a token is kept while the mass before it is
  // < p, the mass measured over the tokens still kept (after top-k: renormalized, as candle does).
  // Only a prefix is sorted (selected by nth_element), widened while it holds less than p.
  auto keep_top_p = [&](double p_in) {
    if (p_in <= 0 || p_in >= 1) return;
    cands_.clear();
    double total = 0;
    for (size_t i = 0; i < n; ++i) {
      if (probs_[i] > 0) cands_.push_back({probs_[i], static_cast<uint32_t>(i)});
      total += probs_[i];
    }
    const double p = p_in * total;
    const auto begin = cands_.begin();
    size_t m = std::min<size_t>(cands_.size(), 256), sorted = 0;
    double mass = 0;
    for (;;) {
      if (m < cands_.size())
        std::nth_element(begin + static_cast<std::ptrdiff_t>(sorted), begin + static_cast<std::ptrdiff_t>(m),
                         cands_.end(), better);
      std::sort(begin + static_cast<std::ptrdiff_t>(sorted), begin + static_cast<std::ptrdiff_t>(m), better);
      for (size_t j = sorted; j < m; ++j) mass += cands_[j].first;
      sorted = m;
      if (mass >= p || m == cands_.size()) break;
      m = std::min(cands_.size(), m * 8);
    }
    double cumsum = 0;
    for (size_t j = 0; j < cands_.size(); ++j) {
      if (j >= sorted || cumsum >= p)
        probs_[cands_[j].second] = 0;
      else
        cumsum += cands_[j].first;
    }
  };

  if (const auto* s = std::get_if<sampling::TopP>(&sampling_)) {
    keep_top_p(s->p);
  } else if (const auto* s = std::get_if<sampling::TopKThenTopP>(&sampling_)) {
    keep_top_p(s->p);  // k >= the vocabulary: top-p alone
  } else if (const auto* s = std::get_if<sampling::MinP>(&sampling_)) {
    const float floor = static_cast<float>(s->p) * probs_[best];
    for (float& p : probs_)
      if (p < floor) p = 0;
  }
  return sample_weighted(probs_);
}

void apply_repeat_penalty(std::span<float> logits, float penalty, std::span<const uint32_t> context) {
  std::unordered_set<uint32_t> seen;
  for (uint32_t id : context) {
    if (!seen.insert(id).second || id >= logits.size()) continue;
    float& l = logits[id];
    if (l >= 0)
      l /= penalty;
    else
      l *= penalty;
  }
}

Tensor apply_repeat_penalty(const Tensor& logits, float penalty, std::span<const uint32_t> context) {
  if (logits.rank() != 1)
    throw Error(ErrorKind::ShapeMismatch,
                "apply_repeat_penalty: logits must be 1-D, got shape " + logits.shape().to_string());
  const Tensor f = logits.dtype() == DType::F32 ? logits : logits.to_dtype(DType::F32);
  std::vector<float> v = f.to_vec1<float>();
  apply_repeat_penalty(std::span<float>(v), penalty, context);
  const size_t n = v.size();
  return Tensor::from_vec(v, Shape({n}), logits.device());
}

void apply_frequency_presence_penalty(std::span<float> logits, float frequency_penalty,
                                      float presence_penalty, std::span<const uint32_t> context) {
  std::unordered_map<uint32_t, uint32_t> counts;
  for (uint32_t id : context)
    if (id < logits.size()) ++counts[id];
  for (const auto& [id, c] : counts)
    logits[id] -= static_cast<float>(c) * frequency_penalty + presence_penalty;
}

}  // namespace candle::generation
