#include <gtest/gtest.h>

#include <cstdlib>

#include "candle/candle.h"
#include "candle/io/npy.h"
#include "io/zip.h"
#include "io_test_util.h"

using namespace candle;
using namespace candle::io_test;

namespace {

uint16_t get16(const std::vector<std::byte>& b, size_t at) {
  return static_cast<uint16_t>(uint16_t(b[at]) | uint16_t(b[at + 1]) << 8);
}
uint32_t get32(const std::vector<std::byte>& b, size_t at) {
  return get16(b, at) | uint32_t(get16(b, at + 2)) << 16;
}
void set16(std::vector<std::byte>& b, size_t at, uint16_t v) {
  b[at] = std::byte(v & 0xff);
  b[at + 1] = std::byte(v >> 8);
}
void set32(std::vector<std::byte>& b, size_t at, uint32_t v) {
  set16(b, at, static_cast<uint16_t>(v));
  set16(b, at + 2, static_cast<uint16_t>(v >> 16));
}
// Offset of the end-of-central-directory record (archives without a comment).
size_t end_record(const std::vector<std::byte>& b) { return b.size() - 22; }
size_t central_dir(const std::vector<std::byte>& b) { return get32(b, end_record(b) + 16); }

}  // namespace

// candle-core/tests/serialization_tests.rs: npz
TEST(Npz, CandleTestFile) {
  auto npz = npy::read_npz(data_path("test.npz"), Device::cpu());
  ASSERT_EQ(npz.size(), 2u);
  EXPECT_EQ(npz[0].first, "x");
  EXPECT_EQ(npz[1].first, "x_plus_one");
  EXPECT_EQ(npz[1].second.to_dtype(DType::U8).to_vec1<uint8_t>(),
            (std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
}

TEST(Npz, ReadsNumpySavez) {
  // numpy.savez writes ZIP64 extra fields in the local headers
  auto npz = npy::read_npz(data_path("stored.npz"), Device::cpu());
  ASSERT_EQ(npz.size(), 2u);
  EXPECT_EQ(npz[0].first, "a");
  EXPECT_EQ(npz[0].second.to_vec2<float>(), (std::vector<std::vector<float>>{{0, 1, 2}, {3, 4, 5}}));
  EXPECT_EQ(npz[1].first, "b");
  EXPECT_EQ(npz[1].second.to_vec1<int32_t>(), (std::vector<int32_t>{7, 8}));
}

TEST(Npz, ReadsNumpySavezCompressed) {
  auto npz = npy::read_npz(data_path("compressed.npz"), Device::cpu());
  ASSERT_EQ(npz.size(), 3u);
  EXPECT_EQ(npz[0].first, "a");
  EXPECT_EQ(npz[0].second.shape(), Shape({10, 10}));
  std::vector<double> want(100);
  for (int i = 0; i < 100; ++i) want[i] = i;
  EXPECT_EQ(npz[0].second.flatten_to_vec<double>(), want);
  EXPECT_EQ(npz[1].first, "flags");
  EXPECT_EQ(npz[1].second.to_vec1<uint8_t>(), (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(npz[2].first, "f");  // Fortran order inside a deflated member
  EXPECT_EQ(npz[2].second.to_vec2<int64_t>(), (std::vector<std::vector<int64_t>>{{0, 1, 2}, {3, 4, 5}}));
}

TEST(Npz, ReadByName) {
  Tensor a = npy::read_npz_by_name(data_path("compressed.npz"), "flags", Device::cpu());
  EXPECT_EQ(a.to_vec1<uint8_t>(), (std::vector<uint8_t>{1, 0}));
  Tensor b = npy::read_npz_by_name(data_path("stored.npz"), "b.npy", Device::cpu());
  EXPECT_EQ(b.to_vec1<int32_t>(), (std::vector<int32_t>{7, 8}));
  Error e = expect_error([&] { npy::read_npz_by_name(data_path("stored.npz"), "zz", Device::cpu()); });
  EXPECT_TRUE(contains(e.what(), "stored.npz") && contains(e.what(), "'zz'")) << e.what();
}

TEST(Npz, RoundTripEveryWritableDtypeInOrder) {
  TempDir dir;
  std::vector<std::pair<std::string, Tensor>> in;
  for (DType dt :
       {DType::U8, DType::U32, DType::I16, DType::I32, DType::I64, DType::F16, DType::F32, DType::F64}) {
    in.emplace_back(std::string("z_") + std::string(dtype_name(dt)), sample_tensor(dt, {2, 7}));
  }
  in.emplace_back("scalar", Tensor::new_(3.0f, Device::cpu()));
  std::string p = dir.file("all.npz");
  npy::write_npz(in, p);
  auto out = npy::read_npz(p, Device::cpu());
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[i].first, in[i].first);
    EXPECT_EQ(out[i].second.dtype(), in[i].second.dtype());
    EXPECT_EQ(out[i].second.shape(), in[i].second.shape());
    EXPECT_EQ(tensor_bytes(out[i].second), tensor_bytes(in[i].second)) << in[i].first;
  }
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"all.npz"});
}

TEST(Npz, WrittenArchiveIsStoredWithCorrectCrcs) {
  TempDir dir;
  std::string p = dir.file("w.npz");
  npy::write_npz(
      {{"x", Tensor::new_({1.f, 2.f}, Device::cpu())}, {"y", Tensor::new_({int64_t(3)}, Device::cpu())}}, p);
  std::vector<std::byte> bytes = read_bytes(p);
  io::zip::Reader zip(bytes, "npz file '" + p + "'");
  ASSERT_EQ(zip.entries().size(), 2u);
  EXPECT_EQ(zip.entries()[0].name, "x.npy");
  EXPECT_EQ(zip.entries()[1].name, "y.npy");
  std::vector<std::byte> scratch;
  for (const auto& e : zip.entries()) {
    EXPECT_EQ(e.method, 0);
    EXPECT_EQ(e.size, e.compressed_size);
    zip.read(e, scratch);  // checks the CRC
  }
  std::vector<std::byte> x = npy::npy_bytes(Tensor::new_({1.f, 2.f}, Device::cpu()));
  auto got = zip.read(zip.entries()[0], scratch);
  EXPECT_EQ(std::vector<std::byte>(got.begin(), got.end()), x);
}

TEST(Npz, WrittenArchiveReadableByNumpy) {
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "/usr/bin/python3 with numpy is not available";
  }
  TempDir dir;
  std::string p = dir.file("n.npz");
  npy::write_npz({{"a", Tensor::from_vec(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}, Device::cpu())},
                  {"b", Tensor::new_({int16_t(-7), int16_t(9)}, Device::cpu())}},
                 p);
  std::string cmd =
      "/usr/bin/python3 -c \"import numpy as np, sys; z = np.load(sys.argv[1]); "
      "assert sorted(z.files) == ['a', 'b']; "
      "assert z['a'].dtype == np.float32 and z['a'].tolist() == [[1, 2, 3], [4, 5, 6]]; "
      "assert z['b'].dtype == np.int16 and z['b'].tolist() == [-7, 9]\" " +
      p;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

TEST(Npz, DuplicateNamesAreRejected) {
  TempDir dir;
  Tensor t = Tensor::new_({1.f}, Device::cpu());
  Error e = expect_error([&] { npy::write_npz({{"a", t}, {"a", t}}, dir.file("d.npz")); });
  EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
  EXPECT_TRUE(dir.entries().empty());
}

TEST(Npz, WrongCrcNamesFileAndMember) {
  TempDir dir;
  std::vector<std::byte> b = read_bytes(data_path("stored.npz"));
  size_t cd = central_dir(b);
  // flip the last data byte of the first member ("a.npy"), just before its successor's local header
  size_t second_local = get32(b, cd + 46 + get16(b, cd + 28) + get16(b, cd + 30) + get16(b, cd + 32) + 42);
  b[second_local - 1] ^= std::byte{0x01};
  std::string p = dir.file("bad.npz");
  write_bytes(p, b);
  Error e = expect_error([&] { npy::read_npz(p, Device::cpu()); });
  EXPECT_EQ(e.kind(), ErrorKind::Parse);
  EXPECT_TRUE(contains(e.what(), "CRC")) << e.what();
  EXPECT_TRUE(contains(e.what(), p)) << e.what();
  EXPECT_TRUE(contains(e.what(), "a.npy")) << e.what();
  // the other member still reads
  EXPECT_EQ(npy::read_npz_by_name(p, "b", Device::cpu()).to_vec1<int32_t>(), (std::vector<int32_t>{7, 8}));
}

TEST(Npz, CorruptDeflateData) {
  TempDir dir;
  std::vector<std::byte> b = read_bytes(data_path("compressed.npz"));
  size_t first_data = 30 + get16(b, 26) + get16(b, 28);
  for (size_t k = 0; k < 16; ++k) b[first_data + k] = std::byte{0xff};
  std::string p = dir.file("bad.npz");
  write_bytes(p, b);
  Error e = expect_error([&] { npy::read_npz(p, Device::cpu()); });
  EXPECT_EQ(e.kind(), ErrorKind::Parse);
  EXPECT_TRUE(contains(e.what(), p) && contains(e.what(), "a.npy")) << e.what();
}

TEST(Npz, ImpossibleInflatedSizeIsRejected) {
  TempDir dir;
  std::vector<std::byte> b = read_bytes(data_path("compressed.npz"));
  set32(b, central_dir(b) + 24, 0xfffffff0u);  // declared size of "a.npy"
  std::string p = dir.file("bomb.npz");
  write_bytes(p, b);
  Error e = expect_error([&] { npy::read_npz(p, Device::cpu()); });
  EXPECT_TRUE(contains(e.what(), "declared size")) << e.what();
}

TEST(Npz, UnsupportedMethodAndZip64) {
  TempDir dir;
  std::vector<std::byte> b = read_bytes(data_path("test.npz"));
  std::vector<std::byte> m = b;
  set16(m, central_dir(m) + 10, 12);  // bzip2
  std::string p = dir.file("m.npz");
  write_bytes(p, m);
  Error e = expect_error([&] { npy::read_npz(p, Device::cpu()); });
  EXPECT_EQ(e.kind(), ErrorKind::UnsupportedOp);
  EXPECT_TRUE(contains(e.what(), "compression method 12") && contains(e.what(), p)) << e.what();

  std::vector<std::byte> z = b;
  set16(z, end_record(z) + 8, 0xffff);
  set16(z, end_record(z) + 10, 0xffff);
  write_bytes(p, z);
  Error e64 = expect_error([&] { npy::read_npz(p, Device::cpu()); });
  EXPECT_EQ(e64.kind(), ErrorKind::Parse);
  EXPECT_TRUE(contains(e64.what(), "asks for ZIP64 values, but there is no ZIP64 locator")) << e64.what();
}

TEST(Npz, Zip64EndOfCentralDirectoryIsRead) {
  // test.npz with a ZIP64 end record and locator before its end record, whose counts and
  // offsets say "see ZIP64" (as writers do past 65535 members or 4 GiB)
  TempDir dir;
  std::vector<std::byte> b = read_bytes(data_path("test.npz"));
  const size_t eocd = end_record(b);
  auto rd = [&](size_t at, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t(static_cast<uint8_t>(b[at + i])) << (8 * i);
    return v;
  };
  const uint64_t count = rd(eocd + 10, 2), cd_size = rd(eocd + 12, 4), cd_offset = rd(eocd + 16, 4);
  std::vector<std::byte> z(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(eocd));
  auto put = [&](uint64_t v, int n) {
    for (int i = 0; i < n; ++i) z.push_back(std::byte((v >> (8 * i)) & 0xff));
  };
  const uint64_t z64_at = z.size();
  put(0x06064b50, 4), put(44, 8), put(45, 2), put(45, 2), put(0, 4), put(0, 4);
  put(count, 8), put(count, 8), put(cd_size, 8), put(cd_offset, 8);
  put(0x07064b50, 4), put(0, 4), put(z64_at, 8), put(1, 4);
  put(0x06054b50, 4), put(0, 2), put(0, 2), put(0xffff, 2), put(0xffff, 2), put(0xffffffff, 4);
  put(0xffffffff, 4), put(0, 2);
  std::string p = dir.file("z64.npz");
  write_bytes(p, z);
  auto want = npy::read_npz(data_path("test.npz"), Device::cpu());
  auto got = npy::read_npz(p, Device::cpu());
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].first, want[i].first);
    EXPECT_EQ(got[i].second.dims(), want[i].second.dims());
  }
  // a locator pointing past the archive
  std::vector<std::byte> bad = z;
  bad[z64_at + 56 + 8 + 7] = std::byte(0x7f);
  write_bytes(p, bad);
  Error e = expect_error([&] { npy::read_npz(p, Device::cpu()); });
  EXPECT_TRUE(contains(e.what(), "ZIP64 end of central directory record is out of bounds")) << e.what();
}

TEST(Npz, EveryTruncatedPrefixThrows) {
  TempDir dir;
  std::string p = dir.file("cut.npz");
  for (const char* name : {"test.npz", "compressed.npz"}) {
    std::vector<std::byte> full = read_bytes(data_path(name));
    for (size_t n = 0; n < full.size(); ++n) {
      write_bytes(p, std::vector<std::byte>(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n)));
      Error e = expect_error([&] { npy::read_npz(p, Device::cpu()); });
      EXPECT_TRUE(contains(e.what(), p)) << n << ": " << e.what();
    }
  }
}

TEST(Npz, EverySingleByteCorruptionIsHandled) {
  for (const char* name : {"test.npz", "compressed.npz"}) {
    std::vector<std::byte> full = read_bytes(data_path(name));
    std::vector<std::byte> scratch;
    for (size_t at = 0; at < full.size(); ++at) {
      for (uint8_t v : {uint8_t(0x00), uint8_t(0xff), uint8_t(0x7f)}) {
        std::vector<std::byte> b = full;
        b[at] = std::byte(v);
        expect_no_crash(
            [&] {
              io::zip::Reader zip(b, name);
              for (const auto& e : zip.entries()) zip.read(e, scratch);
            },
            std::string(name) + " byte " + std::to_string(at));
      }
    }
  }
}

TEST(Zip, RejectsNonArchives) {
  std::vector<std::byte> junk = to_bytes(std::string(100, 'x'));
  Error e = expect_error([&] { io::zip::Reader(junk, "junk.bin"); });
  EXPECT_EQ(e.kind(), ErrorKind::Parse);
  EXPECT_TRUE(contains(e.what(), "junk.bin")) << e.what();
  std::vector<std::byte> empty;
  expect_error([&] { io::zip::Reader(empty, "empty.bin"); });
}
