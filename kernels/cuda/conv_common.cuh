// Device-side helpers shared by the implicit-GEMM convolution kernels (conv2d.cu, conv2d_tc.cu).
#pragma once

#include "common.cuh"
#include "ew.cuh"

namespace candle::cuda_k::conv {

// The epilogue's activation: a UnaryOp picked at run time (ConvArgs::act), applied in the
// compute type before the one rounding to the storage type.
template <typename C>
__device__ __forceinline__ C activate(int act, C v) {
  switch (static_cast<UnaryOp>(act)) {
#define CANDLE_ACT(N) \
  case UnaryOp::N: return ew::UnaryF<UnaryOp::N>{}(v);
    CANDLE_ACT(Neg)
    CANDLE_ACT(Recip)
    CANDLE_ACT(Exp)
    CANDLE_ACT(Log)
    CANDLE_ACT(Sin)
    CANDLE_ACT(Cos)
    CANDLE_ACT(Tanh)
    CANDLE_ACT(Abs)
    CANDLE_ACT(Sqr)
    CANDLE_ACT(Sqrt)
    CANDLE_ACT(Gelu)
    CANDLE_ACT(GeluErf)
    CANDLE_ACT(Erf)
    CANDLE_ACT(Relu)
    CANDLE_ACT(Silu)
    CANDLE_ACT(Ceil)
    CANDLE_ACT(Floor)
    CANDLE_ACT(Round)
    CANDLE_ACT(Sign)
    CANDLE_ACT(Sigmoid)
#undef CANDLE_ACT
  }
  return v;
}

}  // namespace candle::cuda_k::conv
