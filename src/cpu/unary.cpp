// PLACEHOLDER: replaced by the family implementation.
#include "candle/candle.h"
#include <ostream>
#include <string>
namespace candle {
StoragePtr CpuStorage::unary(UnaryOp, const Layout&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
StoragePtr CpuStorage::affine(const Layout&, double, double) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
StoragePtr CpuStorage::powf(const Layout&, double) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
StoragePtr CpuStorage::elu(const Layout&, double) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
}  // namespace candle
