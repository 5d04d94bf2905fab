// Ops without a Vulkan kernel yet: the CPU round-trip of BackendStorage's defaults, recorded
// in vulkan::stats() and traced with CANDLE_VULKAN_TRACE=1. A new kernel replaces its entry here.
#include "storage.h"

namespace candle::vk_backend {

StoragePtr VulkanStorage::conv1d(const Layout& l, const BackendStorage& kernel, const Layout& kernel_l,
                                 const ParamsConv1D& p) const {
  note_round_trip("conv1d");
  return BackendStorage::conv1d(l, kernel, kernel_l, p);
}
StoragePtr VulkanStorage::conv_transpose1d(const Layout& l, const BackendStorage& kernel,
                                           const Layout& kernel_l, const ParamsConv1D& p) const {
  note_round_trip("conv_transpose1d");
  return BackendStorage::conv_transpose1d(l, kernel, kernel_l, p);
}
StoragePtr VulkanStorage::conv2d(const Layout& l, const BackendStorage& kernel, const Layout& kernel_l,
                                 const ParamsConv2D& p, const ConvEpilogue& epilogue) const {
  note_round_trip("conv2d");
  return BackendStorage::conv2d(l, kernel, kernel_l, p, epilogue);
}
StoragePtr VulkanStorage::conv_transpose2d(const Layout& l, const BackendStorage& kernel,
                                           const Layout& kernel_l, const ParamsConv2D& p) const {
  note_round_trip("conv_transpose2d");
  return BackendStorage::conv_transpose2d(l, kernel, kernel_l, p);
}
StoragePtr VulkanStorage::avg_pool2d(const Layout& l, std::array<size_t, 2> kernel,
                                     std::array<size_t, 2> stride) const {
  note_round_trip("avg_pool2d");
  return BackendStorage::avg_pool2d(l, kernel, stride);
}
StoragePtr VulkanStorage::max_pool2d(const Layout& l, std::array<size_t, 2> kernel,
                                     std::array<size_t, 2> stride) const {
  note_round_trip("max_pool2d");
  return BackendStorage::max_pool2d(l, kernel, stride);
}
StoragePtr VulkanStorage::upsample_nearest1d(const Layout& l, size_t out_l) const {
  note_round_trip("upsample_nearest1d");
  return BackendStorage::upsample_nearest1d(l, out_l);
}
StoragePtr VulkanStorage::upsample_nearest2d(const Layout& l, size_t out_h, size_t out_w) const {
  note_round_trip("upsample_nearest2d");
  return BackendStorage::upsample_nearest2d(l, out_h, out_w);
}
StoragePtr VulkanStorage::upsample_bilinear2d(const Layout& l, size_t out_h, size_t out_w, bool align_corners,
                                              std::optional<double> scale_h,
                                              std::optional<double> scale_w) const {
  note_round_trip("upsample_bilinear2d");
  return BackendStorage::upsample_bilinear2d(l, out_h, out_w, align_corners, scale_h, scale_w);
}
StoragePtr VulkanStorage::cumsum(const Layout& l, size_t dim) const {
  note_round_trip("cumsum");
  return BackendStorage::cumsum(l, dim);
}
StoragePtr VulkanStorage::arg_sort_last_dim(const Layout& l, bool ascending) const {
  note_round_trip("arg_sort_last_dim");
  return BackendStorage::arg_sort_last_dim(l, ascending);
}
StoragePtr VulkanStorage::index_add(const Layout& l, const BackendStorage& ids, const Layout& ids_l,
                                    const BackendStorage& src, const Layout& src_l, size_t dim) const {
  note_round_trip("index_add");
  return BackendStorage::index_add(l, ids, ids_l, src, src_l, dim);
}
void VulkanStorage::scatter_set(const Layout& l, const BackendStorage& ids, const Layout& ids_l,
                                const BackendStorage& src, const Layout& src_l, size_t dim) {
  note_round_trip("scatter_set");
  BackendStorage::scatter_set(l, ids, ids_l, src, src_l, dim);
}
void VulkanStorage::scatter_add_set(const Layout& l, const BackendStorage& ids, const Layout& ids_l,
                                    const BackendStorage& src, const Layout& src_l, size_t dim) {
  note_round_trip("scatter_add_set");
  BackendStorage::scatter_add_set(l, ids, ids_l, src, src_l, dim);
}

}  // namespace candle::vk_backend
