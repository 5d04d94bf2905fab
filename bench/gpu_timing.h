// The GPU benchmarks' timer (gpu_ops_speed, gpu_qmatmul_speed): one call to warm up, then 5 runs of
// `reps` calls each ended by a device synchronisation; the median run's ms per call.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

#include "candle/device.h"

namespace candle::bench {

inline double time_ms(const Device& dev, int reps, const std::function<void()>& fn) {
  fn();
  dev.synchronize();
  std::vector<double> runs;
  for (int r = 0; r < 5; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) fn();
    dev.synchronize();
    runs.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
                   reps);
  }
  std::sort(runs.begin(), runs.end());
  return runs[2];
}

}  // namespace candle::bench
