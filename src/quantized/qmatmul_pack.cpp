// qmm_pack: the packed weight layouts of qmatmul_cpu_packed (qmatmul_packed.inc reads them). For a
// group of 16 rows and one (super-)block b, at group * 16 * row bytes + b * 16 * block bytes:
//   Q4_0 (288 bytes): the 16 f16 scales d; then for j = 0..3, quant bytes 4j..4j+3 of each row
//        (elements 4j.. in the low nibbles, 16 + 4j.. in the high ones), row r at 4r
//   IQ4_NL (288 bytes): Q4_0's layout (the nibbles index the levels)
//   Q4_1 (320 bytes): the 16 f16 d, the 16 f16 m, then Q4_0's quad runs at 64 + 64j
//   Q5_0 (352 bytes): the 16 f16 d; the high bits, one 4-byte lane per row at 32 + 4r (qh5_lane: bit j
//        of byte i is element 4j + i's, bit 4 + j element 16 + 4j + i's); the quad runs at 96 + 64j
//   Q5_1 (384 bytes): d, m, the high bits at 64 + 4r, the quad runs at 128 + 64j
//   Q8_0 (544 bytes): the 16 f16 scales d; then for j = 0..7, quants 4j..4j+3 of each row
//   Q4_K (2368 bytes): the 16 f16 d, the 16 f16 dmin; the 6-bit scales, sub-block s (of 32) at
//        64 + 16s, row r at + r; the mins as pairs (mn[2p], mn[2p + 1]) of each row at 192 + 32p + 2r;
//        then for pair p = 0..3 and j = 0..7, quant bytes 32p + 4j..+3 of each row (sub-block 2p's
//        elements 4j.. in the low nibbles, 2p + 1's in the high ones), at 320 + 512p + 64j + 4r
//   Q5_K (2880 bytes): Q4_K's layout, then the high bits: for j = 0..7, qh[4j..4j+3] of each row (bit
//        s of qh[e]: element e of sub-block s) at 2368 + 64j + 4r
//   Q6_K (3360 bytes): the 16 f16 d; the int8 scales, sub-block s (of 16) at 32 + 16s, row r at + r;
//        then for half h = 0..1 and j = 0..7, three runs of 4 bytes per row: ql[64h + 4j..],
//        ql[64h + 32 + 4j..] and qh[32h + 4j..] (the 4 groups of 32 of that half at element 4j..),
//        at 288 + 1536h + 192j + {0, 64, 128} + 4r
//   Q3_K (1824 bytes): Q6_K's d and scales (the 6-bit scales less 32, int8); then for half h = 0..1 and
//        j = 0..7, qs[32h + 4j..+3] of each row at 288 + 512h + 64j + 4r; then for j = 0..7,
//        hmask[4j..4j+3] of each row at 1312 + 64j + 4r
//   Q2_K (1344 bytes): the 16 f16 d, the 16 f16 dmin; the scale bytes (scale | min << 4), sub-block s
//        at 64 + 16s, row r at + r; then Q3_K's qs runs at 320 + 512h + 64j + 4r
//   IQ4_XS (2208 bytes): the 16 f16 d; the scales less 32 (int8) as pairs (sc[2p], sc[2p + 1]) of
//        each row at 32 + 32p + 2r; then for pair p = 0..3 and j = 0..7, 4 bytes per row holding
//        elements 4j..4j+3 of sub-block 2p (low nibbles) and of sub-block 2p + 1 (high nibbles), at
//        160 + 512p + 64j + 4r (Q4_K's order; IQ4_XS's own puts a sub-block's halves in the nibbles)
#include <cstring>
#include <string>
#include <type_traits>

#include "candle/error.h"
#include "candle/quantized/blocks.h"
#include "cpu/parallel.h"
#include "quantized/qmatmul_cpu.h"
#include "quantized/qmatmul_kernels.h"

namespace candle::quantized {

namespace {

constexpr size_t R = qmm::kPackRows;

// The group's block b of a type of 32-element blocks, from the 16 rows' blocks src[r]: the f16
// fields (halves: d, and m for Q4_1 / Q5_1) at 32f + 2r, Q5_0 / Q5_1's high bits as one 4-byte lane
// per row (qh5_lane), then the quad runs
void pack_legacy(const uint8_t* const* src, size_t block, size_t halves, bool qh, uint8_t* o) {
  const size_t head = 2 * halves + (qh ? 4 : 0), quads = (block - head) / 4, at = 32 * halves + (qh ? 64 : 0);
  for (size_t r = 0; r < R; ++r) {
    std::memcpy(o + 2 * r, src[r], 2);
    if (halves == 2) std::memcpy(o + 32 + 2 * r, src[r] + 2, 2);
    if (qh) {
      uint32_t h;
      std::memcpy(&h, src[r] + 2 * halves, 4);
      const uint32_t lane = qmm::qh5_lane(h);
      std::memcpy(o + 32 * halves + 4 * r, &lane, 4);
    }
    for (size_t j = 0; j < quads; ++j) std::memcpy(o + at + (j * R + r) * 4, src[r] + head + 4 * j, 4);
  }
}

// Q4_K, and Q5_K: the same, then its high bits (Block = BlockQ5_K)
template <typename Block>
void pack_q4k(const uint8_t* const* src, uint8_t* o) {
  for (size_t r = 0; r < R; ++r) {
    Block b;
    std::memcpy(&b, src[r], sizeof b);
    std::memcpy(o + 2 * r, &b.d, 2);
    std::memcpy(o + 32 + 2 * r, &b.dmin, 2);
    for (int s = 0; s < 8; ++s) {
      int sc, mn;
      qmm::k4_scale_min(b.scales, s, sc, mn);
      o[64 + 16 * s + r] = static_cast<uint8_t>(sc);
      o[192 + 32 * (s / 2) + 2 * r + s % 2] = static_cast<uint8_t>(mn);
    }
    for (size_t p = 0; p < 4; ++p)
      for (size_t j = 0; j < 8; ++j)
        std::memcpy(o + 320 + 512 * p + 64 * j + 4 * r, b.qs + 32 * p + 4 * j, 4);
    if constexpr (std::is_same_v<Block, BlockQ5_K>)
      for (size_t j = 0; j < 8; ++j)
        std::memcpy(o + qmm::kPackedQ4kGroupBlock + 64 * j + 4 * r, b.qh + 4 * j, 4);
  }
}

void pack_q6k(const uint8_t* const* src, uint8_t* o) {
  for (size_t r = 0; r < R; ++r) {
    BlockQ6_K b;
    std::memcpy(&b, src[r], sizeof b);
    std::memcpy(o + 2 * r, &b.d, 2);
    using L = qmm::PackedQ6Family<GgmlDType::Q6K>;
    for (int s = 0; s < 16; ++s) o[L::kScales + 16 * s + r] = static_cast<uint8_t>(b.scales[s]);
    for (size_t h = 0; h < 2; ++h)
      for (size_t j = 0; j < 8; ++j) {
        uint8_t* run = o + L::kRuns + 1536 * h + 192 * j + 4 * r;
        std::memcpy(run, b.ql + 64 * h + 4 * j, 4);
        std::memcpy(run + 64, b.ql + 64 * h + 32 + 4 * j, 4);
        std::memcpy(run + 128, b.qh + 32 * h + 4 * j, 4);
      }
  }
}

// Q3_K / Q2_K's 2-bit quants of row r: for half h and j, qs[32h + 4j..+3] at o + 512h + 64j + 4r
void pack_2bit_runs(const uint8_t* qs, size_t r, uint8_t* o) {
  for (size_t h = 0; h < 2; ++h)
    for (size_t j = 0; j < 8; ++j) std::memcpy(o + 512 * h + 64 * j + 4 * r, qs + 32 * h + 4 * j, 4);
}

void pack_q3k(const uint8_t* const* src, uint8_t* o) {
  for (size_t r = 0; r < R; ++r) {
    BlockQ3_K b;
    std::memcpy(&b, src[r], sizeof b);
    std::memcpy(o + 2 * r, &b.d, 2);
    for (int s = 0; s < 16; ++s)
      o[qmm::PackedQ6Family<GgmlDType::Q3K>::kScales + 16 * s + r] =
          static_cast<uint8_t>(static_cast<int8_t>(qmm::q3k_scale(b.scales, s) - 32));
    using L = qmm::PackedQ6Family<GgmlDType::Q3K>;
    pack_2bit_runs(b.qs, r, o + L::kRuns);
    for (size_t j = 0; j < 8; ++j) std::memcpy(o + L::kHmask + 64 * j + 4 * r, b.hmask + 4 * j, 4);
  }
}

void pack_q2k(const uint8_t* const* src, uint8_t* o) {
  for (size_t r = 0; r < R; ++r) {
    BlockQ2_K b;
    std::memcpy(&b, src[r], sizeof b);
    std::memcpy(o + 2 * r, &b.d, 2);
    std::memcpy(o + 32 + 2 * r, &b.dmin, 2);
    using L = qmm::PackedQ6Family<GgmlDType::Q2K>;
    for (size_t s = 0; s < 16; ++s) o[L::kScales + 16 * s + r] = b.scales[s];
    pack_2bit_runs(b.qs, r, o + L::kRuns);
  }
}

void pack_iq4xs(const uint8_t* const* src, uint8_t* o) {
  for (size_t r = 0; r < R; ++r) {
    BlockIQ4_XS b;
    std::memcpy(&b, src[r], sizeof b);
    std::memcpy(o + 2 * r, &b.d, 2);
    for (int s = 0; s < 8; ++s)
      o[32 + 32 * (s / 2) + 2 * r + s % 2] =
          static_cast<uint8_t>(static_cast<int8_t>(qmm::iq4xs_scale(b, s) - 32));
    // element e of sub-block s: nibble e / 16 of qs[16s + e % 16]
    const auto q = [&](int s, int e) { return (b.qs[16 * s + e % 16] >> (4 * (e / 16))) & 0xF; };
    for (size_t p = 0; p < 4; ++p)
      for (size_t j = 0; j < 8; ++j)
        for (size_t i = 0; i < 4; ++i) {
          const int e = static_cast<int>(4 * j + i);
          o[160 + 512 * p + 64 * j + 4 * r + i] =
              static_cast<uint8_t>(q(static_cast<int>(2 * p), e) | (q(static_cast<int>(2 * p + 1), e) << 4));
        }
  }
}

}  // namespace

size_t qmm_packed_row_bytes(GgmlDType t, size_t k) {
  if (t == GgmlDType::Q4K) return k / kQK_K * (qmm::kPackedQ4kGroupBlock / R);
  if (t == GgmlDType::Q5K) return k / kQK_K * (qmm::kPackedQ5kGroupBlock / R);
  if (t == GgmlDType::Q6K) return k / kQK_K * (qmm::kPackedQ6kGroupBlock / R);
  if (t == GgmlDType::Q3K) return k / kQK_K * (qmm::kPackedQ3kGroupBlock / R);
  if (t == GgmlDType::Q2K) return k / kQK_K * (qmm::kPackedQ2kGroupBlock / R);
  if (t == GgmlDType::IQ4_XS) return k / kQK_K * (qmm::kPackedIq4xsGroupBlock / R);
  return ggml_row_bytes(t, k);
}

void qmm_pack(GgmlDType t, const void* w, size_t n, size_t k, void* out) {
  if (t != GgmlDType::Q4_0 && t != GgmlDType::Q4_1 && t != GgmlDType::Q5_0 && t != GgmlDType::Q5_1 &&
      t != GgmlDType::Q8_0 && t != GgmlDType::IQ4_NL && t != GgmlDType::Q4K && t != GgmlDType::Q5K &&
      t != GgmlDType::Q6K && t != GgmlDType::Q3K && t != GgmlDType::Q2K && t != GgmlDType::IQ4_XS)
    throw Error(ErrorKind::UnsupportedOp,
                "qmm_pack: " + std::string(ggml_dtype_name(t)) + " has no packed layout");
  const size_t bs = ggml_block_size(t), block = ggml_type_size(t);
  if (n % R != 0 || k % bs != 0)
    throw Error(ErrorKind::InvalidArgument, "qmm_pack: " + std::to_string(n) + " x " + std::to_string(k) +
                                                " is not a whole number of 16-row groups of " +
                                                std::string(ggml_dtype_name(t)) + " blocks");
  const size_t nb = k / bs, row_bytes = nb * block, packed_group = R * qmm_packed_row_bytes(t, k);
  const size_t group_block = packed_group / nb;
  const auto* src = static_cast<const uint8_t*>(w);
  auto* dst = static_cast<uint8_t*>(out);
  cpu::parallel_for(n / R, 1, [&](size_t g0, size_t g1) {
    for (size_t g = g0; g < g1; ++g)
      for (size_t b = 0; b < nb; ++b) {
        const uint8_t* rows[R];
        for (size_t r = 0; r < R; ++r) rows[r] = src + (g * R + r) * row_bytes + b * block;
        uint8_t* o = dst + g * packed_group + b * group_block;
        if (t == GgmlDType::Q4K)
          pack_q4k<BlockQ4_K>(rows, o);
        else if (t == GgmlDType::Q5K)
          pack_q4k<BlockQ5_K>(rows, o);
        else if (t == GgmlDType::Q6K)
          pack_q6k(rows, o);
        else if (t == GgmlDType::Q3K)
          pack_q3k(rows, o);
        else if (t == GgmlDType::Q2K)
          pack_q2k(rows, o);
        else if (t == GgmlDType::IQ4_XS)
          pack_iq4xs(rows, o);
        else
          pack_legacy(rows, block, t == GgmlDType::Q4_1 || t == GgmlDType::Q5_1 ? 2 : 1,
                      t == GgmlDType::Q5_0 || t == GgmlDType::Q5_1, o);
      }
  });
}

}  // namespace candle::quantized
