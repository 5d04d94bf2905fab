// safetensors: memory-mapped zero-copy loading, lazy multi-shard access, and saving.
//
// Dtypes: BOOL -> u8 (zero-copy), U8 I16 U32 I32 I64 F16 BF16 F32 F64 F8_E4M3 -> the same
// dtype (zero-copy on the CPU when the data is aligned to the element size, else copied);
// I8 -> i16 and U16 -> u32 are widened without loss (copied; candle-cpp has no i8/u16);
// U64 and the other float8/float6/float4 formats throw UnsupportedOp; any other dtype
// string is a Parse error. Saving writes the tensors in the reference implementation's
// order (by descending dtype, then by name, so every tensor is aligned to its element
// size) and its exact header bytes (compact JSON, "__metadata__" first, padded with
// spaces to a multiple of 8).
#include "candle/io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "candle/backend/cpu_storage.h"
#include "candle/io/json_limits.h"
#include "io/host_bytes.h"
#include "io/mmap.h"
#include "io/safetensors_internal.h"
#include "io/utf8.h"

namespace candle {

namespace safetensors {

namespace {

constexpr uint64_t kMaxHeaderSize = 100'000'000;  // as the reference implementation
// a header is an object of objects of arrays: 3 deep; __metadata__ is 2
constexpr size_t kMaxJsonDepth = 16;
constexpr size_t kMaxRank = 64;

enum class Widen : uint8_t { None, I8ToI16, U16ToU32 };

struct StDType {
  DType dtype;
  size_t file_size;  // bytes per element in the file
  Widen widen = Widen::None;
};

// The safetensors dtype names we can read, and the dtypes they become.
std::optional<StDType> st_dtype(const std::string& s) {
  if (s == "BOOL" || s == "U8") return StDType{DType::U8, 1};
  if (s == "I8") return StDType{DType::I16, 1, Widen::I8ToI16};
  if (s == "U16") return StDType{DType::U32, 2, Widen::U16ToU32};
  if (s == "I16") return StDType{DType::I16, 2};
  if (s == "U32") return StDType{DType::U32, 4};
  if (s == "I32") return StDType{DType::I32, 4};
  if (s == "I64") return StDType{DType::I64, 8};
  if (s == "F16") return StDType{DType::F16, 2};
  if (s == "BF16") return StDType{DType::BF16, 2};
  if (s == "F32") return StDType{DType::F32, 4};
  if (s == "F64") return StDType{DType::F64, 8};
  if (s == "F8_E4M3") return StDType{DType::F8E4M3, 1};
  return std::nullopt;
}

bool st_dtype_known_unsupported(const std::string& s) {
  static const std::set<std::string> names = {"U64", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4", "C64"};
  return names.count(s) != 0;
}

const char* st_name(DType dt) {
  switch (dt) {
    case DType::U8: return "U8";
    case DType::U32: return "U32";
    case DType::I16: return "I16";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::BF16: return "BF16";
    case DType::F16: return "F16";
    case DType::F32: return "F32";
    case DType::F64: return "F64";
    case DType::F8E4M3: return "F8_E4M3";
  }
  return "?";
}

// The reference writer sorts by its Dtype enum, descending; this is our dtypes' place in it.
int st_order(DType dt) {
  switch (dt) {
    case DType::U8: return 1;
    case DType::F8E4M3: return 4;
    case DType::I16: return 5;
    case DType::F16: return 7;
    case DType::BF16: return 8;
    case DType::I32: return 9;
    case DType::U32: return 10;
    case DType::F32: return 11;
    case DType::F64: return 12;
    case DType::I64: return 13;
  }
  return 0;
}

struct TensorInfo {
  std::string name;
  StDType dtype;
  std::vector<size_t> shape;
  size_t elem_count = 0;
  uint64_t begin = 0, end = 0;  // relative to the data buffer
};

struct Header {
  std::vector<TensorInfo> tensors;  // in header order
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // absolute offset of the data buffer
};

uint64_t json_size(const nlohmann::json& v, const std::string& what, const std::string& where) {
  if (!v.is_number_unsigned()) {
    throw Error(ErrorKind::Parse,
                where + ": " + what + " must be a non-negative integer, got " + io::excerpt(v.dump()));
  }
  return v.get<uint64_t>();
}

Header parse_header(std::span<const std::byte> file, const std::string& label) {
  auto fail = [&](const std::string& msg) { return Error(ErrorKind::Parse, label + ": " + msg); };
  if (file.size() < 8)
    throw fail("too short for a safetensors header (" + std::to_string(file.size()) + " bytes)");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(static_cast<uint8_t>(file[i])) << (8 * i);
  if (n > kMaxHeaderSize)
    throw fail("header length " + std::to_string(n) + " is larger than the 100 MB limit");
  if (n > file.size() - 8) {
    throw fail("header length " + std::to_string(n) + " runs past the end of the file (" +
               std::to_string(file.size()) + " bytes)");
  }
  Header h;
  h.data_start = 8 + n;
  const uint64_t buffer_len = file.size() - h.data_start;
  auto text = reinterpret_cast<const char*>(file.data() + 8);
  std::set<std::string> seen;
  std::string duplicate;
  io::check_json_depth(std::string_view(text, n), kMaxJsonDepth, label + ": the header");
  nlohmann::json j;
  try {
    // The callback sees every top-level key (depth 1): a repeated tensor name is an error,
    // not a silent "last one wins".
    j = nlohmann::json::parse(text, text + n,
                              [&](int depth, nlohmann::json::parse_event_t ev, nlohmann::json& v) {
                                if (depth == 1 && ev == nlohmann::json::parse_event_t::key && v.is_string()) {
                                  if (!seen.insert(v.get<std::string>()).second && duplicate.empty())
                                    duplicate = v.get<std::string>();
                                }
                                return true;
                              });
  } catch (const nlohmann::json::exception& e) {
    throw fail(std::string("invalid JSON header: ") + e.what());
  }
  if (!duplicate.empty()) throw fail("tensor '" + io::excerpt(duplicate) + "' appears twice in the header");
  if (!j.is_object()) throw fail("the header is not a JSON object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) throw fail("'__metadata__' is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          throw fail("'__metadata__' value for '" + io::excerpt(m.key()) + "' is not a string");
        h.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    std::string where = label + ": tensor '" + io::excerpt(name) + "'";
    auto tfail = [&](const std::string& msg) { return Error(ErrorKind::Parse, where + ": " + msg); };
    if (!v.is_object()) throw tfail("entry is not an object");
    auto dt_it = v.find("dtype");
    auto shape_it = v.find("shape");
    auto off_it = v.find("data_offsets");
    if (dt_it == v.end() || !dt_it->is_string()) throw tfail("missing or non-string 'dtype'");
    if (shape_it == v.end() || !shape_it->is_array()) throw tfail("missing or non-array 'shape'");
    if (off_it == v.end() || !off_it->is_array() || off_it->size() != 2) {
      throw tfail("missing 'data_offsets' or it is not a [begin, end] pair");
    }
    TensorInfo info;
    info.name = name;
    std::string dt = dt_it->get<std::string>();
    auto sd = st_dtype(dt);
    if (!sd) {
      if (st_dtype_known_unsupported(dt)) {
        throw Error(ErrorKind::UnsupportedOp,
                    where + ": safetensors dtype " + dt + " is not supported by candle-cpp");
      }
      throw tfail("unknown dtype '" + io::excerpt(dt) + "'");
    }
    info.dtype = *sd;
    if (shape_it->size() > kMaxRank)
      throw tfail("'shape' has " + std::to_string(shape_it->size()) + " dimensions (at most 64)");
    size_t count = 1;
    for (const auto& d : *shape_it) {
      uint64_t dim = json_size(d, "a dimension in 'shape'", where);
      if (dim > std::numeric_limits<size_t>::max() ||
          (dim != 0 && count > std::numeric_limits<size_t>::max() / dim)) {
        throw tfail("element count of shape " + io::excerpt(shape_it->dump()) + " overflows");
      }
      count *= static_cast<size_t>(dim);
      info.shape.push_back(static_cast<size_t>(dim));
    }
    info.elem_count = count;
    info.begin = json_size((*off_it)[0], "'data_offsets'", where);
    info.end = json_size((*off_it)[1], "'data_offsets'", where);
    if (count > std::numeric_limits<uint64_t>::max() / info.dtype.file_size) {
      throw tfail("byte size of shape " + io::excerpt(shape_it->dump()) + " overflows");
    }
    uint64_t nbytes = uint64_t(count) * info.dtype.file_size;
    if (info.begin > info.end || info.end - info.begin != nbytes) {
      throw tfail("data_offsets [" + std::to_string(info.begin) + ", " + std::to_string(info.end) +
                  "] do not hold shape " + Shape(info.shape).to_string() + " of " + dt + " (" +
                  std::to_string(nbytes) + " bytes)");
    }
    if (info.end > buffer_len) {
      throw tfail("data_offsets [" + std::to_string(info.begin) + ", " + std::to_string(info.end) +
                  "] run past the data buffer (" + std::to_string(buffer_len) + " bytes)");
    }
    h.tensors.push_back(std::move(info));
  }
  // No two tensors may share bytes (a writer never does; a crafted file could alias them).
  std::vector<const TensorInfo*> by_offset;
  by_offset.reserve(h.tensors.size());
  for (const TensorInfo& t : h.tensors)
    if (t.end > t.begin) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& a = *by_offset[i - 1];
    const TensorInfo& b = *by_offset[i];
    if (b.begin < a.end) {
      throw fail("tensors '" + io::excerpt(a.name) + "' [" + std::to_string(a.begin) + ", " +
                 std::to_string(a.end) + ") and '" + io::excerpt(b.name) + "' [" + std::to_string(b.begin) +
                 ", " + std::to_string(b.end) + ") overlap");
    }
  }
  return h;
}

// `owner` is the mapping when `file` is one (then CPU tensors view it without a copy).
Tensor make_tensor(const TensorInfo& info, std::span<const std::byte> file, uint64_t data_start,
                   const std::shared_ptr<io::MmapedFile>& owner, const Device& device) {
  const std::byte* src = file.data() + data_start + info.begin;
  const size_t count = info.elem_count;
  const DType dt = info.dtype.dtype;
  Shape shape(info.shape);
  switch (info.dtype.widen) {
    case Widen::I8ToI16: {
      auto cpu = CpuStorage::alloc(dt, count);
      // the sign extension of i8 is the point here
      for (size_t i = 0; i < count; ++i)
        cpu->data<int16_t>()[i] = static_cast<int8_t>(src[i]);  // NOLINT(bugprone-signed-char-misuse)
      Tensor t = Tensor::from_storage(cpu, Layout::contiguous(shape), dt, Device::cpu());
      return device.is_cpu() ? t : t.to_device(device);
    }
    case Widen::U16ToU32: {
      auto cpu = CpuStorage::alloc(dt, count);
      for (size_t i = 0; i < count; ++i) {
        uint16_t v;
        std::memcpy(&v, src + 2 * i, 2);
        cpu->data<uint32_t>()[i] = v;
      }
      Tensor t = Tensor::from_storage(cpu, Layout::contiguous(shape), dt, Device::cpu());
      return device.is_cpu() ? t : t.to_device(device);
    }
    case Widen::None: break;
  }
  bool aligned = reinterpret_cast<uintptr_t>(src) % dtype_size(dt) == 0;
  if (owner && device.is_cpu() && aligned && count > 0) {
    auto storage = CpuStorage::wrap(dt, count, const_cast<std::byte*>(src), owner);
    return Tensor::from_storage(storage, Layout::contiguous(shape), dt, device);
  }
  return Tensor::from_raw_buffer(std::span<const std::byte>(src, count * dtype_size(dt)), dt, shape, device);
}

std::unordered_map<std::string, Tensor> load_all(std::span<const std::byte> file, const std::string& label,
                                                 const std::shared_ptr<io::MmapedFile>& owner,
                                                 const Device& device) {
  Header h = parse_header(file, label);
  std::unordered_map<std::string, Tensor> out;
  for (const TensorInfo& info : h.tensors) {
    out.emplace(info.name, with_context(label + ": loading tensor '" + info.name + "'", [&] {
                  return make_tensor(info, file, h.data_start, owner, device);
                }));
  }
  return out;
}

// ---- writing -----------------------------------------------------------------------------

// A JSON string literal as serde_json writes it (control characters escaped, UTF-8 kept).
void append_json_string(std::string& out, const std::string& s, const char* what) {
  if (!io::valid_utf8(s))
    throw Error(ErrorKind::InvalidArgument, std::string("safetensors: ") + what + " is not valid UTF-8");
  out += '"';
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

struct Prepared {
  std::string header;  // padded
  std::vector<std::pair<const std::string*, const Tensor*>> order;
};

Prepared prepare(const std::unordered_map<std::string, Tensor>& tensors,
                 const std::map<std::string, std::string>& metadata) {
  Prepared p;
  for (const auto& [name, t] : tensors) {
    if (!t.defined())
      throw Error(ErrorKind::InvalidArgument, "safetensors: tensor '" + name + "' is empty (undefined)");
    if (name == "__metadata__")
      throw Error(ErrorKind::InvalidArgument, "safetensors: '__metadata__' is not a valid tensor name");
    p.order.emplace_back(&name, &t);
  }
  std::sort(p.order.begin(), p.order.end(), [](const auto& a, const auto& b) {
    int oa = st_order(a.second->dtype()), ob = st_order(b.second->dtype());
    if (oa != ob) return oa > ob;
    return *a.first < *b.first;
  });
  std::string& h = p.header;
  h += '{';
  bool first = true;
  if (!metadata.empty()) {
    h += "\"__metadata__\":{";
    for (const auto& [k, v] : metadata) {
      if (!first) h += ',';
      first = false;
      append_json_string(h, k, "a metadata key");
      h += ':';
      append_json_string(h, v, "a metadata value");
    }
    h += '}';
    first = false;
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : p.order) {
    if (!first) h += ',';
    first = false;
    append_json_string(h, *name, "a tensor name");
    h += ":{\"dtype\":\"";
    h += st_name(t->dtype());
    h += "\",\"shape\":[";
    for (size_t i = 0; i < t->rank(); ++i) {
      if (i) h += ',';
      h += std::to_string(t->dims()[i]);
    }
    uint64_t nbytes = uint64_t(t->elem_count()) * dtype_size(t->dtype());
    h += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + nbytes) + "]}";
    offset += nbytes;
  }
  h += '}';
  h.append((8 - h.size() % 8) % 8, ' ');
  return p;
}

template <typename Put>
void write_all(const std::unordered_map<std::string, Tensor>& tensors,
               const std::map<std::string, std::string>& metadata, Put&& put) {
  Prepared p = prepare(tensors, metadata);
  uint64_t n = p.header.size();
  std::byte len[8];
  for (int i = 0; i < 8; ++i) len[i] = std::byte((n >> (8 * i)) & 0xff);
  put(len, 8);
  put(p.header.data(), p.header.size());
  for (const auto& [name, t] : p.order) {
    io::HostBytes hb = io::host_bytes(*t);
    put(hb.bytes.data(), hb.bytes.size());
  }
}

}  // namespace

namespace detail {
MappedLoad load_mapped(const std::string& path, const Device& device) {
  MappedLoad r;
  r.mapping = io::MmapedFile::open(path);
  r.tensors = load_all(r.mapping->bytes(), "safetensors file '" + path + "'", r.mapping, device);
  return r;
}
}  // namespace detail

std::unordered_map<std::string, Tensor> load(const std::string& path, const Device& device) {
  return detail::load_mapped(path, device).tensors;
}

std::unordered_map<std::string, Tensor> load_buffer(const std::vector<std::byte>& data,
                                                    const Device& device) {
  return load_all(data, "safetensors buffer", nullptr, device);
}

std::vector<std::byte> serialize(const std::unordered_map<std::string, Tensor>& tensors,
                                 const std::map<std::string, std::string>& metadata) {
  std::vector<std::byte> out;
  write_all(tensors, metadata, [&](const void* p, size_t n) {
    auto b = static_cast<const std::byte*>(p);
    out.insert(out.end(), b, b + n);
  });
  return out;
}

void save(const std::unordered_map<std::string, Tensor>& tensors, const std::string& path,
          const std::map<std::string, std::string>& metadata) {
  with_context("saving safetensors file '" + path + "'", [&] {
    io::AtomicFile f(path);
    write_all(tensors, metadata, [&](const void* p, size_t n) { f.write(p, n); });
    f.commit();
  });
}

// ---- MmapedSafetensors -------------------------------------------------------------------

struct MmapedSafetensors::Impl {
  struct File {
    std::shared_ptr<io::MmapedFile> map;
    Header header;
    std::string label;
  };
  std::vector<File> files;
  std::unordered_map<std::string, std::pair<size_t, size_t>> routing;  // name -> (file, tensor)
  std::map<std::string, std::string> metadata;

  explicit Impl(const std::vector<std::string>& paths) {
    for (const std::string& path : paths) {
      File f;
      f.map = io::MmapedFile::open(path);
      f.label = "safetensors file '" + path + "'";
      f.header = parse_header(f.map->bytes(), f.label);
      size_t idx = files.size();
      for (size_t i = 0; i < f.header.tensors.size(); ++i) {
        const std::string& name = f.header.tensors[i].name;
        auto [it, inserted] = routing.emplace(name, std::make_pair(idx, i));
        if (!inserted) {
          throw Error(ErrorKind::Parse, "tensor '" + name + "' appears in two shards: " +
                                            files[it->second.first].label + " and " + f.label);
        }
      }
      for (const auto& [k, v] : f.header.metadata) metadata.emplace(k, v);  // the first shard's value wins
      files.push_back(std::move(f));
    }
  }

  const std::pair<size_t, size_t>& route(const std::string& name) const {
    auto it = routing.find(name);
    if (it == routing.end()) {
      std::string where;
      for (const File& f : files) where += (where.empty() ? "" : ", ") + f.label;
      throw Error(ErrorKind::InvalidArgument, "cannot find tensor '" + name + "' in " + where);
    }
    return it->second;
  }
};

MmapedSafetensors::MmapedSafetensors(const std::string& path)
    : impl_(std::make_shared<Impl>(std::vector<std::string>{path})) {}
MmapedSafetensors::MmapedSafetensors(const std::vector<std::string>& paths)
    : impl_(std::make_shared<Impl>(paths)) {}

Tensor MmapedSafetensors::load(const std::string& name, const Device& device) const {
  auto [fi, ti] = impl_->route(name);
  const Impl::File& f = impl_->files[fi];
  const auto& info = f.header.tensors[ti];  // (a lambda may not capture a structured binding before clang 16)
  return with_context(f.label + ": loading tensor '" + name + "'",
                      [&] { return make_tensor(info, f.map->bytes(), f.header.data_start, f.map, device); });
}

bool MmapedSafetensors::contains(const std::string& name) const { return impl_->routing.count(name) != 0; }

std::vector<std::string> MmapedSafetensors::names() const {
  std::vector<std::string> out;
  out.reserve(impl_->routing.size());
  for (const auto& [name, where] : impl_->routing) out.push_back(name);
  std::sort(out.begin(), out.end());
  return out;
}

const std::map<std::string, std::string>& MmapedSafetensors::metadata() const { return impl_->metadata; }

void MmapedSafetensors::release(const std::string& name) const {
  auto [fi, ti] = impl_->route(name);
  const Impl::File& f = impl_->files[fi];
  const TensorInfo& t = f.header.tensors[ti];
  f.map->release(f.map->data() + f.header.data_start + t.begin, t.end - t.begin);
}

std::pair<DType, Shape> MmapedSafetensors::info(const std::string& name) const {
  auto [fi, ti] = impl_->route(name);
  const TensorInfo& t = impl_->files[fi].header.tensors[ti];
  return {t.dtype.dtype, Shape(t.shape)};
}

}  // namespace safetensors

void Tensor::save_safetensors(const std::string& name, const std::string& path) const {
  safetensors::save({{name, *this}}, path);
}

}  // namespace candle
