// PLACEHOLDER: replaced by the family implementation.
#include "candle/candle.h"
#include <ostream>
#include <string>
namespace candle {
StoragePtr CpuStorage::matmul(const Layout&, const BackendStorage&, const Layout&, MatmulDims) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
const char* blas_name() { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
}  // namespace candle
