// Hostile checkpoints (tools/make-hostile-models.py): each loader throws a short, clear
// candle::Error; none crashes, recurses deeply or allocates much.
#include <gtest/gtest.h>

#include "candle/candle.h"
#include "candle/io/npy.h"
#include "candle/io/safetensors.h"
#include "hostile_util.h"

namespace {

using namespace candle;
using hostile::file;

TEST(HostileSafetensors, DeepHeaderIsRejectedBeforeParsing) {
  EXPECT_HOSTILE_ERROR([] { safetensors::load(file("deep_header.safetensors"), Device::cpu()); },
                       ErrorKind::Parse, "JSON nests deeper than 16 levels");
  EXPECT_HOSTILE_ERROR([] { safetensors::MmapedSafetensors st(file("deep_header.safetensors")); },
                       ErrorKind::Parse, "nests deeper");
}

TEST(HostileSafetensors, OffsetsPastTheEndOfTheFile) {
  EXPECT_HOSTILE_ERROR([] { safetensors::load(file("offsets_past_eof.safetensors"), Device::cpu()); },
                       ErrorKind::Parse, "run past the data buffer");
}

TEST(HostileSafetensors, OverlappingTensors) {
  EXPECT_HOSTILE_ERROR([] { safetensors::load(file("overlapping.safetensors"), Device::cpu()); },
                       ErrorKind::Parse, "tensors 'a' [0, 16) and 'b' [8, 24) overlap");
}

TEST(HostileSafetensors, DimsOverflowingU64) {
  EXPECT_HOSTILE_ERROR([] { safetensors::load(file("dims_overflow.safetensors"), Device::cpu()); },
                       ErrorKind::Parse, "overflows");
}

TEST(HostileNpy, HugeShapes) {
  EXPECT_HOSTILE_ERROR([] { npy::read_npy(file("huge_shape.npy"), Device::cpu()); }, ErrorKind::Parse,
                       "element count of the shape overflows");
  EXPECT_HOSTILE_ERROR([] { npy::read_npy(file("huge_shape_fits.npy"), Device::cpu()); }, ErrorKind::Parse,
                       "data is truncated");
}

TEST(HostileNpz, MemberInflatingPastItsDeclaredSize) {
  EXPECT_HOSTILE_ERROR([] { npy::read_npz(file("bomb.npz"), Device::cpu()); }, ErrorKind::Parse,
                       "more data than the declared size 1000");
}

TEST(HostileNpz, DeclaredSizeImpossibleForItsDeflateBytes) {
  EXPECT_HOSTILE_ERROR([] { npy::read_npz(file("bomb_declared.npz"), Device::cpu()); }, ErrorKind::Parse,
                       "declared size 4294967296 is impossible");
}

TEST(HostileNpz, OverlappingMembers) {
  EXPECT_HOSTILE_ERROR([] { npy::read_npz(file("overlap.npz"), Device::cpu()); }, ErrorKind::Parse,
                       "members 'm000.npy' and 'm001.npy' overlap");
  EXPECT_HOSTILE_ERROR([] { npy::read_npz_by_name(file("overlap.npz"), "m000", Device::cpu()); },
                       ErrorKind::Parse, "overlap");
}

}  // namespace
