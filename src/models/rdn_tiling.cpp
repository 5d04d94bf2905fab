// Rdn's tiling policy (plan) and the tiled upscale that writes 8-bit tiles as they finish.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "candle/models/rdn.h"
#include "rdn_tiles.h"

namespace candle::models {

namespace {

[[noreturn]] void fail(ErrorKind kind, const std::string& msg) { throw Error(kind, "rdn: " + msg); }

constexpr uint64_t kMiB = uint64_t{1} << 20;
std::string mib(uint64_t bytes) { return std::to_string((bytes + kMiB - 1) / kMiB) + " MiB"; }

// The default activation budget on a device with memory `m` (Rdn::default_budget).
uint64_t budget_of(const DeviceMemory& m) {
  if (m.free_bytes == 0) return 2048 * kMiB;
  // memory shared with everything else the machine runs (the CPU's): take half of it
  return m.shared_with_system ? m.free_bytes / 2 : m.free_bytes / 4 * 3;
}

}  // namespace

uint64_t Rdn::default_budget() const { return budget_of(device().memory()); }

Rdn::TilePlan Rdn::plan(size_t h, size_t w, uint64_t budget_bytes, size_t tile) const {
  if (h == 0 || w == 0) fail(ErrorKind::InvalidArgument, "empty image");
  TilePlan p;
  const DeviceMemory mem = device().memory();
  p.budget_bytes = budget_bytes ? budget_bytes : budget_of(mem);
  const double bpp = double(activation_bytes_per_pixel());
  const double largest = double(largest_activation_bytes_per_pixel());
  const size_t margin = 2 * halo() + kTileAlign;
  const size_t min_tile = std::max(kMinTile, 2 * halo());
  // an extended tile of `side` core pixels: its activations, and its largest single buffer
  auto fits = [&](double pixels) {
    return bpp * pixels <= double(p.budget_bytes) && largest * pixels <= double(mem.max_buffer_bytes);
  };
  if (tile) {
    if (tile < kMinTile) {
      fail(ErrorKind::InvalidArgument, "tile " + std::to_string(tile) + " is below the smallest tile of " +
                                           std::to_string(kMinTile) + " pixels");
    }
  } else if (fits(double(h) * double(w))) {
    tile = std::max(h, w);
  } else {
    // the largest square tile whose extended region (core + 2 halos + alignment) fits
    const double by_budget = double(p.budget_bytes) / bpp;
    const double by_buffer = largest > 0 ? double(mem.max_buffer_bytes) / largest : by_budget;
    const auto side = static_cast<size_t>(std::sqrt(std::min(by_budget, by_buffer)));
    tile = side > margin ? side - margin : 0;
    if (tile < min_tile) {
      const double need = double(min_tile + margin) * double(min_tile + margin);
      fail(ErrorKind::InvalidArgument,
           "the memory budget of " + mib(p.budget_bytes) + " is too small for the smallest tile (" +
               std::to_string(min_tile) + " px with its halo needs " + mib(uint64_t(bpp * need)) +
               "); raise it (candle-upscale --max-memory)");
    }
    tile = std::min(tile, std::max(h, w));
  }
  p.tile = tile;
  p.tiles_y = (h + tile - 1) / tile;
  p.tiles_x = (w + tile - 1) / tile;
  return p;
}

double Rdn::upscale(const Tensor& image, const TilePlan& plan, uint8_t* out, size_t pixel_stride,
                    const std::function<void(size_t, size_t)>& progress) const {
  const size_t c = out_channels(), s = scale();
  if (image.rank() != 4 || image.dim(0) != 1 || image.dim(1) != in_channels()) {
    fail(ErrorKind::ShapeMismatch, "upscale expects an image [1, " + std::to_string(in_channels()) +
                                       ", h, w], got " + image.shape().to_string());
  }
  if (pixel_stride < c)
    fail(ErrorKind::InvalidArgument,
         "pixel stride " + std::to_string(pixel_stride) + " < " + std::to_string(c));
  const size_t h = image.dim(2), w = image.dim(3), tile = plan.tile, ow = w * s;
  if (tile == 0) fail(ErrorKind::InvalidArgument, "tile size 0");
  const size_t ny = (h + tile - 1) / tile, nx = (w + tile - 1) / tile, hl = halo();
  auto extend = [&](size_t c0, size_t c1, size_t n) {
    return detail::tile_extent(c0, c1, n, hl, kTileAlign);
  };
  double compute = 0;
  size_t done = 0;
  for (size_t ty = 0; ty < ny; ++ty) {
    const size_t y0 = ty * tile, y1 = std::min(h, y0 + tile);
    const auto [ey0, ey1] = extend(y0, y1, h);
    for (size_t tx = 0; tx < nx; ++tx) {
      const size_t x0 = tx * tile, x1 = std::min(w, x0 + tile);
      const auto [ex0, ex1] = extend(x0, x1, w);
      const auto t0 = std::chrono::steady_clock::now();
      Tensor patch =
          (ny > 1 || nx > 1) ? image.narrow(2, ey0, ey1 - ey0).narrow(3, ex0, ex1 - ex0).contiguous() : image;
      Tensor up = forward(patch);
      device().synchronize();
      compute += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      // forward's output is clamped to 0..255 and rounded: the cast to u8 (on the device) is
      // exact, and a quarter of the f32 bytes come down
      const size_t th = (y1 - y0) * s, tw = (x1 - x0) * s;
      std::vector<uint8_t> planar;
      Tensor core = up.narrow(2, (y0 - ey0) * s, th).narrow(3, (x0 - ex0) * s, tw).to_dtype(DType::U8);
      planar = core.flatten_to_vec<uint8_t>();
      up = Tensor(), core = Tensor();
      const size_t plane = th * tw;
#pragma omp parallel for schedule(static)
      for (size_t yy = 0; yy < th; ++yy) {
        uint8_t* row = out + ((y0 * s + yy) * ow + x0 * s) * pixel_stride;
        const uint8_t* src = planar.data() + yy * tw;
        for (size_t xx = 0; xx < tw; ++xx)
          for (size_t k = 0; k < c; ++k) row[xx * pixel_stride + k] = src[k * plane + xx];
      }
      if (progress) progress(++done, nx * ny);
    }
  }
  return compute;
}

}  // namespace candle::models
