#version 450
// to_dtype: element-wise conversion through f32 (the CPU's cast_value): float -> integer
// truncates toward zero and saturates, NaN gives 0; bf16 rounds to nearest even.
// Integer -> integer (u8, u32, i64) as a C cast: the low bits of the source, unsigned sources
// zero-extended. Operands: 0 input (strided), 1 output (dense). Variants <src>_<dst>.
//! variant f32_f16 S_F32 D_F16
//! variant f32_bf16 S_F32 D_BF16
//! variant f32_u8 S_F32 D_U8
//! variant f32_u32 S_F32 D_U32
//! variant f32_i64 S_F32 D_I64
//! variant f16_f32 S_F16 D_F32
//! variant f16_bf16 S_F16 D_BF16
//! variant f16_u8 S_F16 D_U8
//! variant f16_u32 S_F16 D_U32
//! variant f16_i64 S_F16 D_I64
//! variant bf16_f32 S_BF16 D_F32
//! variant bf16_f16 S_BF16 D_F16
//! variant bf16_u8 S_BF16 D_U8
//! variant bf16_u32 S_BF16 D_U32
//! variant bf16_i64 S_BF16 D_I64
//! variant u8_f32 S_U8 D_F32
//! variant u8_f16 S_U8 D_F16
//! variant u8_bf16 S_U8 D_BF16
//! variant u32_f32 S_U32 D_F32
//! variant u32_f16 S_U32 D_F16
//! variant u32_bf16 S_U32 D_BF16
//! variant i64_f32 S_I64 D_F32
//! variant i64_f16 S_I64 D_F16
//! variant i64_bf16 S_I64 D_BF16
//! variant u8_u32 S_U8 D_U32
//! variant u8_i64 S_U8 D_I64
//! variant u32_u8 S_U32 D_U8
//! variant u32_i64 S_U32 D_I64
//! variant i64_u8 S_I64 D_U8
//! variant i64_u32 S_I64 D_U32
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#if defined(S_F32)
#define S float
#elif defined(S_F16)
#define S float16_t
#elif defined(S_BF16)
#define S uint16_t
#elif defined(S_U8)
#define S uint8_t
#elif defined(S_U32)
#define S uint
#else
#define S int64_t
#endif

#if defined(D_F32)
#define D float
#elif defined(D_F16)
#define D float16_t
#elif defined(D_BF16)
#define D uint16_t
#elif defined(D_U8)
#define D uint8_t
#elif defined(D_U32)
#define D uint
#else
#define D int64_t
#endif

layout(std430, binding = 0) readonly buffer In { S x[]; };
layout(std430, binding = 1) writeonly buffer Out { D y[]; };

float load(uint o) {
#if defined(S_BF16)
  return uintBitsToFloat(uint(x[o]) << 16);
#else
  return float(x[o]);
#endif
}

D convert(float v) {
#if defined(D_F32)
  return v;
#elif defined(D_F16)
  return float16_t(v);
#elif defined(D_BF16)
  uint b = floatBitsToUint(v);
  if ((b & 0x7fffffffu) > 0x7f800000u) return uint16_t((b >> 16) | 0x40u);
  b += 0x7fffu + ((b >> 16) & 1u);
  return uint16_t(b >> 16);
#elif defined(D_U8)
  if (isnan(v) || v <= 0.0) return uint8_t(0u);
  if (v >= 255.0) return uint8_t(255u);
  return uint8_t(uint(v));
#elif defined(D_U32)
  if (isnan(v) || v <= 0.0) return 0u;
  if (v >= 4294967296.0) return 0xffffffffu;
  return uint(v);
#else
  if (isnan(v)) return int64_t(0);
  if (v <= -9223372036854775808.0) return int64_t(0x8000000000000000ul);
  if (v >= 9223372036854775808.0) return int64_t(0x7ffffffffffffffful);
  return int64_t(v);
#endif
}

#if (defined(S_U8) || defined(S_U32) || defined(S_I64)) && (defined(D_U8) || defined(D_U32) || defined(D_I64))
#define INT_TO_INT
#endif

void main() {
  uint i = ew_index();
  if (i >= pc.n) return;
#if defined(INT_TO_INT)
  y[pc.off[1] + i] = D(uint64_t(x[ew_offsets(i).x]));
#else
  y[pc.off[1] + i] = convert(load(ew_offsets(i).x));
#endif
}
