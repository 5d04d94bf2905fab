#include "candle/nn/encoding.h"

#include <string>
#include <vector>

namespace candle::nn::encoding {

Tensor one_hot(const Tensor& indices, size_t depth, const Scalar& on_value, const Scalar& off_value) {
  if (dtype_is_float(indices.dtype()))
    throw Error(ErrorKind::UnsupportedOp, std::string("one_hot: unsupported index dtype ") +
                                              std::string(dtype_name(indices.dtype())) +
                                              ", expected an integer dtype");
  std::vector<int64_t> ids = indices.flatten_all().to_dtype(DType::I64).to_vec1<int64_t>();
  if (indices.dtype() == DType::U32 || indices.dtype() == DType::U8) {
    // unsigned indices have no -1: everything is a real index
    for (int64_t& v : ids)
      if (v < 0) v = static_cast<int64_t>(static_cast<uint64_t>(v));
  }
  std::vector<size_t> out_dims = indices.dims();
  out_dims.push_back(depth);
  DType dt = on_value.natural_dtype();
  std::vector<int64_t> hot(ids.size(), -1);
  for (size_t i = 0; i < ids.size(); ++i) {
    int64_t v = ids[i];
    if (v == -1) continue;  // a row of off_value
    if (v < -1)
      throw Error(ErrorKind::IndexOutOfRange, "one_hot: invalid negative index value " + std::to_string(v) +
                                                  ", expected a positive index value or -1");
    if (static_cast<uint64_t>(v) >= depth)
      throw Error(ErrorKind::IndexOutOfRange,
                  "one_hot: index value " + std::to_string(v) + " exceeds depth " + std::to_string(depth));
    hot[i] = v;
  }
  return dispatch(dt, [&]<typename T>() {
    std::vector<T> out(ids.size() * depth, off_value.as<T>());
    T on = on_value.as<T>();
    for (size_t i = 0; i < ids.size(); ++i)
      if (hot[i] >= 0) out[i * depth + static_cast<size_t>(hot[i])] = on;
    return Tensor::from_vec(out, Shape(out_dims), indices.device());
  });
}

}  // namespace candle::nn::encoding
