// GGUF read: a file written by llama.cpp's own writer, the small valid seeds of the fuzz corpus
// (v1, v2, v3), and the hostile corpus (tools/make-hostile-gguf.py), each refused with a message
// naming its problem.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "candle/quantized/gguf_file.h"
#include "quantized/gguf_test_util.h"

using namespace candle;
using namespace candle::quantized;
using namespace candle::quantized::gguf_file;
using namespace candle::quantized::test;

namespace {

uint16_t fixture_q8_scale(size_t b) {
  static constexpr uint16_t kBits[] = {0x3800, 0x3c00, 0x3e00, 0x4000};  // 0.5, 1, 1.5, 2
  return kBits[b];
}
int8_t fixture_q8_quant(size_t b, size_t i) { return static_cast<int8_t>(int(b) * 3 + int(i) - 16); }

}  // namespace

// tests/data/quantized/ggml_written.gguf: written by tools/gguf_interop.py with ggml's gguf writer.
TEST(GgufRead, FileWrittenByLlamaCpp) {
  Content c = Content::read(fixture_path("ggml_written.gguf"));
  EXPECT_EQ(c.magic, VersionedMagic::GgufV3);
  EXPECT_EQ(c.version(), 3u);
  EXPECT_EQ(c.alignment, 32u);
  EXPECT_EQ(c.tensor_data_offset, 768u);
  ASSERT_EQ(c.metadata.size(), 17u);
  EXPECT_EQ(c.get("general.architecture").to_string(), "candle-test");
  EXPECT_EQ(c.get("general.name").to_string(), "caf\xc3\xa9 \xe2\x98\x95");
  EXPECT_EQ(c.get("test.u8").to_u8(), 200);
  EXPECT_EQ(c.get("test.i8").to_i8(), -100);
  EXPECT_EQ(c.get("test.u16").to_u16(), 60000);
  EXPECT_EQ(c.get("test.i16").to_i16(), -30000);
  EXPECT_EQ(c.get("test.u32").to_u32(), 4000000000u);
  EXPECT_EQ(c.get("test.i32").to_i32(), -2000000000);
  EXPECT_EQ(c.get("test.u64").to_u64(), 18000000000000000000ull);
  EXPECT_EQ(c.get("test.i64").to_i64(), -9000000000000000000ll);
  EXPECT_EQ(c.get("test.f32").to_f32(), 1.5f);
  EXPECT_EQ(c.get("test.f64").to_f64(), -0.125);
  EXPECT_EQ(c.get("test.bool").to_bool(), true);
  const Value& toks = c.get("tokenizer.ggml.tokens");
  EXPECT_EQ(toks.array_type(), ValueType::String);
  ASSERT_EQ(toks.to_vec().size(), 5u);
  EXPECT_EQ(toks.to_vec()[1].to_string(), "</s>");
  EXPECT_EQ(toks.to_vec()[3].to_string(), "");
  EXPECT_EQ(toks.to_vec()[4].to_string(),
            "\xc3\xbc"
            "ber");
  const auto& i32s = c.get("test.arr_i32").to_vec();
  ASSERT_EQ(i32s.size(), 4u);
  EXPECT_EQ(i32s[1].to_i32(), -2);
  EXPECT_EQ(i32s[3].to_i32(), -4);
  const auto& f32v = c.get("test.arr_f32").to_vec();
  ASSERT_EQ(f32v.size(), 3u);
  EXPECT_EQ(f32v[2].to_f32(), 2.25f);
  EXPECT_EQ(c.get("test.arr_empty").array_type(), ValueType::U8);
  EXPECT_TRUE(c.get("test.arr_empty").to_vec().empty());

  ASSERT_EQ(c.tensor_infos.size(), 3u);
  const TensorInfo& a = c.tensor_infos.at("t.f32");
  EXPECT_EQ(a.ggml_dtype, GgmlDType::F32);
  EXPECT_EQ(a.shape, Shape({3, 4}));  // ne (4, 3)
  EXPECT_EQ(a.offset, 0u);
  const TensorInfo& h = c.tensor_infos.at("t.f16");
  EXPECT_EQ(h.ggml_dtype, GgmlDType::F16);
  EXPECT_EQ(h.shape, Shape({2, 2, 2}));
  EXPECT_EQ(h.offset, 64u);
  const TensorInfo& q = c.tensor_infos.at("t.q8_0");
  EXPECT_EQ(q.ggml_dtype, GgmlDType::Q8_0);
  EXPECT_EQ(q.shape, Shape({2, 64}));  // ne (64, 2)
  EXPECT_EQ(q.offset, 96u);
  EXPECT_EQ(q.size_in_bytes(), 4u * 34);

  QTensor tf = c.tensor("t.f32");
  EXPECT_EQ(tf.shape(), Shape({3, 4}));
  std::vector<float> want;
  for (int i = 0; i < 12; ++i) want.push_back(0.5f * i - 2.0f);
  EXPECT_EQ(f32s(tf), want);
  QTensor th = c.tensor("t.f16");
  const std::vector<uint16_t> f16_bits = {0x0000, 0x3400, 0x3800, 0x3a00, 0x3c00, 0x3d00, 0x3e00, 0x3f00};
  ASSERT_EQ(th.data().size(), 16u);
  EXPECT_EQ(std::memcmp(th.data().data(), f16_bits.data(), 16), 0);
  QTensor tq = c.tensor("t.q8_0");
  EXPECT_EQ(tq.dtype(), GgmlDType::Q8_0);
  auto blocks = q8_0_blocks(4, fixture_q8_scale, fixture_q8_quant);
  ASSERT_EQ(tq.data().size(), blocks.size());
  EXPECT_EQ(std::memcmp(tq.data().data(), blocks.data(), blocks.size()), 0);
  // the blocks dequantize to d * q: row r holds blocks 2r and 2r + 1
  std::vector<float> deq = tq.dequantize(Device::cpu()).flatten_to_vec<float>();
  ASSERT_EQ(deq.size(), 128u);
  for (size_t b = 0; b < 4; ++b)
    for (size_t i = 0; i < 32; ++i)
      EXPECT_EQ(deq[b * 32 + i], 0.5f * float(b + 1) * float(fixture_q8_quant(b, i))) << b << " " << i;
}

TEST(GgufRead, TensorsViewTheFileWithoutCopy) {
  auto bytes = std::make_shared<std::vector<uint8_t>>(file_bytes(fixture_path("ggml_written.gguf")));
  std::span<const uint8_t> view(bytes->data(), bytes->size());
  Content c = Content::read_buffer(bytes, view);
  QTensor q = c.tensor("t.q8_0");
  EXPECT_EQ(q.data().data(), bytes->data() + c.tensor_data_offset + 96);
  // from a path: two loads of a tensor view the same mapped bytes
  Content m = Content::read(fixture_path("ggml_written.gguf"));
  EXPECT_EQ(m.tensor("t.f32").data().data(), m.tensor("t.f32").data().data());
  // the copying overload reads the same
  Content b = Content::read_buffer(std::span<const uint8_t>(*bytes));
  EXPECT_EQ(b.metadata, m.metadata);
  EXPECT_EQ(f32s(b.tensor("t.f32")), f32s(m.tensor("t.f32")));
}

TEST(GgufRead, MissingTensorOrKeyIsNamed) {
  Content c = Content::read(fixture_path("ggml_written.gguf"));
  EXPECT_NE(error_of([&] { c.tensor("nope"); }).find("no tensor 'nope'"), std::string::npos);
  EXPECT_NE(error_of([&] { c.get("nope.key"); }).find("no metadata key 'nope.key'"), std::string::npos);
  EXPECT_EQ(c.find("nope.key"), nullptr);
  EXPECT_NE(c.find("test.u8"), nullptr);
}

// The valid seeds: the same content in each version (v1: 32-bit counts, lengths and dims).
TEST(GgufRead, ValidSeedsOfEveryVersion) {
  for (const char* name : {"valid-v1.gguf", "valid-v2.gguf", "valid-v3.gguf", "valid-v3-align64.gguf"}) {
    SCOPED_TRACE(name);
    Content c = Content::read(corpus_path("gguf", name));
    EXPECT_EQ(c.version(), name == std::string("valid-v1.gguf")   ? 1u
                           : name == std::string("valid-v2.gguf") ? 2u
                                                                  : 3u);
    EXPECT_EQ(c.alignment, name == std::string("valid-v3-align64.gguf") ? 64u : 32u);
    EXPECT_EQ(c.tensor_data_offset % c.alignment, 0u);
    EXPECT_EQ(c.get("general.architecture").to_string(), "llama");
    EXPECT_EQ(c.get("test.u32").to_u32(), 7u);
    EXPECT_EQ(c.get("test.f32").to_f32(), 0.5f);
    EXPECT_TRUE(c.get("test.bool").to_bool());
    const auto& strs = c.get("test.strings").to_vec();
    ASSERT_EQ(strs.size(), 3u);
    EXPECT_EQ(strs[1].to_string(), "bc");
    // an array of arrays of i32
    const Value& nested = c.get("test.nested");
    EXPECT_EQ(nested.array_type(), ValueType::Array);
    ASSERT_EQ(nested.to_vec().size(), 2u);
    EXPECT_EQ(nested.to_vec()[0].array_type(), ValueType::I32);
    EXPECT_EQ(nested.to_vec()[0].to_vec()[1].to_i32(), 2);
    EXPECT_TRUE(nested.to_vec()[1].to_vec().empty());
    QTensor w = c.tensor("w");
    EXPECT_EQ(w.shape(), Shape({2, 4}));
    EXPECT_EQ(f32s(w), (std::vector<float>{0, 0.25f, 0.5f, 0.75f, 1, 1.25f, 1.5f, 1.75f}));
    QTensor b = c.tensor("b");
    EXPECT_EQ(b.shape(), Shape({4}));
    EXPECT_EQ(f32s(b), (std::vector<float>{10, 10.25f, 10.5f, 10.75f}));
  }
}

// What llama.cpp accepts, read the same way here.
TEST(GgufRead, AcceptsWhatLlamaCppAccepts) {
  Content z = Content::read(corpus_path("gguf", "valid-dim-0.gguf"));
  EXPECT_EQ(z.tensor_infos.at("t").shape, Shape({0, 4}));
  EXPECT_EQ(z.tensor("t").data().size(), 0u);
  Content e = Content::read(corpus_path("gguf", "valid-tensor-name-empty.gguf"));
  EXPECT_EQ(e.tensor("").shape(), Shape({8}));
  Content s = Content::read(corpus_path("gguf", "valid-n-dims-0.gguf"));
  EXPECT_EQ(s.tensor_infos.at("t").shape, Shape({1}));
  EXPECT_EQ(f32s(s.tensor("t")), std::vector<float>{0.0f});
  Content b = Content::read(corpus_path("gguf", "valid-bool-2.gguf"));
  EXPECT_TRUE(b.get("k").to_bool());
}

TEST(GgufValue, AccessorsCheckTheType) {
  Value v(uint32_t(5));
  EXPECT_EQ(v.value_type(), ValueType::U32);
  EXPECT_EQ(v.to_u32(), 5u);
  EXPECT_EQ(v.to_u64(), 5u);  // candle's upcast
  EXPECT_EQ(Value(true).to_u64(), 1u);
  EXPECT_EQ(error_of([&] { v.to_string(); }), "gguf: the metadata value is a u32, not a string");
  EXPECT_EQ(error_of([&] { Value("x").to_u32(); }), "gguf: the metadata value is a string, not a u32");
  EXPECT_EQ(error_of([&] { Value(int64_t(-1)).to_u64(); }), "gguf: the metadata value is a i64, not a u64");
  EXPECT_EQ(error_of([&] { v.to_vec(); }), "gguf: the metadata value is a u32, not a array");
  EXPECT_EQ(error_of([&] { v.array_type(); }), "gguf: the metadata value is a u32, not a array");
  EXPECT_NE(error_of([&] {
              Value::array({Value(int32_t(1)), Value("x")});
            }).find("element 1 of type string"),
            std::string::npos);
  EXPECT_EQ(Value::array({}).array_type(), ValueType::U32);
  EXPECT_EQ(Value::array(ValueType::String, {}).array_type(), ValueType::String);
  EXPECT_EQ(Value("abc"), Value(std::string("abc")));
  EXPECT_NE(Value(uint8_t(1)), Value(int8_t(1)));
}

struct HostileCase {
  const char* file;
  const char* message;  // a part of the error's message
};

// Each file of tests/fuzz/corpus/gguf/hostile-*.gguf (tools/make-hostile-gguf.py) is refused
// with a candle::Error whose message names the problem.
TEST(GgufRead, HostileFilesAreRefusedWithAClearError) {
  const HostileCase cases[] = {
      {"truncated-header", "unexpected end of file reading the version at offset 4 (the file is 6 bytes)"},
      {"bad-magic", "not a GGUF file (magic 'GGXF', expected 'GGUF')"},
      {"version-0", "unsupported GGUF version 0"},
      {"version-4", "unsupported GGUF version 4"},
      {"big-endian", "a big-endian GGUF file (version 3)"},
      {"tensor-count-2p63",
       "the tensor count 9223372036854775808 is more than the file (24 bytes) could hold"},
      {"kv-count-2p63", "the metadata key-value count 9223372036854775808 is more than the file"},
      {"v1-kv-count-huge", "the metadata key-value count 4294967295 is more than the file"},
      {"key-length-past-end",
       "a metadata key at offset 24 has length 1099511627776, past the end of the file"},
      {"string-length-past-end", "a string value at offset 37 has length 1000, past the end of the file"},
      {"array-length-past-end",
       "an array of 4611686018427387904 u32 at offset 41 runs past the end of the file"},
      {"string-array-length-past-end", "an array of 1099511627776 string"},
      {"nested-arrays-100-deep", "metadata key 'k': arrays nest deeper than 16 levels"},
      {"alignment-0", "general.alignment 0 is not a power of two"},
      {"alignment-3", "general.alignment 3 is not a power of two"},
      {"alignment-string", "general.alignment must be a u32, not a string"},
      {"alignment-u64", "general.alignment must be a u32, not a u64"},
      {"dims-product-overflow",
       "tensor 't': the element count of ne [4294967296, 4294967296, 2] overflows int64"},
      {"v1-dims-product-overflow", "overflows int64"},
      {"dim-over-int64", "tensor 't': dim 0 is 9223372036854775808, past ggml's int64 limit"},
      {"bytes-overflow", "tensor 't': its size in bytes overflows"},
      {"n-dims-5", "tensor 't' has 5 dims (at most 4)"},
      {"offset-past-eof", "tensor 't': its 32 bytes at offset 1048576 run past the end of the file"},
      {"data-past-eof", "tensor 't': its 256 bytes at offset 0 run past the end of the file"},
      {"overlapping-tensors", "tensors 'a' [0, 32) and 'b' [0, 32) overlap"},
      {"offset-not-aligned", "tensor 't': offset 4 is not a multiple of the alignment 32"},
      {"type-unknown-99", "tensor 't': unknown type id 99"},
      {"type-iq2_xxs", "tensor 't': unsupported type iq2_xxs (id 16)"},
      {"type-removed-4", "tensor 't': type id 4 (q4_2) was removed from ggml"},
      {"row-not-whole-blocks", "tensor 't': a row of 33 elements is not a whole number of q4_0 blocks of 32"},
      {"duplicate-tensor", "tensor 'a' appears twice"},
      {"duplicate-key", "metadata key 'k' appears twice"},
      {"key-invalid-utf8", "metadata key 0 ('k\\xff\\xfe') is not valid UTF-8"},
      {"key-empty", "metadata key 0 is empty"},
      {"tensor-name-invalid-utf8", "tensor 0 ('t\\xc0\\x80'): the name is not valid UTF-8"},
      {"value-type-13", "metadata key 'k' has unknown value type 13"},
      {"array-type-13", "metadata key 'k': an array has unknown element type 13"},
      {"truncated-kv", "unexpected end of file reading a metadata value"},
      {"truncated-tensor-info", "unexpected end of file reading a tensor's dims"},
      {"kv-count-plausible-but-truncated", "unexpected end of file reading a metadata key"},
  };
  // every hostile file of the corpus is in the table; every other file of it reads
  std::set<std::string> listed;
  for (const auto& c : cases) listed.insert(std::string("hostile-") + c.file + ".gguf");
  for (const auto& e : std::filesystem::directory_iterator(corpus_path("gguf", ""))) {
    const std::string f = e.path().filename().string();
    if (f.rfind("hostile-", 0) == 0)
      EXPECT_TRUE(listed.count(f)) << f << " is not in the table";
    else
      EXPECT_NO_THROW(Content::read(e.path().string()).tensor_infos.size()) << f;
  }
  for (const auto& c : cases) {
    const std::string path = corpus_path("gguf", std::string("hostile-") + c.file + ".gguf");
    SCOPED_TRACE(path);
    std::string what = error_of([&] { Content::read(path); });
    EXPECT_NE(what.find(c.message), std::string::npos) << "message: " << what;
    EXPECT_EQ(what.rfind(path, 0), 0u) << "the message names the file: " << what;
    // the same from memory
    auto bytes = file_bytes(path);
    std::string from_buffer = error_of([&] { Content::read_buffer(std::span<const uint8_t>(bytes)); });
    EXPECT_NE(from_buffer.find(c.message), std::string::npos) << "message: " << from_buffer;
  }
}

TEST(GgufRead, ErrorKinds) {
  auto kind = [](const std::string& f) {
    try {
      Content::read(corpus_path("gguf", "hostile-" + f + ".gguf"));
    } catch (const Error& e) {
      return e.kind();
    }
    return ErrorKind::Internal;
  };
  EXPECT_EQ(kind("type-iq2_xxs"), ErrorKind::UnsupportedOp);
  EXPECT_EQ(kind("version-4"), ErrorKind::UnsupportedOp);
  EXPECT_EQ(kind("big-endian"), ErrorKind::UnsupportedOp);
  EXPECT_EQ(kind("duplicate-key"), ErrorKind::Parse);
  EXPECT_EQ(kind("tensor-count-2p63"), ErrorKind::Parse);
}

TEST(GgufRead, MissingFileIsAnIoError) {
  try {
    Content::read("/nonexistent/dir/model.gguf");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/model.gguf"), std::string::npos);
  }
}

// Every prefix of a valid file is refused cleanly (no read past the end), never accepted
// with a tensor cut short.
TEST(GgufRead, EveryTruncationIsRefused) {
  auto bytes = file_bytes(fixture_path("ggml_written.gguf"));
  // the data section ends at 768 + 96 + 136 = 1000; the rest is the last tensor's padding
  for (size_t n = 0; n < 1000; ++n) {
    std::span<const uint8_t> prefix(bytes.data(), n);
    EXPECT_THROW(Content::read_buffer(prefix), Error) << n << " bytes";
  }
  EXPECT_NO_THROW(Content::read_buffer(std::span<const uint8_t>(bytes.data(), 1000)));
}
