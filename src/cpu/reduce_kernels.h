// CPU kernels of mean, norm, var and log_sum_exp (CpuStorage's reduce_mean, ... call them).
// Internal to src/cpu.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "candle/backend/cpu_storage.h"

namespace candle::cpu {

// Mean over `dims` (sorted, unique); output: the input shape with those dims set to 1.
// Floats accumulate as the sum does and are divided before the one final rounding;
// integers give the exact mean truncated toward zero (computed in f64).
std::shared_ptr<CpuStorage> reduce_mean(const CpuStorage& s, const Layout& l,
                                        const std::vector<size_t>& dims);
// sqrt of the sum of squares of every element (one element). Float dtypes only.
std::shared_ptr<CpuStorage> reduce_norm(const CpuStorage& s, const Layout& l);
// Unbiased variance (divides by n - 1) along `dim`, two passes in f64. Float dtypes only.
std::shared_ptr<CpuStorage> reduce_var(const CpuStorage& s, const Layout& l, size_t dim);
// log(sum(exp(x))) over `dims`, shifted by the max of each output's elements. Float dtypes only.
std::shared_ptr<CpuStorage> reduce_log_sum_exp(const CpuStorage& s, const Layout& l,
                                               const std::vector<size_t>& dims);

}  // namespace candle::cpu
