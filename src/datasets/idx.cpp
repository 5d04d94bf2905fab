// IDX files (the MNIST format), plain or gzip-compressed.
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "candle/datasets/mnist.h"
#include "candle/error.h"

namespace candle::datasets {
namespace {

constexpr uint8_t kTypeU8 = 0x08;
// The most elements an IDX file may declare (4 GiB): anything larger is taken as corrupt.
constexpr uint64_t kMaxElements = uint64_t{1} << 32;

[[noreturn]] void parse_error(const std::string& name, const std::string& what) {
  throw Error(ErrorKind::Parse, "idx file " + name + ": " + what);
}

uint32_t read_be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

struct Header {
  std::vector<size_t> dims;
  size_t header_len = 0;
  uint64_t elements = 0;
};

// Parses the magic and dims from the first bytes; nullopt when more bytes are needed.
std::optional<Header> parse_header(const uint8_t* b, size_t len, const std::string& name) {
  if (len < 4) return std::nullopt;
  if (b[0] != 0 || b[1] != 0)
    parse_error(name, "bad magic number (the first two bytes must be zero; not an IDX file?)");
  if (b[2] != kTypeU8) {
    char type[8];
    std::snprintf(type, sizeof type, "0x%02x", b[2]);
    parse_error(name, std::string("element type ") + type + " is not supported (only unsigned bytes, 0x08)");
  }
  size_t ndims = b[3];
  if (ndims == 0) parse_error(name, "zero dimensions");
  Header h;
  h.header_len = 4 + 4 * ndims;
  if (len < h.header_len) return std::nullopt;
  h.elements = 1;
  for (size_t i = 0; i < ndims; ++i) {
    uint32_t d = read_be32(b + 4 + 4 * i);
    h.dims.push_back(d);
    h.elements *= d;
    if (h.elements > kMaxElements)
      parse_error(name, "the dims declare more than 2^32 elements (corrupt header?)");
  }
  return h;
}

IdxFile finish(const Header& h, const uint8_t* b, size_t len, const std::string& name) {
  uint64_t have = len - h.header_len;
  if (have != h.elements) {
    std::string dims;
    for (size_t d : h.dims) {
      if (!dims.empty()) dims += 'x';
      dims += std::to_string(d);
    }
    parse_error(name, std::string(have < h.elements ? "truncated" : "trailing bytes") + ": dims " + dims +
                          " need " + std::to_string(h.elements) + " data bytes, the file has " +
                          std::to_string(have));
  }
  IdxFile f;
  f.dims = h.dims;
  f.data.assign(b + h.header_len, b + len);
  return f;
}

}  // namespace

IdxFile parse_idx(const uint8_t* bytes, size_t len, const std::string& name) {
  std::optional<Header> h = parse_header(bytes, len, name);
  if (!h) parse_error(name, "truncated header (" + std::to_string(len) + " bytes)");
  return finish(*h, bytes, len, name);
}

IdxFile read_idx(const std::string& path) {
  // gzread reads a file without the gzip magic as it is, so one loop serves both forms
  std::unique_ptr<gzFile_s, int (*)(gzFile)> gz(gzopen(path.c_str(), "rb"), gzclose);
  if (!gz) throw Error(ErrorKind::Io, "idx file " + path + ": cannot open: " + std::strerror(errno));
  gzbuffer(gz.get(), 1 << 17);
  std::vector<uint8_t> buf;
  std::optional<Header> h;
  constexpr size_t kChunk = 1 << 20;
  for (;;) {
    // read at most one byte past what the header declares, to detect trailing data
    size_t want = kChunk;
    if (h) {
      uint64_t total = h->header_len + h->elements + 1;
      if (buf.size() >= total) break;
      want = static_cast<size_t>(std::min<uint64_t>(kChunk, total - buf.size()));
    }
    size_t old = buf.size();
    buf.resize(old + want);
    int got = gzread(gz.get(), buf.data() + old, static_cast<unsigned>(want));
    if (got < 0) {
      int err = 0;
      const char* msg = gzerror(gz.get(), &err);
      throw Error(ErrorKind::Parse,
                  "idx file " + path + ": " + (err == Z_ERRNO ? std::strerror(errno) : msg));
    }
    buf.resize(old + static_cast<size_t>(got));
    if (!h) h = parse_header(buf.data(), buf.size(), path);
    if (got == 0) break;
  }
  int err = Z_OK;
  const char* msg = gzerror(gz.get(), &err);
  if (err != Z_OK && err != Z_STREAM_END)
    throw Error(ErrorKind::Parse, "idx file " + path + ": corrupt or truncated gzip stream: " + msg);
  if (!h) parse_error(path, "truncated header (" + std::to_string(buf.size()) + " bytes)");
  return finish(*h, buf.data(), buf.size(), path);
}

}  // namespace candle::datasets
