#include "candle/io/npy.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "candle/candle.h"
#include "io_test_util.h"
#include "test_util.h"

using namespace candle;
using namespace candle::io_test;

namespace {
std::vector<double> as_f64(const Tensor& t) { return t.to_dtype(DType::F64).flatten_to_vec<double>(); }
}  // namespace

// candle-core/tests/serialization_tests.rs: npy
TEST(Npy, CandleTestFile) {
  Tensor t = npy::read_npy(data_path("test.npy"), Device::cpu());
  EXPECT_EQ(t.dtype(), DType::I64);
  EXPECT_EQ(t.to_dtype(DType::U8).to_vec1<uint8_t>(), (std::vector<uint8_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(Npy, ReadsEveryDtypeInCOrder) {
  const std::pair<const char*, DType> files[] = {
      {"c_u1.npy", DType::U8},  {"c_u4.npy", DType::U32}, {"c_i2.npy", DType::I16}, {"c_i4.npy", DType::I32},
      {"c_i8.npy", DType::I64}, {"c_f2.npy", DType::F16}, {"c_f4.npy", DType::F32}, {"c_f8.npy", DType::F64}};
  for (const auto& [name, dt] : files) {
    Tensor t = npy::read_npy(data_path(name), Device::cpu());
    EXPECT_EQ(t.dtype(), dt) << name;
    EXPECT_EQ(t.shape(), Shape({2, 3})) << name;
    EXPECT_EQ(as_f64(t), (std::vector<double>{0, 1, 2, 3, 4, 5})) << name;
  }
}

TEST(Npy, WriterMatchesNumpyByteForByte) {
  const std::pair<const char*, DType> files[] = {
      {"c_u1.npy", DType::U8},  {"c_u4.npy", DType::U32}, {"c_i2.npy", DType::I16}, {"c_i4.npy", DType::I32},
      {"c_i8.npy", DType::I64}, {"c_f2.npy", DType::F16}, {"c_f4.npy", DType::F32}, {"c_f8.npy", DType::F64}};
  for (const auto& [name, dt] : files) {
    Tensor t = Tensor::from_vec(std::vector<double>{0, 1, 2, 3, 4, 5}, {2, 3}, Device::cpu()).to_dtype(dt);
    EXPECT_EQ(npy::npy_bytes(t), read_bytes(data_path(name))) << name;
  }
  EXPECT_EQ(npy::npy_bytes(Tensor::new_(2.5, Device::cpu())), read_bytes(data_path("c_scalar_f64.npy")));
  EXPECT_EQ(npy::npy_bytes(Tensor::zeros({0, 3}, DType::F32, Device::cpu())),
            read_bytes(data_path("c_empty_f32.npy")));
}

TEST(Npy, ScalarAndEmptyArrays) {
  Tensor s = npy::read_npy(data_path("c_scalar_f64.npy"), Device::cpu());
  EXPECT_EQ(s.rank(), 0u);
  EXPECT_EQ(s.to_scalar<double>(), 2.5);
  Tensor e = npy::read_npy(data_path("c_empty_f32.npy"), Device::cpu());
  EXPECT_EQ(e.shape(), Shape({0, 3}));
  EXPECT_EQ(e.dtype(), DType::F32);
}

TEST(Npy, RoundTripEveryWritableDtypeBytesExact) {
  TempDir dir;
  for (DType dt :
       {DType::U8, DType::U32, DType::I16, DType::I32, DType::I64, DType::F16, DType::F32, DType::F64}) {
    Tensor t = sample_tensor(dt, {3, 5});
    std::string p = dir.file("t.npy");
    npy::write_npy(t, p);
    Tensor r = npy::read_npy(p, Device::cpu());
    EXPECT_EQ(r.dtype(), dt);
    EXPECT_EQ(r.shape(), Shape({3, 5}));
    EXPECT_EQ(tensor_bytes(r), tensor_bytes(t)) << dtype_name(dt);
    // the in-memory forms agree with the file
    EXPECT_EQ(npy::npy_bytes(t), read_bytes(p));
    EXPECT_EQ(tensor_bytes(npy::read_npy_buffer(npy::npy_bytes(t), Device::cpu())), tensor_bytes(t));
  }
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"t.npy"});
}

TEST(Npy, WritesStridedTensorsInCOrder) {
  Tensor base = Tensor::from_vec(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}, Device::cpu());
  Tensor tr = test_util::view(base, base.layout().transpose(0, 1));  // [3, 2]
  Tensor r = npy::read_npy_buffer(npy::npy_bytes(tr), Device::cpu());
  EXPECT_EQ(r.to_vec2<float>(), (std::vector<std::vector<float>>{{1, 4}, {2, 5}, {3, 6}}));
  Tensor off = test_util::offset_view(base);
  EXPECT_EQ(npy::read_npy_buffer(npy::npy_bytes(off), Device::cpu()).to_vec2<float>(),
            (std::vector<std::vector<float>>{{1, 2, 3}, {4, 5, 6}}));
  Tensor row = Tensor::from_vec(std::vector<float>{7, 8}, {1, 2}, Device::cpu());
  Tensor bc = test_util::view(row, row.layout().broadcast_as({3, 2}));
  EXPECT_EQ(npy::read_npy_buffer(npy::npy_bytes(bc), Device::cpu()).to_vec2<float>(),
            (std::vector<std::vector<float>>{{7, 8}, {7, 8}, {7, 8}}));
}

TEST(Npy, WritingBf16OrF8IsUnsupported) {
  TempDir dir;
  for (DType dt : {DType::BF16, DType::F8E4M3}) {
    Error e = expect_error([&] { npy::write_npy(Tensor::zeros({2}, dt, Device::cpu()), dir.file("x.npy")); });
    EXPECT_EQ(e.kind(), ErrorKind::UnsupportedOp);
    EXPECT_TRUE(contains(e.what(), std::string(dtype_name(dt)))) << e.what();
  }
  EXPECT_TRUE(dir.entries().empty());  // no file, no temporary
}

TEST(Npy, FortranOrderIsTransposedToRowMajor) {
  Tensor t = npy::read_npy(data_path("fortran_f32.npy"), Device::cpu());
  EXPECT_EQ(t.shape(), Shape({2, 3, 4}));
  EXPECT_TRUE(t.is_contiguous());
  std::vector<float> want(24);
  for (int i = 0; i < 24; ++i) want[i] = static_cast<float>(i);
  EXPECT_EQ(t.flatten_to_vec<float>(), want);
  Tensor s = npy::read_npy(data_path("fortran_i16.npy"), Device::cpu());
  EXPECT_EQ(s.to_vec2<int16_t>(), (std::vector<std::vector<int16_t>>{{0, 1, 2}, {3, 4, 5}}));
}

TEST(Npy, BigEndianIsByteSwapped) {
  EXPECT_EQ(npy::read_npy(data_path("be_f32.npy"), Device::cpu()).to_vec1<float>(),
            (std::vector<float>{1.5f, -2.0f, 3.25f}));
  EXPECT_EQ(npy::read_npy(data_path("be_i64.npy"), Device::cpu()).to_vec2<int64_t>(),
            (std::vector<std::vector<int64_t>>{{1, -2}, {300000000000, 4}}));
  Tensor h = npy::read_npy(data_path("be_f16.npy"), Device::cpu());
  EXPECT_EQ(h.dtype(), DType::F16);
  EXPECT_EQ(as_f64(h), (std::vector<double>{0.5, -1.0}));
  Tensor u = npy::read_npy(data_path("be_u2.npy"), Device::cpu());
  EXPECT_EQ(u.dtype(), DType::U32);
  EXPECT_EQ(u.to_vec1<uint32_t>(), (std::vector<uint32_t>{1, 65535}));
}

TEST(Npy, BoolBecomesU8) {
  Tensor t = npy::read_npy(data_path("bool.npy"), Device::cpu());
  EXPECT_EQ(t.dtype(), DType::U8);
  EXPECT_EQ(t.to_vec1<uint8_t>(), (std::vector<uint8_t>{1, 0, 1, 1}));
}

TEST(Npy, Int8IsWidenedToI16AndUint16ToU32) {
  Tensor t = npy::read_npy(data_path("i1.npy"), Device::cpu());
  EXPECT_EQ(t.dtype(), DType::I16);
  EXPECT_EQ(t.to_vec1<int16_t>(), (std::vector<int16_t>{-128, -1, 0, 127}));
  Tensor u = npy::read_npy(data_path("u2.npy"), Device::cpu());
  EXPECT_EQ(u.dtype(), DType::U32);
  EXPECT_EQ(u.to_vec1<uint32_t>(), (std::vector<uint32_t>{0, 1, 65535}));
}

TEST(Npy, FormatVersions2And3) {
  for (const char* name : {"v2_f32.npy", "v3_f32.npy"}) {
    EXPECT_EQ(npy::read_npy(data_path(name), Device::cpu()).to_vec1<float>(), (std::vector<float>{1, 2}))
        << name;
  }
}

TEST(Npy, UnsupportedDescrNamesFileAndDescr) {
  for (auto [name, descr] :
       {std::pair{"unsupported_u8.npy", "<u8"}, std::pair{"unsupported_c8.npy", "<c8"}}) {
    Error e = expect_error([file = name] { npy::read_npy(data_path(file), Device::cpu()); });
    EXPECT_EQ(e.kind(), ErrorKind::UnsupportedOp);
    EXPECT_TRUE(contains(e.what(), name)) << e.what();
    EXPECT_TRUE(contains(e.what(), descr)) << e.what();
  }
}

TEST(Npy, EveryTruncatedPrefixThrows) {
  std::vector<std::byte> full = read_bytes(data_path("c_f4.npy"));
  TempDir dir;
  std::string p = dir.file("cut.npy");
  for (size_t n = 0; n < full.size(); ++n) {
    std::vector<std::byte> cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    Error e = expect_error([&] { npy::read_npy_buffer(cut, Device::cpu()); });
    EXPECT_EQ(e.kind(), ErrorKind::Parse) << n;
    write_bytes(p, cut);
    Error f = expect_error([&] { npy::read_npy(p, Device::cpu()); });
    EXPECT_TRUE(contains(f.what(), p)) << f.what();
  }
}

TEST(Npy, CorruptedHeaders) {
  std::vector<std::byte> good = read_bytes(data_path("c_f4.npy"));
  auto with = [&](size_t at, const std::string& s) {
    std::vector<std::byte> b = good;
    std::memcpy(b.data() + at, s.data(), s.size());
    return b;
  };
  auto kind_of = [](const std::vector<std::byte>& b) {
    return expect_error([&] { npy::read_npy_buffer(b, Device::cpu()); }).kind();
  };
  EXPECT_EQ(kind_of(with(1, "NUMPX")), ErrorKind::Parse);                      // magic
  EXPECT_EQ(kind_of(with(6, "\x04")), ErrorKind::Parse);                       // version 4.0
  EXPECT_EQ(kind_of(with(8, "\xff\xff")), ErrorKind::Parse);                   // header length past the end
  EXPECT_EQ(kind_of(with(10, "[")), ErrorKind::Parse);                         // not a dict
  EXPECT_EQ(kind_of(with(21, "<q4")), ErrorKind::UnsupportedOp);               // 'descr': '<q4'
  EXPECT_EQ(kind_of(with(44, "Maybe")), ErrorKind::Parse);                     // fortran_order
  EXPECT_EQ(kind_of(with(61, "9")), ErrorKind::Parse);                         // shape (9, 3): data too short
  EXPECT_EQ(kind_of(with(60, "(99999999999999999999999")), ErrorKind::Parse);  // overflowing dim
  // the header as numpy writes it, for the offsets above
  std::string header(reinterpret_cast<const char*>(good.data()) + 10, 60);
  EXPECT_EQ(header.substr(0, 60), "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } ");
  // every single-byte change in the header gives an Error or a valid tensor, never a crash
  for (size_t at = 0; at < 128; ++at) {
    for (int v : {0x00, 0x20, 0x27, 0x28, 0x29, 0x2c, 0x39, 0x7b, 0x7d, 0xff}) {
      std::vector<std::byte> b = good;
      b[at] = std::byte(v);
      expect_no_crash([&] { npy::read_npy_buffer(b, Device::cpu()); }, "byte " + std::to_string(at));
    }
  }
}

TEST(Npy, MissingFileIsIoError) {
  Error e = expect_error([&] { npy::read_npy("/nonexistent/dir/x.npy", Device::cpu()); });
  EXPECT_EQ(e.kind(), ErrorKind::Io);
  EXPECT_TRUE(contains(e.what(), "/nonexistent/dir/x.npy")) << e.what();
}
