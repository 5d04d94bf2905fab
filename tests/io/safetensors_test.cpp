#include "candle/io/safetensors.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "candle/backend/cpu_storage.h"
#include "candle/candle.h"
#include "io/safetensors_internal.h"
#include "io_test_util.h"
#include "test_util.h"

using namespace candle;
using namespace candle::io_test;

namespace {

// A safetensors file from a header text and a data buffer.
std::vector<std::byte> st_file(const std::string& header, const std::vector<std::byte>& data = {}) {
  std::vector<std::byte> out(8);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = std::byte((n >> (8 * i)) & 0xff);
  std::vector<std::byte> h = to_bytes(header);
  out.insert(out.end(), h.begin(), h.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::vector<std::byte> from_u8(std::initializer_list<int> v) {
  std::vector<std::byte> out;
  for (int x : v) out.push_back(std::byte(x));
  return out;
}

const std::byte* data_ptr(const Tensor& t) {
  auto cpu = std::dynamic_pointer_cast<CpuStorage>(t.storage());
  return cpu->bytes() + t.layout().start_offset() * dtype_size(t.dtype());
}

std::string header_of(const std::vector<std::byte>& file) {
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(static_cast<uint8_t>(file[i])) << (8 * i);
  return std::string(reinterpret_cast<const char*>(file.data()) + 8, n);
}

}  // namespace

// candle-core/tests/serialization_tests.rs: safetensors
TEST(Safetensors, CandleSaveAndLoad) {
  TempDir dir;
  std::string p = dir.file("st");
  std::vector<float> v(24);
  for (int i = 0; i < 24; ++i) v[i] = static_cast<float>(i);
  Tensor t = Tensor::from_vec(v, {24}, Device::cpu());
  t.save_safetensors("t", p);
  auto st = safetensors::load(p, Device::cpu());
  ASSERT_EQ(st.count("t"), 1u);
  EXPECT_EQ(st.at("t").to_vec1<float>(), t.to_vec1<float>());
  auto from_bytes = safetensors::load_buffer(read_bytes(p), Device::cpu());
  EXPECT_EQ(from_bytes.at("t").to_vec1<float>(), t.to_vec1<float>());
}

// Byte vectors from the reference implementation's tests (safetensors/src/tensor.rs).
TEST(Safetensors, SerializeMatchesReferenceBytes) {
  Tensor attn = Tensor::from_vec(std::vector<float>{0, 1, 2, 3, 4, 5}, {1, 2, 3}, Device::cpu());
  EXPECT_EQ(
      safetensors::serialize({{"attn.0", attn}}),
      from_u8({64,  0,   0,   0,   0,   0,  0,  0,  123, 34, 97,  116, 116, 110, 46,  48,  34,  58,  123, 34,
               100, 116, 121, 112, 101, 34, 58, 34, 70,  51, 50,  34,  44,  34,  115, 104, 97,  112, 101, 34,
               58,  91,  49,  44,  50,  44, 51, 93, 44,  34, 100, 97,  116, 97,  95,  111, 102, 102, 115, 101,
               116, 115, 34,  58,  91,  48, 44, 50, 52,  93, 125, 125, 0,   0,   0,   0,   0,   0,   128, 63,
               0,   0,   0,   64,  0,   0,  64, 64, 0,   0,  128, 64,  0,   0,   160, 64}));
  EXPECT_EQ(safetensors::serialize({}), from_u8({8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32}));
  EXPECT_EQ(safetensors::serialize({}, {{"framework", "pt"}}),
            from_u8({40,  0,   0,   0,  0,  0,  0,   0,   123, 34,  95,  95,  109, 101, 116, 97,
                     100, 97,  116, 97, 95, 95, 34,  58,  123, 34,  102, 114, 97,  109, 101, 119,
                     111, 114, 107, 34, 58, 34, 112, 116, 34,  125, 125, 32,  32,  32,  32,  32}));
  // header padded with spaces so that the data is aligned
  Tensor attn0 = Tensor::from_vec(std::vector<float>{0, 1, 2, 3, 4, 5}, {1, 1, 2, 3}, Device::cpu());
  std::vector<std::byte> out = safetensors::serialize({{"attn0", attn0}});
  EXPECT_EQ(out.size(), 8u + 72u + 24u);
  EXPECT_EQ(header_of(out),
            "{\"attn0\":{\"dtype\":\"F32\",\"shape\":[1,1,2,3],\"data_offsets\":[0,24]}}       ");
}

TEST(Safetensors, RoundTripEveryDtypeBytesExact) {
  TempDir dir;
  std::unordered_map<std::string, Tensor> in;
  for (DType dt : kAllDTypes)
    in.emplace(std::string("t_") + std::string(dtype_name(dt)), sample_tensor(dt, {3, 1, 5}));
  in.emplace("scalar", Tensor::new_(1.5, Device::cpu()));
  in.emplace("empty", Tensor::zeros({0, 4}, DType::F32, Device::cpu()));
  std::string p = dir.file("all.safetensors");
  safetensors::save(in, p);
  EXPECT_EQ(read_bytes(p), safetensors::serialize(in));
  for (const auto& loaded :
       {safetensors::load(p, Device::cpu()), safetensors::load_buffer(read_bytes(p), Device::cpu())}) {
    ASSERT_EQ(loaded.size(), in.size());
    for (const auto& [name, t] : in) {
      const Tensor& r = loaded.at(name);
      EXPECT_EQ(r.dtype(), t.dtype()) << name;
      EXPECT_EQ(r.shape(), t.shape()) << name;
      EXPECT_EQ(tensor_bytes(r), tensor_bytes(t)) << name;
    }
  }
}

TEST(Safetensors, WritesByDescendingDtypeThenName) {
  auto dev = Device::cpu();
  std::vector<std::byte> out = safetensors::serialize({{"b", Tensor::zeros({1}, DType::U8, dev)},
                                                       {"a", Tensor::zeros({1}, DType::U8, dev)},
                                                       {"c", Tensor::zeros({1}, DType::F64, dev)},
                                                       {"d", Tensor::zeros({1}, DType::F16, dev)}},
                                                      {{"z", "1"}, {"y", "q\"\n"}});
  EXPECT_EQ(header_of(out),
            "{\"__metadata__\":{\"y\":\"q\\\"\\n\",\"z\":\"1\"},"
            "\"c\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},"
            "\"d\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[8,10]},"
            "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[10,11]},"
            "\"b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[11,12]}}   ");
}

TEST(Safetensors, StridedTensorsAreWrittenContiguously) {
  auto dev = Device::cpu();
  Tensor base = Tensor::from_vec(std::vector<int32_t>{1, 2, 3, 4, 5, 6}, {2, 3}, dev);
  Tensor row = Tensor::from_vec(std::vector<int32_t>{7, 8}, {1, 2}, dev);
  auto loaded = safetensors::load_buffer(
      safetensors::serialize({{"tr", test_util::view(base, base.layout().transpose(0, 1))},
                              {"off", test_util::offset_view(base)},
                              {"narrow", test_util::view(base, base.layout().narrow(1, 1, 2))},
                              {"bc", test_util::view(row, row.layout().broadcast_as({2, 2}))}}),
      dev);
  EXPECT_EQ(loaded.at("tr").to_vec2<int32_t>(), (std::vector<std::vector<int32_t>>{{1, 4}, {2, 5}, {3, 6}}));
  EXPECT_EQ(loaded.at("off").to_vec2<int32_t>(), (std::vector<std::vector<int32_t>>{{1, 2, 3}, {4, 5, 6}}));
  EXPECT_EQ(loaded.at("narrow").to_vec2<int32_t>(), (std::vector<std::vector<int32_t>>{{2, 3}, {5, 6}}));
  EXPECT_EQ(loaded.at("bc").to_vec2<int32_t>(), (std::vector<std::vector<int32_t>>{{7, 8}, {7, 8}}));
}

TEST(Safetensors, CpuLoadIsZeroCopy) {
  TempDir dir;
  std::string p = dir.file("z.safetensors");
  safetensors::save(
      {{"a", Tensor::from_vec(std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {10}, Device::cpu())},
       {"b", Tensor::new_({int64_t(1), int64_t(2)}, Device::cpu())}},
      p);
  auto r = safetensors::detail::load_mapped(p, Device::cpu());
  for (const auto& [name, t] : r.tensors) {
    EXPECT_TRUE(r.mapping->contains(data_ptr(t), t.elem_count() * dtype_size(t.dtype()))) << name;
  }
  EXPECT_EQ(r.tensors.at("b").to_vec1<int64_t>(), (std::vector<int64_t>{1, 2}));
}

TEST(Safetensors, MisalignedDataIsCopied) {
  // "u" (1 byte) first, then an f32 at buffer offset 1: not 4-byte aligned in the mapping
  TempDir dir;
  std::string p = dir.file("m.safetensors");
  std::string h =
      "{\"u\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
      "\"f\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[1,9]}}";
  h.append((8 - h.size() % 8) % 8, ' ');
  write_bytes(p, st_file(h, from_u8({9, 0, 0, 128, 63, 0, 0, 0, 64})));
  auto r = safetensors::detail::load_mapped(p, Device::cpu());
  EXPECT_EQ(r.tensors.at("f").to_vec1<float>(), (std::vector<float>{1.f, 2.f}));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(data_ptr(r.tensors.at("f"))) % 4, 0u);
  EXPECT_FALSE(r.mapping->contains(data_ptr(r.tensors.at("f")), 8));
  EXPECT_TRUE(r.mapping->contains(data_ptr(r.tensors.at("u")), 1));
  EXPECT_EQ(r.tensors.at("u").to_vec1<uint8_t>(), (std::vector<uint8_t>{9}));
}

TEST(Safetensors, TensorsOutliveTheLoaderAndTheFile) {
  TempDir dir;
  std::string p = dir.file("l.safetensors");
  Tensor::new_({3.f, 4.f}, Device::cpu()).save_safetensors("w", p);
  Tensor w;
  {
    auto all = safetensors::load(p, Device::cpu());
    w = all.at("w");
  }
  std::filesystem::remove(p);
  EXPECT_EQ(w.to_vec1<float>(), (std::vector<float>{3.f, 4.f}));
}

TEST(Safetensors, NumpyWrittenFixtureWithWidenedDtypes) {
  auto all = safetensors::load(data_path("mixed.safetensors"), Device::cpu());
  EXPECT_EQ(all.at("b").dtype(), DType::U8);
  EXPECT_EQ(all.at("b").to_vec1<uint8_t>(), (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(all.at("i8").dtype(), DType::I16);
  EXPECT_EQ(all.at("i8").to_vec2<int16_t>(), (std::vector<std::vector<int16_t>>{{-128, -1}, {0, 127}}));
  EXPECT_EQ(all.at("u16").dtype(), DType::U32);
  EXPECT_EQ(all.at("u16").to_vec1<uint32_t>(), (std::vector<uint32_t>{0, 1, 65535}));
  EXPECT_EQ(all.at("bf").dtype(), DType::BF16);
  EXPECT_EQ(all.at("bf").to_dtype(DType::F32).to_vec1<float>(), (std::vector<float>{1.0f, -2.5f}));
  EXPECT_EQ(all.at("w").to_vec2<float>(), (std::vector<std::vector<float>>{{0, 1, 2}, {3, 4, 5}}));
}

TEST(Safetensors, MmapedLazyAccess) {
  safetensors::MmapedSafetensors st(data_path("mixed.safetensors"));
  EXPECT_EQ(st.names(), (std::vector<std::string>{"b", "bf", "i8", "u16", "w"}));
  EXPECT_TRUE(st.contains("w"));
  EXPECT_FALSE(st.contains("nope"));
  EXPECT_EQ(st.metadata(), (std::map<std::string, std::string>{{"format", "pt"}, {"note", "fixture"}}));
  auto [dt, shape] = st.info("i8");
  EXPECT_EQ(dt, DType::I16);
  EXPECT_EQ(shape, Shape({2, 2}));
  Tensor w = st.load("w", Device::cpu());  // at buffer offset 17: misaligned, copied
  EXPECT_EQ(w.to_vec2<float>(), (std::vector<std::vector<float>>{{0, 1, 2}, {3, 4, 5}}));
  Tensor b1 = st.load("b", Device::cpu());
  Tensor b2 = st.load("b", Device::cpu());
  EXPECT_EQ(b1.to_vec1<uint8_t>(), (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(data_ptr(b1), data_ptr(b2));  // both views of the one mapping
  Error e = expect_error([&] { st.load("nope", Device::cpu()); });
  EXPECT_TRUE(contains(e.what(), "'nope'") && contains(e.what(), "mixed.safetensors")) << e.what();
  expect_error([&] { st.info("nope"); });
}

// release() lets the mapping's pages go: views of them read the same, from the file again
TEST(Safetensors, MmapedReleaseKeepsTheViews) {
  safetensors::MmapedSafetensors st(data_path("mixed.safetensors"));
  Tensor b = st.load("b", Device::cpu());
  for (const std::string& name : st.names()) st.release(name);
  EXPECT_EQ(b.to_vec1<uint8_t>(), (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(st.load("w", Device::cpu()).to_vec2<float>(),
            (std::vector<std::vector<float>>{{0, 1, 2}, {3, 4, 5}}));
  Error e = expect_error([&] { st.release("nope"); });
  EXPECT_TRUE(contains(e.what(), "'nope'")) << e.what();
}

TEST(Safetensors, MmapedShards) {
  TempDir dir;
  auto dev = Device::cpu();
  safetensors::save({{"a", Tensor::new_({1.f}, dev)}}, dir.file("s1.safetensors"), {{"k", "first"}});
  safetensors::save({{"b", Tensor::new_({int64_t(2)}, dev)}}, dir.file("s2.safetensors"),
                    {{"k", "second"}, {"x", "y"}});
  safetensors::MmapedSafetensors st({dir.file("s1.safetensors"), dir.file("s2.safetensors")});
  EXPECT_EQ(st.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(st.load("a", dev).to_vec1<float>(), (std::vector<float>{1.f}));
  EXPECT_EQ(st.load("b", dev).to_vec1<int64_t>(), (std::vector<int64_t>{2}));
  EXPECT_EQ(st.metadata(), (std::map<std::string, std::string>{{"k", "first"}, {"x", "y"}}));
  // the same name in two shards is an error naming both files
  Error e = expect_error([&] {
    safetensors::MmapedSafetensors({dir.file("s1.safetensors"), dir.file("s1.safetensors")});
  });
  EXPECT_TRUE(contains(e.what(), "'a'") && contains(e.what(), "s1.safetensors")) << e.what();
}

TEST(Safetensors, SaveReplacesExistingFileWholeAndLeavesNoTemporary) {
  TempDir dir;
  std::string p = dir.file("x.safetensors");
  write_bytes(p, std::vector<std::byte>(10000, std::byte{0x5a}));
  Tensor t = Tensor::new_({1.f, 2.f}, Device::cpu());
  t.save_safetensors("t", p);
  EXPECT_EQ(read_bytes(p), safetensors::serialize({{"t", t}}));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"x.safetensors"});
}

TEST(Safetensors, FailedSaveLeavesNothing) {
  TempDir dir;
  std::string p = dir.file("keep.safetensors");
  Tensor t = Tensor::new_({1.f, 2.f}, Device::cpu());
  t.save_safetensors("t", p);
  std::vector<std::byte> before = read_bytes(p);
  // a name that is not UTF-8 fails after the temporary file was created
  Error e = expect_error([&] { safetensors::save({{"ok", t}, {std::string("\xff\xfe"), t}}, p); });
  EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
  EXPECT_TRUE(contains(e.what(), p)) << e.what();
  EXPECT_EQ(read_bytes(p), before);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"keep.safetensors"});
  Error io = expect_error([&] { t.save_safetensors("t", dir.file("no/such/dir/x.safetensors")); });
  EXPECT_EQ(io.kind(), ErrorKind::Io);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"keep.safetensors"});
}

// ---- hostile files -------------------------------------------------------------------------

namespace {
// Loads `file` from a real path and returns the error, checking that it names the path.
Error load_error(const std::vector<std::byte>& file) {
  TempDir dir;
  std::string p = dir.file("bad.safetensors");
  write_bytes(p, file);
  Error e = expect_error([&] { safetensors::load(p, Device::cpu()); });
  EXPECT_TRUE(contains(e.what(), p)) << e.what();
  expect_error([&] { safetensors::MmapedSafetensors m(p); });
  expect_error([&] { safetensors::load_buffer(file, Device::cpu()); });
  return e;
}
}  // namespace

TEST(Safetensors, EveryTruncatedPrefixThrows) {
  std::vector<std::byte> full = safetensors::serialize(
      {{"a", Tensor::new_({1.f, 2.f}, Device::cpu())}, {"b", Tensor::new_({int16_t(3)}, Device::cpu())}});
  TempDir dir;
  std::string p = dir.file("cut.safetensors");
  for (size_t n = 0; n < full.size(); ++n) {
    std::vector<std::byte> cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    write_bytes(p, cut);
    Error e = expect_error([&] { safetensors::load(p, Device::cpu()); });
    EXPECT_EQ(e.kind(), ErrorKind::Parse) << n;
    EXPECT_TRUE(contains(e.what(), p)) << e.what();
    expect_error([&] { safetensors::load_buffer(cut, Device::cpu()); });
  }
}

TEST(Safetensors, HeaderLengthBeyondTheFile) {
  std::vector<std::byte> f = st_file("{}      ");
  f[0] = std::byte{200};
  Error e = load_error(f);
  EXPECT_EQ(e.kind(), ErrorKind::Parse);
  EXPECT_TRUE(contains(e.what(), "header length 200")) << e.what();
  f[0] = std::byte{0};
  f[7] = std::byte{0xff};  // ~2^63
  EXPECT_EQ(load_error(f).kind(), ErrorKind::Parse);
}

TEST(Safetensors, InvalidJson) {
  EXPECT_TRUE(contains(load_error(st_file("{\"a\":")).what(), "invalid JSON"));
  EXPECT_TRUE(contains(load_error(st_file("[1, 2]  ")).what(), "not a JSON object"));
  EXPECT_EQ(load_error(st_file("{\"a\":\"\xff\"}")).kind(), ErrorKind::Parse);  // invalid UTF-8
  EXPECT_EQ(load_error(st_file(std::string(2000, '[') + std::string(2000, ']'))).kind(), ErrorKind::Parse);
}

TEST(Safetensors, MissingOrMistypedFieldsNameTheTensor) {
  const char* headers[] = {
      "{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}",
      "{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}",
      "{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}",
      "{\"w\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}",
      "{\"w\":{\"dtype\":\"F32\",\"shape\":1,\"data_offsets\":[0,4]}}",
      "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}",
      "{\"w\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}",
      "{\"w\":[1,2]}",
  };
  for (const char* h : headers) {
    Error e = load_error(st_file(h, std::vector<std::byte>(4)));
    EXPECT_EQ(e.kind(), ErrorKind::Parse) << h;
    EXPECT_TRUE(contains(e.what(), "tensor 'w'")) << e.what();
  }
}

TEST(Safetensors, UnknownAndUnsupportedDtypes) {
  Error unknown = load_error(st_file("{\"w\":{\"dtype\":\"F128\",\"shape\":[1],\"data_offsets\":[0,16]}}",
                                     std::vector<std::byte>(16)));
  EXPECT_EQ(unknown.kind(), ErrorKind::Parse);
  EXPECT_TRUE(contains(unknown.what(), "F128") && contains(unknown.what(), "tensor 'w'")) << unknown.what();
  Error u64 = load_error(
      st_file("{\"w\":{\"dtype\":\"U64\",\"shape\":[1],\"data_offsets\":[0,8]}}", std::vector<std::byte>(8)));
  EXPECT_EQ(u64.kind(), ErrorKind::UnsupportedOp);
  EXPECT_TRUE(contains(u64.what(), "U64") && contains(u64.what(), "tensor 'w'")) << u64.what();
}

TEST(Safetensors, OffsetsMustMatchShapeAndBuffer) {
  std::vector<std::byte> data(24);
  const char* headers[] = {
      "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}",    // size mismatch
      "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[4,28]}}",    // past the buffer
      "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[24,0]}}",    // reversed
      "{\"w\":{\"dtype\":\"F32\",\"shape\":[-2,3],\"data_offsets\":[0,24]}}",   // negative dim
      "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[-4,20]}}",   // negative offset
      "{\"w\":{\"dtype\":\"F32\",\"shape\":[2.5,3],\"data_offsets\":[0,24]}}",  // not an integer
      "{\"w\":{\"dtype\":\"F32\",\"shape\":[1e30],\"data_offsets\":[0,24]}}",
      "{\"w\":{\"dtype\":\"F32\",\"shape\":[18446744073709551615,2],\"data_offsets\":[0,24]}}",  // overflow
      "{\"w\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],\"data_offsets\":[0,0]}}",  // bytes overflow
      "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,18446744073709551616]}}",
  };
  for (const char* h : headers) {
    Error e = load_error(st_file(h, data));
    EXPECT_EQ(e.kind(), ErrorKind::Parse) << h;
    EXPECT_TRUE(contains(e.what(), "tensor 'w'")) << h << " -> " << e.what();
  }
}

TEST(Safetensors, DuplicateNamesAreRejected) {
  Error e =
      load_error(st_file("{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},\"w\":{\"dtype\":"
                         "\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
                         std::vector<std::byte>(2)));
  EXPECT_EQ(e.kind(), ErrorKind::Parse);
  EXPECT_TRUE(contains(e.what(), "'w' appears twice")) << e.what();
}

TEST(Safetensors, BadMetadataIsRejected) {
  EXPECT_TRUE(contains(load_error(st_file("{\"__metadata__\":{\"a\":1}}")).what(), "__metadata__"));
  EXPECT_TRUE(contains(load_error(st_file("{\"__metadata__\":[]}")).what(), "__metadata__"));
}

TEST(Safetensors, OverlappingTensorsAreRejectedGapsAllowed) {
  // As the reference implementation: no two tensors may share bytes (an alias in a crafted
  // file); a gap between tensors is allowed here.
  std::vector<std::byte> data = from_u8({0, 0, 128, 63, 0, 0, 0, 64, 7, 7, 7, 7, 0, 0, 64, 64});
  Error e = expect_error([&] {
    safetensors::load_buffer(st_file("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                                     "\"y\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                                     data),
                             Device::cpu());
  });
  EXPECT_EQ(e.kind(), ErrorKind::Parse);
  EXPECT_TRUE(contains(e.what(), "tensors 'x' [0, 8) and 'y' [4, 8) overlap")) << e.what();
  auto all =
      safetensors::load_buffer(st_file("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                                       "\"y\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[12,16]}}",
                                       data),
                               Device::cpu());
  EXPECT_EQ(all.at("x").to_vec1<float>(), (std::vector<float>{1.f, 2.f}));
  EXPECT_EQ(all.at("y").to_vec1<float>(), (std::vector<float>{3.f}));
}

TEST(Safetensors, EverySingleByteCorruptionIsHandled) {
  std::vector<std::byte> good = read_bytes(data_path("mixed.safetensors"));
  size_t header_end = 8 + header_of(good).size();
  for (size_t at = 0; at < header_end; ++at) {
    for (int v : {0x00, 0x22, 0x2c, 0x30, 0x39, 0x5b, 0x5d, 0x7b, 0x7d, 0xff}) {
      std::vector<std::byte> b = good;
      b[at] = std::byte(v);
      expect_no_crash([&] { safetensors::load_buffer(b, Device::cpu()); }, "byte " + std::to_string(at));
    }
  }
}
