// Memory-mapped files (read side) and all-or-nothing file writes (write side). Internal.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace candle::io {

// A whole file mapped copy-on-write: tensors that wrap it may be written to without
// touching the file (a Var made from a loaded weight), and reads cost no copy.
// Keep it in a shared_ptr: zero-copy tensors hold it as their storage's owner.
class MmapedFile {
 public:
  // Throws Error(Io) naming the path when the file cannot be opened or mapped.
  static std::shared_ptr<MmapedFile> open(const std::string& path);
  ~MmapedFile();
  MmapedFile(const MmapedFile&) = delete;
  MmapedFile& operator=(const MmapedFile&) = delete;

  const std::string& path() const { return path_; }
  std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<const std::byte> bytes() const { return {data_, size_}; }
  // Whether [p, p + n) lies inside the mapping.
  bool contains(const void* p, size_t n) const;
  // Tells the system that the bytes [p, p + n) (inside the mapping) are done with. The page cache
  // holds large folios (up to 2 MiB, aligned in the file) and keeps one that is released only in
  // part, so the file's pages leave the process's resident memory by whole 2 MiB spans: each span
  // once every byte of it has been released, by this call or earlier ones, in any order
  // (MADV_PAGEOUT; the pages are read from the file again on the next access, so nothing changes
  // for the tensors that view them, written copy-on-write pages included). Thread-safe. Best
  // effort: a system without MADV_PAGEOUT keeps the pages.
  void release(const void* p, size_t n) const;

 private:
  MmapedFile(std::string path, std::byte* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  std::byte* data_;
  size_t size_;
  mutable std::mutex release_mu_;
  mutable std::map<size_t, size_t> released_;  // the released bytes: disjoint [begin, end), merged
  mutable std::vector<bool> span_out_;         // the 2 MiB spans already paged out
};

// Writes a file under a temporary name next to `path` ("<path>.tmp-XXXXXX") and renames
// it over `path` on commit(); destroyed without commit() (an exception), it removes the
// temporary, so a failed save leaves neither a half file nor a stray temporary.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t n);
  void write(std::span<const std::byte> bytes) { write(bytes.data(), bytes.size()); }
  void commit();
  const std::string& temp_path() const { return tmp_; }

 private:
  void flush_buffer();
  std::string path_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
  std::unique_ptr<std::byte[]> buf_;
  size_t buf_len_ = 0;
};

}  // namespace candle::io
