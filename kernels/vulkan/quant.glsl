// GGML block decoding shared by qdequant.comp and qmatvec.comp. The blocks are bound as a
// uint array (binding 0) and read by byte offsets, so blocks of any size at any byte offset
// need no 8/16-bit storage. One variant macro picks the type:
//   Q_F16 Q_BF16 (QK 1) Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 IQ4_NL (QK 32)
//   Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_XS (QK 256)
// deq8(base, c, v) writes the values 8c .. 8c + 7 of the block at byte `base` (QK >= 32: eight
// consecutive values always share their scales and read eight consecutive bytes); deq1(o) the
// value of a plain f16 / bf16 element at byte o (QPLAIN defined). Each value is computed with the CPU
// dequantizer's f32 operations in its order (src/quantized/quants_*.cpp), unfused (`precise`),
// and the f16 scales are converted exactly, so the values are the CPU's bit for bit.

layout(std430, binding = 0) readonly buffer WBlocks { uint wq[]; };

#if defined(Q_F16) || defined(Q_BF16)
#define QK 1u
#define QB 2u
#define QPLAIN
#elif defined(Q4_0) || defined(IQ4_NL)
#define QK 32u
#define QB 18u
#elif defined(Q4_1)
#define QK 32u
#define QB 20u
#elif defined(Q5_0)
#define QK 32u
#define QB 22u
#elif defined(Q5_1)
#define QK 32u
#define QB 24u
#elif defined(Q8_0)
#define QK 32u
#define QB 34u
#elif defined(Q2_K)
#define QK 256u
#define QB 84u
#elif defined(Q3_K)
#define QK 256u
#define QB 110u
#elif defined(Q4_K)
#define QK 256u
#define QB 144u
#elif defined(Q5_K)
#define QK 256u
#define QB 176u
#elif defined(Q6_K)
#define QK 256u
#define QB 210u
#elif defined(IQ4_XS)
#define QK 256u
#define QB 136u
#else
#error "quant.glsl: no block type"
#endif

// chunks of 8 values per block
#define QCPB (QK / 8u)

uint qb8(uint o) { return (wq[o >> 2] >> ((o & 3u) << 3)) & 0xffu; }
uint qu16(uint o) { return qb8(o) | (qb8(o + 1u) << 8); }
uint qu32(uint o) { return qu16(o) | (qu16(o + 2u) << 16); }
// bytes o .. o + 7 (little-endian in two words); reads only the words they lie in
uvec2 qload8(uint o) {
  uint w = o >> 2, s = (o & 3u) << 3;
  uint w0 = wq[w], w1 = wq[w + 1u];
  if (s == 0u) return uvec2(w0, w1);
  uint w2 = wq[w + 2u];
  return uvec2((w0 >> s) | (w1 << (32u - s)), (w1 >> s) | (w2 << (32u - s)));
}
// byte j (0..7) of qload8's result
uint qbyte(uvec2 q, uint j) { return (q[j >> 2] >> ((j & 3u) << 3)) & 0xffu; }
int qsbyte(uvec2 q, uint j) { return bitfieldExtract(int(q[j >> 2]), int((j & 3u) << 3), 8); }

// f16 bits to f32, exactly; a NaN is quieted (the top mantissa bit set), as the CPU's
// conversion (F16C / ggml) does
float qh2f(uint h) {
  uint sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (e == 0u) {
    float f = float(mant) * uintBitsToFloat(0x33800000u);  // mant * 2^-24, exact
    return sign != 0u ? -f : f;
  }
  if (e == 31u) return uintBitsToFloat(sign | 0x7f800000u | (mant << 13) | (mant != 0u ? 0x400000u : 0u));
  return uintBitsToFloat(sign | ((e + 112u) << 23) | (mant << 13));
}

// f32 to f16 bits, rounded to nearest even as candle's f16::from_f32 (NaN -> 0x7e00)
uint qf2h(float v) {
  uint x = floatBitsToUint(v), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u);
  if (ax >= 0x477ff000u) return sign | 0x7c00u;
  if (ax < 0x38800000u) {
    // the f16 subnormal (or zero) mantissa, rounded to nearest even with integers
    uint e = ax >> 23;
    if (e < 102u) return sign;  // below half the smallest subnormal (or an f32 subnormal)
    uint m = (ax & 0x7fffffu) | 0x800000u, sh = 126u - e;  // value = m * 2^(e - 150); want units of 2^-24
    uint q = m >> sh, rem = m & ((1u << sh) - 1u), half_ = 1u << (sh - 1u);
    if (rem > half_ || (rem == half_ && (q & 1u) != 0u)) ++q;
    return sign | q;
  }
  return sign | ((ax + 0xc8000fffu + ((ax >> 13) & 1u)) >> 13);
}

#if defined(QPLAIN)
float deq1(uint o) {
#if defined(Q_F16)
  return qh2f(qu16(o));
#else
  return uintBitsToFloat(qu16(o) << 16);
#endif
}
#else

#if defined(IQ4_NL) || defined(IQ4_XS)
const int kIq4[16] = int[16](-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
#endif

#if defined(Q4_K) || defined(Q5_K)
// scale and min of sub-block j from the 12 packed bytes at s (6 bits each)
void qscale_min_k4(uint j, uint s, out uint sc, out uint mn) {
  if (j < 4u) {
    sc = qb8(s + j) & 63u;
    mn = qb8(s + j + 4u) & 63u;
  } else {
    sc = (qb8(s + j + 4u) & 0xfu) | ((qb8(s + j - 4u) >> 6) << 4);
    mn = (qb8(s + j + 4u) >> 4) | ((qb8(s + j) >> 6) << 4);
  }
}
#endif

void deq8(uint base, uint c, out float v[8]) {
  uint i0 = 8u * c;
#if defined(Q4_0) || defined(IQ4_NL) || defined(Q4_1)
#if defined(Q4_1)
  const float d = qh2f(qu16(base)), m = qh2f(qu16(base + 2u));
  uvec2 q = qload8(base + 4u + (i0 & 15u));
#else
  const float d = qh2f(qu16(base));
  uvec2 q = qload8(base + 2u + (i0 & 15u));
#endif
  uint sh = (i0 >> 4) * 4u;
  for (uint j = 0u; j < 8u; ++j) {
    uint nib = (qbyte(q, j) >> sh) & 0xfu;
#if defined(Q4_0)
    precise float t = float(int(nib) - 8) * d;
#elif defined(IQ4_NL)
    precise float t = d * float(kIq4[nib]);
#else
    precise float t = float(nib) * d + m;
#endif
    v[j] = t;
  }
#elif defined(Q5_0) || defined(Q5_1)
#if defined(Q5_1)
  const float d = qh2f(qu16(base)), m = qh2f(qu16(base + 2u));
  uint qh = qu32(base + 4u);
  uvec2 q = qload8(base + 8u + (i0 & 15u));
#else
  const float d = qh2f(qu16(base));
  uint qh = qu32(base + 2u);
  uvec2 q = qload8(base + 6u + (i0 & 15u));
#endif
  uint sh = (i0 >> 4) * 4u;
  for (uint j = 0u; j < 8u; ++j) {
    uint level = ((qbyte(q, j) >> sh) & 0xfu) | (((qh >> (i0 + j)) & 1u) << 4);
#if defined(Q5_0)
    precise float t = float(int(level) - 16) * d;
#else
    precise float t = float(level) * d + m;
#endif
    v[j] = t;
  }
#elif defined(Q8_0)
  const float d = qh2f(qu16(base));
  uvec2 q = qload8(base + 2u + i0);
  for (uint j = 0u; j < 8u; ++j) {
    precise float t = float(qsbyte(q, j)) * d;
    v[j] = t;
  }
#elif defined(Q2_K) || defined(Q3_K) || defined(Q6_K)
  // element 128 h + 32 s + 16 k + l, sub-block 8 h + 2 s + k
  uint h = i0 >> 7, s = (i0 >> 5) & 3u, k = (i0 >> 4) & 1u, l0 = i0 & 15u, sb = 8u * h + 2u * s + k;
#if defined(Q2_K)
  const float d = qh2f(qu16(base + 80u)), dmin = qh2f(qu16(base + 82u));
  uint sc = qb8(base + sb);
  precise float dl = d * float(sc & 0xfu);
  precise float ml = dmin * float(sc >> 4);
  uvec2 q = qload8(base + 16u + 32u * h + 16u * k + l0);
  for (uint j = 0u; j < 8u; ++j) {
    precise float t = dl * float((qbyte(q, j) >> (2u * s)) & 3u) - ml;
    v[j] = t;
  }
#elif defined(Q3_K)
  const float d_all = qh2f(qu16(base + 108u));
  uint low = sb < 8u ? (qb8(base + 96u + sb) & 0xfu) : (qb8(base + 96u + sb - 8u) >> 4);
  uint sc = low | (((qb8(base + 104u + (sb & 3u)) >> (2u * (sb >> 2))) & 3u) << 4);
  precise float dl = d_all * float(int(sc) - 32);
  uvec2 q = qload8(base + 32u + 32u * h + 16u * k + l0);
  uvec2 hm = qload8(base + 16u * k + l0);
  uint bit = 1u << (4u * h + s);
  for (uint j = 0u; j < 8u; ++j) {
    int val = int((qbyte(q, j) >> (2u * s)) & 3u) - ((qbyte(hm, j) & bit) != 0u ? 0 : 4);
    precise float t = dl * float(val);
    v[j] = t;
  }
#else
  const float d = qh2f(qu16(base + 208u));
  precise float ds = d * float(bitfieldExtract(int(qb8(base + 192u + sb)), 0, 8));
  uvec2 ql = qload8(base + 64u * h + 32u * (s & 1u) + 16u * k + l0);
  uvec2 qh = qload8(base + 128u + 32u * h + 16u * k + l0);
  uint shift = s < 2u ? 0u : 4u;
  for (uint j = 0u; j < 8u; ++j) {
    int q = int(((qbyte(ql, j) >> shift) & 0xfu) | (((qbyte(qh, j) >> (2u * s)) & 3u) << 4)) - 32;
    precise float t = ds * float(q);
    v[j] = t;
  }
#endif
#elif defined(Q4_K) || defined(Q5_K)
  // element 64 g + 32 half + l, sub-block 2 g + half
  uint g = i0 >> 6, hf = (i0 >> 5) & 1u, l0 = i0 & 31u;
  const float d = qh2f(qu16(base)), dmin = qh2f(qu16(base + 2u));
  uint sc, mn;
  qscale_min_k4(2u * g + hf, base + 4u, sc, mn);
  precise float d1 = d * float(sc);
  precise float m1 = dmin * float(mn);
#if defined(Q4_K)
  uvec2 q = qload8(base + 16u + 32u * g + l0);
#else
  uvec2 q = qload8(base + 48u + 32u * g + l0);
  uvec2 qh = qload8(base + 16u + l0);
  uint u = 1u << (2u * g + hf);
#endif
  for (uint j = 0u; j < 8u; ++j) {
    uint lv = (qbyte(q, j) >> (4u * hf)) & 0xfu;
#if defined(Q5_K)
    lv += (qbyte(qh, j) & u) != 0u ? 16u : 0u;
#endif
    precise float t = d1 * float(lv) - m1;
    v[j] = t;
  }
#elif defined(IQ4_XS)
  uint ib = i0 >> 5, j0 = i0 & 31u;
  const float d = qh2f(qu16(base));
  uint ls = ((qb8(base + 4u + (ib >> 1)) >> (4u * (ib & 1u))) & 0xfu) | (((qu16(base + 2u) >> (2u * ib)) & 3u) << 4);
  precise float dl = d * float(int(ls) - 32);
  uvec2 q = qload8(base + 8u + 16u * ib + (j0 & 15u));
  uint sh = (j0 >> 4) * 4u;
  for (uint j = 0u; j < 8u; ++j) {
    precise float t = dl * float(kIq4[(qbyte(q, j) >> sh) & 0xfu]);
    v[j] = t;
  }
#endif
}
#endif
