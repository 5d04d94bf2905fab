// candle::quantized::gguf_file (candle's candle_core::quantized::gguf_file): GGUF v1 / v2 / v3
// read (memory-mapped: tensor data is not copied) and v3 write.
//
// A GGUF file is a header (magic "GGUF", version, tensor count, key-value count), typed
// metadata (key -> Value), tensor infos (name, ne[], ggml type, offset), then the tensor data,
// each tensor at an offset that is a multiple of the alignment (general.alignment, default 32)
// from the start of the data section. Everything is little-endian; v1 has 32-bit counts,
// lengths and dims where v2 and v3 have 64-bit ones.
//
// The reader treats the file as hostile: every count, length and offset is checked against the
// file's size before anything is allocated, arrays nest at most kMaxArrayDepth levels, and
// anything wrong is a candle::Error (Parse; UnsupportedOp for ggml types and versions this
// build does not read) naming what was wrong. Decisions where the format leaves room:
// - keys must be non-empty, valid UTF-8 and unique; tensor names valid UTF-8 and unique (an
//   empty tensor name is accepted, as llama.cpp does);
// - string values are kept byte for byte (not checked for UTF-8: real vocabularies hold byte
//   tokens that are not UTF-8, and a lossy repair would merge distinct tokens);
// - a bool byte other than 0 is true (as llama.cpp and candle read it);
// - general.alignment must be a u32 and a power of two;
// - a tensor has at most 4 dims (GGML_MAX_DIMS); 0 dims read as shape (1), as ggml reads them;
//   a dim of 0 is accepted (an empty tensor), as llama.cpp does; the element count must fit
//   in an int64 (ggml's ne[] type);
// - tensor offsets must be multiples of the alignment, inside the file, and not overlap; gaps
//   between tensors are allowed (llama.cpp's reader wants them packed in order; candle does
//   not), and the last tensor's trailing padding may be missing;
// - arrays of arrays are read (candle does; llama.cpp refuses them).
// Memory: the parsed metadata takes at most ~48 bytes per byte of file (one Value per element).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "candle/device.h"
#include "candle/quantized/ggml_dtype.h"
#include "candle/quantized/quantized.h"
#include "candle/shape.h"

namespace candle::quantized::gguf_file {

inline constexpr uint32_t kDefaultAlignment = 32;
// arrays of arrays of ... at most this deep (an array of scalars is depth 1)
inline constexpr size_t kMaxArrayDepth = 16;
// GGML_MAX_DIMS
inline constexpr size_t kMaxDims = 4;

enum class VersionedMagic : uint8_t { GgufV1, GgufV2, GgufV3 };
uint32_t version_number(VersionedMagic m);

// The GGUF value type ids.
enum class ValueType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};
// "u8", "i8", ..., "string", "array"
std::string_view value_type_name(ValueType t);

// A metadata value. An array is homogeneous: every element has array_type() (itself possibly
// an array). The accessors throw Error(InvalidArgument) naming both types on a mismatch.
class Value {
 public:
  Value(uint8_t v) : v_(v) {}                   // NOLINT: implicit on purpose, as candle's Value::U8(v) ...
  Value(int8_t v) : v_(v) {}                    // NOLINT
  Value(uint16_t v) : v_(v) {}                  // NOLINT
  Value(int16_t v) : v_(v) {}                   // NOLINT
  Value(uint32_t v) : v_(v) {}                  // NOLINT
  Value(int32_t v) : v_(v) {}                   // NOLINT
  Value(uint64_t v) : v_(v) {}                  // NOLINT
  Value(int64_t v) : v_(v) {}                   // NOLINT
  Value(float v) : v_(v) {}                     // NOLINT
  Value(double v) : v_(v) {}                    // NOLINT
  Value(bool v) : v_(v) {}                      // NOLINT
  Value(std::string v) : v_(std::move(v)) {}    // NOLINT
  Value(const char* v) : v_(std::string(v)) {}  // NOLINT
  // An array of `items`, each of type `element_type` (checked).
  static Value array(ValueType element_type, std::vector<Value> items);
  // An array whose element type is that of its first item; an empty one is an array of u32
  // (as candle writes it). Throws when the items' types differ.
  static Value array(std::vector<Value> items);

  ValueType value_type() const { return static_cast<ValueType>(v_.index()); }
  // the element type of an array; throws when this is not one
  ValueType array_type() const;

  uint8_t to_u8() const;
  int8_t to_i8() const;
  uint16_t to_u16() const;
  int16_t to_i16() const;
  uint32_t to_u32() const;
  int32_t to_i32() const;
  // also from u8, u16, u32 and bool (candle's upcast)
  uint64_t to_u64() const;
  int64_t to_i64() const;
  float to_f32() const;
  double to_f64() const;
  bool to_bool() const;
  const std::string& to_string() const;
  const std::vector<Value>& to_vec() const;

  bool operator==(const Value& o) const { return v_ == o.v_ && array_type_ == o.array_type_; }
  bool operator!=(const Value& o) const { return !(*this == o); }

 private:
  Value() = default;
  template <typename T>
  const T& get(ValueType want) const;
  // alternative i is the value of type id i
  std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool, std::string,
               std::vector<Value>, uint64_t, int64_t, double>
      v_;
  ValueType array_type_ = ValueType::U8;  // arrays only
};

struct TensorInfo {
  GgmlDType ggml_dtype;
  Shape shape;      // candle's order: the reverse of GGUF's ne[]
  uint64_t offset;  // from the start of the data section
  // bytes of the tensor's blocks
  size_t size_in_bytes() const;
};

class Content {
 public:
  VersionedMagic magic = VersionedMagic::GgufV3;
  std::map<std::string, Value> metadata;
  std::map<std::string, TensorInfo> tensor_infos;
  uint64_t tensor_data_offset = 0;  // from the start of the file
  uint64_t alignment = kDefaultAlignment;

  uint32_t version() const { return version_number(magic); }

  // The file at `path`, memory-mapped; tensors view the mapping (kept alive by them).
  static Content read(const std::string& path);
  // A file already in memory, copied once.
  static Content read_buffer(std::span<const uint8_t> bytes);
  // A file already in memory that `owner` keeps alive; nothing is copied.
  static Content read_buffer(std::shared_ptr<const void> owner, std::span<const uint8_t> bytes);

  // The tensor `name` (Error(InvalidArgument) naming it when absent): its blocks in the file,
  // not copied (QTensor::from_bytes).
  QTensor tensor(const std::string& name, const Device& device = Device::cpu()) const;
  // Tells the system that the blocks of tensor `name` in a file read() mapped are done with for
  // now: their pages leave the process's resident memory and are read again on the next access;
  // QTensors that view them stay valid. The file goes out by 2 MiB spans, each once all of its
  // tensors are released (in any order; the header and padding count as released). For one pass
  // over a model larger than memory, and for weights a loader copied. Nothing happens for a
  // Content read from a buffer. The second form: the bytes [p, p + n) of the file (a part of a
  // tensor's blocks), nothing where they lie outside it.
  void release(const std::string& name) const;
  void release(const void* p, size_t n) const;
  // The value of `key`, or Error(InvalidArgument) naming the key; find: nullptr when absent.
  const Value& get(const std::string& key) const;
  const Value* find(const std::string& key) const;

 private:
  std::shared_ptr<const void> owner_;
  bool mapped_ = false;  // owner_ is the io::MmapedFile of file_
  std::span<const uint8_t> file_;
  std::string label_;  // the path, for messages
};

using MetadataList = std::vector<std::pair<std::string, Value>>;
using TensorList = std::vector<std::pair<std::string, QTensor>>;

// A tensor as the writer announces it before its blocks: name, shape (candle's order) and type.
struct TensorSpec {
  std::string name;
  Shape shape;
  GgmlDType ggml_dtype;
  // bytes of its blocks (TensorInfo::size_in_bytes)
  size_t size_in_bytes() const;
};

// GGUF v3 written tensor by tensor, so that a model larger than memory can be written while it
// is made (candle-quantize: load, quantize, write, drop). The constructor takes the metadata (in
// this order) and every tensor's name, shape and type (in this order), checks them
// (Error(InvalidArgument) on an empty, non-UTF-8 or repeated key or tensor name, a heterogeneous
// array, arrays nested deeper than kMaxArrayDepth, a tensor of more than kMaxDims dims or of
// rows that are not whole blocks) and writes the header, the metadata, the tensor infos and the
// padding. write_tensor() then takes each tensor's blocks in turn (each at a multiple of the
// alignment: general.alignment when the metadata has it, a power-of-two u32, else 32) and
// finish() ends the file. Blocks of the wrong size, type or shape, one tensor too many, or
// finish() before the last tensor are Error(InvalidArgument) naming the tensor; nothing is
// written for a refused tensor. After a write that failed part way (Error(Io)) every call is an
// error. To a path: the file is written under a temporary name next to it and renamed over
// `path` by finish(); a writer destroyed before that (an error) removes the temporary, leaving
// any previous file as it was. To a stream: the bytes go out as they come.
class Writer {
 public:
  Writer(const std::string& path, const MetadataList& metadata, std::vector<TensorSpec> tensors);
  Writer(std::ostream& out, const MetadataList& metadata, std::vector<TensorSpec> tensors);
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // The next tensor's blocks: exactly its size_in_bytes().
  void write_tensor(std::span<const uint8_t> blocks);
  // The next tensor, whose type and shape must be the announced ones.
  void write_tensor(const QTensor& t);
  // After the last tensor: completes the file (renamed into place when writing to a path).
  void finish();

  size_t tensors_written() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The whole file at once, through a Writer: the same checks and bytes. Also throws
// Error(InvalidArgument) when a tensor's blocks do not match its shape and type, before
// anything is written.
void write(const std::string& path, const MetadataList& metadata, const TensorList& tensors);
void write(std::ostream& out, const MetadataList& metadata, const TensorList& tensors);

}  // namespace candle::quantized::gguf_file
