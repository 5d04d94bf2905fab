// Binary element-wise ops and comparisons (functors and kernels: ew.cuh).
#include "ew.cuh"

namespace candle::cuda_k {

using namespace ew;

cudaError_t binary(BinaryOp op, Dt dt, const void* a, const EwStrides& as, const void* b, const EwStrides& bs,
                   void* out, const EwShape& sh, cudaStream_t s) {
  auto go = [&]<BinaryOp OP>() {
    return with_dtype(dt, [&]<typename S>() -> cudaError_t {
      if constexpr (is_int_v<S> && OP == BinaryOp::Pow)
        return cudaErrorNotSupported;
      else
        return launch_map2<S, S>(a, as, b, bs, out, sh, BinaryF<OP>{}, s);
    });
  };
  switch (op) {
    case BinaryOp::Add: return go.template operator()<BinaryOp::Add>();
    case BinaryOp::Sub: return go.template operator()<BinaryOp::Sub>();
    case BinaryOp::Mul: return go.template operator()<BinaryOp::Mul>();
    case BinaryOp::Div: return go.template operator()<BinaryOp::Div>();
    case BinaryOp::Maximum: return go.template operator()<BinaryOp::Maximum>();
    case BinaryOp::Minimum: return go.template operator()<BinaryOp::Minimum>();
    case BinaryOp::Pow: return go.template operator()<BinaryOp::Pow>();
  }
  return cudaErrorInvalidValue;
}

cudaError_t cmp(CmpOp op, Dt dt, const void* a, const EwStrides& as, const void* b, const EwStrides& bs,
                uint8_t* out, const EwShape& sh, cudaStream_t s) {
  auto go = [&]<CmpOp OP>() {
    return with_dtype(
        dt, [&]<typename S>() { return launch_map2<S, uint8_t>(a, as, b, bs, out, sh, CmpF<OP>{}, s); });
  };
  switch (op) {
    case CmpOp::Eq: return go.template operator()<CmpOp::Eq>();
    case CmpOp::Ne: return go.template operator()<CmpOp::Ne>();
    case CmpOp::Lt: return go.template operator()<CmpOp::Lt>();
    case CmpOp::Le: return go.template operator()<CmpOp::Le>();
    case CmpOp::Gt: return go.template operator()<CmpOp::Gt>();
    case CmpOp::Ge: return go.template operator()<CmpOp::Ge>();
  }
  return cudaErrorInvalidValue;
}

}  // namespace candle::cuda_k
