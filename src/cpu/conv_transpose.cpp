// PLACEHOLDER: replaced by the family implementation.
#include "candle/candle.h"
namespace candle {
StoragePtr CpuStorage::conv_transpose1d(const Layout&, const BackendStorage&, const Layout&, const ParamsConv1D&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
StoragePtr CpuStorage::conv_transpose2d(const Layout&, const BackendStorage&, const Layout&, const ParamsConv2D&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
}  // namespace candle
