// GGUF v3 write: round trips, the layout (alignment, padding), atomic replacement, refused
// inputs, and interop with llama.cpp's reader (tools/gguf_interop.py).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "candle/quantized/gguf_file.h"
#include "io/io_test_util.h"
#include "quantized/gguf_test_util.h"

using namespace candle;
using namespace candle::quantized;
using namespace candle::quantized::gguf_file;
using namespace candle::quantized::test;
using candle::io_test::TempDir;

namespace {

// a QTensor over `bytes` (kept alive by the tensor)
QTensor qtensor(std::vector<uint8_t> bytes, Shape shape, GgmlDType dt) {
  auto owned = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  std::span<const uint8_t> view(owned->data(), owned->size());
  return QTensor::from_bytes(owned, view, std::move(shape), dt);
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

uint16_t q8_scale(size_t b) { return static_cast<uint16_t>(0x3c00 + 0x100 * b); }
int8_t q8_quant(size_t b, size_t i) { return static_cast<int8_t>(int(i) * 4 - 60 + int(b)); }

// every byte distinct-ish: Q4_0 blocks of 18 bytes
std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(i * 7 + seed);
  return b;
}

MetadataList sample_metadata() {
  return {
      {"general.architecture", Value("candle")},
      {"test.u8", Value(uint8_t(7))},
      {"test.i8", Value(int8_t(-7))},
      {"test.u16", Value(uint16_t(65535))},
      {"test.i16", Value(int16_t(-32768))},
      {"test.u32", Value(uint32_t(123456789))},
      {"test.i32", Value(int32_t(-123456789))},
      {"test.u64", Value(uint64_t(1) << 40)},
      {"test.i64", Value(-(int64_t(1) << 40))},
      {"test.f32", Value(0.25f)},
      {"test.f64", Value(-1.5)},
      {"test.bool", Value(false)},
      {"test.utf8", Value("gr\xc3\xbc\xc3\x9f")},
      {"tokenizer.ggml.tokens", Value::array({Value("<s>"), Value("hi"), Value("")})},
      {"test.arr_i32", Value::array({Value(int32_t(3)), Value(int32_t(-1))})},
  };
}

TensorList sample_tensors() {
  return {
      {"w.f32", qtensor(f32_bytes({1, 2, 3, 4, 5, 6}), Shape({2, 3}), GgmlDType::F32)},
      {"w.q8_0", qtensor(q8_0_blocks(1, q8_scale, q8_quant), Shape({1, 32}), GgmlDType::Q8_0)},
      {"w.q4_0", qtensor(pattern(2 * 18, 1), Shape({2, 32}), GgmlDType::Q4_0)},
  };
}

std::string hex(std::span<const uint8_t> b) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < b.size() && i < 64; ++i) {
    s += d[b[i] >> 4];
    s += d[b[i] & 15];
  }
  return s;
}

}  // namespace

TEST(GgufWrite, RoundTrip) {
  TempDir dir;
  const std::string path = dir.file("m.gguf");
  MetadataList md = sample_metadata();
  md.emplace_back("test.nested",
                  Value::array({Value::array({Value(1.0f)}), Value::array(ValueType::F32, {})}));
  md.emplace_back("test.empty_strings", Value::array(ValueType::String, {}));
  TensorList ts = sample_tensors();
  write(path, md, ts);
  Content c = Content::read(path);
  EXPECT_EQ(c.version(), 3u);
  ASSERT_EQ(c.metadata.size(), md.size());
  for (const auto& [k, v] : md) EXPECT_EQ(c.get(k), v) << k;
  EXPECT_EQ(c.get("test.empty_strings").array_type(), ValueType::String);
  ASSERT_EQ(c.tensor_infos.size(), ts.size());
  for (const auto& [name, t] : ts) {
    SCOPED_TRACE(name);
    QTensor r = c.tensor(name);
    EXPECT_EQ(r.dtype(), t.dtype());
    EXPECT_EQ(r.shape(), t.shape());
    ASSERT_EQ(r.data().size(), t.data().size());
    EXPECT_EQ(std::memcmp(r.data().data(), t.data().data(), t.data().size()), 0);
  }
  // packed in order, each at a multiple of 32, each padded (as ggml writes)
  EXPECT_EQ(c.tensor_infos.at("w.f32").offset, 0u);
  EXPECT_EQ(c.tensor_infos.at("w.q8_0").offset, 32u);
  EXPECT_EQ(c.tensor_infos.at("w.q4_0").offset, 96u);
  EXPECT_EQ(c.tensor_data_offset % 32, 0u);
  EXPECT_EQ(std::filesystem::file_size(path), c.tensor_data_offset + 96 + 64);
  // nothing but the file is left in the directory
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"m.gguf"});
}

TEST(GgufWrite, QuantizedTensorsRoundTrip) {
  std::vector<float> v(2 * 256);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.1f * float(i));
  Tensor t = Tensor::from_vec(v, Shape({2, 256}), Device::cpu());
  TensorList ts;
  for (GgmlDType dt : {GgmlDType::Q4K, GgmlDType::Q6K, GgmlDType::Q8_0, GgmlDType::F16})
    ts.emplace_back(std::string(ggml_dtype_name(dt)), QTensor::quantize(t, dt));
  std::ostringstream os;
  write(os, {}, ts);
  const std::string s = os.str();
  Content c =
      Content::read_buffer(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
  for (const auto& [name, q] : ts) {
    SCOPED_TRACE(name);
    QTensor r = c.tensor(name);
    EXPECT_EQ(r.dtype(), q.dtype());
    EXPECT_EQ(r.shape(), Shape({2, 256}));
    EXPECT_EQ(r.dequantize(Device::cpu()).flatten_to_vec<float>(),
              q.dequantize(Device::cpu()).flatten_to_vec<float>());
  }
}

TEST(GgufWrite, StreamWritesTheSameBytes) {
  TempDir dir;
  write(dir.file("a.gguf"), sample_metadata(), sample_tensors());
  std::ostringstream os;
  write(os, sample_metadata(), sample_tensors());
  const std::string s = os.str();
  EXPECT_EQ(std::vector<uint8_t>(s.begin(), s.end()), file_bytes(dir.file("a.gguf")));
}

TEST(GgufWrite, HonoursGeneralAlignment) {
  TempDir dir;
  MetadataList md = {{"general.alignment", Value(uint32_t(64))}};
  write(dir.file("a.gguf"), md, sample_tensors());
  Content c = Content::read(dir.file("a.gguf"));
  EXPECT_EQ(c.alignment, 64u);
  EXPECT_EQ(c.tensor_data_offset % 64, 0u);
  EXPECT_EQ(c.tensor_infos.at("w.q8_0").offset, 64u);
  EXPECT_EQ(c.tensor_infos.at("w.q4_0").offset, 128u);
  EXPECT_EQ(f32s(c.tensor("w.f32")), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST(GgufWrite, EmptyFileHasOnlyTheHeader) {
  std::ostringstream os;
  write(os, {}, {});
  EXPECT_EQ(os.str(), std::string("GGUF\x03\0\0\0", 8) + std::string(16, '\0') + std::string(8, '\0'));
  Content c =
      Content::read_buffer(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(os.str().data()), 32));
  EXPECT_TRUE(c.metadata.empty());
  EXPECT_TRUE(c.tensor_infos.empty());
}

TEST(GgufWrite, RefusedInputsNameTheProblemAndLeaveTheOldFile) {
  TempDir dir;
  const std::string path = dir.file("m.gguf");
  write(path, sample_metadata(), sample_tensors());
  const auto before = file_bytes(path);
  auto q = sample_tensors()[0].second;
  auto five_dims = qtensor(f32_bytes({1}), Shape({1, 1, 1, 1, 1}), GgmlDType::F32);
  Value deep = Value(uint8_t(1));
  for (int i = 0; i < 17; ++i) deep = Value::array({deep});
  Value ok_deep = Value(uint8_t(1));
  for (int i = 0; i < 16; ++i) ok_deep = Value::array({ok_deep});
  struct Case {
    MetadataList md;
    TensorList ts;
    const char* message;
  };
  const Case cases[] = {
      {{{"", Value(1)}}, {}, "gguf write: a metadata key is empty"},
      {{{"k", Value(1)}, {"k", Value(2)}}, {}, "gguf write: metadata key 'k' appears twice"},
      {{{"k\xff", Value(1)}}, {}, "gguf write: metadata key 'k\\xff' is not valid UTF-8"},
      {{{"general.alignment", Value(uint32_t(48))}},
       {},
       "gguf write: general.alignment 48 is not a power of two"},
      {{{"general.alignment", Value(uint64_t(32))}},
       {},
       "gguf write: general.alignment must be a u32, not a u64"},
      {{{"k", deep}}, {}, "gguf write: metadata key 'k': arrays nest deeper than 16 levels"},
      {{}, {{"a", q}, {"a", q}}, "gguf write: tensor 'a' appears twice"},
      {{}, {{"a\xc0", q}}, "gguf write: tensor name 'a\\xc0' is not valid UTF-8"},
      {{}, {{"x", five_dims}}, "gguf write: tensor 'x' has 5 dims (GGUF holds at most 4)"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.message);
    EXPECT_EQ(error_of([&] { write(path, c.md, c.ts); }), c.message);
    EXPECT_EQ(file_bytes(path), before);
    EXPECT_EQ(dir.entries(), std::vector<std::string>{"m.gguf"});
  }
  // 16 levels are fine
  std::ostringstream os;
  write(os, {{"k", ok_deep}}, {});
  const std::string s = os.str();
  Content c =
      Content::read_buffer(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
  EXPECT_EQ(c.get("k"), ok_deep);
}

TEST(GgufWrite, UnwritableDirectoryIsAnIoError) {
  try {
    write("/nonexistent/dir/m.gguf", sample_metadata(), sample_tensors());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
  }
}

// A file written here, read by llama.cpp's gguf reader (ggml v0.5.0 from tools/peers, through
// tools/gguf_interop.py): every key, type, value, tensor type, ne[], offset and byte agree.
TEST(GgufWrite, LlamaCppReadsOurFile) {
  const std::string script = source_path("tools/gguf_interop.py");
  const std::string lib =
      source_path("tools/peers/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so");
  if (std::system("python3 -c 'import ctypes' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "python3 is not available";
  if (!std::filesystem::exists(lib))
    GTEST_SKIP() << "llama.cpp's libggml-base.so is not installed (" << lib << "; run tools/install-deps.sh)";
  TempDir dir;
  const std::string path = dir.file("ours.gguf"), out = dir.file("dump.txt");
  TensorList ts = sample_tensors();
  write(path, sample_metadata(), ts);
  const std::string cmd = "python3 '" + script + "' dump '" + path + "' > '" + out + "' 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "llama.cpp refused the file:\n"
                                         << [&] {
                                              auto b = file_bytes(out);
                                              return std::string(b.begin(), b.end());
                                            }();
  auto got_bytes = file_bytes(out);
  const std::string got(got_bytes.begin(), got_bytes.end());
  Content c = Content::read(path);
  std::string want = "version 3\nalignment 32\ndata_offset " + std::to_string(c.tensor_data_offset) +
                     "\n"
                     "kv general.architecture string 'candle'\n"
                     "kv test.u8 u8 7\n"
                     "kv test.i8 i8 -7\n"
                     "kv test.u16 u16 65535\n"
                     "kv test.i16 i16 -32768\n"
                     "kv test.u32 u32 123456789\n"
                     "kv test.i32 i32 -123456789\n"
                     "kv test.u64 u64 1099511627776\n"
                     "kv test.i64 i64 -1099511627776\n"
                     "kv test.f32 f32 0.25\n"
                     "kv test.f64 f64 -1.5\n"
                     "kv test.bool bool false\n"
                     "kv test.utf8 string 'gr\xc3\xbc\xc3\x9f'\n"
                     "kv tokenizer.ggml.tokens array[string] 3 ['<s>', 'hi', '']\n"
                     "kv test.arr_i32 array[i32] 2 [3, -1]\n";
  want += "tensor w.f32 f32 ne=[3, 2, 1, 1] offset=0 size=24 data=" + hex(ts[0].second.data()) + "\n";
  want += "tensor w.q8_0 q8_0 ne=[32, 1, 1, 1] offset=32 size=34 data=" + hex(ts[1].second.data()) + "\n";
  want += "tensor w.q4_0 q4_0 ne=[32, 2, 1, 1] offset=96 size=36 data=" + hex(ts[2].second.data()) + "\n";
  EXPECT_EQ(got, want);
}
