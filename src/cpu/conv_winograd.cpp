// Winograd F(4x4, 3x3) for f32 3x3 stride-1 convolutions (placeholder until implemented).
#include "cpu/conv_kernels.h"

namespace candle::cpu {

bool conv2d_winograd_f32(const ConvGeom&, const float*, const float*, const float*, std::optional<UnaryOp>,
                         float*) {
  return false;
}

}  // namespace candle::cpu
