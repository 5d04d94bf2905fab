// The random draws of every device: the CPU device fills its storage with them, GPU backends
// draw on the CPU and upload, so a seed gives the same values on every device.
#pragma once

#include <memory>
#include <random>

#include "candle/backend/cpu_storage.h"

namespace candle::cpu {

// n values of dtype (a float dtype) from U(lo, up) / N(mean, stddev), drawn from rng in order
// (f64 draws in f64; the other float dtypes draw in f32 and round once).
std::shared_ptr<CpuStorage> draw_uniform(std::mt19937_64& rng, DType dtype, size_t n, double lo, double up);
std::shared_ptr<CpuStorage> draw_normal(std::mt19937_64& rng, DType dtype, size_t n, double mean,
                                        double stddev);

}  // namespace candle::cpu
