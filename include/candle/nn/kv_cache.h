// candle_nn::kv_cache: key/value caches for autoregressive decoding.
#pragma once

#include <optional>
#include <utility>

#include "candle/tensor.h"

namespace candle::nn::kv_cache {

// The keys or the values of one layer: a buffer allocated ahead with room for `capacity`
// positions along `dim`, grown in chunks of kChunk positions (up to max_seq_len) and written in
// place (slice_set): appending a token copies that token only, never the whole prefix (a growth
// copies it once per chunk).
class Cache {
 public:
  static constexpr size_t kChunk = 512;
  Cache(size_t dim, size_t max_seq_len) : dim_(dim), max_seq_len_(max_seq_len) {}
  // Writes src (its size along dim: the new positions) after the current ones; the filled prefix
  // [0, current_seq_len()) as a view of the buffer. Throws when max_seq_len would be exceeded or
  // src's other dims, dtype or device differ from the earlier appends'.
  Tensor append(const Tensor& src);
  // The filled prefix (nullopt when empty).
  std::optional<Tensor> current_data() const;
  size_t current_seq_len() const { return len_; }
  size_t capacity() const { return capacity_; }
  size_t dim() const { return dim_; }
  size_t max_seq_len() const { return max_seq_len_; }
  // Forgets the positions (keeps the buffer for reuse).
  void reset() { len_ = 0; }

 private:
  size_t dim_, max_seq_len_;
  size_t len_ = 0, capacity_ = 0;
  std::optional<Tensor> buf_;
};

// Keys and values (candle_nn::kv_cache::KvCache): k, v [b, h, t, d] with dim = 2 for the
// models here.
class KvCache {
 public:
  KvCache(size_t dim, size_t max_seq_len) : k_(dim, max_seq_len), v_(dim, max_seq_len) {}
  // (k_all, v_all): views of the filled prefixes after appending k and v.
  std::pair<Tensor, Tensor> append(const Tensor& k, const Tensor& v);
  size_t current_seq_len() const { return k_.current_seq_len(); }
  size_t max_seq_len() const { return k_.max_seq_len(); }
  const Cache& k_cache() const { return k_; }
  const Cache& v_cache() const { return v_; }
  void reset() {
    k_.reset();
    v_.reset();
  }

 private:
  Cache k_, v_;
};

}  // namespace candle::nn::kv_cache

namespace candle::nn {
using kv_cache::KvCache;
}  // namespace candle::nn
