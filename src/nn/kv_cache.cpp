// candle_nn::kv_cache: buffers allocated ahead, grown by chunks, written in place.
#include "candle/nn/kv_cache.h"

#include <string>
#include <vector>

namespace candle::nn::kv_cache {

Tensor Cache::append(const Tensor& src) {
  if (dim_ >= src.rank())
    throw Error(ErrorKind::InvalidArgument,
                "kv-cache: dim " + std::to_string(dim_) + " out of range for " + src.shape().to_string());
  const size_t t = src.dim(dim_);
  if (t > max_seq_len_ || len_ > max_seq_len_ - t)
    throw Error(ErrorKind::InvalidArgument, "kv-cache: " + std::to_string(len_) + " + " + std::to_string(t) +
                                                " positions exceed max_seq_len " +
                                                std::to_string(max_seq_len_));
  if (buf_) {
    std::vector<size_t> want = buf_->dims();
    want[dim_] = t;
    if (Shape(want) != src.shape() || src.dtype() != buf_->dtype() ||
        !src.device().same_device(buf_->device()))
      throw Error(ErrorKind::ShapeMismatch, "kv-cache: appending " + src.shape().to_string() + " " +
                                                std::string(dtype_name(src.dtype())) + " to a cache of " +
                                                buf_->shape().to_string() + " " +
                                                std::string(dtype_name(buf_->dtype())));
  }
  if (!buf_ || len_ + t > capacity_) {
    size_t cap = (len_ + t + kChunk - 1) / kChunk * kChunk;
    if (cap > max_seq_len_) cap = max_seq_len_;
    std::vector<size_t> dims = src.dims();
    dims[dim_] = cap;
    Tensor grown = Tensor::zeros(Shape(dims), src.dtype(), src.device());
    if (buf_ && len_ > 0) grown.slice_set(buf_->narrow(static_cast<int64_t>(dim_), 0, len_), dim_, 0);
    buf_ = grown;
    capacity_ = cap;
  }
  if (t > 0) buf_->slice_set(src.detach(), static_cast<int64_t>(dim_), len_);
  len_ += t;
  return buf_->narrow(static_cast<int64_t>(dim_), 0, len_);
}

std::optional<Tensor> Cache::current_data() const {
  if (!buf_ || len_ == 0) return std::nullopt;
  return buf_->narrow(static_cast<int64_t>(dim_), 0, len_);
}

std::pair<Tensor, Tensor> KvCache::append(const Tensor& k, const Tensor& v) {
  if (k.rank() <= k_.dim() || v.rank() <= v_.dim() || k.dim(k_.dim()) != v.dim(v_.dim()))
    throw Error(ErrorKind::ShapeMismatch, "kv-cache: keys " + k.shape().to_string() + " and values " +
                                              v.shape().to_string() + " differ in length");
  Tensor ka = k_.append(k);
  Tensor va = v_.append(v);
  return {ka, va};
}

}  // namespace candle::nn::kv_cache
