// candle::Comm: the group of CPU ranks in this process's memory, and the dispatch to the
// collectives a backend plugin registers (CUDA: NCCL).
#include "candle/comm.h"

#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>

#include "candle/backend/plugin.h"
#include "candle/error.h"

namespace candle {
namespace {

struct Providers {
  std::mutex mu;
  std::map<DeviceKind, CommProvider> by_kind;
};

Providers& providers() {
  static Providers* p = new Providers();  // never destroyed, like the device registry
  return *p;
}

CommProvider provider_of(DeviceKind kind) {
  auto& p = providers();
  std::lock_guard lock(p.mu);
  auto it = p.by_kind.find(kind);
  if (it == p.by_kind.end())
    throw Error(ErrorKind::Device, "no collective communication for " + std::string(device_kind_name(kind)) +
                                       " devices (tensor parallelism runs on CPU and CUDA devices)");
  return it->second;
}

// The shared state of a CPU group: one slot per rank, and a barrier that an abort opens.
struct LocalGroup {
  explicit LocalGroup(size_t n) : n(n), slots(n), errors(n) {}
  const size_t n;
  std::mutex mu;
  std::condition_variable cv;
  size_t arrived = 0, generation = 0;
  std::optional<std::string> aborted;
  std::vector<std::optional<Tensor>> slots;
  std::vector<std::string> errors;

  void wait() {
    std::unique_lock lk(mu);
    if (aborted) throw Error(ErrorKind::Device, "tensor-parallel group aborted: " + *aborted);
    const size_t gen = generation;
    if (++arrived == n) {
      arrived = 0;
      ++generation;
      cv.notify_all();
    } else {
      cv.wait(lk, [&] { return generation != gen || aborted; });
      if (generation == gen) throw Error(ErrorKind::Device, "tensor-parallel group aborted: " + *aborted);
    }
  }
  void abort(const std::string& why) {
    std::lock_guard lk(mu);
    if (!aborted) aborted = why;
    cv.notify_all();
  }
};

class LocalComm final : public Comm {
 public:
  LocalComm(std::shared_ptr<LocalGroup> g, size_t rank, Device dev)
      : g_(std::move(g)), rank_(rank), dev_(std::move(dev)) {}
  size_t rank() const override { return rank_; }
  size_t world_size() const override { return g_->n; }
  Device device() const override { return dev_; }

  Tensor all_reduce_sum(const Tensor& t) override {
    return collective("all_reduce_sum", t, [&](const std::vector<Tensor>& all) {
      Tensor sum = all[0];
      for (size_t r = 1; r < all.size(); ++r) sum = sum + all[r];  // rank order: the same bits on every rank
      return all.size() == 1 ? sum.copy() : sum;
    });
  }
  Tensor all_gather(const Tensor& t, size_t dim) override {
    if (dim >= t.rank())
      return collective("all_gather", t, [&](const std::vector<Tensor>&) -> Tensor {
        throw Error(ErrorKind::DimOutOfRange, "Comm::all_gather: dim " + std::to_string(dim) + " of a rank-" +
                                                  std::to_string(t.rank()) + " tensor");
      });
    return collective("all_gather", t, [&](const std::vector<Tensor>& all) {
      return Tensor::cat(all, static_cast<int64_t>(dim));
    });
  }
  Tensor broadcast(const Tensor& t, size_t root) override {
    if (root >= g_->n)
      throw Error(ErrorKind::InvalidArgument, "Comm::broadcast: root " + std::to_string(root) +
                                                  " of a group of " + std::to_string(g_->n));
    return collective("broadcast", t, [&](const std::vector<Tensor>& all) { return all[root].copy(); });
  }
  void abort(const std::string& why) override { g_->abort("rank " + std::to_string(rank_) + ": " + why); }

 private:
  // Every rank deposits its tensor (or why it has none), waits for the others, checks all of them
  // (so that a bad input fails on every rank instead of leaving the others waiting), computes its
  // result from them and waits again before the slots are reused.
  template <typename F>
  Tensor collective(const char* what, const Tensor& t, F&& compute) {
    std::string mine;
    if (!t.device().is_cpu()) mine = "its tensor is on " + t.device().to_string() + ", not the CPU";
    g_->slots[rank_] = mine.empty() ? std::optional<Tensor>(t) : std::nullopt;
    g_->errors[rank_] = mine;
    g_->wait();
    std::string error;
    std::vector<Tensor> all;
    for (size_t r = 0; r < g_->n && error.empty(); ++r) {
      if (!g_->slots[r]) {
        error = "rank " + std::to_string(r) + ": " + g_->errors[r];
        break;
      }
      const Tensor& x = *g_->slots[r];
      if (r > 0 && (x.shape() != all[0].shape() || x.dtype() != all[0].dtype()))
        error = "rank " + std::to_string(r) + " passed " + x.shape().to_string() + " " +
                std::string(dtype_name(x.dtype())) + ", rank 0 " + all[0].shape().to_string() + " " +
                std::string(dtype_name(all[0].dtype()));
      all.push_back(x);
    }
    std::optional<Tensor> out;
    std::optional<Error> failure;
    if (!error.empty()) {
      failure = Error(ErrorKind::InvalidArgument, std::string("Comm::") + what + ": " + error);
    } else {
      try {
        out = compute(all);
      } catch (const Error& e) {
        failure = e;
      }
    }
    g_->wait();
    if (failure) throw *failure;
    return *out;
  }

  std::shared_ptr<LocalGroup> g_;
  size_t rank_;
  Device dev_;
};

}  // namespace

void register_comm_provider(DeviceKind kind, CommProvider provider) {
  auto& p = providers();
  std::lock_guard lock(p.mu);
  p.by_kind[kind] = std::move(provider);
}

std::vector<std::shared_ptr<Comm>> Comm::create_group(const std::vector<Device>& devices) {
  if (devices.empty()) throw Error(ErrorKind::InvalidArgument, "Comm::create_group: no devices");
  const DeviceKind kind = devices[0].kind();
  for (const Device& d : devices)
    if (d.kind() != kind)
      throw Error(ErrorKind::InvalidArgument,
                  "Comm::create_group: the devices mix " + devices[0].to_string() + " and " + d.to_string());
  if (kind == DeviceKind::Cpu) {
    auto g = std::make_shared<LocalGroup>(devices.size());
    std::vector<std::shared_ptr<Comm>> out;
    for (size_t r = 0; r < devices.size(); ++r) out.push_back(std::make_shared<LocalComm>(g, r, devices[r]));
    return out;
  }
  return provider_of(kind).group(devices);
}

std::string Comm::unique_id(DeviceKind kind) {
  if (kind == DeviceKind::Cpu)
    throw Error(ErrorKind::InvalidArgument, "Comm::unique_id: CPU groups live in one process (create_group)");
  (void)Device::open(kind, 0);  // loads the backend, which registers its collectives
  return provider_of(kind).unique_id();
}

std::shared_ptr<Comm> Comm::create(const std::string& id, size_t rank, size_t world_size,
                                   const Device& device) {
  if (world_size == 0 || rank >= world_size)
    throw Error(ErrorKind::InvalidArgument, "Comm::create: rank " + std::to_string(rank) + " of a group of " +
                                                std::to_string(world_size));
  if (device.is_cpu())
    throw Error(ErrorKind::InvalidArgument, "Comm::create: CPU groups live in one process (create_group)");
  return provider_of(device.kind()).create(id, rank, world_size, device);
}

}  // namespace candle
