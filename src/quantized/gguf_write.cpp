// GGUF v3 write: the header, the metadata, the tensor infos, then every tensor's blocks at a
// multiple of the alignment (each padded with zeros to the next multiple, as ggml writes). One
// code path: write() is a Writer given every tensor at once.
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

void check(const MetadataList& metadata, const std::vector<TensorSpec>& tensors) {
  std::set<std::string_view> keys, names;
  for (const auto& [k, v] : metadata) {
    if (k.empty()) bad("a metadata key is empty");
    if (!detail::valid_utf8(k)) bad("metadata key '" + printable(k) + "' is not valid UTF-8");
    if (!keys.insert(k).second) bad("metadata key '" + printable(k) + "' appears twice");
    check_value(v, k, 0);
  }
  for (const TensorSpec& t : tensors) {
    if (!detail::valid_utf8(t.name)) bad("tensor name '" + printable(t.name) + "' is not valid UTF-8");
    if (!names.insert(t.name).second) bad("tensor '" + printable(t.name) + "' appears twice");
    if (t.shape.rank() > kMaxDims)
      bad("tensor '" + printable(t.name) + "' has " + std::to_string(t.shape.rank()) +
          " dims (GGUF holds at most " + std::to_string(kMaxDims) + ")");
  }
}

std::string describe(const TensorSpec& t) {
  return "tensor '" + printable(t.name) + "' (" + t.shape.to_string() + " of " +
         std::string(ggml_dtype_name(t.ggml_dtype)) + ")";
}

// the blocks' size, the error naming the tensor when its rows are not whole blocks
size_t checked_size(const TensorSpec& t) {
  try {
    return t.size_in_bytes();
  } catch (const Error& e) {
    bad(describe(t) + ": " + e.what());
  }
}

class ByteSink {
 public:
  explicit ByteSink(Put put) : put_(std::move(put)) {}
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

}  // namespace

size_t TensorSpec::size_in_bytes() const { return TensorInfo{ggml_dtype, shape, 0}.size_in_bytes(); }

struct Writer::Impl {
  std::unique_ptr<io::AtomicFile> file;  // when writing to a path
  ByteSink sink;
  std::vector<TensorSpec> tensors;
  std::vector<size_t> sizes;
  uint64_t alignment = kDefaultAlignment;
  size_t next = 0;
  bool finished = false;
  bool broken = false;  // a write failed part way: the output is not a GGUF file any more

  Impl(Put put, std::vector<TensorSpec> ts) : sink(std::move(put)), tensors(std::move(ts)) {}

  // Checks everything before the first byte (and the temporary file) exists.
  static void validate(const MetadataList& metadata, const std::vector<TensorSpec>& tensors) {
    check(metadata, tensors);
    alignment_of(metadata);
    for (const TensorSpec& t : tensors) checked_size(t);
  }

  void start(const MetadataList& metadata) {
    alignment = alignment_of(metadata);
    for (const TensorSpec& t : tensors) sizes.push_back(checked_size(t));
    guarded([&] {
      sink.raw("GGUF", 4);
      sink.pod<uint32_t>(3);
      sink.pod<uint64_t>(tensors.size());
      sink.pod<uint64_t>(metadata.size());
      for (const auto& [k, v] : metadata) {
        sink.string(k);
        sink.pod(static_cast<uint32_t>(v.value_type()));
        sink.value(v);
      }
      uint64_t offset = 0;
      for (size_t i = 0; i < tensors.size(); ++i) {
        sink.string(tensors[i].name);
        const auto& dims = tensors[i].shape.dims();
        sink.pod<uint32_t>(static_cast<uint32_t>(dims.size()));
        for (size_t d = dims.size(); d-- > 0;) sink.pod<uint64_t>(dims[d]);  // ne[]: the reverse of candle's
        sink.pod(static_cast<uint32_t>(tensors[i].ggml_dtype));
        sink.pod<uint64_t>(offset);
        offset += (sizes[i] + alignment - 1) / alignment * alignment;
      }
      sink.pad_to(alignment);
    });
  }

  template <typename Fn>
  void guarded(Fn&& fn) {
    broken = true;
    fn();
    broken = false;
  }

  void usable(const char* what) const {
    if (broken) bad(std::string(what) + " after a failed write");
    if (finished) bad(std::string(what) + " after finish()");
  }

  void write(std::span<const uint8_t> blocks) {
    usable("a tensor written");
    if (next == tensors.size())
      bad("all " + std::to_string(tensors.size()) + " tensors are already written; a " +
          std::to_string(blocks.size()) + "-byte tensor is one too many");
    const TensorSpec& t = tensors[next];
    if (blocks.size() != sizes[next])
      bad(describe(t) + " takes " + std::to_string(sizes[next]) + " bytes, " + std::to_string(blocks.size()) +
          " were given");
    guarded([&] {
      sink.raw(blocks.data(), blocks.size());
      sink.pad_to(alignment);
    });
    ++next;
  }

  void finish() {
    usable("finish()");
    if (next != tensors.size())
      bad("finish() after " + std::to_string(next) + " of " + std::to_string(tensors.size()) +
          " tensors: " + describe(tensors[next]) + " and any after it were not written");
    guarded([&] {
      if (file) file->commit();
    });
    finished = true;
  }
};

Writer::Writer(const std::string& path, const MetadataList& metadata, std::vector<TensorSpec> tensors) {
  Impl::validate(metadata, tensors);  // before a temporary file exists
  auto file = std::make_unique<io::AtomicFile>(path);
  io::AtomicFile* f = file.get();
  impl_ = std::make_unique<Impl>([f](const void* p, size_t n) { f->write(p, n); }, std::move(tensors));
  impl_->file = std::move(file);
  impl_->start(metadata);
}

Writer::Writer(std::ostream& out, const MetadataList& metadata, std::vector<TensorSpec> tensors) {
  Impl::validate(metadata, tensors);
  impl_ = std::make_unique<Impl>(
      [&out](const void* p, size_t n) {
        out.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
        if (!out) throw Error(ErrorKind::Io, "gguf write: the output stream failed");
      },
      std::move(tensors));
  impl_->start(metadata);
}

Writer::~Writer() = default;

void Writer::write_tensor(std::span<const uint8_t> blocks) { impl_->write(blocks); }

void Writer::write_tensor(const QTensor& t) {
  impl_->usable("a tensor written");
  if (impl_->next < impl_->tensors.size()) {
    const TensorSpec& want = impl_->tensors[impl_->next];
    if (t.dtype() != want.ggml_dtype || t.shape() != want.shape)
      bad(describe(want) + " was announced, a tensor of " + t.shape().to_string() + " of " +
          std::string(ggml_dtype_name(t.dtype())) + " was given");
  }
  impl_->write(t.data());
}

void Writer::finish() { impl_->finish(); }

size_t Writer::tensors_written() const { return impl_->next; }

namespace {

std::vector<TensorSpec> specs_of(const TensorList& tensors) {
  std::vector<TensorSpec> specs;
  specs.reserve(tensors.size());
  for (const auto& [name, t] : tensors) specs.push_back({name, t.shape(), t.dtype()});
  return specs;
}

// every tensor's blocks against its shape and type, before a byte (or the temporary file) exists
void check_blocks(const std::vector<TensorSpec>& specs, const TensorList& tensors) {
  for (size_t i = 0; i < specs.size(); ++i) {
    const size_t want = checked_size(specs[i]), got = tensors[i].second.data().size();
    if (want != got)
      bad("tensor '" + printable(specs[i].name) + "' holds " + std::to_string(got) + " bytes, its shape " +
          specs[i].shape.to_string() + " of " + std::string(ggml_dtype_name(specs[i].ggml_dtype)) +
          " needs " + std::to_string(want));
  }
}

template <typename Out>
void write_whole(Out& out, const MetadataList& metadata, const TensorList& tensors) {
  std::vector<TensorSpec> specs = specs_of(tensors);
  check(metadata, specs);
  check_blocks(specs, tensors);
  Writer w(out, metadata, std::move(specs));
  for (const auto& [name, t] : tensors) w.write_tensor(t.data());
  w.finish();
}

}  // namespace

void write(const std::string& path, const MetadataList& metadata, const TensorList& tensors) {
  write_whole(path, metadata, tensors);
}

void write(std::ostream& out, const MetadataList& metadata, const TensorList& tensors) {
  write_whole(out, metadata, tensors);
}

}  // namespace candle::quantized::gguf_file
