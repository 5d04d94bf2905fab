// The pickle virtual machine behind candle::pickle: opcodes of protocols 0-5 build a tree of
// values; nothing is executed. Internal (src/io; the tests and fuzzers use it).
//
// Values live in an arena and refer to each other by index, so a hostile pickle can nest or
// alias them (a list appended to itself) without recursion or reference cycles: the arena
// is freed flat, and every walk over the tree is iterative and bounded in depth and in the
// number of steps. The stack, the marks, the memo and the arena's memory are bounded too
// (see kMax* in pickle.cpp); every length is checked against the bytes that remain.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "candle/dtype.h"

namespace candle::pickle::detail {

// The element types of torch storages.
enum class TorchDType : uint8_t {
  Float64,
  Float32,
  Float16,
  BFloat16,
  Int64,
  Int32,
  Int16,
  Int8,
  UInt8,
  Bool,
  UInt16,
  UInt32,
  UInt64,
  Complex64,
  Complex128,
  Float8E4M3,
  Float8E5M2,
  QInt8,
  QUInt8,
  QInt32,
  Untyped,  // torch.UntypedStorage: bytes
};

const char* torch_dtype_name(TorchDType t);
size_t torch_dtype_size(TorchDType t);
// The candle dtype a torch dtype loads as (nullopt: not supported).
std::optional<DType> candle_dtype(TorchDType t);

enum class Kind : uint8_t {
  None,
  Bool,
  Int,
  Float,
  // arena objects
  BigInt,  // an integer wider than 64 bits: `text` holds its little-endian two's complement bytes
  Str,
  Bytes,
  Tuple,
  List,
  Dict,  // items: key, value, key, value, ...
  Set,
  Global,       // an allowed global (sub: Callable)
  StorageType,  // torch.<X>Storage (sub: TorchDType)
  DTypeObj,     // torch.<dtype> (sub: TorchDType)
  Storage,      // a persistent id resolved to a storage (aux: index into Tree::storages)
  Tensor,       // a rebuilt tensor (aux: index into Tree::tensors)
};

const char* kind_name(Kind k);

// An inline scalar or an index into the arena.
struct Ref {
  Kind kind = Kind::None;
  uint32_t index = 0;  // arena objects
  union {
    int64_t i = 0;  // Bool, Int
    double f;       // Float
  };
  bool in_arena() const { return kind >= Kind::BigInt; }
};

struct Object {
  Kind kind = Kind::None;
  uint8_t sub = 0;
  uint32_t aux = 0;
  std::string text;  // Str, Bytes, BigInt; Global: "module.name"
  std::vector<Ref> items;
};

struct StorageRecord {
  std::string key;
  TorchDType dtype = TorchDType::Float32;
  uint64_t numel = 0;        // elements of the storage (of the view, for a legacy view)
  uint64_t view_offset = 0;  // legacy storage views: elements into the root storage
  bool is_view = false;
  std::string location;  // "cpu", "cuda:0", ... (informative)
};

struct TensorRecord {
  uint32_t storage = 0;  // index into Tree::storages
  TorchDType dtype = TorchDType::Float32;
  uint64_t storage_offset = 0;
  std::vector<uint64_t> shape, stride;
  bool requires_grad = false;
};

// How persistent ids look: ('storage', type, key, location, numel) in zip archives, plus
// view metadata (None or (view_key, offset, size)) in the legacy format.
enum class PidFormat : uint8_t { Zip, Legacy, None };

struct Tree {
  std::vector<Object> arena;
  std::vector<StorageRecord> storages;
  std::unordered_map<std::string, uint32_t> storage_by_key;  // key of the storage (not of a view)
  std::vector<TensorRecord> tensors;
  Ref root;
  size_t end = 0;  // offset just past the STOP opcode

  const Object& obj(const Ref& r) const { return arena[r.index]; }
};

// Runs the pickle at the start of `data` up to its STOP opcode. `label` starts every error
// message. Throws Error(Parse) on anything malformed or not allowed.
Tree unpickle(std::span<const std::byte> data, PidFormat pids, const std::string& label);

struct NamedTensor {
  std::string name;
  uint32_t tensor = 0;  // index into Tree::tensors
};

// The tensors under `root`: dicts and lists flattened into dotted names ("a.b.0"), a later
// duplicate name replacing the earlier one in place; anything that is not a tensor, dict,
// list or tuple is skipped. Bounded in depth, steps and name bytes (Error(Parse) past them).
std::vector<NamedTensor> collect_tensors(const Tree& tree, const Ref& root, const std::string& label);

// The value of the string key `key` in the dict `dict` (nullopt when absent or not a dict).
std::optional<Ref> dict_lookup(const Tree& tree, const Ref& dict, const std::string& key);

}  // namespace candle::pickle::detail
