// IDX reading (plain and gzip), hostile inputs, and the MNIST directory loader.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "candle/datasets/mnist.h"

using namespace candle;
namespace fs = std::filesystem;

namespace {

std::vector<uint8_t> idx_bytes(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data,
                               uint8_t type = 0x08) {
  std::vector<uint8_t> b{0, 0, type, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) {
    b.push_back(static_cast<uint8_t>(d >> 24));
    b.push_back(static_cast<uint8_t>(d >> 16));
    b.push_back(static_cast<uint8_t>(d >> 8));
    b.push_back(static_cast<uint8_t>(d));
  }
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

std::vector<uint8_t> gzip_bytes(const std::vector<uint8_t>& raw) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::vector<uint8_t> out(deflateBound(&zs, raw.size()) + 64);
  zs.next_in = const_cast<uint8_t*>(raw.data());
  zs.avail_in = static_cast<uInt>(raw.size());
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// A scratch directory removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("candle_idx_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::vector<uint8_t>& bytes) const {
    std::ofstream f(path / name, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return (path / name).string();
  }
};

std::string error_of(const std::string& path) {
  try {
    datasets::read_idx(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A small MNIST-like directory: n_train / n_test images of 2x3 pixels.
void write_mnist_dir(const TempDir& d, size_t n_train, size_t n_test, bool gz) {
  auto put = [&](const std::string& name, const std::vector<uint8_t>& raw) {
    d.write(gz ? name + ".gz" : name, gz ? gzip_bytes(raw) : raw);
  };
  for (auto [prefix, n] : {std::pair<std::string, size_t>{"train", n_train}, {"t10k", n_test}}) {
    std::vector<uint8_t> px(n * 6), lab(n);
    for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>((i * 37) % 256);
    for (size_t i = 0; i < n; ++i) lab[i] = static_cast<uint8_t>(i % 10);
    put(prefix + "-images-idx3-ubyte", idx_bytes({static_cast<uint32_t>(n), 2, 3}, px));
    put(prefix + "-labels-idx1-ubyte", idx_bytes({static_cast<uint32_t>(n)}, lab));
  }
}

}  // namespace

TEST(DatasetsIdx, ReadsPlainFile) {
  TempDir d;
  auto p = d.write("a.idx", idx_bytes({2, 3}, {1, 2, 3, 4, 5, 255}));
  datasets::IdxFile f = datasets::read_idx(p);
  EXPECT_EQ(f.dims, (std::vector<size_t>{2, 3}));
  EXPECT_EQ(f.data, (std::vector<uint8_t>{1, 2, 3, 4, 5, 255}));
}

TEST(DatasetsIdx, ReadsGzipFile) {
  TempDir d;
  std::vector<uint8_t> data(5000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7);
  auto p = d.write("a.gz", gzip_bytes(idx_bytes({5000}, data)));
  datasets::IdxFile f = datasets::read_idx(p);
  EXPECT_EQ(f.dims, (std::vector<size_t>{5000}));
  EXPECT_EQ(f.data, data);
}

TEST(DatasetsIdx, RejectsBadMagicAndType) {
  TempDir d;
  auto bad_magic = idx_bytes({1}, {7});
  bad_magic[0] = 1;
  EXPECT_NE(error_of(d.write("m", bad_magic)).find("bad magic"), std::string::npos);
  EXPECT_NE(error_of(d.write("t", idx_bytes({1}, {0, 0, 0, 0}, 0x0D))).find("0x0d"), std::string::npos);
  EXPECT_NE(error_of(d.write("z", idx_bytes({}, {}))).find("zero dimensions"), std::string::npos);
}

TEST(DatasetsIdx, RejectsWrongCounts) {
  TempDir d;
  EXPECT_NE(error_of(d.write("short", idx_bytes({2, 2}, {1, 2, 3}))).find("truncated"), std::string::npos);
  EXPECT_NE(error_of(d.write("long", idx_bytes({2, 2}, {1, 2, 3, 4, 5}))).find("trailing"),
            std::string::npos);
  // dims claiming 2^40 elements fail on the header, before any allocation
  EXPECT_NE(error_of(d.write("huge", idx_bytes({1u << 20, 1u << 20}, {}))).find("2^32"), std::string::npos);
}

TEST(DatasetsIdx, EveryTruncationOfAPlainFileIsAnError) {
  TempDir d;
  auto full = idx_bytes({3, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  for (size_t len = 0; len < full.size(); ++len) {
    std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(len));
    EXPECT_THROW(datasets::read_idx(d.write("cut", cut)), Error) << "length " << len;
    EXPECT_THROW(datasets::parse_idx(cut.data(), cut.size(), "mem"), Error) << "length " << len;
  }
  EXPECT_NO_THROW(datasets::parse_idx(full.data(), full.size(), "mem"));
}

TEST(DatasetsIdx, EveryTruncationOfAGzipFileIsAnError) {
  TempDir d;
  std::vector<uint8_t> data(3000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>((i * i) % 251);
  auto gz = gzip_bytes(idx_bytes({1000, 3}, data));
  for (size_t len = 0; len < gz.size(); ++len) {
    std::vector<uint8_t> cut(gz.begin(), gz.begin() + static_cast<std::ptrdiff_t>(len));
    EXPECT_THROW(datasets::read_idx(d.write("cut.gz", cut)), Error)
        << "length " << len << " of " << gz.size();
  }
}

TEST(DatasetsIdx, CorruptGzipIsAnError) {
  TempDir d;
  std::vector<uint8_t> data(3000, 9);
  auto gz = gzip_bytes(idx_bytes({3000}, data));
  // flip bytes in the deflate stream; the CRC or the inflater must catch it
  for (size_t pos = 12; pos + 8 < gz.size(); pos += 3) {
    auto bad = gz;
    bad[pos] ^= 0x5A;
    EXPECT_THROW(datasets::read_idx(d.write("bad.gz", bad)), Error) << "byte " << pos;
  }
}

TEST(DatasetsIdx, MissingFileIsAnIoError) {
  try {
    datasets::read_idx("/nonexistent/dir/file-idx1-ubyte");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/file-idx1-ubyte"), std::string::npos);
  }
}

TEST(DatasetsMnist, LoadsPlainDirectory) {
  TempDir d;
  write_mnist_dir(d, 12, 5, false);
  datasets::Dataset ds = datasets::load_mnist(d.path.string());
  EXPECT_EQ(ds.train_images.dims(), (std::vector<size_t>{12, 6}));
  EXPECT_EQ(ds.train_images.dtype(), DType::F32);
  EXPECT_EQ(ds.train_labels.dims(), (std::vector<size_t>{12}));
  EXPECT_EQ(ds.train_labels.dtype(), DType::U8);
  EXPECT_EQ(ds.test_images.dims(), (std::vector<size_t>{5, 6}));
  EXPECT_EQ(ds.labels, 10u);
  auto px = ds.train_images.flatten_all().to_vec1<float>();
  EXPECT_FLOAT_EQ(px[1], 37.f / 255.f);
  EXPECT_FLOAT_EQ(px[7], static_cast<float>((7 * 37) % 256) / 255.f);
  EXPECT_EQ(ds.test_labels.to_vec1<uint8_t>(), (std::vector<uint8_t>{0, 1, 2, 3, 4}));
}

TEST(DatasetsMnist, LoadsGzipDirectory) {
  TempDir d;
  write_mnist_dir(d, 7, 3, true);
  datasets::Dataset ds = datasets::load_mnist(d.path.string());
  EXPECT_EQ(ds.train_images.dims(), (std::vector<size_t>{7, 6}));
  EXPECT_EQ(ds.train_labels.to_vec1<uint8_t>(), (std::vector<uint8_t>{0, 1, 2, 3, 4, 5, 6}));
}

TEST(DatasetsMnist, MismatchedLabelCountIsAnError) {
  TempDir d;
  write_mnist_dir(d, 7, 3, false);
  d.write("t10k-labels-idx1-ubyte", idx_bytes({2}, {1, 2}));
  EXPECT_THROW(datasets::load_mnist(d.path.string()), Error);
}

TEST(DatasetsMnist, LabelOutOfRangeIsAnError) {
  TempDir d;
  write_mnist_dir(d, 2, 2, false);
  d.write("train-labels-idx1-ubyte", idx_bytes({2}, {1, 10}));
  EXPECT_THROW(datasets::load_mnist(d.path.string()), Error);
}

TEST(DatasetsMnist, WrongRankIsAnError) {
  TempDir d;
  write_mnist_dir(d, 2, 2, false);
  d.write("train-images-idx3-ubyte", idx_bytes({2, 6}, std::vector<uint8_t>(12, 0)));
  EXPECT_THROW(datasets::load_mnist(d.path.string()), Error);
}

TEST(DatasetsMnist, MissingDirectoryOrFileIsAnError) {
  EXPECT_THROW(datasets::load_mnist("/nonexistent/mnist"), Error);
  TempDir d;
  write_mnist_dir(d, 2, 2, false);
  fs::remove(d.path / "t10k-images-idx3-ubyte");
  try {
    datasets::load_mnist(d.path.string());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("t10k-images-idx3-ubyte"), std::string::npos);
  }
}

// Debian's dataset-fashion-mnist (tools/install-deps.sh installs it).
TEST(DatasetsMnist, LoadsDebianFashionMnist) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(dir + "/t10k-labels-idx1-ubyte.gz")) GTEST_SKIP() << dir << " not installed";
  datasets::Dataset ds = datasets::load_mnist(dir);
  EXPECT_EQ(ds.train_images.dims(), (std::vector<size_t>{60000, 784}));
  EXPECT_EQ(ds.test_images.dims(), (std::vector<size_t>{10000, 784}));
  EXPECT_EQ(ds.test_labels.dims(), (std::vector<size_t>{10000}));
  // Fashion-MNIST's test set holds 1000 images of each class
  auto lab = ds.test_labels.to_vec1<uint8_t>();
  std::vector<size_t> count(10);
  for (uint8_t l : lab) ++count[l];
  EXPECT_EQ(count, std::vector<size_t>(10, 1000));
  EXPECT_GE(ds.train_images.min_all().to_scalar<float>(), 0.f);
  EXPECT_LE(ds.train_images.max_all().to_scalar<float>(), 1.f);
}
