// ZIP reading (stored/deflate, CRC-checked, bounds-checked) and stored-member writing.
#include "io/zip.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string_view>
#include <unordered_set>

#include "candle/error.h"
#include "io/mmap.h"

namespace candle::io::zip {

namespace {

constexpr uint32_t kLocalSig = 0x04034b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr uint32_t kZip64EndSig = 0x06064b50;
constexpr size_t kLocalLen = 30, kCentralLen = 46, kEndLen = 22, kZip64LocatorLen = 20, kZip64EndLen = 56;
// deflate cannot expand data by more than this factor (RFC 1951 stored-length codes aside,
// the best possible ratio is about 1032:1).
constexpr uint64_t kMaxDeflateRatio = 1032;

uint16_t rd16(const std::byte* p) { return static_cast<uint16_t>(uint16_t(p[0]) | uint16_t(p[1]) << 8); }
uint32_t rd32(const std::byte* p) { return uint32_t(rd16(p)) | uint32_t(rd16(p + 2)) << 16; }
uint64_t rd64(const std::byte* p) { return uint64_t(rd32(p)) | uint64_t(rd32(p + 4)) << 32; }

void wr16(std::byte* p, uint16_t v) {
  p[0] = std::byte(v & 0xff);
  p[1] = std::byte(v >> 8);
}
void wr32(std::byte* p, uint32_t v) {
  wr16(p, static_cast<uint16_t>(v & 0xffff));
  wr16(p + 2, static_cast<uint16_t>(v >> 16));
}

// A member name for an error message: at most 64 bytes.
std::string excerpt(const std::string& s) { return s.size() <= 64 ? s : s.substr(0, 64) + "..."; }

}  // namespace

Reader::Reader(std::span<const std::byte> archive, std::string label)
    : data_(archive), label_(std::move(label)) {
  auto fail = [&](const std::string& msg) { return Error(ErrorKind::Parse, label_ + ": " + msg); };
  const uint64_t n = data_.size();
  if (n < kEndLen) throw fail("too short to be a zip archive (" + std::to_string(n) + " bytes)");
  // The end record sits in the last 22 + 65535 (maximum comment) bytes.
  size_t lowest = n - kEndLen > 0xffff ? n - kEndLen - 0xffff : 0;
  size_t end_pos = SIZE_MAX;
  for (size_t pos = n - kEndLen + 1; pos-- > lowest;) {
    const std::byte* p = data_.data() + pos;
    if (rd32(p) == kEndSig && pos + kEndLen + rd16(p + 20) <= n) {
      end_pos = pos;
      break;
    }
  }
  if (end_pos == SIZE_MAX) throw fail("no end of central directory record (not a zip archive, or truncated)");
  const std::byte* e = data_.data() + end_pos;
  uint32_t disk = rd16(e + 4), cd_disk = rd16(e + 6);
  uint64_t count_disk = rd16(e + 8), count = rd16(e + 10), cd_size = rd32(e + 12), cd_offset = rd32(e + 16);
  // where the central directory may end: the ZIP64 end record, else the end record
  uint64_t cd_limit = end_pos;
  if (end_pos >= kZip64LocatorLen && rd32(e - kZip64LocatorLen) == kZip64LocatorSig) {
    // ZIP64: the locator (just before the end record) points at the ZIP64 end record, whose
    // 64-bit counts and offsets replace the end record's.
    const std::byte* loc = e - kZip64LocatorLen;
    const uint64_t z_pos = rd64(loc + 8);
    if (rd32(loc + 4) != 0 || rd32(loc + 16) > 1) throw fail("multi-disk archives are not supported");
    if (z_pos > end_pos - kZip64LocatorLen || end_pos - kZip64LocatorLen - z_pos < kZip64EndLen)
      throw fail("the ZIP64 end of central directory record is out of bounds");
    const std::byte* z = data_.data() + z_pos;
    if (rd32(z) != kZip64EndSig) throw fail("bad ZIP64 end of central directory signature");
    disk = rd32(z + 16), cd_disk = rd32(z + 20);
    count_disk = rd64(z + 24), count = rd64(z + 32), cd_size = rd64(z + 40), cd_offset = rd64(z + 48);
    cd_limit = z_pos;
  } else if (count == 0xffff || cd_size == 0xffffffffu || cd_offset == 0xffffffffu) {
    throw fail("the end record asks for ZIP64 values, but there is no ZIP64 locator");
  }
  if (disk != 0 || cd_disk != 0 || count_disk != count) throw fail("multi-disk archives are not supported");
  if (cd_offset > cd_limit || cd_size > cd_limit - cd_offset) {
    throw fail("central directory [" + std::to_string(cd_offset) + ", +" + std::to_string(cd_size) +
               ") runs past the end record at " + std::to_string(cd_limit));
  }
  if (count > cd_size / kCentralLen) {
    throw fail(std::to_string(count) + " members cannot fit a central directory of " +
               std::to_string(cd_size) + " bytes");
  }
  central_dir_offset_ = cd_offset;
  const std::byte* cd = data_.data() + cd_offset;
  uint64_t pos = 0;
  entries_.reserve(static_cast<size_t>(count));
  std::unordered_set<std::string_view> names;
  for (uint64_t i = 0; i < count; ++i) {
    if (cd_size - pos < kCentralLen || rd32(cd + pos) != kCentralSig) {
      throw fail("central directory entry " + std::to_string(i) + " is truncated or has a bad signature");
    }
    const std::byte* c = cd + pos;
    Entry en;
    en.flags = rd16(c + 8);
    en.method = rd16(c + 10);
    en.crc32 = rd32(c + 16);
    en.compressed_size = rd32(c + 20);
    en.size = rd32(c + 24);
    size_t name_len = rd16(c + 28), extra_len = rd16(c + 30), comment_len = rd16(c + 32);
    const uint32_t start_disk = rd16(c + 34);
    en.local_header_offset = rd32(c + 42);
    if (cd_size - pos - kCentralLen < name_len + extra_len + comment_len) {
      throw fail("central directory entry " + std::to_string(i) + " runs past the central directory");
    }
    en.name.assign(reinterpret_cast<const char*>(c + kCentralLen), name_len);
    const std::string shown = excerpt(en.name);
    // ZIP64 extended information: the 8-byte values for the 32-bit fields that are 0xffffffff.
    const std::byte* x = c + kCentralLen + name_len;
    bool zip64_seen = false;
    for (size_t k = 0; k + 4 <= extra_len;) {
      uint16_t id = rd16(x + k), len = rd16(x + k + 2);
      if (k + 4 + len > extra_len) throw fail("member '" + shown + "': malformed extra field");
      if (id == 0x0001 && !zip64_seen) {
        zip64_seen = true;
        const std::byte* z = x + k + 4;
        size_t left = len;
        auto take = [&](uint64_t& field) {
          if (field != 0xffffffffu) return;
          if (left < 8) throw fail("member '" + shown + "': truncated ZIP64 extra field");
          field = rd64(z);
          z += 8;
          left -= 8;
        };
        take(en.size);
        take(en.compressed_size);
        take(en.local_header_offset);
      }
      k += 4 + size_t(len);
    }
    if (start_disk != 0 && start_disk != 0xffff) throw fail("multi-disk archives are not supported");
    pos += kCentralLen + name_len + extra_len + comment_len;
    // the member's local header and data, inside the archive and before the central directory
    const uint64_t lh = en.local_header_offset;
    if (lh > cd_offset || cd_offset - lh < kLocalLen) {
      throw fail("member '" + shown + "': local header at " + std::to_string(lh) +
                 " is not before the central directory");
    }
    const std::byte* l = data_.data() + lh;
    if (rd32(l) != kLocalSig) throw fail("member '" + shown + "': bad local header signature");
    en.data_offset = lh + kLocalLen + rd16(l + 26) + rd16(l + 28);
    if (en.data_offset > cd_offset || en.compressed_size > cd_offset - en.data_offset) {
      throw fail("member '" + shown + "': data [" + std::to_string(en.data_offset) + ", +" +
                 std::to_string(en.compressed_size) + ") runs past the start of the central directory (" +
                 std::to_string(cd_offset) + ")");
    }
    entries_.push_back(std::move(en));
  }
  // No two members may share bytes (overlapping members are how the worst zip bombs
  // multiply one deflate stream), and no name may appear twice.
  std::vector<const Entry*> order;
  order.reserve(entries_.size());
  for (const Entry& en : entries_) {
    if (!names.insert(en.name).second) throw fail("member '" + excerpt(en.name) + "' appears twice");
    order.push_back(&en);
  }
  std::stable_sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return a->local_header_offset < b->local_header_offset;
  });
  for (size_t i = 1; i < order.size(); ++i) {
    if (order[i]->local_header_offset < order[i - 1]->data_offset + order[i - 1]->compressed_size) {
      throw fail("members '" + excerpt(order[i - 1]->name) + "' and '" + excerpt(order[i]->name) +
                 "' overlap");
    }
  }
}

const Entry* Reader::find(std::string_view name) const {
  for (const Entry& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

std::span<const std::byte> Reader::read(const Entry& e, std::vector<std::byte>& scratch) const {
  auto fail = [&](const std::string& msg) {
    return Error(ErrorKind::Parse, label_ + ", member '" + excerpt(e.name) + "': " + msg);
  };
  if (e.flags & 1u)
    throw Error(ErrorKind::UnsupportedOp,
                label_ + ", member '" + e.name + "': encrypted members are not supported");
  if (e.method != 0 && e.method != 8) {
    throw Error(ErrorKind::UnsupportedOp, label_ + ", member '" + e.name + "': compression method " +
                                              std::to_string(e.method) +
                                              " is not supported (only stored and deflate)");
  }
  const uint64_t n = data_.size();
  const uint64_t start = e.data_offset;
  if (start > n || e.compressed_size > n - start) {
    throw fail("data [" + std::to_string(start) + ", +" + std::to_string(e.compressed_size) +
               ") runs past the end of the archive (" + std::to_string(n) + " bytes)");
  }
  std::span<const std::byte> raw = data_.subspan(start, e.compressed_size);
  std::span<const std::byte> out;
  if (e.method == 0) {
    if (e.compressed_size != e.size) throw fail("stored member with compressed size != size");
    out = raw;
  } else {
    if (e.size > e.compressed_size * kMaxDeflateRatio + 64) {
      throw fail("declared size " + std::to_string(e.size) + " is impossible for " +
                 std::to_string(e.compressed_size) + " deflated bytes");
    }
    scratch.resize(e.size);
    z_stream zs{};
    if (inflateInit2(&zs, -15) != Z_OK) throw Error(ErrorKind::Internal, "zlib inflateInit2 failed");
    const std::byte* in = raw.data();
    size_t in_left = raw.size(), out_done = 0;
    int ret = Z_OK;
    constexpr size_t kChunk = size_t(1) << 30;
    Bytef dummy = 0;  // zlib rejects a null next_out even when there is no room
    zs.next_out = &dummy;
    zs.avail_out = 0;
    while (ret == Z_OK) {
      if (zs.avail_in == 0 && in_left > 0) {
        size_t k = std::min(in_left, kChunk);
        zs.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in));
        zs.avail_in = static_cast<uInt>(k);
        in += k;
        in_left -= k;
      }
      if (zs.avail_out == 0 && out_done < scratch.size()) {
        size_t k = std::min(scratch.size() - out_done, kChunk);
        zs.next_out = reinterpret_cast<Bytef*>(scratch.data() + out_done);
        zs.avail_out = static_cast<uInt>(k);
        out_done += k;
      }
      uInt before_in = zs.avail_in, before_out = zs.avail_out;
      ret = inflate(&zs, Z_NO_FLUSH);
      if (ret == Z_BUF_ERROR || (ret == Z_OK && before_in == zs.avail_in && before_out == zs.avail_out)) {
        // no progress: the input ran out or the output is full before the stream's end
        ret = Z_BUF_ERROR;
      }
    }
    uint64_t total = zs.total_out;
    const char* msg = zs.msg;
    inflateEnd(&zs);
    if (ret != Z_STREAM_END) {
      throw fail(std::string("corrupt deflate data") + (msg ? std::string(" (") + msg + ")" : std::string()) +
                 " or more data than the declared size " + std::to_string(e.size));
    }
    if (total != e.size) {
      throw fail("inflated to " + std::to_string(total) + " bytes, declared size " + std::to_string(e.size));
    }
    out = std::span<const std::byte>(scratch.data(), scratch.size());
  }
  uLong crc = crc32_z(0L, reinterpret_cast<const Bytef*>(out.data()), out.size());
  if (static_cast<uint32_t>(crc) != e.crc32) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "CRC-32 mismatch (computed %08x, stored %08x)", static_cast<unsigned>(crc),
                  static_cast<unsigned>(e.crc32));
    throw fail(buf);
  }
  return out;
}

void Writer::put(const void* p, size_t n) {
  out_.write(p, n);
  offset_ += n;
}

void Writer::add(const std::string& name, std::span<const std::byte> data) {
  auto too_big = [&](const std::string& what) {
    return Error(ErrorKind::UnsupportedOp,
                 "zip writer: " + what + " would need ZIP64, which is not supported");
  };
  if (name.size() > 0xffff)
    throw Error(ErrorKind::InvalidArgument, "zip writer: member name longer than 65535 bytes");
  if (data.size() >= 0xffffffffu)
    throw too_big("member '" + name + "' of " + std::to_string(data.size()) + " bytes");
  if (offset_ >= 0xffffffffu) throw too_big("an archive past 4 GiB");
  if (count_ >= 0xffff) throw too_big("more than 65535 members");
  bool utf8 =
      std::any_of(name.begin(), name.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x80; });
  uint16_t flags = utf8 ? 0x0800 : 0;  // bit 11: the name is UTF-8
  uint32_t crc = static_cast<uint32_t>(crc32_z(0L, reinterpret_cast<const Bytef*>(data.data()), data.size()));
  uint32_t size = static_cast<uint32_t>(data.size());
  std::byte local[kLocalLen] = {};
  wr32(local, kLocalSig);
  wr16(local + 4, 20);  // version needed: 2.0
  wr16(local + 6, flags);
  wr16(local + 8, 0);      // stored
  wr16(local + 10, 0);     // time 00:00:00
  wr16(local + 12, 0x21);  // date 1980-01-01: fixed, so that archives are reproducible
  wr32(local + 14, crc);
  wr32(local + 18, size);
  wr32(local + 22, size);
  wr16(local + 26, static_cast<uint16_t>(name.size()));
  wr16(local + 28, 0);
  std::byte central[kCentralLen] = {};
  wr32(central, kCentralSig);
  wr16(central + 4, (3u << 8) | 20u);       // made by: Unix, 2.0
  std::memcpy(central + 6, local + 4, 26);  // version needed .. name length
  wr32(central + 38, 0100644u << 16);       // external attributes: a regular rw-r--r-- file
  wr32(central + 42, static_cast<uint32_t>(offset_));
  central_.insert(central_.end(), central, central + kCentralLen);
  auto name_bytes = reinterpret_cast<const std::byte*>(name.data());
  central_.insert(central_.end(), name_bytes, name_bytes + name.size());
  put(local, kLocalLen);
  put(name.data(), name.size());
  put(data.data(), data.size());
  ++count_;
}

void Writer::finish() {
  if (offset_ >= 0xffffffffu || central_.size() >= 0xffffffffu) {
    throw Error(ErrorKind::UnsupportedOp,
                "zip writer: an archive past 4 GiB would need ZIP64, which is not supported");
  }
  uint32_t cd_offset = static_cast<uint32_t>(offset_);
  put(central_.data(), central_.size());
  std::byte end[kEndLen] = {};
  wr32(end, kEndSig);
  wr16(end + 8, static_cast<uint16_t>(count_));
  wr16(end + 10, static_cast<uint16_t>(count_));
  wr32(end + 12, static_cast<uint32_t>(central_.size()));
  wr32(end + 16, cd_offset);
  put(end, kEndLen);
}

}  // namespace candle::io::zip
