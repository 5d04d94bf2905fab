// GGUF v3 write: the header, the metadata, the tensor infos, then every tensor's blocks at a
// multiple of the alignment (each padded with zeros to the next multiple, as ggml writes).
#include <cstring>
#include <functional>
#include <ostream>
#include <set>

#include "candle/quantized/gguf_file.h"
#include "io/mmap.h"
#include "quantized/file_reader.h"

namespace candle::quantized::gguf_file {

namespace {

using detail::printable;
using Put = std::function<void(const void*, size_t)>;

[[noreturn]] void bad(const std::string& msg) {
  throw Error(ErrorKind::InvalidArgument, "gguf write: " + msg);
}

void check_value(const Value& v, const std::string& key, size_t depth) {
  if (v.value_type() != ValueType::Array) return;
  if (depth >= kMaxArrayDepth)
    bad("metadata key '" + printable(key) + "': arrays nest deeper than " + std::to_string(kMaxArrayDepth) +
        " levels");
  const ValueType et = v.array_type();
  for (const Value& item : v.to_vec()) {
    // Value::array checks this; a copy-assigned element could still differ
    if (item.value_type() != et)
      bad("metadata key '" + printable(key) + "': an array of " + std::string(value_type_name(et)) +
          " holds a " + std::string(value_type_name(item.value_type())));
    check_value(item, key, depth + 1);
  }
}

uint64_t alignment_of(const MetadataList& metadata) {
  for (const auto& [k, v] : metadata) {
    if (k != "general.alignment") continue;
    if (v.value_type() != ValueType::U32)
      bad("general.alignment must be a u32, not a " + std::string(value_type_name(v.value_type())));
    const uint32_t a = v.to_u32();
    if (a == 0 || (a & (a - 1)) != 0)
      bad("general.alignment " + std::to_string(a) + " is not a power of two");
    return a;
  }
  return kDefaultAlignment;
}

void check(const MetadataList& metadata, const TensorList& tensors) {
  std::set<std::string_view> keys, names;
  for (const auto& [k, v] : metadata) {
    if (k.empty()) bad("a metadata key is empty");
    if (!detail::valid_utf8(k)) bad("metadata key '" + printable(k) + "' is not valid UTF-8");
    if (!keys.insert(k).second) bad("metadata key '" + printable(k) + "' appears twice");
    check_value(v, k, 0);
  }
  for (const auto& [name, t] : tensors) {
    if (!detail::valid_utf8(name)) bad("tensor name '" + printable(name) + "' is not valid UTF-8");
    if (!names.insert(name).second) bad("tensor '" + printable(name) + "' appears twice");
    if (t.shape().rank() > kMaxDims)
      bad("tensor '" + printable(name) + "' has " + std::to_string(t.shape().rank()) +
          " dims (GGUF holds at most " + std::to_string(kMaxDims) + ")");
    const TensorInfo info{t.dtype(), t.shape(), 0};
    if (info.size_in_bytes() != t.data().size())
      bad("tensor '" + printable(name) + "' holds " + std::to_string(t.data().size()) + " bytes, its shape " +
          t.shape().to_string() + " of " + std::string(ggml_dtype_name(t.dtype())) + " needs " +
          std::to_string(info.size_in_bytes()));
  }
}

class Writer {
 public:
  explicit Writer(Put put) : put_(std::move(put)) {}
  template <typename T>
  void pod(T v) {
    put_(&v, sizeof v);
    n_ += sizeof v;
  }
  void raw(const void* p, size_t n) {
    if (n == 0) return;
    put_(p, n);
    n_ += n;
  }
  void string(std::string_view s) {
    pod<uint64_t>(s.size());
    raw(s.data(), s.size());
  }
  void pad_to(uint64_t alignment) {
    static constexpr uint8_t kZeros[64] = {};
    uint64_t pad = (alignment - n_ % alignment) % alignment;
    while (pad > 0) {
      size_t k = std::min<uint64_t>(pad, sizeof kZeros);
      raw(kZeros, k);
      pad -= k;
    }
  }
  void value(const Value& v) {
    switch (v.value_type()) {
      case ValueType::U8: pod(v.to_u8()); break;
      case ValueType::I8: pod(v.to_i8()); break;
      case ValueType::U16: pod(v.to_u16()); break;
      case ValueType::I16: pod(v.to_i16()); break;
      case ValueType::U32: pod(v.to_u32()); break;
      case ValueType::I32: pod(v.to_i32()); break;
      case ValueType::F32: pod(v.to_f32()); break;
      case ValueType::Bool: pod<uint8_t>(v.to_bool() ? 1 : 0); break;
      case ValueType::String: string(v.to_string()); break;
      case ValueType::U64: pod(v.to_u64()); break;
      case ValueType::I64: pod(v.to_i64()); break;
      case ValueType::F64: pod(v.to_f64()); break;
      case ValueType::Array:
        pod(static_cast<uint32_t>(v.array_type()));
        pod<uint64_t>(v.to_vec().size());
        for (const Value& item : v.to_vec()) value(item);
        break;
    }
  }
  uint64_t written() const { return n_; }

 private:
  Put put_;
  uint64_t n_ = 0;
};

void write_all(const MetadataList& metadata, const TensorList& tensors, Put put) {
  check(metadata, tensors);
  const uint64_t alignment = alignment_of(metadata);
  Writer w(std::move(put));
  w.raw("GGUF", 4);
  w.pod<uint32_t>(3);
  w.pod<uint64_t>(tensors.size());
  w.pod<uint64_t>(metadata.size());
  for (const auto& [k, v] : metadata) {
    w.string(k);
    w.pod(static_cast<uint32_t>(v.value_type()));
    w.value(v);
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    w.string(name);
    const auto& dims = t.shape().dims();
    w.pod<uint32_t>(static_cast<uint32_t>(dims.size()));
    for (size_t d = dims.size(); d-- > 0;) w.pod<uint64_t>(dims[d]);  // ne[]: the reverse of candle's
    w.pod(static_cast<uint32_t>(t.dtype()));
    w.pod<uint64_t>(offset);
    offset += (t.data().size() + alignment - 1) / alignment * alignment;
  }
  w.pad_to(alignment);
  for (const auto& [name, t] : tensors) {
    w.raw(t.data().data(), t.data().size());
    w.pad_to(alignment);
  }
}

}  // namespace

void write(const std::string& path, const MetadataList& metadata, const TensorList& tensors) {
  check(metadata, tensors);  // before a temporary file exists
  io::AtomicFile f(path);
  write_all(metadata, tensors, [&](const void* p, size_t n) { f.write(p, n); });
  f.commit();
}

void write(std::ostream& out, const MetadataList& metadata, const TensorList& tensors) {
  write_all(metadata, tensors, [&](const void* p, size_t n) {
    out.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
    if (!out) throw Error(ErrorKind::Io, "gguf write: the output stream failed");
  });
}

}  // namespace candle::quantized::gguf_file
