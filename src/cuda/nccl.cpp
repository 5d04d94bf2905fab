// candle::Comm among CUDA devices through NCCL (candle/comm.h): libnccl.so.2 is opened with dlopen
// at the first collective call (never linked, never at plugin load; no nccl.h: the few types below
// are NCCL 2's public C ABI), and each rank's collectives are queued on its device's one stream.
#include <dlfcn.h>

#include <climits>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "candle/backend/plugin.h"
#include "candle/comm.h"
#include "storage.h"

namespace candle::cuda_backend {
namespace {

// ---- NCCL's C ABI (nccl.h) ----
using ncclResult_t = int;  // an enum: ncclSuccess = 0
constexpr ncclResult_t ncclSuccess = 0;
struct ncclUniqueId {
  char internal[128];
};
struct ncclComm;  // opaque
using ncclComm_t = ncclComm*;
using ncclDataType_t = int;
constexpr ncclDataType_t ncclInt8 = 0, ncclUint8 = 1, ncclInt32 = 2, ncclUint32 = 3, ncclInt64 = 4,
                         ncclUint64 = 5, ncclFloat16 = 6, ncclFloat32 = 7, ncclFloat64 = 8, ncclBfloat16 = 9;
using ncclRedOp_t = int;
constexpr ncclRedOp_t ncclSum = 0;

constexpr const char* kLib = "libnccl.so.2";

struct Api {
  void* lib = nullptr;
  std::string why;  // why lib is null
  ncclResult_t (*ncclGetUniqueId)(ncclUniqueId*) = nullptr;
  ncclResult_t (*ncclCommInitRank)(ncclComm_t*, int, ncclUniqueId, int) = nullptr;
  ncclResult_t (*ncclCommInitAll)(ncclComm_t*, int, const int*) = nullptr;
  ncclResult_t (*ncclAllReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                cudaStream_t) = nullptr;
  ncclResult_t (*ncclAllGather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t,
                                cudaStream_t) = nullptr;
  ncclResult_t (*ncclBroadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
                                cudaStream_t) = nullptr;
  ncclResult_t (*ncclCommDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*ncclCommAbort)(ncclComm_t) = nullptr;
  const char* (*ncclGetErrorString)(ncclResult_t) = nullptr;
  ncclResult_t (*ncclGroupStart)() = nullptr;
  ncclResult_t (*ncclGroupEnd)() = nullptr;
};

// Resolves `name` into f; on failure sets r.why (the first missing symbol) and returns false.
template <typename F>
bool resolve(Api& r, const char* name, F& f) {
  dlerror();
  f = reinterpret_cast<F>(dlsym(r.lib, name));
  if (f) return true;
  if (r.why.empty()) {
    const char* e = dlerror();
    r.why = std::string("nccl: ") + kLib + " lacks " + name + " (" + (e ? e : "no such symbol") +
            "): collectives among CUDA devices need NCCL 2";
  }
  return false;
}

const Api& api_state() {
  static const Api a = [] {
    Api r;
    r.lib = dlopen(kLib, RTLD_NOW | RTLD_LOCAL);
    if (!r.lib) {
      const char* e = dlerror();
      r.why = std::string("nccl: cannot open ") + kLib + " (" + (e ? e : "not found") +
              "): collectives among CUDA devices need NCCL 2 (the libnccl2 package)";
      return r;
    }
    bool ok = true;
    ok = resolve(r, "ncclGetUniqueId", r.ncclGetUniqueId) && ok;
    ok = resolve(r, "ncclCommInitRank", r.ncclCommInitRank) && ok;
    ok = resolve(r, "ncclCommInitAll", r.ncclCommInitAll) && ok;
    ok = resolve(r, "ncclAllReduce", r.ncclAllReduce) && ok;
    ok = resolve(r, "ncclAllGather", r.ncclAllGather) && ok;
    ok = resolve(r, "ncclBroadcast", r.ncclBroadcast) && ok;
    ok = resolve(r, "ncclCommDestroy", r.ncclCommDestroy) && ok;
    ok = resolve(r, "ncclCommAbort", r.ncclCommAbort) && ok;
    ok = resolve(r, "ncclGetErrorString", r.ncclGetErrorString) && ok;
    ok = resolve(r, "ncclGroupStart", r.ncclGroupStart) && ok;
    ok = resolve(r, "ncclGroupEnd", r.ncclGroupEnd) && ok;
    if (!ok) {
      dlclose(r.lib);
      r.lib = nullptr;
    }
    return r;
  }();
  return a;
}

// The loaded library, or Error(Device) naming libnccl.so.2 and why it did not open.
const Api& nccl() {
  const Api& a = api_state();
  if (!a.lib) throw Error(ErrorKind::Device, a.why);
  return a;
}

// Error(Device) "nccl: <call> (<where>): <NCCL's message>" when r is not ncclSuccess.
void check_nccl(ncclResult_t r, const char* call, const std::string& where) {
  if (r == ncclSuccess) return;
  const char* s = nccl().ncclGetErrorString(r);
  throw Error(ErrorKind::Device, std::string("nccl: ") + call + " (" + where + ") failed: " +
                                     (s ? s : "unknown error") + " (ncclResult_t " + std::to_string(r) + ")");
}

// The NCCL type of a dtype, where NCCL has one.
std::optional<ncclDataType_t> nccl_type(DType dt) {
  switch (dt) {
    case DType::U8: return ncclUint8;
    case DType::U32: return ncclUint32;
    case DType::I32: return ncclInt32;
    case DType::I64: return ncclInt64;
    case DType::BF16: return ncclBfloat16;
    case DType::F16: return ncclFloat16;
    case DType::F32: return ncclFloat32;
    case DType::F64: return ncclFloat64;
    default: return std::nullopt;
  }
}

// What the copying collectives (all_gather, broadcast) move for n elements of dt: the dtype's own
// NCCL type, or its bytes for the dtypes NCCL lacks (i16, f8e4m3).
std::pair<ncclDataType_t, size_t> moved(DType dt, size_t n) {
  if (auto t = nccl_type(dt)) return {*t, n};
  return {ncclInt8, n * dtype_size(dt)};
}

std::string aborted_message(const std::string& why) { return "tensor-parallel group aborted: " + why; }

// The communicators of the ranks of one group in this process (create_group: all of them; create:
// this process's one), their state guarded by mu. A slot's communicator is null once given back.
struct Group {
  explicit Group(size_t n) : slots(n) {}
  ~Group() {
    // communicators no NcclComm took (a failure while the group was being made)
    for (auto& s : slots)
      if (s.comm) api_state().ncclCommDestroy(s.comm);
  }
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  struct Slot {
    ncclComm_t comm = nullptr;
    bool in_call = false;  // its rank's thread is inside an NCCL call on it
  };
  std::mutex mu;
  std::optional<std::string> aborted;
  std::vector<Slot> slots;
};

class NcclComm final : public Comm {
 public:
  NcclComm(std::shared_ptr<Group> g, size_t slot, size_t rank, size_t world, Device dev)
      : g_(std::move(g)), slot_(slot), rank_(rank), world_(world), dev_(std::move(dev)) {
    cd_ = dynamic_cast<CudaDevice*>(&dev_.backend());
    if (!cd_) throw Error(ErrorKind::Internal, "NCCL communicator on " + dev_.to_string());
  }

  // A communicator is given back with ncclCommDestroy once the collectives queued on the stream
  // are done (it does not wait for the other ranks: the last of the process's ranks frees what they
  // share), or with ncclCommAbort once its group was aborted (a peer's part may never come).
  ~NcclComm() override {
    ncclComm_t c = nullptr;
    bool aborted = false;
    {
      std::lock_guard lk(g_->mu);
      c = std::exchange(g_->slots[slot_].comm, nullptr);
      aborted = g_->aborted.has_value();
    }
    if (!c) return;
    const Api& a = api_state();
    if (aborted) {
      a.ncclCommAbort(c);
      return;
    }
    cudaStreamSynchronize(cd_->ctx().stream());  // (errors are the next synchronisation's to report)
    a.ncclCommDestroy(c);
  }

  size_t rank() const override { return rank_; }
  size_t world_size() const override { return world_; }
  Device device() const override { return dev_; }

  Tensor all_reduce_sum(const Tensor& t) override {
    check_usable();
    const CudaStorage& s = storage_of(t, "all_reduce_sum");
    const auto type = nccl_type(t.dtype());
    if (!type) unsupported(t.dtype(), "Comm::all_reduce_sum");
    const size_t n = t.elem_count();
    CuStoragePtr out = cd_->make(t.dtype(), n);
    if (n) {
      const Dense d = dense(s, t.layout());
      run("all_reduce_sum", "ncclAllReduce", [&](const Api& a, ncclComm_t c, cudaStream_t st) {
        return a.ncclAllReduce(d.s->at(d.first), out->at(0), n, *type, ncclSum, c, st);
      });
    }
    return Tensor::from_storage(out, Layout::contiguous(t.shape()), t.dtype(), dev_);
  }

  Tensor all_gather(const Tensor& t, size_t dim) override {
    check_usable();
    const CudaStorage& s = storage_of(t, "all_gather");
    if (dim >= t.rank())
      throw Error(ErrorKind::DimOutOfRange, "Comm::all_gather: dim " + std::to_string(dim) + " of a rank-" +
                                                std::to_string(t.rank()) + " tensor");
    const size_t n = t.elem_count();
    CuStoragePtr out = cd_->make(t.dtype(), n * world_);
    if (n) {
      const Dense d = dense(s, t.layout());
      const std::pair<ncclDataType_t, size_t> how = moved(t.dtype(), n);
      const ncclDataType_t type =
          how.first;  // (no structured bindings: clang 14's lambdas cannot capture them)
      const size_t count = how.second;
      run("all_gather", "ncclAllGather", [&](const Api& a, ncclComm_t c, cudaStream_t st) {
        return a.ncclAllGather(d.s->at(d.first), out->at(0), count, type, c, st);
      });
    }
    // NCCL puts the ranks' buffers one after the other: [world, a_0, ..., a_k], which is the
    // concatenation along dim 0; along dim d it is [world, P, a_d * Q] (P, Q the products of the
    // dims before and after d) transposed to [P, world, a_d * Q]
    std::vector<size_t> dims = t.shape().dims();
    dims[dim] *= world_;
    if (dim == 0) return Tensor::from_storage(out, Layout::contiguous(Shape(dims)), t.dtype(), dev_);
    size_t before = 1, after = 1;
    for (size_t i = 0; i < t.rank(); ++i) (i < dim ? before : after) *= t.shape()[i];
    Tensor g = Tensor::from_storage(out, Layout::contiguous(Shape{world_, before, after}), t.dtype(), dev_);
    return g.transpose(0, 1).contiguous().reshape(Shape(dims));
  }

  Tensor broadcast(const Tensor& t, size_t root) override {
    if (root >= world_)
      throw Error(ErrorKind::InvalidArgument, "Comm::broadcast: root " + std::to_string(root) +
                                                  " of a group of " + std::to_string(world_));
    check_usable();
    const CudaStorage& s = storage_of(t, "broadcast");
    const size_t n = t.elem_count();
    CuStoragePtr out = cd_->make(t.dtype(), n);
    if (n) {
      // only the root's tensor is read: the others receive into out (NCCL's in-place form)
      Dense d{out.get(), 0, nullptr};
      if (rank_ == root) d = dense(s, t.layout());
      const std::pair<ncclDataType_t, size_t> how = moved(t.dtype(), n);
      const ncclDataType_t type = how.first;
      const size_t count = how.second;
      run("broadcast", "ncclBroadcast", [&](const Api& a, ncclComm_t c, cudaStream_t st) {
        return a.ncclBroadcast(d.s->at(d.first), out->at(0), count, type, static_cast<int>(root), c, st);
      });
    }
    return Tensor::from_storage(out, Layout::contiguous(t.shape()), t.dtype(), dev_);
  }

  void abort(const std::string& why) override { abort_group("rank " + std::to_string(rank_) + ": " + why); }

 private:
  // Marks the group aborted (the first reason stays) and aborts the communicators of its ranks in
  // this process, each once: their queued collectives stop waiting for this rank and their later
  // calls throw Error(Device) naming the reason. A rank inside an NCCL call aborts its own when the
  // call returns (its communicator is not freed under it).
  void abort_group(const std::string& reason) {
    std::vector<ncclComm_t> comms;
    {
      std::lock_guard lk(g_->mu);
      if (!g_->aborted) g_->aborted = reason;
      for (auto& s : g_->slots)
        if (s.comm && !s.in_call) comms.push_back(std::exchange(s.comm, nullptr));
    }
    if (comms.empty()) return;
    const Api& a = nccl();
    for (ncclComm_t c : comms) a.ncclCommAbort(c);
  }

  void check_usable() {
    std::lock_guard lk(g_->mu);
    if (g_->aborted) throw Error(ErrorKind::Device, aborted_message(*g_->aborted));
  }

  // t's storage, on this rank's device; else Error(InvalidArgument), as the CPU group says it. The
  // other ranks would wait for this one's part forever: a group of several ranks is aborted first.
  const CudaStorage& storage_of(const Tensor& t, const char* what) {
    if (!(t.device() == dev_)) {
      const std::string msg = std::string("Comm::") + what + ": rank " + std::to_string(rank_) +
                              ": its tensor is on " + t.device().to_string() + ", not " + dev_.to_string();
      if (world_ > 1) abort_group(msg);
      throw Error(ErrorKind::InvalidArgument, msg);
    }
    return as_cuda(*t.storage(), what);
  }

  // Queues an NCCL call on this rank's communicator and its device's stream (the device made current
  // on the calling thread); no host synchronisation. Throws Error(Device) naming the call and NCCL's
  // message, or the reason when the group was aborted meanwhile.
  template <typename F>
  void run(const char* what, const char* call, F&& f) {
    const Api& a = nccl();
    Context& ctx = cd_->ctx();
    DeviceGuard dg(ctx.ordinal());
    const cudaStream_t st = ctx.stream();
    ncclComm_t c = nullptr;
    {
      std::lock_guard lk(g_->mu);
      if (g_->aborted) throw Error(ErrorKind::Device, aborted_message(*g_->aborted));
      c = g_->slots[slot_].comm;
      g_->slots[slot_].in_call = true;
    }
    const ncclResult_t r = f(a, c, st);
    ncclComm_t late = nullptr;
    std::optional<std::string> reason;
    {
      std::lock_guard lk(g_->mu);
      g_->slots[slot_].in_call = false;
      if (g_->aborted) {
        reason = g_->aborted;
        late = std::exchange(g_->slots[slot_].comm, nullptr);
      }
    }
    if (late) a.ncclCommAbort(late);
    if (reason) throw Error(ErrorKind::Device, aborted_message(*reason));
    check_nccl(r, call, "Comm::" + std::string(what) + " on " + dev_.to_string());
  }

  std::shared_ptr<Group> g_;
  size_t slot_, rank_, world_;
  Device dev_;
  CudaDevice* cd_ = nullptr;
};

CudaDevice& cuda_device_of(const Device& d, const char* op) {
  auto* cd = dynamic_cast<CudaDevice*>(&d.backend());
  if (!cd)
    throw Error(ErrorKind::InvalidArgument, std::string(op) + ": " + d.to_string() + " is not a CUDA device");
  return *cd;
}

std::vector<std::shared_ptr<Comm>> create_group(const std::vector<Device>& devices) {
  const size_t n = devices.size();
  for (size_t i = 0; i < n; ++i) {
    cuda_device_of(devices[i], "Comm::create_group");
    for (size_t j = 0; j < i; ++j)
      if (devices[j] == devices[i])
        throw Error(ErrorKind::InvalidArgument, "Comm::create_group: " + devices[i].to_string() +
                                                    " is ranks " + std::to_string(j) + " and " +
                                                    std::to_string(i) + " (NCCL runs one rank per GPU)");
  }
  if (n > static_cast<size_t>(INT_MAX))
    throw Error(ErrorKind::InvalidArgument, "Comm::create_group: " + std::to_string(n) + " devices");
  const Api& a = nccl();
  std::vector<int> ordinals;
  ordinals.reserve(n);
  for (const Device& d : devices) ordinals.push_back(static_cast<int>(d.ordinal()));
  std::vector<ncclComm_t> comms(n, nullptr);
  check_nccl(a.ncclCommInitAll(comms.data(), static_cast<int>(n), ordinals.data()), "ncclCommInitAll",
             "Comm::create_group of " + std::to_string(n) + " CUDA devices");
  auto g = std::make_shared<Group>(n);
  for (size_t r = 0; r < n; ++r) g->slots[r].comm = comms[r];
  std::vector<std::shared_ptr<Comm>> out;
  out.reserve(n);
  for (size_t r = 0; r < n; ++r) out.push_back(std::make_shared<NcclComm>(g, r, r, n, devices[r]));
  return out;
}

std::string unique_id() {
  const Api& a = nccl();
  ncclUniqueId id{};
  check_nccl(a.ncclGetUniqueId(&id), "ncclGetUniqueId", "Comm::unique_id");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  s.reserve(2 * sizeof(id.internal));
  for (char c : id.internal) {
    const auto b = static_cast<unsigned char>(c);
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  return s;
}

// The id unique_id() printed: exactly 256 lowercase hex digits (a malformed id is not echoed: it
// may be long, or a secret of the caller's).
ncclUniqueId parse_id(const std::string& text) {
  ncclUniqueId id{};
  constexpr size_t kDigits = 2 * sizeof(id.internal);
  const std::string want = "Comm::create: a group id is the " + std::to_string(kDigits) +
                           " lowercase hex digits Comm::unique_id(DeviceKind::Cuda) gives";
  if (text.size() != kDigits)
    throw Error(ErrorKind::InvalidArgument, want + ", got " + std::to_string(text.size()) + " characters");
  auto digit = [&](size_t i) -> unsigned {
    const char c = text[i];
    if (c >= '0' && c <= '9') return static_cast<unsigned>(c - '0');
    if (c >= 'a' && c <= 'f') return static_cast<unsigned>(c - 'a' + 10);
    throw Error(ErrorKind::InvalidArgument, want + ", got something else at character " + std::to_string(i));
  };
  for (size_t i = 0; i < sizeof(id.internal); ++i)
    id.internal[i] = static_cast<char>(digit(2 * i) << 4 | digit(2 * i + 1));
  return id;
}

std::shared_ptr<Comm> create(const std::string& text, size_t rank, size_t world, const Device& device) {
  const ncclUniqueId id = parse_id(text);
  if (world > static_cast<size_t>(INT_MAX))
    throw Error(ErrorKind::InvalidArgument, "Comm::create: a group of " + std::to_string(world));
  Context& ctx = cuda_device_of(device, "Comm::create").ctx();
  const Api& a = nccl();
  DeviceGuard dg(ctx.ordinal());  // ncclCommInitRank takes the current device
  ncclComm_t c = nullptr;
  check_nccl(a.ncclCommInitRank(&c, static_cast<int>(world), id, static_cast<int>(rank)), "ncclCommInitRank",
             "Comm::create: rank " + std::to_string(rank) + " of " + std::to_string(world) + " on " +
                 device.to_string());
  auto g = std::make_shared<Group>(1);
  g->slots[0].comm = c;
  return std::make_shared<NcclComm>(g, 0, rank, world, device);
}

}  // namespace

CommProvider nccl_comm_provider() { return CommProvider{create_group, unique_id, create}; }

}  // namespace candle::cuda_backend
