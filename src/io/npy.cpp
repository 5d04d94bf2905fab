// NumPy .npy (format versions 1.0, 2.0, 3.0) and .npz (zip of .npy members).
//
// Dtype mapping: |b1 (bool) -> u8 (0/1), |u1 -> u8, |i1 -> i16 and <u2 -> u32 (widened
// without loss: candle has no i8/u16), <i2 i16, <i4 i32, <i8 i64, <u4 u32, <f2 f16, <f4 f32,
// <f8 f64; big-endian ('>') variants are byte-swapped. Anything else (u8/uint64, complex,
// strings, objects, structured dtypes) throws UnsupportedOp. Fortran-order arrays are
// transposed into row-major tensors. Writing: C order, format 1.0 (2.0 when the header needs
// it), the header laid out byte for byte as numpy.save does; bf16 and f8e4m3 have no NumPy
// dtype and throw UnsupportedOp.
#include "candle/io/npy.h"

#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <string_view>

#include "candle/backend/cpu_storage.h"
#include "io/host_bytes.h"
#include "io/mmap.h"
#include "io/zip.h"

namespace candle::npy {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

struct NpyDescr {
  char kind = 0;         // b u i f
  size_t item_size = 0;  // in the file
  bool big_endian = false;
  DType dtype = DType::U8;  // of the tensor we make
};

struct NpyHeader {
  NpyDescr descr;
  bool fortran_order = false;
  std::vector<size_t> shape;
  size_t data_offset = 0;
};

// Parser of the header's Python dict literal:
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class HeaderParser {
 public:
  HeaderParser(std::string_view s, const std::string& label) : s_(s), label_(label) {}

  NpyHeader parse() {
    NpyHeader h;
    bool seen_descr = false, seen_order = false, seen_shape = false;
    expect('{');
    while (true) {
      skip_ws();
      if (peek() == '}') break;
      std::string key = string_literal();
      expect(':');
      if (key == "descr") {
        skip_ws();
        if (peek() == '[') unsupported("structured dtypes (a list 'descr') are not supported");
        h.descr = parse_descr(string_literal());
        seen_descr = true;
      } else if (key == "fortran_order") {
        h.fortran_order = boolean();
        seen_order = true;
      } else if (key == "shape") {
        h.shape = tuple_of_ints();
        seen_shape = true;
      } else {
        fail("unexpected key '" + key + "' in header");
      }
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      skip_ws();
      if (peek() != '}') fail("expected ',' or '}' in header at byte " + std::to_string(pos_));
    }
    ++pos_;
    skip_ws();
    if (pos_ != s_.size()) fail("trailing characters after the header dict");
    if (!seen_descr || !seen_order || !seen_shape)
      fail("header lacks one of 'descr', 'fortran_order', 'shape'");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& msg) const { throw Error(ErrorKind::Parse, label_ + ": " + msg); }
  [[noreturn]] void unsupported(const std::string& msg) const {
    throw Error(ErrorKind::UnsupportedOp, label_ + ": " + msg);
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }
  void expect(char c) {
    skip_ws();
    if (peek() != c) fail(std::string("expected '") + c + "' in header at byte " + std::to_string(pos_));
    ++pos_;
  }
  std::string string_literal() {
    skip_ws();
    char q = peek();
    if (q != '\'' && q != '"') fail("expected a string in header at byte " + std::to_string(pos_));
    size_t end = s_.find(q, pos_ + 1);
    if (end == std::string_view::npos) fail("unterminated string in header");
    std::string out(s_.substr(pos_ + 1, end - pos_ - 1));
    if (out.find('\\') != std::string::npos) fail("escapes in header strings are not supported");
    pos_ = end + 1;
    return out;
  }
  bool boolean() {
    skip_ws();
    if (s_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (s_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    fail("expected True or False for 'fortran_order'");
  }
  std::vector<size_t> tuple_of_ints() {
    std::vector<size_t> dims;
    expect('(');
    while (true) {
      skip_ws();
      if (peek() == ')') break;
      if (peek() < '0' || peek() > '9')
        fail("expected a non-negative integer in 'shape' at byte " + std::to_string(pos_));
      size_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        size_t d = static_cast<size_t>(peek() - '0');
        if (v > (std::numeric_limits<size_t>::max() - d) / 10) fail("dimension too large in 'shape'");
        v = v * 10 + d;
        ++pos_;
      }
      if (peek() == 'L') ++pos_;  // Python 2 long
      dims.push_back(v);
      if (dims.size() > 64) fail("'shape' has more than 64 dimensions");
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      skip_ws();
      if (peek() != ')') fail("expected ',' or ')' in 'shape'");
    }
    ++pos_;
    return dims;
  }
  NpyDescr parse_descr(const std::string& d) const {
    NpyDescr r;
    if (d.size() < 3 || std::string_view("<>|=").find(d[0]) == std::string_view::npos) {
      unsupported("unsupported dtype descr '" + d + "'");
    }
    r.big_endian = d[0] == '>';
    r.kind = d[1];
    std::string_view size = std::string_view(d).substr(2);
    if (size == "1")
      r.item_size = 1;
    else if (size == "2")
      r.item_size = 2;
    else if (size == "4")
      r.item_size = 4;
    else if (size == "8")
      r.item_size = 8;
    std::optional<DType> dt;
    switch (r.kind) {
      case 'b':
        if (r.item_size == 1) dt = DType::U8;
        break;
      case 'u':
        if (r.item_size == 1)
          dt = DType::U8;
        else if (r.item_size == 2 || r.item_size == 4)
          dt = DType::U32;
        break;
      case 'i':
        if (r.item_size == 1 || r.item_size == 2)
          dt = DType::I16;
        else if (r.item_size == 4)
          dt = DType::I32;
        else if (r.item_size == 8)
          dt = DType::I64;
        break;
      case 'f':
        if (r.item_size == 2)
          dt = DType::F16;
        else if (r.item_size == 4)
          dt = DType::F32;
        else if (r.item_size == 8)
          dt = DType::F64;
        break;
      default: break;
    }
    if (!dt) {
      unsupported("unsupported dtype descr '" + d +
                  "' (supported: b1 u1 u2 u4 i1 i2 i4 i8 f2 f4 f8, little- or big-endian)");
    }
    r.dtype = *dt;
    return r;
  }

  std::string_view s_;
  const std::string& label_;
  size_t pos_ = 0;
};

NpyHeader parse_header(std::span<const std::byte> data, const std::string& label) {
  auto fail = [&](const std::string& msg) { return Error(ErrorKind::Parse, label + ": " + msg); };
  if (data.size() < kMagicLen + 2 || std::memcmp(data.data(), kMagic, kMagicLen) != 0) {
    throw fail("not a .npy file (bad magic string)");
  }
  auto major = static_cast<uint8_t>(data[6]);
  auto minor = static_cast<uint8_t>(data[7]);
  size_t len_bytes;
  if (major == 1 && minor == 0)
    len_bytes = 2;
  else if ((major == 2 || major == 3) && minor == 0)
    len_bytes = 4;
  else
    throw fail("unsupported .npy format version " + std::to_string(major) + "." + std::to_string(minor));
  size_t prefix = kMagicLen + 2 + len_bytes;
  if (data.size() < prefix) throw fail("truncated header");
  uint64_t header_len = 0;
  for (size_t i = 0; i < len_bytes; ++i) header_len |= uint64_t(static_cast<uint8_t>(data[8 + i])) << (8 * i);
  if (header_len > data.size() - prefix) {
    throw fail("header length " + std::to_string(header_len) + " runs past the end of the data (" +
               std::to_string(data.size()) + " bytes)");
  }
  std::string_view text(reinterpret_cast<const char*>(data.data() + prefix), header_len);
  NpyHeader h = HeaderParser(text, label).parse();
  h.data_offset = prefix + header_len;
  return h;
}

template <typename T>
T load_le(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

Tensor parse_npy(std::span<const std::byte> data, const Device& device, const std::string& label) {
  NpyHeader h = parse_header(data, label);
  size_t count = 1;
  for (size_t d : h.shape) {
    if (d != 0 && count > std::numeric_limits<size_t>::max() / d) {
      throw Error(ErrorKind::Parse, label + ": element count of the shape overflows");
    }
    count *= d;
  }
  size_t avail = data.size() - h.data_offset;
  if (count > avail / h.descr.item_size) {
    throw Error(ErrorKind::Parse, label + ": data is truncated: shape " + Shape(h.shape).to_string() +
                                      " needs " + std::to_string(count) + " elements of " +
                                      std::to_string(h.descr.item_size) + " bytes, " + std::to_string(avail) +
                                      " bytes present");
  }
  const std::byte* src = data.data() + h.data_offset;
  const size_t isz = h.descr.item_size;
  const size_t out_sz = dtype_size(h.descr.dtype);
  auto cpu = CpuStorage::alloc(h.descr.dtype, count);
  std::byte* dst = cpu->bytes();
  if (isz == out_sz && (!h.descr.big_endian || isz == 1)) {
    if (count) std::memcpy(dst, src, count * isz);
  } else if (isz == out_sz) {  // big-endian: reverse each element's bytes
    for (size_t i = 0; i < count; ++i)
      for (size_t b = 0; b < isz; ++b) dst[i * isz + b] = src[i * isz + isz - 1 - b];
  } else if (h.descr.kind == 'i') {  // i1 -> i16
    auto out = cpu->data<int16_t>();
    // the sign extension of i1 is the point here
    for (size_t i = 0; i < count; ++i)
      out[i] = static_cast<int8_t>(src[i]);  // NOLINT(bugprone-signed-char-misuse)
  } else {                                   // u2 -> u32
    auto out = cpu->data<uint32_t>();
    for (size_t i = 0; i < count; ++i) {
      uint16_t v = load_le<uint16_t>(src + 2 * i);
      out[i] = h.descr.big_endian ? static_cast<uint16_t>((v >> 8) | (v << 8)) : v;
    }
  }
  Shape shape(h.shape);
  Tensor t;
  if (h.fortran_order && h.shape.size() > 1) {
    // Column-major data: element (i0, i1, ..) sits at i0 + d0 * (i1 + d1 * ..).
    std::vector<size_t> stride(h.shape.size());
    size_t s = 1;
    for (size_t d = 0; d < h.shape.size(); ++d) {
      stride[d] = s;
      s *= h.shape[d];
    }
    Tensor view = Tensor::from_storage(cpu, Layout(shape, stride, 0), h.descr.dtype, Device::cpu());
    t = view.copy();
  } else {
    t = Tensor::from_storage(cpu, Layout::contiguous(shape), h.descr.dtype, Device::cpu());
  }
  return device.is_cpu() ? t : t.to_device(device);
}

std::string npy_descr(DType dt) {
  switch (dt) {
    case DType::U8: return "|u1";
    case DType::U32: return "<u4";
    case DType::I16: return "<i2";
    case DType::I32: return "<i4";
    case DType::I64: return "<i8";
    case DType::F16: return "<f2";
    case DType::F32: return "<f4";
    case DType::F64: return "<f8";
    default:
      throw Error(ErrorKind::UnsupportedOp,
                  "npy: dtype " + std::string(dtype_name(dt)) +
                      " has no NumPy equivalent; convert it first (e.g. to_dtype(F32))");
  }
}

std::string member_label(const std::string& path, const std::string& member) {
  return "npz file '" + path + "', member '" + member + "'";
}

std::string strip_npy(const std::string& name) {
  constexpr std::string_view ext = ".npy";
  if (name.size() >= ext.size() && name.compare(name.size() - ext.size(), ext.size(), ext) == 0) {
    return name.substr(0, name.size() - ext.size());
  }
  return name;
}

}  // namespace

Tensor read_npy(const std::string& path, const Device& device) {
  auto map = io::MmapedFile::open(path);
  return parse_npy(map->bytes(), device, "npy file '" + path + "'");
}

Tensor read_npy_buffer(const std::vector<std::byte>& data, const Device& device) {
  return parse_npy(data, device, "npy buffer");
}

std::vector<std::byte> npy_bytes(const Tensor& t) {
  std::string descr = npy_descr(t.dtype());
  // numpy.save's layout: sorted keys, a shape repr, room for the first dim to grow to 21
  // digits, then spaces and '\n' up to a multiple of 64 bytes.
  std::string shape = "(";
  for (size_t i = 0; i < t.rank(); ++i) {
    shape += std::to_string(t.dims()[i]);
    if (t.rank() == 1 || i + 1 < t.rank()) shape += t.rank() == 1 ? "," : ", ";
  }
  shape += ")";
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  if (t.rank() > 0) header.append(21 - std::to_string(t.dims()[0]).size(), ' ');
  size_t hlen = header.size() + 1;
  size_t len_bytes = 2;
  uint8_t major = 1;
  size_t pad = 64 - (kMagicLen + 2 + len_bytes + hlen) % 64;
  if (hlen + pad > 0xffff) {
    len_bytes = 4;
    major = 2;
    pad = 64 - (kMagicLen + 2 + len_bytes + hlen) % 64;
  }
  header.append(pad, ' ');
  header += '\n';
  io::HostBytes hb = io::host_bytes(t);
  std::vector<std::byte> out(kMagicLen + 2 + len_bytes + header.size() + hb.bytes.size());
  size_t at = 0;
  auto put = [&](const void* p, size_t n) {
    if (n) std::memcpy(out.data() + at, p, n);
    at += n;
  };
  put(kMagic, kMagicLen);
  uint8_t version[2] = {major, 0};
  put(version, 2);
  uint32_t len = static_cast<uint32_t>(header.size());
  uint8_t len_le[4] = {uint8_t(len), uint8_t(len >> 8), uint8_t(len >> 16), uint8_t(len >> 24)};
  put(len_le, len_bytes);
  put(header.data(), header.size());
  put(hb.bytes.data(), hb.bytes.size());
  return out;
}

void write_npy(const Tensor& t, const std::string& path) {
  std::vector<std::byte> bytes = npy_bytes(t);
  io::AtomicFile f(path);
  f.write(bytes);
  f.commit();
}

namespace {
std::vector<std::pair<std::string, Tensor>> read_npz_bytes(std::span<const std::byte> bytes,
                                                           const Device& device, const std::string& label) {
  io::zip::Reader zip(bytes, label);
  std::vector<std::pair<std::string, Tensor>> out;
  std::vector<std::byte> scratch;
  for (const io::zip::Entry& e : zip.entries()) {
    std::span<const std::byte> member = zip.read(e, scratch);
    out.emplace_back(strip_npy(e.name), parse_npy(member, device, label + ", member '" + e.name + "'"));
  }
  return out;
}
}  // namespace

std::vector<std::pair<std::string, Tensor>> read_npz(const std::string& path, const Device& device) {
  auto map = io::MmapedFile::open(path);
  return read_npz_bytes(map->bytes(), device, "npz file '" + path + "'");
}

std::vector<std::pair<std::string, Tensor>> read_npz_buffer(const std::vector<std::byte>& data,
                                                            const Device& device) {
  return read_npz_bytes(data, device, "npz buffer");
}

Tensor read_npz_by_name(const std::string& path, const std::string& name, const Device& device) {
  auto map = io::MmapedFile::open(path);
  io::zip::Reader zip(map->bytes(), "npz file '" + path + "'");
  const io::zip::Entry* e = zip.find(name + ".npy");
  if (!e) e = zip.find(name);
  if (!e)
    throw Error(ErrorKind::InvalidArgument, "npz file '" + path + "' has no array named '" + name + "'");
  std::vector<std::byte> scratch;
  return parse_npy(zip.read(*e, scratch), device, member_label(path, e->name));
}

void write_npz(const std::vector<std::pair<std::string, Tensor>>& tensors, const std::string& path) {
  io::AtomicFile f(path);
  io::zip::Writer zip(f);
  std::set<std::string> names;
  for (const auto& [name, t] : tensors) {
    if (!names.insert(name).second) {
      throw Error(ErrorKind::InvalidArgument, "write_npz: array name '" + name + "' appears twice");
    }
  }
  for (const auto& [name, t] : tensors) zip.add(name + ".npy", npy_bytes(t));
  zip.finish();
  f.commit();
}

}  // namespace candle::npy
