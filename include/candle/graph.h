// candle::Graph: a device's work recorded once and replayed with one submission, on any device.
//
// An LLM's decode step is hundreds of small kernels whose launch cost (about 6 us each from the
// host on CUDA) outweighs their work; recorded as a graph it is one launch. Where the device
// records graphs (CUDA: Device::records_graphs()), capture() records the work; elsewhere the graph
// keeps the work and replay() runs it again, so that one code path serves every device:
//   Graph g = Graph::capture(dev, [&] { out = model_step(in); });
//   ... write new values into `in` in place (Tensor::slice_set, inplace ops) ...
//   g.replay();   // `out` holds the new result once the device has run it
// Contract (what makes the two forms agree): the work reads its inputs from tensors that stay
// alive and are updated in place, and it leaves its results in tensors it assigns to (captured by
// reference); the results are valid after a replay, not after capture(). A recorded replay reads
// and writes the very device memory of the recorded run; the tensors the work made are rewritten
// by every replay. Inside a recorded work, copies to or from the host and synchronisation throw
// Error(Device), and so does the capture.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "candle/device.h"

namespace candle {

class BackendGraph;

class Graph {
 public:
  static Graph capture(const Device& dev, std::function<void()> work);
  // Queues the recorded work (asynchronous, like any op), or runs the work again.
  void replay() const;
  // Whether the device recorded the work (false: replay() runs it).
  bool recorded() const { return recorded_ != nullptr; }
  // Kernels and library calls recorded (0 when not recorded).
  size_t nodes() const;
  // Whether the calling thread is inside the work of a capture() that records. Such work runs once
  // on the host and its device values are never seen there: code that would read them (an MoE
  // router choosing experts on the host) takes a device-only path instead.
  static bool recording();

 private:
  std::shared_ptr<const BackendGraph> recorded_;
  std::function<void()> work_;
};

}  // namespace candle
