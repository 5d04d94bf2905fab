// GGUF read: Value, the hostile-input parser, and Content's accessors. The writer is in
// gguf_write.cpp.
#include "candle/quantized/gguf_file.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "io/mmap.h"
#include "quantized/file_reader.h"

namespace candle::quantized::gguf_file {

using detail::printable;

uint32_t version_number(VersionedMagic m) {
  switch (m) {
    case VersionedMagic::GgufV1: return 1;
    case VersionedMagic::GgufV2: return 2;
    case VersionedMagic::GgufV3: return 3;
  }
  return 0;
}

std::string_view value_type_name(ValueType t) {
  static constexpr std::string_view kNames[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                                "bool", "string", "array", "u64", "i64", "f64"};
  auto i = static_cast<uint32_t>(t);
  return i < std::size(kNames) ? kNames[i] : std::string_view("unknown");
}

// ---- Value --------------------------------------------------------------------------------

Value Value::array(ValueType element_type, std::vector<Value> items) {
  if (static_cast<uint32_t>(element_type) > static_cast<uint32_t>(ValueType::F64))
    throw Error(ErrorKind::InvalidArgument,
                "gguf: unknown array element type " + std::to_string(static_cast<uint32_t>(element_type)));
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].value_type() != element_type)
      throw Error(ErrorKind::InvalidArgument,
                  "gguf: an array of " + std::string(value_type_name(element_type)) + " has element " +
                      std::to_string(i) + " of type " + std::string(value_type_name(items[i].value_type())));
  }
  Value v;
  v.v_ = std::move(items);
  v.array_type_ = element_type;
  return v;
}

Value Value::array(std::vector<Value> items) {
  ValueType t = items.empty() ? ValueType::U32 : items[0].value_type();
  return array(t, std::move(items));
}

ValueType Value::array_type() const {
  (void)get<std::vector<Value>>(ValueType::Array);
  return array_type_;
}

template <typename T>
const T& Value::get(ValueType want) const {
  if (const T* p = std::get_if<T>(&v_)) return *p;
  throw Error(ErrorKind::InvalidArgument, "gguf: the metadata value is a " +
                                              std::string(value_type_name(value_type())) + ", not a " +
                                              std::string(value_type_name(want)));
}

uint8_t Value::to_u8() const { return get<uint8_t>(ValueType::U8); }
int8_t Value::to_i8() const { return get<int8_t>(ValueType::I8); }
uint16_t Value::to_u16() const { return get<uint16_t>(ValueType::U16); }
int16_t Value::to_i16() const { return get<int16_t>(ValueType::I16); }
uint32_t Value::to_u32() const { return get<uint32_t>(ValueType::U32); }
int32_t Value::to_i32() const { return get<int32_t>(ValueType::I32); }
uint64_t Value::to_u64() const {
  switch (value_type()) {
    case ValueType::U8: return std::get<uint8_t>(v_);
    case ValueType::U16: return std::get<uint16_t>(v_);
    case ValueType::U32: return std::get<uint32_t>(v_);
    case ValueType::Bool: return std::get<bool>(v_) ? 1 : 0;
    default: return get<uint64_t>(ValueType::U64);
  }
}
int64_t Value::to_i64() const { return get<int64_t>(ValueType::I64); }
float Value::to_f32() const { return get<float>(ValueType::F32); }
double Value::to_f64() const { return get<double>(ValueType::F64); }
bool Value::to_bool() const { return get<bool>(ValueType::Bool); }
const std::string& Value::to_string() const { return get<std::string>(ValueType::String); }
const std::vector<Value>& Value::to_vec() const { return get<std::vector<Value>>(ValueType::Array); }

size_t TensorInfo::size_in_bytes() const {
  size_t rows = 1;
  for (size_t i = 0; i + 1 < shape.rank(); ++i) rows *= shape[i];
  return rows * ggml_row_bytes(ggml_dtype, shape.rank() ? shape[shape.rank() - 1] : 1);
}

// ---- the parser ---------------------------------------------------------------------------

namespace {

constexpr uint64_t kMaxNe = uint64_t(std::numeric_limits<int64_t>::max());

class Parser {
 public:
  Parser(std::span<const uint8_t> file, std::string label) : r_(file, std::move(label)) {}

  Content parse() {
    Content c;
    read_header(c);
    const uint64_t n_tensors = count("the tensor count");
    const uint64_t n_kv = count("the metadata key-value count");
    // Each key-value takes at least a length, a 1-byte key, a type and a 1-byte value; each
    // tensor info a length, n_dims, a type and an offset: bound both counts before any loop.
    const uint64_t min_kv = len_size() + 1 + 4 + 1, min_info = len_size() + 4 + 4 + 8;
    check_count(n_kv, min_kv, "metadata key-value count");
    check_count(n_tensors, min_info, "tensor count");
    if (n_kv * min_kv + n_tensors * min_info > r_.remaining())
      r_.fail(std::to_string(n_kv) + " key-values and " + std::to_string(n_tensors) +
              " tensors are more than the file (" + std::to_string(r_.size()) + " bytes) could hold");
    for (uint64_t i = 0; i < n_kv; ++i) read_kv(c, i);
    read_alignment(c);
    std::vector<const std::string*> order;
    order.reserve(static_cast<size_t>(n_tensors));
    for (uint64_t i = 0; i < n_tensors; ++i) order.push_back(read_tensor_info(c, i));
    // the data section starts at the next multiple of the alignment (alignment <= 2^31 and
    // pos <= the file size: no overflow)
    c.tensor_data_offset = (r_.pos() + c.alignment - 1) / c.alignment * c.alignment;
    check_tensor_data(c, order);
    return c;
  }

 private:
  uint64_t len_size() const { return v1_ ? 4 : 8; }
  // a count or length: u32 in v1, u64 in v2 and v3
  uint64_t count(const char* what) { return v1_ ? r_.u32(what) : r_.u64(what); }
  void check_count(uint64_t n, uint64_t min_bytes, const char* what) const {
    if (n > r_.remaining() / min_bytes)
      r_.fail(std::string("the ") + what + " " + std::to_string(n) + " is more than the file (" +
              std::to_string(r_.size()) + " bytes) could hold");
  }

  void read_header(Content& c) {
    if (r_.size() < 4) r_.fail("too short for a GGUF file (" + std::to_string(r_.size()) + " bytes)");
    const std::string_view magic = r_.bytes(4, "the magic");
    if (magic != "GGUF") r_.fail("not a GGUF file (magic '" + printable(magic) + "', expected 'GGUF')");
    const uint32_t version = r_.u32("the version");
    switch (version) {
      case 1: c.magic = VersionedMagic::GgufV1; break;
      case 2: c.magic = VersionedMagic::GgufV2; break;
      case 3: c.magic = VersionedMagic::GgufV3; break;
      default: {
        // a big-endian file (ggml can write them for s390x) has its version byte-swapped
        const uint32_t swapped = __builtin_bswap32(version);
        if (swapped >= 1 && swapped <= 3)
          r_.fail("a big-endian GGUF file (version " + std::to_string(swapped) +
                      "); only little-endian files are supported",
                  ErrorKind::UnsupportedOp);
        r_.fail("unsupported GGUF version " + std::to_string(version) + " (1, 2 and 3 are read)",
                ErrorKind::UnsupportedOp);
      }
    }
    v1_ = c.magic == VersionedMagic::GgufV1;
  }

  std::string_view string(const char* what) {
    const size_t at = r_.pos();
    const uint64_t n = count(what);
    if (n > r_.remaining())
      r_.fail(std::string(what) + " at offset " + std::to_string(at) + " has length " + std::to_string(n) +
              ", past the end of the file (" + std::to_string(r_.size()) + " bytes)");
    return r_.bytes(n, what);
  }

  // the bytes a value of type t takes at least in the file
  uint64_t min_size(uint32_t t) const {
    switch (static_cast<ValueType>(t)) {
      case ValueType::U8:
      case ValueType::I8:
      case ValueType::Bool: return 1;
      case ValueType::U16:
      case ValueType::I16: return 2;
      case ValueType::U32:
      case ValueType::I32:
      case ValueType::F32: return 4;
      case ValueType::U64:
      case ValueType::I64:
      case ValueType::F64: return 8;
      case ValueType::String: return len_size();
      case ValueType::Array: return 4 + len_size();
    }
    return 1;
  }

  Value value(uint32_t t, size_t depth, const std::string& key) {
    auto scalar = [&]<typename T>(T*) { return Value(r_.read<T>("a metadata value")); };
    switch (static_cast<ValueType>(t)) {
      case ValueType::U8: return scalar(static_cast<uint8_t*>(nullptr));
      case ValueType::I8: return scalar(static_cast<int8_t*>(nullptr));
      case ValueType::U16: return scalar(static_cast<uint16_t*>(nullptr));
      case ValueType::I16: return scalar(static_cast<int16_t*>(nullptr));
      case ValueType::U32: return scalar(static_cast<uint32_t*>(nullptr));
      case ValueType::I32: return scalar(static_cast<int32_t*>(nullptr));
      case ValueType::F32: return scalar(static_cast<float*>(nullptr));
      case ValueType::U64: return scalar(static_cast<uint64_t*>(nullptr));
      case ValueType::I64: return scalar(static_cast<int64_t*>(nullptr));
      case ValueType::F64: return scalar(static_cast<double*>(nullptr));
      case ValueType::Bool: return Value(r_.read<uint8_t>("a metadata value") != 0);
      case ValueType::String: return Value(std::string(string("a string value")));
      case ValueType::Array: {
        if (depth >= kMaxArrayDepth)
          r_.fail("metadata key '" + printable(key) + "': arrays nest deeper than " +
                  std::to_string(kMaxArrayDepth) + " levels");
        const uint32_t et = r_.u32("an array's element type");
        if (et > static_cast<uint32_t>(ValueType::F64))
          r_.fail("metadata key '" + printable(key) + "': an array has unknown element type " +
                  std::to_string(et));
        const size_t at = r_.pos();
        const uint64_t n = count("an array's length");
        if (n > r_.remaining() / min_size(et))
          r_.fail("metadata key '" + printable(key) + "': an array of " + std::to_string(n) + " " +
                  std::string(value_type_name(static_cast<ValueType>(et))) + " at offset " +
                  std::to_string(at) + " runs past the end of the file (" + std::to_string(r_.size()) +
                  " bytes)");
        std::vector<Value> items;
        items.reserve(static_cast<size_t>(n));
        for (uint64_t i = 0; i < n; ++i) items.push_back(value(et, depth + 1, key));
        return Value::array(static_cast<ValueType>(et), std::move(items));
      }
    }
    r_.fail("metadata key '" + printable(key) + "' has unknown value type " + std::to_string(t));
  }

  void read_kv(Content& c, uint64_t i) {
    const std::string_view key = string("a metadata key");
    const std::string nth = "metadata key " + std::to_string(i);
    if (key.empty()) r_.fail(nth + " is empty");
    if (!detail::valid_utf8(key)) r_.fail(nth + " ('" + printable(key) + "') is not valid UTF-8");
    const uint32_t t = r_.u32("a metadata value type");
    if (t > static_cast<uint32_t>(ValueType::F64))
      r_.fail("metadata key '" + printable(key) + "' has unknown value type " + std::to_string(t));
    std::string k(key);
    Value v = value(t, 0, k);
    if (!c.metadata.emplace(std::move(k), std::move(v)).second)
      r_.fail("metadata key '" + printable(key) + "' appears twice");
  }

  void read_alignment(Content& c) {
    auto it = c.metadata.find("general.alignment");
    if (it == c.metadata.end()) return;
    if (it->second.value_type() != ValueType::U32)
      r_.fail("general.alignment must be a u32, not a " +
              std::string(value_type_name(it->second.value_type())));
    const uint32_t a = it->second.to_u32();
    if (a == 0 || (a & (a - 1)) != 0)
      r_.fail("general.alignment " + std::to_string(a) + " is not a power of two");
    c.alignment = a;
  }

  const std::string* read_tensor_info(Content& c, uint64_t i) {
    const std::string_view name = string("a tensor name");
    const std::string where = "tensor '" + printable(name) + "'";
    if (!detail::valid_utf8(name))
      r_.fail("tensor " + std::to_string(i) + " ('" + printable(name) + "'): the name is not valid UTF-8");
    const uint32_t n_dims = r_.u32("a tensor's n_dims");
    if (n_dims > kMaxDims)
      r_.fail(where + " has " + std::to_string(n_dims) + " dims (at most " + std::to_string(kMaxDims) + ")");
    uint64_t ne[kMaxDims] = {1, 1, 1, 1};
    uint64_t elems = 1;
    bool overflow = false;
    for (uint32_t d = 0; d < n_dims; ++d) {
      ne[d] = count("a tensor's dims");
      if (ne[d] > kMaxNe)
        r_.fail(where + ": dim " + std::to_string(d) + " is " + std::to_string(ne[d]) +
                ", past ggml's int64 limit");
      if (ne[d] != 0 && elems > kMaxNe / ne[d]) overflow = true;
      elems *= ne[d];  // wraps only when overflow is set
    }
    if (overflow) {
      std::string dims;
      for (uint32_t d = 0; d < n_dims; ++d) dims += (d ? ", " : "") + std::to_string(ne[d]);
      r_.fail(where + ": the element count of ne [" + dims + "] overflows int64");
    }
    const uint32_t type_id = r_.u32("a tensor's type");
    const GgmlDType dt = detail::ggml_dtype_of_id(type_id, r_.label() + ": " + where);
    const uint64_t block = ggml_block_size(dt);
    if (ne[0] % block != 0)
      r_.fail(where + ": a row of " + std::to_string(ne[0]) + " elements is not a whole number of " +
              std::string(ggml_dtype_name(dt)) + " blocks of " + std::to_string(block));
    const uint64_t offset = r_.u64("a tensor's offset");
    std::vector<size_t> shape(n_dims);
    for (uint32_t d = 0; d < n_dims; ++d) shape[n_dims - 1 - d] = static_cast<size_t>(ne[d]);
    if (n_dims == 0) shape = {1};  // ggml reads it as ne [1, 1, 1, 1]; a QTensor has a dim
    // bytes = elems / block * type_size: checked against the file size in check_tensor_data,
    // so it must not wrap here
    if (elems / block > std::numeric_limits<uint64_t>::max() / ggml_type_size(dt))
      r_.fail(where + ": its size in bytes overflows");
    auto [it, fresh] =
        c.tensor_infos.emplace(std::string(name), TensorInfo{dt, Shape(std::move(shape)), offset});
    if (!fresh) r_.fail(where + " appears twice");
    sizes_.push_back(elems / block * ggml_type_size(dt));
    return &it->first;
  }

  void check_tensor_data(const Content& c, const std::vector<const std::string*>& order) {
    if (order.empty()) return;
    if (c.tensor_data_offset > r_.size())
      r_.fail("the tensor data section starts at " + std::to_string(c.tensor_data_offset) +
              ", past the end of the file (" + std::to_string(r_.size()) + " bytes)");
    const uint64_t data_len = r_.size() - c.tensor_data_offset;
    struct Extent {
      uint64_t begin, end;
      const std::string* name;
    };
    std::vector<Extent> extents;
    extents.reserve(order.size());
    for (size_t i = 0; i < order.size(); ++i) {
      const TensorInfo& t = c.tensor_infos.at(*order[i]);
      const std::string where = "tensor '" + printable(*order[i]) + "'";
      if (t.offset % c.alignment != 0)
        r_.fail(where + ": offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                std::to_string(c.alignment));
      if (t.offset > data_len || sizes_[i] > data_len - t.offset)
        r_.fail(where + ": its " + std::to_string(sizes_[i]) + " bytes at offset " +
                std::to_string(t.offset) + " run past the end of the file (the data section holds " +
                std::to_string(data_len) + " bytes)");
      if (sizes_[i] > 0) extents.push_back({t.offset, t.offset + sizes_[i], order[i]});
    }
    std::sort(extents.begin(), extents.end(),
              [](const Extent& a, const Extent& b) { return a.begin < b.begin; });
    for (size_t i = 1; i < extents.size(); ++i) {
      if (extents[i].begin < extents[i - 1].end)
        r_.fail("tensors '" + printable(*extents[i - 1].name) + "' [" + std::to_string(extents[i - 1].begin) +
                ", " + std::to_string(extents[i - 1].end) + ") and '" + printable(*extents[i].name) + "' [" +
                std::to_string(extents[i].begin) + ", " + std::to_string(extents[i].end) + ") overlap");
    }
  }

  detail::ByteReader r_;
  bool v1_ = false;
  std::vector<uint64_t> sizes_;  // bytes of each tensor, in file order
};

}  // namespace

// ---- Content ------------------------------------------------------------------------------

Content Content::read(const std::string& path) {
  auto mapping = io::MmapedFile::open(path);
  std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(mapping->data()), mapping->size());
  Content c = Parser(bytes, path).parse();
  c.owner_ = mapping;
  c.mapped_ = true;
  c.file_ = bytes;
  c.label_ = path;
  // the bytes outside every tensor (the header, the padding) count as released, so that a span
  // is paged out once its tensors are (MmapedFile::release)
  std::vector<std::pair<size_t, size_t>> ranges;
  for (const auto& [name, t] : c.tensor_infos)
    ranges.emplace_back(c.tensor_data_offset + t.offset, c.tensor_data_offset + t.offset + t.size_in_bytes());
  std::sort(ranges.begin(), ranges.end());
  size_t at = 0;
  for (const auto& [b, e] : ranges) {
    if (b > at) mapping->release(mapping->data() + at, b - at);
    at = std::max(at, e);
  }
  if (at < mapping->size()) mapping->release(mapping->data() + at, mapping->size() - at);
  return c;
}

Content Content::read_buffer(std::span<const uint8_t> bytes) {
  auto copy = std::make_shared<std::vector<uint8_t>>(bytes.begin(), bytes.end());
  std::span<const uint8_t> view(copy->data(), copy->size());
  return read_buffer(std::move(copy), view);
}

Content Content::read_buffer(std::shared_ptr<const void> owner, std::span<const uint8_t> bytes) {
  Content c = Parser(bytes, "GGUF buffer").parse();
  c.owner_ = std::move(owner);
  c.file_ = bytes;
  c.label_ = "GGUF buffer";
  return c;
}

QTensor Content::tensor(const std::string& name, const Device& device) const {
  auto it = tensor_infos.find(name);
  if (it == tensor_infos.end())
    throw Error(ErrorKind::InvalidArgument, label_ + ": no tensor '" + printable(name) + "'");
  const TensorInfo& t = it->second;
  const size_t n = t.size_in_bytes();
  // the parser checked that every tensor lies inside the file; this guards a Content whose
  // public fields were edited since
  if (tensor_data_offset > file_.size() || t.offset > file_.size() - tensor_data_offset ||
      n > file_.size() - tensor_data_offset - t.offset)
    throw Error(ErrorKind::InvalidArgument,
                label_ + ": tensor '" + printable(name) + "' lies outside the file");
  return with_context(label_ + ": loading tensor '" + printable(name) + "'", [&] {
    return QTensor::from_bytes(owner_, file_.subspan(tensor_data_offset + t.offset, n), t.shape, t.ggml_dtype,
                               device);
  });
}

void Content::release(const std::string& name) const {
  if (!mapped_) return;
  const QTensor t = tensor(name);  // checks the name and the range
  release(t.data().data(), t.data().size());
}

void Content::release(const void* p, size_t n) const {
  if (mapped_) static_cast<const io::MmapedFile*>(owner_.get())->release(p, n);
}

const Value* Content::find(const std::string& key) const {
  auto it = metadata.find(key);
  return it == metadata.end() ? nullptr : &it->second;
}

const Value& Content::get(const std::string& key) const {
  if (const Value* v = find(key)) return *v;
  throw Error(ErrorKind::InvalidArgument, label_ + ": no metadata key '" + printable(key) + "'");
}

}  // namespace candle::quantized::gguf_file
