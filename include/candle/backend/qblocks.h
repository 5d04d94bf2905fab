// The backend SDK's checks for GGML quantized blocks (BackendStorage::qmatmul / qdequantize): what
// every GPU backend's quantized kernels verify before they read a weight's bytes.
#pragma once

#include <cstddef>

#include "candle/backend/backend.h"

namespace candle {

// a * b; Error(Internal) naming `op` when it overflows.
size_t checked_mul(size_t a, size_t b, const char* op);

// The start offset (in bytes) of `need` block bytes of the U8 storage s under layout l;
// Error(Internal) naming the device kind and `op` unless s is U8, l contiguous and the bytes inside s.
size_t checked_block_offset(const BackendStorage& s, const Layout& l, size_t need, const char* op);

}  // namespace candle
