// candle::Comm: collective communication among the ranks of a tensor-parallel group (candle's
// "multiple GPU distribution via NCCL": its llama_multiprocess example sums the partial results of
// row-parallel layers with an all-reduce on NCCL communicators).
//
//   auto comms = Comm::create_group({Device::cuda(0), Device::cuda(1)});  // one per rank
//   // rank r, on its own thread: y = comms[r]->all_reduce_sum(partial);
//
// CUDA devices communicate through NCCL, opened at run time by the CUDA backend (libnccl.so.2; a
// clear Error(Device) where it is missing); CPU devices through this process's memory (one thread
// per rank: tests and CPU-only machines run the same tensor-parallel code). Every rank makes the
// same calls in the same order, each from its own thread; a call returns once every rank's
// contribution is in (on CUDA: once it is queued on the device's stream, after which the result
// reads like any tensor). Every rank gets identical results, bit for bit. The CPU group checks the
// ranks' shapes against each other (a mismatch fails on every rank); NCCL cannot, so on CUDA ranks
// that disagree get wrong results or wait: the model code makes every rank's shapes equal.
//
// Ranks in other processes of the same host (CUDA only): rank 0 makes unique_id(), hands it to
// the others (a file, a pipe, an argument), and every rank calls create(id, rank, world_size, dev).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "candle/device.h"
#include "candle/tensor.h"

namespace candle {

class Comm {
 public:
  virtual ~Comm() = default;
  virtual size_t rank() const = 0;
  virtual size_t world_size() const = 0;
  virtual Device device() const = 0;
  // The element-wise sum over the ranks of `t` (the same shape and dtype on every rank, on this
  // rank's device), on every rank.
  virtual Tensor all_reduce_sum(const Tensor& t) = 0;
  // Every rank's `t` (the same shape and dtype) concatenated along `dim` in rank order.
  virtual Tensor all_gather(const Tensor& t, size_t dim) = 0;
  // Rank `root`'s `t` on every rank (the others pass a tensor of the same shape and dtype).
  virtual Tensor broadcast(const Tensor& t, size_t root) = 0;
  // For a rank that stops on an error: the other ranks' waiting and later calls fail with
  // Error(Device) naming `why` instead of waiting for this one forever (on CUDA: ncclCommAbort,
  // which releases the ranks of this process; their collective already queued ends with undefined
  // values, their next call throws).
  virtual void abort(const std::string& why) = 0;

  // One communicator per device, rank i on devices[i], for one thread per rank in this process.
  // The devices are all CPU (a group in memory; the same device may appear more than once) or all
  // CUDA (NCCL; distinct GPUs). Error(InvalidArgument) for an empty list or mixed kinds,
  // Error(Device) where the kind has no collectives or NCCL does not open.
  static std::vector<std::shared_ptr<Comm>> create_group(const std::vector<Device>& devices);
  // A group's id for ranks in several processes (NCCL's unique id, as printable text).
  static std::string unique_id(DeviceKind kind);
  // This process's rank of the group `id` names; blocks until every rank has joined.
  static std::shared_ptr<Comm> create(const std::string& id, size_t rank, size_t world_size,
                                      const Device& device);
};

}  // namespace candle
