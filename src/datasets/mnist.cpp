// The MNIST / Fashion-MNIST loader and the Batcher.
#include "candle/datasets/mnist.h"

#include <filesystem>
#include <random>
#include <string>

#include "candle/error.h"

namespace candle::datasets {
namespace {

namespace fs = std::filesystem;

// <dir>/<stem>, else <dir>/<stem>.gz.
std::string find_file(const fs::path& dir, const std::string& stem) {
  std::error_code ec;
  for (const std::string& name : {stem, stem + ".gz"}) {
    fs::path p = dir / name;
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  throw Error(ErrorKind::Io, "mnist: " + (dir / stem).string() + "[.gz] not found");
}

// f32 [n, rows * cols] in 0..1 from a 3-D IDX file.
Tensor images_tensor(const IdxFile& f, const std::string& path) {
  if (f.dims.size() != 3)
    throw Error(ErrorKind::Parse, "mnist: " + path + " is not an image file (" +
                                      std::to_string(f.dims.size()) + " dims, want 3)");
  size_t n = f.dims[0], pixels = f.dims[1] * f.dims[2];
  std::vector<float> v(f.data.size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(f.data[i]) / 255.0f;
  return Tensor::from_vec(v, {n, pixels}, Device::cpu());
}

Tensor labels_tensor(const IdxFile& f, const std::string& path, size_t want, size_t classes) {
  if (f.dims.size() != 1)
    throw Error(ErrorKind::Parse, "mnist: " + path + " is not a label file (" +
                                      std::to_string(f.dims.size()) + " dims, want 1)");
  if (f.dims[0] != want)
    throw Error(ErrorKind::Parse, "mnist: " + path + " has " + std::to_string(f.dims[0]) + " labels for " +
                                      std::to_string(want) + " images");
  for (size_t i = 0; i < f.data.size(); ++i) {
    if (f.data[i] >= classes)
      throw Error(ErrorKind::Parse, "mnist: " + path + ": label " + std::to_string(f.data[i]) + " at " +
                                        std::to_string(i) + " is not below " + std::to_string(classes));
  }
  return Tensor::from_vec(f.data, {f.dims[0]}, Device::cpu());
}

}  // namespace

Dataset load_mnist(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(ErrorKind::Io, "mnist: data directory " + dir + " not found");
  Dataset d;
  auto load_split = [&](const std::string& prefix, Tensor& images, Tensor& labels) {
    std::string ip = find_file(dir, prefix + "-images-idx3-ubyte");
    std::string lp = find_file(dir, prefix + "-labels-idx1-ubyte");
    images = images_tensor(read_idx(ip), ip);
    labels = labels_tensor(read_idx(lp), lp, images.dim(0), d.labels);
  };
  load_split("train", d.train_images, d.train_labels);
  load_split("t10k", d.test_images, d.test_labels);
  if (d.train_images.dim(1) != d.test_images.dim(1))
    throw Error(ErrorKind::Parse, "mnist: train and test images in " + dir + " differ in size (" +
                                      std::to_string(d.train_images.dim(1)) + " vs " +
                                      std::to_string(d.test_images.dim(1)) + " pixels)");
  return d;
}

// ---- Batcher ------------------------------------------------------------------------------

std::vector<uint32_t> shuffled_indices(size_t n, uint64_t seed, uint64_t epoch) {
  if (n > UINT32_MAX) throw Error(ErrorKind::InvalidArgument, "Batcher: more than 2^32 samples");
  std::vector<uint32_t> idx(n);
  for (size_t i = 0; i < n; ++i) idx[i] = static_cast<uint32_t>(i);
  // splitmix-style mixing so that nearby (seed, epoch) pairs give unrelated streams
  std::mt19937_64 rng(seed ^ (0x9E3779B97F4A7C15ull * (epoch + 1)));
  // Fisher-Yates with Lemire's unbiased bounded draw (std::shuffle's order is up to the library)
  for (size_t i = n; i > 1; --i) {
    uint64_t bound = i;
    unsigned __int128 m = static_cast<unsigned __int128>(rng()) * bound;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < bound) {
      uint64_t threshold = (0 - bound) % bound;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(rng()) * bound;
        low = static_cast<uint64_t>(m);
      }
    }
    size_t j = static_cast<size_t>(m >> 64);
    std::swap(idx[i - 1], idx[j]);
  }
  return idx;
}

Batcher::Batcher(Tensor images, Tensor labels, size_t batch_size, uint64_t seed)
    : images_(std::move(images)), labels_(std::move(labels)), batch_size_(batch_size), seed_(seed) {
  if (batch_size == 0) throw Error(ErrorKind::InvalidArgument, "Batcher: batch size must be positive");
  if (images_.rank() == 0 || labels_.rank() == 0 || images_.dim(0) != labels_.dim(0))
    throw Error(ErrorKind::ShapeMismatch, "Batcher: images " + images_.shape().to_string() + " and labels " +
                                              labels_.shape().to_string() + " need the same first dim");
  if (images_.device() != labels_.device())
    throw Error(ErrorKind::DeviceMismatch, "Batcher: images and labels are on different devices");
  start_epoch(0);
}

void Batcher::start_epoch(uint64_t epoch) {
  order_ = shuffled_indices(images_.dim(0), seed_, epoch);
  pos_ = 0;
}

size_t Batcher::num_batches() const {
  size_t n = order_.size();
  return return_last_ ? (n + batch_size_ - 1) / batch_size_ : n / batch_size_;
}

std::optional<std::pair<Tensor, Tensor>> Batcher::next() {
  size_t n = order_.size();
  if (pos_ >= n) return std::nullopt;
  size_t len = std::min(batch_size_, n - pos_);
  if (len < batch_size_ && !return_last_) return std::nullopt;
  std::vector<uint32_t> ids(order_.begin() + static_cast<std::ptrdiff_t>(pos_),
                            order_.begin() + static_cast<std::ptrdiff_t>(pos_ + len));
  pos_ += len;
  Tensor t = Tensor::from_vec(ids, {len}, images_.device());
  return std::make_pair(images_.index_select(t, 0), labels_.index_select(t, 0));
}

}  // namespace candle::datasets
