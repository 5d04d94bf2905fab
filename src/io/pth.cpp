// PyTorch checkpoint files (candle::pickle, include/candle/io/pickle.h) over the pickle VM of
// src/io/pickle_vm.h.
//
// Zip format (torch >= 1.6): <folder>/data.pkl is the pickle, <folder>/data/<key> the raw
// bytes of storage <key>, <folder>/byteorder (when present) must say "little". Any single
// top folder name is accepted. Legacy format: the pickles of the magic number
// 0x1950a86a20f9469cfc6c, the protocol version (1001), the system info (little_endian must
// be true), the object, then the list of storage keys, then for each key its element count
// (int64 little-endian, equal to the one the pickle declared) and its bytes. Storages are
// checked once when the file is opened: every one the pickle references must exist and hold
// the bytes it declares; each tensor's extent was checked against its storage by the VM.
#include <cstring>
#include <limits>
#include <mutex>
#include <unordered_map>

#include "candle/backend/cpu_storage.h"
#include "candle/io/json_limits.h"
#include "candle/io/pickle.h"
#include "io/mmap.h"
#include "io/pickle_vm.h"
#include "io/zip.h"

namespace candle::pickle {

namespace {

using detail::Kind;
using detail::Ref;
using detail::TorchDType;

constexpr char kLegacyMagic[] = "\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19";  // 0x1950a86a20f9469cfc6c
constexpr int64_t kLegacyProtocolVersion = 1001;
// A tensor whose elements overlap in its storage (stride 0) is expanded when loaded; past
// its storage's size, only up to this many bytes.
constexpr uint64_t kMaxExpandedBytes = uint64_t(64) << 20;

// How a storage's element is turned into the tensor's.
enum class Convert : uint8_t { Copy, Int8ToI16, BoolToU8, U16ToU32 };

Convert conversion(TorchDType t) {
  switch (t) {
    case TorchDType::Int8: return Convert::Int8ToI16;
    case TorchDType::Bool: return Convert::BoolToU8;
    case TorchDType::UInt16: return Convert::U16ToU32;
    default: return Convert::Copy;
  }
}

}  // namespace

struct PthTensors::Impl {
  std::shared_ptr<io::MmapedFile> map;           // a file, or
  std::shared_ptr<std::vector<std::byte>> copy;  // a buffer
  std::span<const std::byte> bytes;
  std::string label;
  detail::Tree tree;
  bool is_zip = false;
  std::optional<io::zip::Reader> zip;
  std::vector<const io::zip::Entry*> storage_entry;  // zip: per root storage
  std::vector<uint64_t> storage_offset;              // legacy: per root storage, in the file
  std::vector<TensorInfo> infos;
  std::vector<uint32_t> info_tensor;  // index into tree.tensors
  std::unordered_map<std::string, size_t> by_name;
  // the CRC-checked bytes of stored zip members, read once
  mutable std::mutex mutex;
  mutable std::unordered_map<uint32_t, std::span<const std::byte>> verified;

  void open(const std::optional<std::string>& key);
  void open_zip();
  void open_legacy();
  void select(const std::optional<std::string>& key);
  Tensor make(size_t info_index, const Device& device) const;
  // The bytes of root storage `idx` and what keeps them alive (null: `bytes` itself).
  std::pair<std::span<const std::byte>, std::shared_ptr<void>> storage_bytes(uint32_t idx) const;

  [[noreturn]] void fail(const std::string& msg) const { throw Error(ErrorKind::Parse, label + ": " + msg); }
};

void PthTensors::Impl::open(const std::optional<std::string>& key) {
  if (bytes.size() >= 4 && std::memcmp(bytes.data(), "PK\x03\x04", 4) == 0) {
    is_zip = true;
    open_zip();
  } else if (bytes.size() >= 2 && (static_cast<uint8_t>(bytes[0]) == 0x80 || bytes[0] == std::byte{'L'})) {
    open_legacy();
  } else if (bytes.size() >= 262 && std::memcmp(bytes.data() + 257, "ustar", 5) == 0) {
    throw Error(ErrorKind::UnsupportedOp,
                label + ": the tar checkpoint format (PyTorch < 0.1.10) is not supported");
  } else {
    fail("not a PyTorch checkpoint (neither a zip archive nor the legacy pickle format)");
  }
  select(key);
}

void PthTensors::Impl::open_zip() {
  zip.emplace(bytes, label);
  // <folder>/data.pkl, for exactly one folder name
  const io::zip::Entry* pkl = nullptr;
  for (const io::zip::Entry& e : zip->entries()) {
    const size_t slash = e.name.find('/');
    if (slash == std::string::npos || e.name.compare(slash, std::string::npos, "/data.pkl") != 0) continue;
    if (pkl) fail("two pickles: '" + io::excerpt(pkl->name) + "' and '" + io::excerpt(e.name) + "'");
    pkl = &e;
  }
  if (!pkl) fail("the archive has no <folder>/data.pkl member (not a torch.save checkpoint)");
  const std::string prefix = pkl->name.substr(0, pkl->name.size() - std::string_view("data.pkl").size());
  if (const io::zip::Entry* bo = zip->find(prefix + "byteorder")) {
    std::vector<std::byte> scratch;
    auto b = zip->read(*bo, scratch);
    std::string_view order(reinterpret_cast<const char*>(b.data()), b.size());
    if (order != "little") {
      throw Error(ErrorKind::UnsupportedOp,
                  label + ": byte order '" + io::excerpt(order) + "' is not supported (only little-endian)");
    }
  }
  std::vector<std::byte> scratch;
  std::span<const std::byte> pickle = zip->read(*pkl, scratch);
  tree =
      detail::unpickle(pickle, detail::PidFormat::Zip, label + ", member '" + io::excerpt(pkl->name) + "'");
  storage_entry.resize(tree.storages.size(), nullptr);
  for (size_t i = 0; i < tree.storages.size(); ++i) {
    const detail::StorageRecord& s = tree.storages[i];
    const std::string member = prefix + "data/" + s.key;
    const io::zip::Entry* e = zip->find(member);
    if (!e) fail("storage '" + io::excerpt(s.key) + "' is missing (no member '" + io::excerpt(member) + "')");
    const uint64_t need = s.numel * detail::torch_dtype_size(s.dtype);
    if (e->size < need) {
      fail("storage '" + io::excerpt(s.key) + "' holds " + std::to_string(e->size) + " bytes, " +
           std::to_string(s.numel) + " " + detail::torch_dtype_name(s.dtype) + " elements need " +
           std::to_string(need));
    }
    storage_entry[i] = e;
  }
}

void PthTensors::Impl::open_legacy() {
  size_t at = 0;
  auto next = [&](detail::PidFormat pids, const char* what) {
    if (at >= bytes.size()) fail(std::string("truncated: the file ends before ") + what);
    detail::Tree t = detail::unpickle(bytes.subspan(at), pids, label + ", " + what);
    at += t.end;
    return t;
  };
  {
    detail::Tree magic = next(detail::PidFormat::None, "the magic number");
    const Ref& r = magic.root;
    if (r.kind != Kind::BigInt || magic.obj(r).text != std::string_view(kLegacyMagic, 10))
      fail("not a PyTorch checkpoint (the legacy format's magic number is missing)");
  }
  {
    detail::Tree version = next(detail::PidFormat::None, "the protocol version");
    if (version.root.kind != Kind::Int || version.root.i != kLegacyProtocolVersion) {
      fail("legacy protocol version " +
           (version.root.kind == Kind::Int ? std::to_string(version.root.i) : std::string("?")) +
           " is not supported (only 1001)");
    }
  }
  {
    detail::Tree info = next(detail::PidFormat::None, "the system info");
    auto le = detail::dict_lookup(info, info.root, "little_endian");
    if (le && le->kind == Kind::Bool && le->i == 0)
      throw Error(ErrorKind::UnsupportedOp, label + ": big-endian checkpoints are not supported");
  }
  tree = next(detail::PidFormat::Legacy, "the pickled object");
  detail::Tree keys = next(detail::PidFormat::None, "the storage keys");
  if (keys.root.kind != Kind::List) fail("the storage keys are not a list");
  storage_offset.assign(tree.storages.size(), std::numeric_limits<uint64_t>::max());
  for (const Ref& k : keys.obj(keys.root).items) {
    if (k.kind != Kind::Str) fail("a storage key is not a string");
    const std::string& key = keys.obj(k).text;
    auto it = tree.storage_by_key.find(key);
    if (it == tree.storage_by_key.end()) fail("storage '" + io::excerpt(key) + "' is not used by the pickle");
    if (storage_offset[it->second] != std::numeric_limits<uint64_t>::max())
      fail("storage '" + io::excerpt(key) + "' is listed twice");
    const detail::StorageRecord& s = tree.storages[it->second];
    if (bytes.size() - at < 8) fail("truncated: the size of storage '" + io::excerpt(key) + "' is missing");
    uint64_t numel = 0;
    for (int i = 0; i < 8; ++i) numel |= uint64_t(static_cast<uint8_t>(bytes[at + i])) << (8 * i);
    at += 8;
    if (numel != s.numel) {
      fail("storage '" + io::excerpt(key) + "' has " + std::to_string(numel) + " elements in the file, " +
           std::to_string(s.numel) + " in the pickle");
    }
    const uint64_t n = s.numel * detail::torch_dtype_size(s.dtype);
    if (n > bytes.size() - at) {
      fail("truncated: storage '" + io::excerpt(key) + "' needs " + std::to_string(n) + " bytes, " +
           std::to_string(bytes.size() - at) + " left");
    }
    storage_offset[it->second] = at;
    at += static_cast<size_t>(n);
  }
  for (size_t i = 0; i < tree.storages.size(); ++i) {
    const detail::StorageRecord& s = tree.storages[i];
    if (!s.is_view && storage_offset[i] == std::numeric_limits<uint64_t>::max())
      fail("storage '" + io::excerpt(s.key) + "' has no data (it is not in the list of storage keys)");
  }
}

void PthTensors::Impl::select(const std::optional<std::string>& key) {
  Ref root = tree.root;
  std::string where = label;
  if (key) {
    if (root.kind != Kind::Dict) {
      throw Error(ErrorKind::InvalidArgument, label + ": the checkpoint is a " +
                                                  std::string(detail::kind_name(root.kind)) +
                                                  ", not a dict with key '" + io::excerpt(*key) + "'");
    }
    auto r = detail::dict_lookup(tree, root, *key);
    if (!r) {
      std::string names;
      const auto& items = tree.obj(root).items;
      for (size_t i = 0; i + 1 < items.size() && names.size() < 200; i += 2)
        if (items[i].kind == Kind::Str)
          names += (names.empty() ? "" : ", ") + io::excerpt(tree.obj(items[i]).text);
      throw Error(ErrorKind::InvalidArgument, label + ": the checkpoint has no key '" + io::excerpt(*key) +
                                                  "' (its keys: " + names + ")");
    }
    root = *r;
  }
  for (const detail::NamedTensor& nt : detail::collect_tensors(tree, root, label)) {
    const detail::TensorRecord& t = tree.tensors[nt.tensor];
    const detail::StorageRecord& s = tree.storages[t.storage];
    auto dt = detail::candle_dtype(t.dtype);
    if (!dt) {
      throw Error(ErrorKind::UnsupportedOp, label + ": tensor '" + io::excerpt(nt.name) +
                                                "' has torch dtype " + detail::torch_dtype_name(t.dtype) +
                                                ", which candle does not support");
    }
    TensorInfo info;
    info.name = nt.name;
    info.dtype = *dt;
    info.shape.assign(t.shape.begin(), t.shape.end());
    info.stride.assign(t.stride.begin(), t.stride.end());
    info.storage_offset = static_cast<size_t>(t.storage_offset);
    info.storage = s.key;
    info.storage_size = static_cast<size_t>(s.numel);
    info.requires_grad = t.requires_grad;
    by_name.emplace(info.name, infos.size());
    infos.push_back(std::move(info));
    info_tensor.push_back(nt.tensor);
  }
}

std::pair<std::span<const std::byte>, std::shared_ptr<void>> PthTensors::Impl::storage_bytes(
    uint32_t idx) const {
  const detail::StorageRecord& s = tree.storages[idx];
  const uint64_t n = s.numel * detail::torch_dtype_size(s.dtype);
  std::shared_ptr<void> owner = map ? std::shared_ptr<void>(map) : std::shared_ptr<void>(copy);
  if (!is_zip)
    return {bytes.subspan(static_cast<size_t>(storage_offset[idx]), static_cast<size_t>(n)), owner};
  const io::zip::Entry& e = *storage_entry[idx];
  if (e.method == 0) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = verified.find(idx);
    if (it == verified.end()) {
      std::vector<std::byte> unused;
      it = verified.emplace(idx, zip->read(e, unused)).first;
    }
    return {it->second.first(static_cast<size_t>(n)), owner};
  }
  // a compressed member: inflated into a buffer that the tensor may keep
  auto inflated = std::make_shared<std::vector<std::byte>>();
  std::span<const std::byte> b = zip->read(e, *inflated);
  return {b.first(static_cast<size_t>(n)), inflated};
}

Tensor PthTensors::Impl::make(size_t info_index, const Device& device) const {
  const TensorInfo& info = infos[info_index];
  const detail::TensorRecord& t = tree.tensors[info_tensor[info_index]];
  const detail::StorageRecord& s = tree.storages[t.storage];
  const DType dt = info.dtype;
  const Shape shape(info.shape);
  const size_t count = shape.elem_count();
  if (count == 0) return Tensor::zeros(shape, dt, device);
  // the root storage, and where this storage (a legacy view) starts in it
  uint32_t root = t.storage;
  if (s.is_view) root = tree.storage_by_key.at(s.key);
  auto [all, owner] = storage_bytes(root);
  const size_t esize = detail::torch_dtype_size(t.dtype);
  const std::byte* base = all.data() + s.view_offset * detail::torch_dtype_size(s.dtype);
  // the extent (checked by the VM against the storage)
  size_t extent = info.storage_offset + 1;
  for (size_t i = 0; i < info.shape.size(); ++i) extent += (info.shape[i] - 1) * info.stride[i];
  const Convert conv = conversion(t.dtype);
  const size_t out_size = dtype_size(dt);
  if (count > extent && uint64_t(count) * out_size > kMaxExpandedBytes) {
    throw Error(ErrorKind::UnsupportedOp,
                label + ": tensor '" + io::excerpt(info.name) + "' of " + std::to_string(count) +
                    " elements views only " + std::to_string(extent) +
                    " elements of its storage (stride 0); expanding it would take more than " +
                    std::to_string(kMaxExpandedBytes >> 20) + " MiB");
  }
  const std::byte* src = base + info.storage_offset * esize;
  const bool contiguous = shape.is_contiguous(info.stride);
  if (contiguous && conv == Convert::Copy) {
    const bool aligned = reinterpret_cast<uintptr_t>(src) % esize == 0;
    if (device.is_cpu() && aligned) {
      // a view of the mapped file (or the buffer): no copy
      auto storage = CpuStorage::wrap(dt, count, const_cast<std::byte*>(src), owner);
      return Tensor::from_storage(storage, Layout::contiguous(shape), dt, device);
    }
    return Tensor::from_raw_buffer(std::span<const std::byte>(src, count * esize), dt, shape, device);
  }
  // One strided copy, converting each element; runs along the last dimension.
  auto out = CpuStorage::alloc(dt, count);
  std::byte* dst = out->bytes();
  const size_t rank = info.shape.size();
  const size_t inner = rank ? info.shape[rank - 1] : 1;
  const size_t inner_stride = rank ? info.stride[rank - 1] : 1;
  std::vector<size_t> idx(rank, 0);
  size_t offset = 0;  // of the current run, in elements from src
  for (size_t done = 0; done < count; done += inner) {
    std::byte* q = dst + done * out_size;
    if (conv == Convert::Copy && inner_stride == 1) {
      std::memcpy(q, src + offset * esize, inner * esize);
    } else {
      for (size_t j = 0; j < inner; ++j) {
        const std::byte* p = src + (offset + j * inner_stride) * esize;
        switch (conv) {
          case Convert::Copy: std::memcpy(q + j * out_size, p, esize); break;
          case Convert::Int8ToI16: {
            // two's complement: the byte's value as int8
            const int u = static_cast<int>(static_cast<uint8_t>(*p));
            auto v = static_cast<int16_t>(u >= 128 ? u - 256 : u);
            std::memcpy(q + j * 2, &v, 2);
            break;
          }
          case Convert::BoolToU8: q[j] = std::byte(*p != std::byte{0} ? 1 : 0); break;
          case Convert::U16ToU32: {
            uint16_t v16;
            std::memcpy(&v16, p, 2);
            uint32_t v = v16;
            std::memcpy(q + j * 4, &v, 4);
            break;
          }
        }
      }
    }
    // advance the odometer over the outer dimensions
    for (size_t d = rank >= 1 ? rank - 1 : 0; d-- > 0;) {
      offset += info.stride[d];
      if (++idx[d] < info.shape[d]) break;
      offset -= info.stride[d] * info.shape[d];
      idx[d] = 0;
    }
  }
  Tensor cpu = Tensor::from_storage(out, Layout::contiguous(shape), dt, Device::cpu());
  return device.is_cpu() ? cpu : cpu.to_device(device);
}

PthTensors::PthTensors(const std::string& path, const std::optional<std::string>& key) {
  auto impl = std::make_shared<Impl>();
  impl->map = io::MmapedFile::open(path);
  impl->bytes = impl->map->bytes();
  impl->label = "pth file '" + path + "'";
  impl->open(key);
  impl_ = std::move(impl);
}

PthTensors PthTensors::from_buffer(std::span<const std::byte> data, const std::optional<std::string>& key) {
  auto impl = std::make_shared<Impl>();
  impl->copy = std::make_shared<std::vector<std::byte>>(data.begin(), data.end());
  impl->bytes = *impl->copy;
  impl->label = "pth buffer";
  impl->open(key);
  return PthTensors(std::move(impl));
}

const std::vector<TensorInfo>& PthTensors::tensor_infos() const { return impl_->infos; }

bool PthTensors::contains(const std::string& name) const { return impl_->by_name.count(name) != 0; }

const TensorInfo* PthTensors::info(const std::string& name) const {
  auto it = impl_->by_name.find(name);
  return it == impl_->by_name.end() ? nullptr : &impl_->infos[it->second];
}

std::optional<Tensor> PthTensors::get(const std::string& name, const Device& device) const {
  auto it = impl_->by_name.find(name);
  if (it == impl_->by_name.end()) return std::nullopt;
  return with_context(impl_->label + ": loading tensor '" + io::excerpt(name) + "'",
                      [&] { return impl_->make(it->second, device); });
}

Tensor PthTensors::load(const std::string& name, const Device& device) const {
  auto t = get(name, device);
  if (!t)
    throw Error(ErrorKind::InvalidArgument,
                impl_->label + " has no tensor named '" + io::excerpt(name) + "'");
  return *t;
}

namespace {
std::vector<std::pair<std::string, Tensor>> all_tensors(const PthTensors& pth, const Device& device) {
  std::vector<std::pair<std::string, Tensor>> out;
  out.reserve(pth.tensor_infos().size());
  for (const TensorInfo& info : pth.tensor_infos()) out.emplace_back(info.name, pth.load(info.name, device));
  return out;
}
}  // namespace

std::vector<std::pair<std::string, Tensor>> read_all(const std::string& path, const Device& device) {
  return all_tensors(PthTensors(path), device);
}

std::vector<std::pair<std::string, Tensor>> read_all_with_key(const std::string& path, const std::string& key,
                                                              const Device& device) {
  return all_tensors(PthTensors(path, key), device);
}

}  // namespace candle::pickle
