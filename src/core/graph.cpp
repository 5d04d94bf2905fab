// candle::Graph (candle/graph.h): the device's recording where it makes one, else the work itself.
#include "candle/graph.h"

#include "candle/backend/backend.h"
#include "candle/error.h"

namespace candle {

std::unique_ptr<BackendGraph> BackendDevice::capture_graph(const std::function<void()>&) { return nullptr; }

namespace {
thread_local int recording_depth = 0;
}  // namespace

GraphRecordingScope::GraphRecordingScope() { ++recording_depth; }
GraphRecordingScope::~GraphRecordingScope() { --recording_depth; }

bool Graph::recording() { return recording_depth > 0; }

Graph Graph::capture(const Device& dev, std::function<void()> work) {
  if (!work) throw Error(ErrorKind::InvalidArgument, "Graph::capture: no work given");
  Graph g;
  g.recorded_ = dev.backend().capture_graph(work);
  if (!g.recorded_) g.work_ = std::move(work);
  return g;
}

void Graph::replay() const {
  if (recorded_) {
    recorded_->replay();
  } else if (work_) {
    work_();
  } else {
    throw Error(ErrorKind::InvalidArgument, "Graph::replay: an empty graph (not made by Graph::capture)");
  }
}

size_t Graph::nodes() const { return recorded_ ? recorded_->nodes() : 0; }

}  // namespace candle
