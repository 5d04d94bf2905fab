// Shared by the element-wise kernels: the push constants (EwPush in src/vulkan/storage.h), the
// work-item index, strided offsets and the element types of a variant.
//
// Variant macros: T_F32 / T_F16 pick the float type T of the operands (float16_t needs
// shaderFloat16 + 16-bit storage); B1/B2/B4/B8 pick a raw element type E of that many bytes.

#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require

#if defined(T_F16)
#define T float16_t
#else
#define T float
#endif

#if defined(B1)
#define E uint8_t
#elif defined(B2)
#define E uint16_t
#elif defined(B8)
#define E uvec2
#else
#define E uint
#endif

layout(local_size_x = 256) in;

layout(push_constant) uniform EwPush {
  uint n;        // elements of this dispatch
  uint rank_op;  // rank | op << 8
  uint p0, p1;   // parameters (float bits or integers)
  uint off[4];   // first element of each operand in its binding
  uint dims[6];
  uint st[18];   // strides of the strided operands 0..2: st[6 * i + d]
} pc;

// The work item's element index; >= pc.n for the idle tail.
uint ew_index() {
  return (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
}

uint ew_op() { return pc.rank_op >> 8; }
float ew_p0() { return uintBitsToFloat(pc.p0); }
float ew_p1() { return uintBitsToFloat(pc.p1); }

// Element offsets of the strided operands 0..2 for row-major element i.
uvec3 ew_offsets(uint i) {
  uvec3 o = uvec3(pc.off[0], pc.off[1], pc.off[2]);
  uint rank = pc.rank_op & 0xffu;
  for (int d = int(rank) - 1; d >= 0; --d) {
    uint dim = pc.dims[d];
    uint idx = i % dim;
    i /= dim;
    o += idx * uvec3(pc.st[d], pc.st[6 + d], pc.st[12 + d]);
  }
  return o;
}

// expm1 accurate near 0.
float expm1_(float x) {
  if (abs(x) < 0.5) {
    float t = x * (1.0 / 40320.0) + 1.0 / 5040.0;
    t = t * x + 1.0 / 720.0;
    t = t * x + 1.0 / 120.0;
    t = t * x + 1.0 / 24.0;
    t = t * x + 1.0 / 6.0;
    t = t * x + 0.5;
    t = t * x + 1.0;
    return t * x;
  }
  return exp(x) - 1.0;
}

// erfc for any x (Abramowitz-Stegun 7.1.26 for |x| >= 0.5; absolute error below 2e-7).
float erfc_pos_(float z) {
  float t = 1.0 / (1.0 + 0.3275911 * z);
  float p = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t;
  return p * exp(-z * z);
}
float erf_(float x) {
  float a = abs(x);
  if (a < 0.5) {
    float x2 = x * x;
    // 2/sqrt(pi) (x - x^3/3 + x^5/10 - x^7/42 + x^9/216)
    return 1.1283791670955126 * x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (0.1 + x2 * (-1.0 / 42.0 + x2 / 216.0))));
  }
  float r = 1.0 - erfc_pos_(a);
  return x < 0.0 ? -r : r;
}
float erfc_(float x) {
  if (abs(x) < 0.5) return 1.0 - erf_(x);
  return x > 0.0 ? erfc_pos_(x) : 2.0 - erfc_pos_(-x);
}

// x^e with std::pow's results where they are real (negative bases with integral exponents).
float pow_(float x, float e) {
  const float nan_ = uintBitsToFloat(0x7fc00000u);
  if (e == 0.0 || x == 1.0) return 1.0;
  if (isnan(x) || isnan(e)) return nan_;
  bool integral = trunc(e) == e;
  bool odd = integral && mod(abs(e), 2.0) == 1.0;
  if (x == 0.0) {
    bool neg = (floatBitsToUint(x) >> 31) != 0u;
    float r = e > 0.0 ? 0.0 : uintBitsToFloat(0x7f800000u);
    return odd && neg ? -r : r;
  }
  if (x < 0.0) {
    if (!integral) return nan_;
    float r = exp2(e * log2(-x));
    return odd ? -r : r;
  }
  return exp2(e * log2(x));
}
