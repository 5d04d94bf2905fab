// Tensor parallelism for the decoder (Megatron-LM's split, as candle's llama_multiprocess does it):
// each rank holds a share of the attention heads and of the MLP's intermediate rows. q, k, v,
// gate and up are column-parallel (a rank's output rows), o and down row-parallel (its input
// columns, partial sums added by Comm::all_reduce_sum); embeddings, norms and the LM head are whole
// on every rank, so every rank computes the same logits.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "candle/comm.h"
#include "candle/error.h"

namespace candle::models::detail {

struct TpPlan {
  size_t rank = 0, world = 1;
  size_t heads = 0, kv_heads = 0;    // this rank's
  size_t q_head0 = 0, kv_head0 = 0;  // its first q and kv heads
  std::shared_ptr<Comm> comm;

  // The plan of comm's rank (nullptr: one rank) for `heads` query and `kv_heads` key/value heads of a
  // model loaded on `device` (comm's). The query heads must divide evenly; the kv heads too, or
  // (fewer kv heads than ranks) each kv head is repeated on the ranks of its query heads.
  static TpPlan make(std::shared_ptr<Comm> comm, size_t heads, size_t kv_heads, const Device& device) {
    if (comm && !(comm->device() == device))
      throw Error(ErrorKind::InvalidArgument, "tensor parallelism: the communicator's rank is on " +
                                                  comm->device().to_string() + ", the model on " +
                                                  device.to_string());
    TpPlan p;
    p.comm = std::move(comm);
    p.world = p.comm ? p.comm->world_size() : 1;
    p.rank = p.comm ? p.comm->rank() : 0;
    const auto why = [&](const std::string& w) {
      return Error(ErrorKind::InvalidArgument, "tensor parallelism over " + std::to_string(p.world) +
                                                   " ranks: " + w + " (" + std::to_string(heads) +
                                                   " heads, " + std::to_string(kv_heads) + " kv heads)");
    };
    if (heads % p.world != 0) throw why("the heads do not divide evenly");
    p.heads = heads / p.world;
    p.q_head0 = p.rank * p.heads;
    if (kv_heads % p.world == 0) {
      p.kv_heads = kv_heads / p.world;
      p.kv_head0 = p.rank * p.kv_heads;
    } else if (p.world % kv_heads == 0) {
      p.kv_heads = 1;
      p.kv_head0 = p.rank * kv_heads / p.world;
    } else {
      throw why("the kv heads neither divide evenly nor divide the ranks");
    }
    return p;
  }
  // This rank's [start, start + n) of `total` rows (an MLP's intermediate size), which must divide
  // evenly.
  std::pair<size_t, size_t> share(size_t total, const char* what) const {
    if (total % world != 0)
      throw Error(ErrorKind::InvalidArgument, "tensor parallelism over " + std::to_string(world) +
                                                  " ranks: " + what + " " + std::to_string(total) +
                                                  " does not divide evenly");
    return {rank * (total / world), total / world};
  }
};

}  // namespace candle::models::detail
