// candle-upscale: whole-image super-resolution with a bundled residual dense network
// (UpscalerJS's ESRGAN slim or medium, MIT). PNG / JPEG in and out.
//
//   candle-upscale [--model NAME|PATH] [--scale 2|3|4|8] [--device auto|cpu|cuda|rocm|vulkan]
//                  [--tile N] [--max-memory MB] [--repeat N] [--max-pixels N]
//                  [--png-level 0-9] [--jpeg-quality 1-100] [INPUT [OUTPUT]]
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "candle/candle.h"
#include "candle/image.h"
#include "candle/models/rdn.h"
#include "common/models_dir.h"

namespace fs = std::filesystem;
using candle::Error;
using candle::ErrorKind;

namespace {

using candle_examples::models_dir;

// --model: a .safetensors file, a directory with x<scale>.safetensors, or a bundled model's name.
fs::path model_path(const std::string& model, size_t scale) {
  std::error_code ec;
  fs::path p(model);
  if (fs::is_regular_file(p, ec)) return p;
  const std::string file = "x" + std::to_string(scale) + ".safetensors";
  if (fs::is_directory(p, ec)) return p / file;
  if (model.find('/') == std::string::npos && model.find(".safetensors") == std::string::npos) {
    const fs::path dir = models_dir() / model;
    if (fs::is_regular_file(dir / file, ec)) return dir / file;
    if (!fs::is_directory(dir, ec)) {
      throw Error(ErrorKind::Io,
                  "model not found: " + model + " (no bundled model in " + models_dir().string() + ")");
    }
    std::vector<std::string> have;  // the scales this bundled model has
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string n = e.path().filename().string();
      if (n.size() > 13 && n[0] == 'x' && e.path().extension() == ".safetensors")
        have.push_back(e.path().stem().string());
    }
    std::sort(have.begin(), have.end());
    std::string list;
    for (const auto& n : have) list += (list.empty() ? "" : ", ") + n;
    throw Error(ErrorKind::Io, "model not found: " + model + " x" + std::to_string(scale) + " (" +
                                   (dir / file).string() + " does not exist; " + model + " has " +
                                   (list.empty() ? std::string("no scales") : list) + ")");
  }
  throw Error(ErrorKind::Io, "model not found: " + model);
}

struct Image {
  size_t w = 0, h = 0;
  std::vector<float> rgb;        // planar [3, h, w], 0..255
  std::vector<unsigned char> a;  // alpha (h * w) or empty
};

// PNG or JPEG (by its signature), its size checked against --max-pixels before decoding
Image load_image(const fs::path& path, const candle::image::DecodeOptions& opts) {
  const candle::image::Image px = candle::image::read(path.string(), opts);  // RGB or RGBA
  Image img;
  img.w = px.width, img.h = px.height;
  const size_t hw = img.w * img.h, n = px.channels;
  img.rgb.resize(3 * hw);
  if (n == 4) img.a.resize(hw);
  for (size_t i = 0; i < hw; ++i) {
    for (size_t c = 0; c < 3; ++c) img.rgb[c * hw + i] = px.pixels[n * i + c];
    if (n == 4) img.a[i] = px.pixels[4 * i + 3];
  }
  return img;
}

// by the extension (checked before the compute), through a temporary file renamed over the target
void write_image(const fs::path& path, const std::vector<unsigned char>& px, size_t w, size_t h, int channels,
                 const candle::image::EncodeOptions& opts) {
  candle::image::write(path.string(), px.data(), w, h, size_t(channels), opts);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Image super-resolution with a residual dense network (ESRGAN slim by default)"};
  std::string model = "esrgan-slim", device_name = "auto", input, output;
  size_t scale = 2, tile = 0, max_memory_mb = 0, repeat = 1;
  bool scale_given = false;
  candle::image::DecodeOptions decode_opts;
  candle::image::EncodeOptions encode_opts;
  app.add_option("--model", model, "bundled model name, a model directory or a .safetensors file")
      ->capture_default_str();
  app.add_option_function<size_t>(
      "--scale", [&](const size_t& s) { scale = s, scale_given = true; },
      "upscaling factor: 2, 3, 4 or 8 (default 2)");
  app.add_option("--device", device_name,
                 "auto (CUDA, else the best Vulkan GPU, else the CPU), cpu, cuda, rocm or vulkan (with an "
                 "optional :N)")
      ->capture_default_str();
  app.add_option("--tile", tile,
                 "tile size in input pixels, at least 16 (0: the whole image unless over the memory budget)")
      ->capture_default_str();
  app.add_option("--max-memory", max_memory_mb,
                 "activation memory budget in MiB for automatic tiling (0: 3/4 of the device's free memory, "
                 "half the available memory on the CPU)")
      ->capture_default_str();
  app.add_option("--repeat", repeat, "run the network N times and report the best time (benchmarking)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-pixels", decode_opts.max_pixels,
                 "largest input (width x height) decoded; more is refused as a possible decompression bomb")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--png-level", encode_opts.png_level, "PNG compression level 0-9 (1: fast)")
      ->capture_default_str()
      ->check(CLI::Range(0, 9));
  app.add_option("--jpeg-quality", encode_opts.jpeg_quality, "JPEG quality 1-100")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  app.add_option("input", input, "PNG or JPEG image (default: the bundled fixture.png)");
  app.add_option("output", output, "output .png/.jpg (default: <input>_x<scale>.png)");
  CLI11_PARSE(app, argc, argv);

  try {
    const auto t0 = std::chrono::steady_clock::now();
    if (scale != 2 && scale != 3 && scale != 4 && scale != 8) {
      throw Error(ErrorKind::InvalidArgument,
                  "unsupported scale " + std::to_string(scale) + " (use 2, 3, 4 or 8)");
    }
    if (tile != 0 && tile < 16) {
      throw Error(
          ErrorKind::InvalidArgument,
          "--tile " + std::to_string(tile) + " is too small (at least 16 pixels, or 0 for automatic tiling)");
    }
    bool default_input = input.empty();
    if (default_input) input = (models_dir() / "esrgan-slim" / "fixture.png").string();
    if (output.empty()) {
      fs::path in(input);
      fs::path stem = default_input ? fs::path(in.stem()) : in.parent_path() / in.stem();
      output = stem.string() + "_x" + std::to_string(scale) + ".png";
    }
    candle::image::check_output_path(output);  // before the model and the compute
    fs::path mpath = model_path(model, scale);
    std::string why;
    candle::Device device =
        device_name == "auto" ? candle::Device::auto_select(&why) : candle::Device::from_name(device_name);
    candle::models::Rdn net = candle::models::Rdn::load(mpath.string(), device);
    if (net.scale() != scale) {
      if (scale_given) {
        throw Error(ErrorKind::InvalidArgument, "model " + mpath.string() + " upscales x" +
                                                    std::to_string(net.scale()) + ", not x" +
                                                    std::to_string(scale));
      }
      scale = net.scale();
    }
    if (net.in_channels() != 3 || net.out_channels() != 3) {
      throw Error(ErrorKind::UnsupportedOp, "model " + mpath.string() + " is not an RGB -> RGB network");
    }

    // the header first: the sizes are checked against the limits and the memory before decoding
    std::error_code ec;
    if (!fs::is_regular_file(input, ec)) throw Error(ErrorKind::Io, "input not found: " + input);
    const candle::image::Info info = candle::image::probe_file(input, decode_opts);
    const size_t w = info.width, h = info.height, ow = w * scale, oh = h * scale;
    if (ow > candle::image::kMaxSide || oh > candle::image::kMaxSide) {
      throw Error(
          ErrorKind::InvalidArgument,
          "output would be larger than " + std::to_string(candle::image::kMaxSide) + " pixels on a side");
    }
    // host memory for the images: decoded, planar f32, the 8-bit output and its encoding
    const double host_need = double(w) * double(h) * double(info.channels + 3 * sizeof(float)) +
                             2.0 * double(ow) * double(oh) * double(info.channels);
    const candle::DeviceMemory host = candle::Device::cpu().memory();
    if (host.free_bytes && host_need > double(host.free_bytes)) {
      throw Error(ErrorKind::InvalidArgument,
                  input + ": " + std::to_string(w) + "x" + std::to_string(h) + " -> " + std::to_string(ow) +
                      "x" + std::to_string(oh) + " needs about " + std::to_string(uint64_t(host_need) >> 20) +
                      " MiB of memory for the images; " + std::to_string(host.free_bytes >> 20) +
                      " MiB are available");
    }
    Image img = load_image(input, decode_opts);
    // the tiling policy is the model's: the whole image when it fits the budget (by default
    // from the device's free memory), else the largest tiles that do
    const candle::models::Rdn::TilePlan plan = net.plan(h, w, uint64_t(max_memory_mb) << 20, tile);
    // (printed once the inputs are known to be good: an error is one line)
    if (device_name == "auto") std::fprintf(stderr, "device: %s\n", why.c_str());
    std::fprintf(stderr, "%s: %zux%zu -> %zux%zu (x%zu) on %s, %s\n", input.c_str(), w, h, ow, oh, scale,
                 device.to_string().c_str(),
                 plan.tiled() ? (std::to_string(plan.tiles_x * plan.tiles_y) + " tiles of " +
                                 std::to_string(plan.tile) + " px (budget " +
                                 std::to_string(plan.budget_bytes >> 20) + " MiB)")
                                    .c_str()
                              : "whole image");

    candle::Tensor x =
        candle::Tensor::from_vec(img.rgb, {1, 3, h, w}, candle::Device::cpu()).to_device(device);
    img.rgb = {};
    // Per run (the best of --repeat runs is reported): the compute, the forward until the device
    // has finished it; and the network time, the compute plus the conversion of each tile to
    // 8 bits on the device, its download and its interleaving into the output image.
    const int channels = img.a.empty() ? 3 : 4;
    std::vector<unsigned char> px(oh * ow * size_t(channels));
    double net_secs = 0, compute_secs = 0;
    for (size_t r = 0; r < repeat; ++r) {
      const auto n0 = std::chrono::steady_clock::now();
      const double c = net.upscale(x, plan, px.data(), size_t(channels), [&](size_t done, size_t total) {
        if (plan.tiled()) std::fprintf(stderr, "\r  tile %zu/%zu", done, total), std::fflush(stderr);
      });
      if (plan.tiled()) std::fprintf(stderr, "\n");
      const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - n0).count();
      if (repeat > 1) std::fprintf(stderr, "  run %zu: network %.4f s (compute %.4f s)\n", r + 1, t, c);
      net_secs = r == 0 ? t : std::min(net_secs, t);
      compute_secs = r == 0 ? c : std::min(compute_secs, c);
    }
    if (channels == 4) {  // alpha is upscaled by nearest neighbour
      for (size_t yy = 0; yy < oh; ++yy)
        for (size_t xx = 0; xx < ow; ++xx) px[(yy * ow + xx) * 4 + 3] = img.a[(yy / scale) * w + xx / scale];
    }
    write_image(output, px, ow, oh, channels, encode_opts);

    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    struct rusage ru {};
    getrusage(RUSAGE_SELF, &ru);
    std::fprintf(
        stderr,
        "wrote %s: %zux%zu -> %zux%zu in %.2f s (network %.4f s, compute %.4f s%s), peak memory %.1f MiB\n",
        output.c_str(), w, h, ow, oh, secs, net_secs, compute_secs, repeat > 1 ? ", best run" : "",
        double(ru.ru_maxrss) / 1024.0);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "candle-upscale: %s\n", e.what());
    return 1;
  }
  return 0;
}
