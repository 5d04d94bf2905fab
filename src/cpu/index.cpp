// PLACEHOLDER: replaced by the family implementation.
#include "candle/candle.h"
#include <ostream>
#include <string>
namespace candle {
StoragePtr CpuStorage::index_select(const Layout&, const BackendStorage&, const Layout&, size_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
StoragePtr CpuStorage::gather(const Layout&, const BackendStorage&, const Layout&, size_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
StoragePtr CpuStorage::index_add(const Layout&, const BackendStorage&, const Layout&, const BackendStorage&, const Layout&, size_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
void CpuStorage::scatter_set(const Layout&, const BackendStorage&, const Layout&, const BackendStorage&, const Layout&, size_t) { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
void CpuStorage::scatter_add_set(const Layout&, const BackendStorage&, const Layout&, const BackendStorage&, const Layout&, size_t) { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
}  // namespace candle
