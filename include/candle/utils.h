// Process-wide settings (candle::utils).
#pragma once

#include <cstddef>
#include <string>

namespace candle {

// Threads used by CPU kernels: CANDLE_NUM_THREADS if set, else the cores this process may use.
size_t get_num_threads();
// Changes the CPU thread count (0 restores the default). Results do not depend on it:
// every CPU kernel partitions its work so that its bytes are identical for any count.
void set_num_threads(size_t n);

// Large CPU buffers (>= 1 MiB) are cached after release for reuse, up to
// CANDLE_CPU_CACHE_LIMIT_MB (default: an eighth of the machine's memory, between 1 and
// 4 GiB; 0 disables the cache).
size_t cpu_cache_bytes();
size_t cpu_cache_limit();
// Changes the cache's limit (frees the cached blocks when they exceed it).
void set_cpu_cache_limit(size_t bytes);
// Returns the cached blocks to the system.
void empty_cpu_cache();

// The most scratch memory one convolution may use for its im2col/col2im buffers (they are
// built in chunks of output rows under this cap): CANDLE_CONV_SCRATCH_MB, default 256 MiB.
size_t conv_scratch_limit();
void set_conv_scratch_limit(size_t bytes);

bool has_avx2();
bool has_avx512f();
// "openblas" or "builtin": the GEMM used for f32/f64 matmul.
const char* blas_name();
// The GEMM library's build and the kernel it chose for this CPU (for benchmark reports).
std::string blas_info();

}  // namespace candle
