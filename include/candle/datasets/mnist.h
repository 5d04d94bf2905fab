// candle_datasets: IDX files, the MNIST / Fashion-MNIST loader and a shuffling batcher.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "candle/tensor.h"

namespace candle::datasets {

// An IDX file of unsigned bytes (type 0x08): its dims and row-major data.
struct IdxFile {
  std::vector<size_t> dims;
  std::vector<uint8_t> data;
};

// Reads an IDX file, plain or gzip-compressed (told apart by the gzip magic bytes, so the
// name does not matter). Errors (ErrorKind::Parse or Io, naming the file): a bad magic
// number, a type other than unsigned byte, fewer or more data bytes than the dims say, a
// corrupt gzip stream.
IdxFile read_idx(const std::string& path);
// The same checks on bytes in memory (already decompressed); `name` is used in errors.
IdxFile parse_idx(const uint8_t* bytes, size_t len, const std::string& name);

// candle_datasets::vision::Dataset.
struct Dataset {
  Tensor train_images;  // f32 [n_train, rows * cols], pixel / 255
  Tensor train_labels;  // u8 [n_train]
  Tensor test_images;   // f32 [n_test, rows * cols]
  Tensor test_labels;   // u8 [n_test]
  size_t labels = 10;
};

// Loads {train,t10k}-{images-idx3,labels-idx1}-ubyte (or the same names with .gz, as
// Debian's dataset-fashion-mnist installs them in /usr/share/datasets/fashion-mnist) from
// `dir`, like candle_datasets::vision::mnist::load_dir. Each image file must be 3-D, each
// label file 1-D with as many entries as its images, and every label < 10.
Dataset load_mnist(const std::string& dir);

// Mini-batches of (images, labels) in a shuffled order. The order of epoch e is a
// Fisher-Yates shuffle driven by std::mt19937_64 seeded from (seed, e), so it is the same on
// every platform and a resumed run can ask for the epoch it stopped at.
class Batcher {
 public:
  // images [n, ...] and labels [n, ...] on one device; batch_size > 0.
  Batcher(Tensor images, Tensor labels, size_t batch_size, uint64_t seed);
  // Whether the last, smaller batch is returned (default: dropped, as candle's Batcher).
  Batcher& return_last_incomplete_batch(bool yes) {
    return_last_ = yes;
    return *this;
  }
  // Reshuffles for epoch `epoch` and restarts from its first batch.
  void start_epoch(uint64_t epoch);
  // The next batch of the current epoch, or nothing at its end.
  std::optional<std::pair<Tensor, Tensor>> next();
  size_t num_batches() const;
  size_t batch_size() const { return batch_size_; }
  // The current epoch's sample order.
  const std::vector<uint32_t>& order() const { return order_; }

 private:
  Tensor images_, labels_;
  size_t batch_size_;
  uint64_t seed_;
  bool return_last_ = false;
  std::vector<uint32_t> order_;
  size_t pos_ = 0;
};

// The shuffled order of 0..n-1 that Batcher uses for (seed, epoch).
std::vector<uint32_t> shuffled_indices(size_t n, uint64_t seed, uint64_t epoch);

}  // namespace candle::datasets
