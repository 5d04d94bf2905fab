// Residual dense networks for image super-resolution (UpscalerJS's ESRGAN slim / medium /
// default models), run from a converted safetensors file: the weights plus the layer
// graph in its "topology" metadata, interpreted in topological order (NCHW).
//
// The topology (written by candle-tfjs-convert) is JSON:
//   {"format": "candle-graph", "version": 1, "input": NAME, "output": NAME, "scale": S,
//    "layers": [{"name": NAME, "op": OP, "inputs": [NAME, ...], ...}, ...]}
// with OP one of
//   input             {"channels": C}
//   conv2d            {"in_channels", "out_channels", "kernel": [kh, kw], "padding": [ph, pw],
//                      "bias": bool, "activation": "linear" | "relu"}; weights "<name>.weight"
//                      [c_out, c_in, kh, kw] and "<name>.bias" [c_out]; stride 1
//   relu, identity    one input
//   concat            along channels
//   add               two or more inputs of one shape
//   upsample_nearest  {"size": [sh, sw]}
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "candle/tensor.h"

namespace candle::models {

class Rdn {
 public:
  // Loads a converted model file (weights + "topology" metadata) onto `device`.
  static Rdn load(const std::string& path, const Device& device);
  // Builds the network from its tensors and topology JSON; checks every weight's shape.
  Rdn(const std::unordered_map<std::string, Tensor>& tensors, const std::string& topology_json,
      const Device& device);

  // image: [b, c, h, w] f32 with values 0..255 -> [b, c, h * scale, w * scale], clamped to
  // 0..255 and rounded to integers (UpscalerJS clips its output to 0..255; 8-bit images
  // then hold whole numbers).
  Tensor forward(const Tensor& image) const;
  // The network's output as it comes (no clamp, no rounding).
  Tensor forward_raw(const Tensor& image) const;
  // forward in tiles of tile x tile input pixels, each with a halo() margin: the result is
  // identical to forward(image). `progress(done, total)` is called after each tile.
  Tensor forward_tiled(const Tensor& image, size_t tile,
                       const std::function<void(size_t, size_t)>& progress = {}) const;

  size_t scale() const;
  size_t in_channels() const;
  size_t out_channels() const;
  // The receptive field radius in input pixels: how far an output pixel's inputs reach.
  size_t receptive_radius() const;
  // The margin forward_tiled gives each tile: the receptive radius plus, per conv, the
  // extra reach of block convolution algorithms (a Winograd F(4x4, 3x3) output depends on
  // its whole 6x6 input block in floating point), so tiled results are bit-identical.
  size_t halo() const;
  // Tile origins (with their halo) are multiples of this, so block algorithms see the
  // same block grid in a tile as in the whole image.
  static constexpr size_t kTileAlign = 8;
  // Peak bytes of live activations per input pixel (f32), for choosing a tile size.
  size_t activation_bytes_per_pixel() const;
  // The bytes per input pixel of the largest single activation (one buffer on the device).
  size_t largest_activation_bytes_per_pixel() const;
  // The device the weights are on.
  const Device& device() const;

  // The tiling policy: how upscale() splits an image.
  struct TilePlan {
    size_t tile = 0;  // input pixels per tile side (the longer image side when not tiled)
    size_t tiles_x = 1, tiles_y = 1;
    uint64_t budget_bytes = 0;  // the activation memory it was planned for
    bool tiled() const { return tiles_x * tiles_y > 1; }
  };
  // Tiles are never smaller than this many input pixels per side (nor than 2 halos): smaller
  // ones would mostly recompute their halos.
  static constexpr size_t kMinTile = 16;
  // The default activation budget on the model's device: 3/4 of its free memory (the CPU: half
  // of the available system memory), or 2 GiB where the device cannot tell.
  uint64_t default_budget() const;
  // The plan for an h x w image: the whole image when its activations (and its largest buffer)
  // fit `budget_bytes` (0: default_budget()), else the largest square tiles that fit. `tile`
  // forces a tile size (at least kMinTile). Throws Error(InvalidArgument) when even the
  // smallest tile does not fit the budget, naming both.
  TilePlan plan(size_t h, size_t w, uint64_t budget_bytes = 0, size_t tile = 0) const;
  // Upscales `image` ([1, c, h, w] f32, 0..255, on any device) as `plan` says, writing each tile
  // into `out` as soon as it is done: 8-bit pixels, interleaved, `pixel_stride` bytes per pixel
  // (>= out_channels(); channels beyond are left as they are), (h * scale) x (w * scale) pixels
  // row-major. The network's f32 output never exists whole, so the peak memory is the plan's
  // budget plus `out`. Returns the seconds spent in the network until the device finished
  // (the rest is conversion to 8 bits, download and interleaving). `progress(done, total)`
  // is called after each tile.
  double upscale(const Tensor& image, const TilePlan& plan, uint8_t* out, size_t pixel_stride,
                 const std::function<void(size_t, size_t)>& progress = {}) const;
  // The number of layers and of conv layers.
  size_t num_layers() const;
  size_t num_convs() const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace candle::models
