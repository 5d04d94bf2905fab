// Legacy GGML / GGMF / GGJT files, written here byte by byte: every version reads, and hostile
// files are refused with a message naming the problem.
#include "candle/quantized/ggml_file.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "io/io_test_util.h"
#include "quantized/gguf_test_util.h"

using namespace candle;
using namespace candle::quantized;
using namespace candle::quantized::ggml_file;
using namespace candle::quantized::test;

namespace {

constexpr uint32_t kGgml = 0x67676d6c, kGgmf = 0x67676d66, kGgjt = 0x67676a74;

struct TensorSpec {
  std::string name;
  std::vector<uint32_t> ne;
  uint32_t type;
  std::vector<uint8_t> data;
};

// magic, [version], hparams (n_vocab = tokens.size()), vocab, tensors
std::vector<uint8_t> legacy(uint32_t magic, int version, const std::vector<std::string>& tokens,
                            const std::vector<TensorSpec>& tensors) {
  Bytes b;
  b.u32(magic);
  if (version >= 0) b.u32(static_cast<uint32_t>(version));
  b.u32(static_cast<uint32_t>(tokens.size())).u32(8).u32(256).u32(2).u32(1).u32(4).u32(7);
  for (size_t i = 0; i < tokens.size(); ++i) {
    b.u32(static_cast<uint32_t>(tokens[i].size())).str(tokens[i]);
    if (magic != kGgml) b.f32(-0.5f * static_cast<float>(i));
  }
  for (const auto& t : tensors) {
    b.u32(static_cast<uint32_t>(t.ne.size())).u32(static_cast<uint32_t>(t.name.size())).u32(t.type);
    for (uint32_t d : t.ne) b.u32(d);
    b.str(t.name);
    if (magic == kGgjt) b.pad_to(32);
    b.b.insert(b.b.end(), t.data.begin(), t.data.end());
  }
  return b.b;
}

std::vector<uint8_t> f32_data(size_t n, float start) {
  Bytes b;
  for (size_t i = 0; i < n; ++i) b.f32(start + static_cast<float>(i));
  return b.b;
}

uint16_t scale_one(size_t) { return 0x3c00; }
int8_t quant_i(size_t, size_t i) { return static_cast<int8_t>(i); }

std::vector<TensorSpec> f32_tensors() {
  return {{"tok_embeddings.weight", {4, 3}, 0, f32_data(12, 0)}, {"norm.weight", {4}, 0, f32_data(4, 100)}};
}

std::vector<uint8_t> prefix(std::vector<uint8_t> b, size_t n) {
  b.resize(std::min(n, b.size()));
  return b;
}

Content read_bytes(const std::vector<uint8_t>& b) {
  return Content::read_buffer(std::span<const uint8_t>(b));
}

}  // namespace

TEST(GgmlFile, ReadsEveryVersion) {
  struct V {
    uint32_t magic;
    int version;
    VersionedMagic want;
  };
  for (const V& v : {V{kGgml, -1, VersionedMagic::GgmlUnversioned}, V{kGgmf, 1, VersionedMagic::GgmfV1},
                     V{kGgjt, 1, VersionedMagic::GgjtV1}, V{kGgjt, 2, VersionedMagic::GgjtV2},
                     V{kGgjt, 3, VersionedMagic::GgjtV3}}) {
    SCOPED_TRACE(static_cast<int>(v.want));
    Content c = read_bytes(legacy(v.magic, v.version, {"<unk>", "a", "\xff"}, f32_tensors()));
    EXPECT_EQ(c.magic, v.want);
    EXPECT_EQ(c.hparams.n_vocab, 3u);
    EXPECT_EQ(c.hparams.n_embd, 8u);
    EXPECT_EQ(c.hparams.n_mult, 256u);
    EXPECT_EQ(c.hparams.n_head, 2u);
    EXPECT_EQ(c.hparams.n_layer, 1u);
    EXPECT_EQ(c.hparams.n_rot, 4u);
    EXPECT_EQ(c.hparams.ftype, 7u);
    ASSERT_EQ(c.vocab.token_score_pairs.size(), 3u);
    EXPECT_EQ(c.vocab.token_score_pairs[0].first, "<unk>");
    EXPECT_EQ(c.vocab.token_score_pairs[2].first, "\xff");  // bytes kept as they are
    EXPECT_EQ(c.vocab.token_score_pairs[2].second, v.magic == kGgml ? 0.0f : -1.0f);
    ASSERT_EQ(c.tensors.size(), 2u);
    const QTensor& e = c.tensors.at("tok_embeddings.weight");
    EXPECT_EQ(e.shape(), Shape({3, 4}));  // ne (4, 3)
    EXPECT_EQ(e.dtype(), GgmlDType::F32);
    EXPECT_EQ(f32s(e), (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
    EXPECT_EQ(f32s(c.tensors.at("norm.weight")), (std::vector<float>{100, 101, 102, 103}));
  }
}

TEST(GgmlFile, GgjtDataIsAlignedTo32Bytes) {
  auto b = legacy(kGgjt, 3, {"a"}, f32_tensors());
  auto owner = std::make_shared<std::vector<uint8_t>>(b);
  Content c = Content::read_buffer(owner, std::span<const uint8_t>(*owner));
  for (const auto& [name, t] : c.tensors) {
    EXPECT_EQ((t.data().data() - owner->data()) % 32, 0) << name;  // and not copied
  }
}

TEST(GgmlFile, QuantizedTensorsOfGgjtV3) {
  auto q8 = q8_0_blocks(2, scale_one, quant_i);
  Content c = read_bytes(legacy(kGgjt, 3, {}, {{"layers.0.attention.wq.weight", {32, 2}, 8, q8}}));
  const QTensor& t = c.tensors.at("layers.0.attention.wq.weight");
  EXPECT_EQ(t.dtype(), GgmlDType::Q8_0);
  EXPECT_EQ(t.shape(), Shape({2, 32}));
  ASSERT_EQ(t.data().size(), q8.size());
  EXPECT_EQ(std::memcmp(t.data().data(), q8.data(), q8.size()), 0);
}

TEST(GgmlFile, FromAPath) {
  candle::io_test::TempDir dir;
  put_file(dir.file("m.bin"), legacy(kGgjt, 3, {"x"}, f32_tensors()));
  Content c = Content::read(dir.file("m.bin"));
  EXPECT_EQ(f32s(c.tensors.at("norm.weight")), (std::vector<float>{100, 101, 102, 103}));
}

// The seeds of the ggml fuzz corpus (tools/make-hostile-gguf.py) read.
TEST(GgmlFile, CorpusSeedsRead) {
  for (const char* name : {"valid-ggml.bin", "valid-ggmf-v1.bin", "valid-ggjt-v1.bin", "valid-ggjt-v3.bin"}) {
    SCOPED_TRACE(name);
    Content c = Content::read(corpus_path("ggml", name));
    EXPECT_EQ(c.vocab.token_score_pairs.size(), 3u);
    EXPECT_EQ(c.tensors.at("tok_embeddings.weight").shape(), Shape({3, 8}));
  }
}

TEST(GgmlFile, HostileFilesAreRefusedWithAClearError) {
  auto with = [](auto edit) {
    auto b = legacy(kGgjt, 3, {"a", "b"}, f32_tensors());
    edit(b);
    return b;
  };
  auto put_u32 = [](std::vector<uint8_t>& b, size_t at, uint32_t v) { std::memcpy(b.data() + at, &v, 4); };
  // offsets in legacy(kGgjt, 3, {"a", "b"}, ...): magic 0, version 4, hparams 8..36, vocab 36..54,
  // first tensor's n_dims 54, name_len 58, type 62, dims 66, 70, name 74
  const size_t kVocab = 36, kTensor = 54;
  struct Case {
    std::vector<uint8_t> bytes;
    const char* message;
  };
  const std::vector<uint8_t> q8 = q8_0_blocks(1, scale_one, quant_i);
  const Case cases[] = {
      {{}, "too short for a GGML file (0 bytes)"},
      {{'G', 'G', 'U', 'F', 3, 0, 0, 0}, "a GGUF file, not a legacy GGML one"},
      {{'a', 'b', 'c', 'd'}, "not a GGML file (magic 'abcd')"},
      {legacy(kGgjt, 4, {}, {}), "unsupported ggjt version 4"},
      {legacy(kGgmf, 2, {}, {}), "unsupported ggmf version 2"},
      {prefix(legacy(kGgjt, 3, {}, {}), 20),
       "unexpected end of file reading the hyper-parameters at offset 20"},
      {with([&](auto& b) { put_u32(b, 8, 0xFFFFFFFF); }), "n_vocab 4294967295 is more than the file"},
      {with([&](auto& b) { put_u32(b, kVocab, 1000); }),
       "token 0 at offset 36 has length 1000, past the end"},
      {with([&](auto& b) { put_u32(b, kTensor, 0); }), "the tensor at offset 54 has 0 dims (1 to 4)"},
      {with([&](auto& b) { put_u32(b, kTensor, 5); }), "the tensor at offset 54 has 5 dims (1 to 4)"},
      {with([&](auto& b) { put_u32(b, kTensor + 4, 1u << 30); }),
       "the name length 1073741824 runs past the end"},
      {with([&](auto& b) { put_u32(b, kTensor + 8, 99); }),
       "tensor 'tok_embeddings.weight': unknown type id 99"},
      {with([&](auto& b) { put_u32(b, kTensor + 8, 16); }), "unsupported type iq2_xxs (id 16)"},
      {with([&](auto& b) { put_u32(b, kTensor + 8, 30); }), "bf16 is not a type of legacy GGML files"},
      {with([&](auto& b) { put_u32(b, kTensor + 12, 1000); }),
       "tensor 'tok_embeddings.weight': its 12000 bytes at offset 96 run past the end of the file"},
      {with([&](auto& b) { b.pop_back(); }), "tensor 'norm.weight': its 16 bytes"},
      {legacy(kGgjt, 3, {}, {{"big", {0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}, 0, {}}}),
       "tensor 'big': the element count overflows int64"},
      {legacy(kGgjt, 3, {}, {{"q", {33}, 2, std::vector<uint8_t>(18)}}),
       "tensor 'q': a row of 33 elements is not a whole number of q4_0 blocks of 32"},
      {legacy(kGgjt, 3, {}, {{"t", {4}, 0, f32_data(4, 0)}, {"t", {4}, 0, f32_data(4, 0)}}),
       "tensor 't' appears twice"},
      {legacy(kGgjt, 1, {}, {{"q", {32}, 8, q8}}),
       "tensor 'q': q8_0 blocks of ggjt v1 files have an older layout; only f32 and f16 tensors of such "
       "files are "
       "read"},
      {legacy(kGgmf, 1, {}, {{"q", {32}, 2, std::vector<uint8_t>(18)}}), "q4_0 blocks of ggmf v1 files"},
      {prefix(legacy(kGgjt, 3, {}, {{"t", {4}, 0, f32_data(4, 0)}}), 58),
       "tensor 't': the file ends in the padding before its data"},
      {with([&](auto& b) {
         b.insert(b.end(), {1, 0});
       }),
       "unexpected end of file reading a tensor's n_dims"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.message);
    std::string what = error_of([&] { read_bytes(c.bytes); });
    EXPECT_NE(what.find(c.message), std::string::npos) << "message: " << what;
    EXPECT_EQ(what.rfind("GGML buffer: ", 0), 0u) << what;
  }
}

TEST(GgmlFile, EveryTruncationIsRefusedOrATensorBoundary) {
  auto b = legacy(kGgjt, 3, {"a", "bc"}, f32_tensors());
  for (size_t n = 0; n < b.size(); ++n) {
    std::vector<uint8_t> prefix(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n));
    try {
      Content c = read_bytes(prefix);
      // a prefix that ends between tensors is a file with fewer tensors
      EXPECT_LT(c.tensors.size(), 2u) << n;
    } catch (const Error&) {
    }
  }
}
