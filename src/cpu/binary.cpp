// PLACEHOLDER: replaced by the family implementation.
#include "candle/candle.h"
#include <ostream>
#include <string>
namespace candle {
StoragePtr CpuStorage::binary(BinaryOp, const Layout&, const BackendStorage&, const Layout&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
StoragePtr CpuStorage::cmp(CmpOp, const Layout&, const BackendStorage&, const Layout&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
StoragePtr CpuStorage::where_cond(const Layout&, const BackendStorage&, const Layout&, const BackendStorage&, const Layout&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
}  // namespace candle
