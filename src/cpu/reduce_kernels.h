// CPU kernels of the reduction family that have no BackendStorage method of their own
// (mean, norm, var, log_sum_exp, the value gather of sort). Internal to src/.
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
// out[r, k] = src[r, ids[r, k]] along the last dim; ids: contiguous u32 of l's shape.
std::shared_ptr<CpuStorage> gather_last_dim(const CpuStorage& s, const Layout& l, const CpuStorage& ids);

}  // namespace candle::cpu
