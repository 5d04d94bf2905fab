// GGUF v3 write: round trips, the layout (alignment, padding), atomic replacement, refused
// inputs, and interop with llama.cpp's reader (tools/gguf_interop.py).
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
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

// FNV-1a (64-bit) of the bytes: a fingerprint of a whole file
uint64_t fnv1a(std::span<const uint8_t> b) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint8_t x : b) h = (h ^ x) * 0x100000001b3ull;
  return h;
}

// a small model of hand-made blocks (no quantizer in the way: the same bytes on every machine):
// sizes that need padding, K-quant and legacy blocks, every metadata type
std::pair<MetadataList, TensorList> small_model(uint32_t alignment) {
  MetadataList md = sample_metadata();
  if (alignment != kDefaultAlignment) md.emplace_back("general.alignment", Value(alignment));
  TensorList ts = {
      {"token_embd.weight", qtensor(pattern(4 * 144, 3), Shape({4, 256}), GgmlDType::Q4K)},
      {"blk.0.attn_norm.weight", qtensor(f32_bytes({1, 2, 3, 4, 5}), Shape({5}), GgmlDType::F32)},
      {"blk.0.attn_q.weight", qtensor(pattern(2 * 210, 5), Shape({2, 256}), GgmlDType::Q6K)},
      {"blk.0.ffn_down.weight", qtensor(pattern(3 * 18, 9), Shape({3, 32}), GgmlDType::Q4_0)},
      {"blk.0.ffn_up.weight", qtensor(pattern(3 * 7 * 2, 11), Shape({3, 7}), GgmlDType::F16)},
      {"output.weight", qtensor(pattern(2 * 34, 13), Shape({2, 32}), GgmlDType::Q8_0)},
  };
  return {std::move(md), std::move(ts)};
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

std::vector<TensorSpec> specs_of(const TensorList& ts) {
  std::vector<TensorSpec> specs;
  for (const auto& [name, t] : ts) specs.push_back({name, t.shape(), t.dtype()});
  return specs;
}

// The fingerprints are those of write() before it was built on Writer (commit f8d096d): the
// streaming writer, write() on top of it and the stream form give those bytes.
TEST(GgufWrite, WriterGivesTheBytesOfTheWholeFileWriter) {
  const struct {
    uint32_t alignment;
    size_t size;
    uint64_t fnv;
  } cases[] = {{32, 2112, 0xa9764cdea860935dull}, {64, 2240, 0xf42639050bb72266ull}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.alignment);
    TempDir dir;
    auto [md, ts] = small_model(c.alignment);
    {
      Writer w(dir.file("streamed.gguf"), md, specs_of(ts));
      for (size_t i = 0; i < ts.size(); ++i) {
        EXPECT_EQ(w.tensors_written(), i);
        if (i % 2)
          w.write_tensor(ts[i].second);
        else
          w.write_tensor(ts[i].second.data());
      }
      EXPECT_FALSE(std::filesystem::exists(dir.file("streamed.gguf")));  // not before finish()
      w.finish();
    }
    write(dir.file("whole.gguf"), md, ts);
    std::ostringstream os;
    {
      Writer w(os, md, specs_of(ts));
      for (const auto& [name, t] : ts) w.write_tensor(t);
      w.finish();
    }
    const std::string s = os.str();
    const std::vector<uint8_t> streamed = file_bytes(dir.file("streamed.gguf"));
    EXPECT_EQ(streamed.size(), c.size);
    EXPECT_EQ(fnv1a(streamed), c.fnv);
    EXPECT_EQ(file_bytes(dir.file("whole.gguf")), streamed);
    EXPECT_EQ(std::vector<uint8_t>(s.begin(), s.end()), streamed);
    EXPECT_EQ(dir.entries(), (std::vector<std::string>{"streamed.gguf", "whole.gguf"}));
  }
}

// A refused tensor writes nothing: the writer goes on with the right blocks and the file is the
// same as one written without the mistake.
TEST(GgufWrite, WriterRefusesBlocksOfTheWrongSizeOrType) {
  TempDir dir;
  // (a reference, not a binding, for the lambdas: clang 14 cannot capture structured bindings)
  auto model = small_model(32);
  auto& md = model.first;
  auto& ts = model.second;
  Writer w(dir.file("m.gguf"), md, specs_of(ts));
  w.write_tensor(ts[0].second);
  const std::vector<uint8_t> short_blocks(419);
  EXPECT_EQ(error_of([&] { w.write_tensor(short_blocks); }),
            "gguf write: tensor 'blk.0.attn_norm.weight' ([5] of f32) takes 20 bytes, 419 were given");
  EXPECT_EQ(error_of([&] { w.write_tensor(ts[2].second); }),
            "gguf write: tensor 'blk.0.attn_norm.weight' ([5] of f32) was announced, a tensor of [2, 256] of "
            "q6_K was given");
  EXPECT_EQ(w.tensors_written(), 1u);
  for (size_t i = 1; i < ts.size(); ++i) w.write_tensor(ts[i].second);
  EXPECT_EQ(error_of([&] { w.write_tensor(ts[0].second); }),
            "gguf write: all 6 tensors are already written; a 576-byte tensor is one too many");
  w.finish();
  EXPECT_EQ(fnv1a(file_bytes(dir.file("m.gguf"))), 0xa9764cdea860935dull);
  EXPECT_EQ(error_of([&] { w.finish(); }), "gguf write: finish() after finish()");
}

// finish() before the last tensor names the first missing one; the writer then removes its
// temporary, leaving the previous file as it was (and no file where there was none).
TEST(GgufWrite, WriterNeedsEveryTensorAndLeavesNoHalfFile) {
  TempDir dir;
  // (a reference, not a binding, for the lambdas: clang 14 cannot capture structured bindings)
  auto model = small_model(32);
  auto& md = model.first;
  auto& ts = model.second;
  put_file(dir.file("old.gguf"), {'o', 'l', 'd'});
  for (const char* name : {"old.gguf", "new.gguf"}) {
    SCOPED_TRACE(name);
    {
      Writer w(dir.file(name), md, specs_of(ts));
      for (size_t i = 0; i < 3; ++i) w.write_tensor(ts[i].second);
      EXPECT_EQ(error_of([&] { w.finish(); }),
                "gguf write: finish() after 3 of 6 tensors: tensor 'blk.0.ffn_down.weight' ([3, 32] of q4_0) "
                "and any after it were not written");
      EXPECT_EQ(dir.entries().size(), 2u);  // the temporary, beside old.gguf
    }
    EXPECT_EQ(dir.entries(), std::vector<std::string>{"old.gguf"});
    EXPECT_EQ(file_bytes(dir.file("old.gguf")), (std::vector<uint8_t>{'o', 'l', 'd'}));
  }
  // refused announcements: no temporary file is made
  EXPECT_EQ(error_of([&] {
              Writer(dir.file("new.gguf"), md, {{"w", Shape({2, 33}), GgmlDType::Q8_0}});
            }),
            "gguf write: tensor 'w' ([2, 33] of q8_0): a row of 33 elements is not a whole number of q8_0 "
            "blocks of 32");
  EXPECT_EQ(error_of([&] {
              Writer(dir.file("new.gguf"), md,
                     {{"w", Shape({32}), GgmlDType::F32}, {"w", Shape({32}), GgmlDType::F32}});
            }),
            "gguf write: tensor 'w' appears twice");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"old.gguf"});
}

// a write that failed part way leaves a stream that is no GGUF file: the writer refuses the rest
TEST(GgufWrite, WriterRefusesEverythingAfterAFailedWrite) {
  // (a reference, not a binding, for the lambdas: clang 14 cannot capture structured bindings)
  auto model = small_model(32);
  auto& md = model.first;
  auto& ts = model.second;
  std::ostringstream os;
  Writer w(os, md, specs_of(ts));
  os.setstate(std::ios::badbit);
  try {
    w.write_tensor(ts[0].second);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_STREQ(e.what(), "gguf write: the output stream failed");
  }
  os.clear();
  EXPECT_EQ(error_of([&] { w.write_tensor(ts[0].second); }),
            "gguf write: a tensor written after a failed write");
  EXPECT_EQ(error_of([&] { w.finish(); }), "gguf write: finish() after a failed write");
}

// release() lets a mapped file's pages go; the tensors that view them read the same afterwards
TEST(GgufWrite, ReleasedTensorsReadTheSame) {
  TempDir dir;
  auto [md, ts] = small_model(32);
  write(dir.file("m.gguf"), md, ts);
  const std::vector<uint8_t> bytes = file_bytes(dir.file("m.gguf"));
  Content mapped = Content::read(dir.file("m.gguf"));
  Content buffered = Content::read_buffer(bytes);
  for (const Content* c : {&mapped, &buffered}) {
    QTensor held = c->tensor("blk.0.attn_q.weight");
    for (const auto& [name, t] : ts) c->release(name);
    for (const auto& [name, t] : ts) {
      SCOPED_TRACE(name);
      QTensor r = c->tensor(name);
      EXPECT_TRUE(std::equal(r.data().begin(), r.data().end(), t.data().begin(), t.data().end()));
    }
    EXPECT_TRUE(std::equal(held.data().begin(), held.data().end(), ts[2].second.data().begin(),
                           ts[2].second.data().end()));
  }
  EXPECT_EQ(error_of([&] { mapped.release("nope"); }), dir.file("m.gguf") + ": no tensor 'nope'");
}

// the resident bytes of the mapping that holds p (/proc/self/smaps), or -1 where unknown
long resident_kib(const void* p) {
  std::ifstream f("/proc/self/smaps");
  std::string line;
  bool in = false;
  const auto a = reinterpret_cast<uintptr_t>(p);
  while (std::getline(f, line)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
      in = a >= lo && a < hi;
    } else if (in && line.rfind("Rss:", 0) == 0) {
      return std::strtol(line.c_str() + 4, nullptr, 10);
    }
  }
  return -1;
}

// The file's pages go by 2 MiB spans once every tensor in a span is released, in any order: 6 MiB
// of tensors read and released last to first leave almost nothing resident (the old rule paged
// out each range's spans but the last, left to the range after it in the file: read and released
// before, that range left the span to this one, which had faulted it in again)
TEST(GgufWrite, ReleaseInAnyOrderDropsTheFile) {
  TempDir dir;
  TensorList ts;
  for (int i = 0; i < 6; ++i)
    ts.push_back({std::string(1, 't') + char('0' + i),
                  qtensor(pattern((size_t{1} << 20) + 4096 * i, uint8_t(i)),
                          Shape({(size_t{1} << 18) + 1024 * i}), GgmlDType::F32)});
  write(dir.file("big.gguf"), {}, ts);
  Content c = Content::read(dir.file("big.gguf"));
  const void* at = c.tensor("t0").data().data();
  // as a loader does: each tensor read (every page in memory), copied, released; last to first
  uint64_t sum = 0;
  long most = 0;
  for (auto it = ts.rbegin(); it != ts.rend(); ++it) {
    for (uint8_t b : c.tensor(it->first).data()) sum += b;
    most = std::max(most, resident_kib(at));
    c.release(it->first);
  }
  if (most < 1024) GTEST_SKIP() << "the mapping's resident size is not readable here (" << most << " KiB)";
  const long after = resident_kib(at);
  if (after > 512) {
    // MADV_PAGEOUT may do nothing on this system: then every page stays, whatever the rule
    auto* base = static_cast<const uint8_t*>(at) - c.tensor_data_offset - c.tensor_infos.at("t0").offset;
    madvise(const_cast<uint8_t*>(base), std::filesystem::file_size(dir.file("big.gguf")), MADV_PAGEOUT);
    const long control = resident_kib(at);
    if (control >= after) GTEST_SKIP() << "MADV_PAGEOUT pages nothing out here";
  }
  EXPECT_LE(after, 512) << "resident KiB at most " << most << " (sum " << sum << ")";
  for (const auto& [name, t] : ts) {  // and the tensors read the same
    QTensor r = c.tensor(name);
    EXPECT_TRUE(std::equal(r.data().begin(), r.data().end(), t.data().begin(), t.data().end())) << name;
  }
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
