// A small ZIP reader (stored and deflate members, CRC-checked) and a stored-only writer,
// enough for .npz (and PyTorch's zip checkpoints). Internal.
//
// Reading treats the archive as hostile: every offset and size is bounded by the archive
// length (each member's local header and data lie before the central directory, and no two
// members overlap), member counts by the central directory's size, names are unique,
// inflated sizes are bounded by deflate's maximum ratio and inflating stops at the declared
// size; any mismatch throws Error(Parse) naming the archive (and member). ZIP64 is
// understood: the ZIP64 end of central directory (more than 65535 members or past 4 GiB) and
// the ZIP64 size fields of central-directory entries (numpy.savez writes ZIP64 local
// headers). Encrypted or multi-disk archives and compression methods other than
// stored/deflate are rejected with a clear error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace candle::io {

class AtomicFile;

namespace zip {

struct Entry {
  std::string name;
  uint16_t flags = 0;
  uint16_t method = 0;  // 0 stored, 8 deflate
  uint32_t crc32 = 0;
  uint64_t compressed_size = 0;
  uint64_t size = 0;
  uint64_t local_header_offset = 0;
  uint64_t data_offset = 0;  // of the member's (compressed) bytes, after its local header
};

class Reader {
 public:
  // Parses the central directory of `archive` (which must outlive the reader); `label`
  // starts every error message (e.g. "npz file 'x.npz'").
  Reader(std::span<const std::byte> archive, std::string label);
  // Members in central-directory order.
  const std::vector<Entry>& entries() const { return entries_; }
  const Entry* find(std::string_view name) const;
  // The member's bytes after checking their CRC-32: a view into the archive for a stored
  // member, else the inflated bytes placed in `scratch`.
  std::span<const std::byte> read(const Entry& e, std::vector<std::byte>& scratch) const;
  const std::string& label() const { return label_; }

 private:
  std::span<const std::byte> data_;
  std::string label_;
  std::vector<Entry> entries_;
  uint64_t central_dir_offset_ = 0;
};

// Writes stored (uncompressed) members; finish() writes the central directory.
class Writer {
 public:
  explicit Writer(AtomicFile& out) : out_(out) {}
  void add(const std::string& name, std::span<const std::byte> data);
  void finish();

 private:
  void put(const void* p, size_t n);
  AtomicFile& out_;
  uint64_t offset_ = 0;
  std::vector<std::byte> central_;
  size_t count_ = 0;
};

}  // namespace zip
}  // namespace candle::io
