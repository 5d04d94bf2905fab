// PLACEHOLDER: replaced by the family implementation.
#include "candle/candle.h"
namespace candle {
StoragePtr CpuStorage::avg_pool2d(const Layout&, std::array<size_t, 2>, std::array<size_t, 2>) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
StoragePtr CpuStorage::max_pool2d(const Layout&, std::array<size_t, 2>, std::array<size_t, 2>) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
StoragePtr CpuStorage::upsample_nearest1d(const Layout&, size_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
StoragePtr CpuStorage::upsample_nearest2d(const Layout&, size_t, size_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
StoragePtr CpuStorage::upsample_bilinear2d(const Layout&, size_t, size_t, bool, std::optional<double>, std::optional<double>) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
}  // namespace candle
