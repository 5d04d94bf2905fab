// PLACEHOLDER: replaced by the family implementation.
#include "candle/candle.h"
#include <ostream>
#include <string>
namespace candle {
StoragePtr CpuStorage::reduce(ReduceOp, const Layout&, const std::vector<size_t>&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
StoragePtr CpuStorage::cumsum(const Layout&, size_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
StoragePtr CpuStorage::arg_sort_last_dim(const Layout&, bool) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
}  // namespace candle
